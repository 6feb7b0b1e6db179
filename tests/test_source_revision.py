"""Which commit a run's unit records, read from ``.git`` without a git process."""

from pathlib import Path

from nanobot_memory_adapters.versions import _checked_out_commit

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_the_commit_is_read_from_a_branch_a_packed_ref_a_detached_head_and_a_worktree(
        tmp_path: Path):
    git = tmp_path / "repo" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    assert _checked_out_commit(git) is None  # a branch with no commit yet
    (git / "packed-refs").write_text(f"# pack-refs\n{SHA} refs/heads/main\n")
    assert _checked_out_commit(git) == SHA
    (git / "refs" / "heads" / "main").write_text(SHA[::-1] + "\n")  # loose ref wins
    assert _checked_out_commit(git) == SHA[::-1]
    (git / "HEAD").write_text(SHA + "\n")  # detached
    assert _checked_out_commit(git) == SHA
    # a worktree: a .git file pointing (relative to itself) at its git folder, whose
    # branch lives in the common folder
    wt_git = git / "worktrees" / "wt"
    wt_git.mkdir(parents=True)
    (wt_git / "HEAD").write_text("ref: refs/heads/main\n")
    (wt_git / "commondir").write_text("../..\n")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / ".git").write_text("gitdir: ../repo/.git/worktrees/wt\n")
    assert _checked_out_commit(tree / ".git") == SHA[::-1]
    assert _checked_out_commit(tmp_path / "nowhere" / ".git") is None
