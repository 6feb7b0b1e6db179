"""Hostile files and runs: a password in a URL, files that are not regular files, JSON
nested past the parser, malformed dataset fields, two runs into one folder. Each is one
line naming the input and the fix (never a traceback, a hang or a silently different
result), and nothing the user wrote is replaced."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from tests.harness.conftest import synthetic_locomo

REPO = Path(__file__).resolve().parents[1]
BEAM = REPO / "tests" / "harness" / "data" / "beam" / "100K" / "1"
LME = REPO / "tests" / "harness" / "data" / "longmemeval_fixture.json"
CLI = [sys.executable, "-m", "nanobot_memory_adapters.cli"]


def _one_line(result, code: int, *needles: str) -> str:
    output = result.output if hasattr(result, "output") else result.stdout + result.stderr
    exit_code = result.exit_code if hasattr(result, "exit_code") else result.returncode
    assert exit_code == code, (exit_code, output[-2000:])
    assert "Traceback" not in output and "RecursionError" not in output, output[-2000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output[-2000:]
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def _deep(levels: int = 100_000) -> str:
    return "[" * levels + "]" * levels


def _locomo(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(synthetic_locomo()[:1]), encoding="utf-8")
    return path


# -- a password in a URL ------------------------------------------------------------------------
def test_a_password_in_the_llm_url_reaches_no_output_file(tmp_path, llm_double):
    url = llm_double.base_url.replace("http://", "http://user:S3CRETPASSWORD@")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "bench", "--dataset", str(_locomo(tmp_path)), "--providers", "no_memory,full_history",
        "--out", str(out), "--llm-base-url", url, "--llm-model", "double",
        "--test-points", "last"])
    assert result.exit_code == 0, result.output
    assert "S3CRETPASSWORD" not in result.output
    written = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"manifest.json", "results.json", "report.html"}
    for path in written:
        assert b"S3CRETPASSWORD" not in path.read_bytes(), path
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["judge"]["base_url"].startswith("http://user:***@")


# -- dataset files ------------------------------------------------------------------------------
@pytest.mark.servers
def test_a_dataset_that_is_a_fifo_is_one_line_not_a_hang(tmp_path):
    fifo = tmp_path / "locomo.json"
    os.mkfifo(fifo)
    proc = subprocess.run([*CLI, "bench", "--dataset", str(fifo), "--providers", "no_memory",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=120)
    _one_line(proc, 2, "FIFO")
    assert not (tmp_path / "out").exists()  # a refused run leaves no folder behind


def test_a_dataset_linked_to_dev_zero_is_one_line(tmp_path):
    link = tmp_path / "locomo.json"
    link.symlink_to("/dev/zero")
    _one_line(CliRunner().invoke(app, ["bench", "--dataset", str(link), "--providers",
                                       "no_memory", "--out", str(tmp_path / "out")]),
              2, "character device")


@pytest.mark.parametrize("task", ["locomo", "longmemeval", "beam"])
def test_json_nested_past_the_parser_is_one_line(tmp_path, task):
    if task == "beam":
        folder = tmp_path / "beam"
        shutil.copytree(BEAM, folder)
        (folder / "chat.json").write_text(_deep())
        dataset = folder
    else:
        dataset = tmp_path / "data.json"
        dataset.write_text(_deep())
    _one_line(CliRunner().invoke(app, ["bench", "--task", task, "--dataset", str(dataset),
                                       "--providers", "no_memory",
                                       "--out", str(tmp_path / "out")]), 2, "nest")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("value", "said"), [
    ([1, 1], "appears twice"), ([1, -2], "-2"), ([1, 2.5], "2.5"), ([1, "2"], '"2"')])
def test_beam_batch_numbers_that_would_change_the_run_are_refused(tmp_path, value, said):
    folder = tmp_path / "beam"
    shutil.copytree(BEAM, folder)
    chat = json.loads((folder / "chat.json").read_text())
    for batch, number in zip(chat, value, strict=False):
        batch["batch_number"] = number
    (folder / "chat.json").write_text(json.dumps(chat))
    _one_line(CliRunner().invoke(app, ["bench", "--task", "beam", "--dataset", str(folder),
                                       "--providers", "no_memory",
                                       "--out", str(tmp_path / "out")]),
              2, "batch_number", said)


def test_longmemeval_session_ids_that_are_not_ids_are_one_line(tmp_path):
    data = json.loads(LME.read_text())
    data[0]["answer_session_ids"] = [["answer_3f0c9d21"]]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    _one_line(CliRunner().invoke(app, ["bench", "--task", "longmemeval", "--dataset",
                                       str(path), "--providers", "no_memory",
                                       "--out", str(tmp_path / "out")]),
              2, "answer_session_ids", "list")


def test_a_long_longmemeval_question_id_runs(tmp_path):
    data = json.loads(LME.read_text())[:1]
    data[0]["question_id"] = "q" * 240
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["bench", "--task", "longmemeval", "--dataset", str(path),
                                      "--providers", "no_memory,full_history", "--out",
                                      str(out)])
    assert result.exit_code == 0, result.output[-2000:]
    assert "persona_id" not in result.output


# -- memory.json --------------------------------------------------------------------------------
def _home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "nb"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"agents": {"defaults": {
        "workspace": str(home / "ws")}}}))
    env = {**os.environ, "NANOBOT_MEMORY_CONFIG": str(home / "memory.json"), "NO_COLOR": "1",
           "COLUMNS": "200", "HOME": str(tmp_path)}
    return home, env


def _memory_cli(env: dict[str, str], *args: str, timeout: float = 60
                ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.servers
def test_a_linked_memory_json_is_written_through(tmp_path):
    home, env = _home(tmp_path)
    target = tmp_path / "dotfiles" / "memory.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"memory": {"condition": "full_history"}}))
    (home / "memory.json").symlink_to(target)
    for command, enabled in (("off", False), ("on", True)):
        proc = _memory_cli(env, command)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (home / "memory.json").is_symlink(), command  # the link stays a link
        assert json.loads(target.read_text())["memory"].get("enabled", True) is enabled, command


@pytest.mark.servers
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep"])
@pytest.mark.parametrize("command", [["status"], ["outbox", "status"], ["health"],
                                     ["forget", "--persona", "x", "--yes"],
                                     ["migrate-scopes", "--dry-run"], ["off"]])
def test_a_hostile_memory_json_is_one_line_in_every_command(tmp_path, kind, command):
    home, env = _home(tmp_path)
    path = home / "memory.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text('{"memory": ' + _deep(50_000) + "}")
    args = [*command]
    if command[0] in ("health", "outbox", "migrate-scopes", "forget"):
        args += ["--config", str(path)]
    if command[0] == "forget":
        args += ["--nanobot-config", str(home / "config.json")]
    started = time.monotonic()
    proc = _memory_cli(env, *args)
    assert time.monotonic() - started < 50
    output = proc.stdout + proc.stderr
    assert proc.returncode in (1, 2), (proc.returncode, output[-1500:])
    assert "Traceback" not in output and "RecursionError" not in output, output[-1500:]
    said = {"fifo": "FIFO", "dev-zero": "character device", "deep": "nest"}[kind]
    assert said in output, output[-1500:]
    if kind == "fifo":
        assert Path(path).exists() and not Path(path).is_file()  # never replaced


@pytest.mark.servers
def test_nanobot_answers_with_a_fifo_for_memory_json(tmp_path, llm_double):
    """nanobot agent -m hung forever reading a FIFO memory.json; now the plugin stays
    out (one line in the log) and nanobot answers."""
    from tests.nanobot.conftest import Home

    root = tmp_path / "home"
    root.mkdir()
    home = Home(root=root, base_url=llm_double.base_url)
    home.write_config()
    os.mkfifo(home.memory_path)
    proc = home.cli("Hello there", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "You said: Hello there" in proc.stdout
    assert "FIFO" in proc.stderr


# -- two runs into one folder -----------------------------------------------------------------
@pytest.mark.servers
def test_a_second_run_into_a_folder_in_use_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from nanobot_memory_adapters.harness.safe_paths import run_lock
        with run_lock(Path({str(out)!r})):
            print("held", flush=True)
            time.sleep(120)
        """)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = CliRunner().invoke(app, ["bench", "--dataset", str(_locomo(tmp_path)),
                                          "--providers", "no_memory", "--out", str(out)])
        _one_line(result, 2, str(holder.pid), "in use by another run")
        assert not (out / "results.json").exists() and not (out / "checkpoint.json").exists()
    finally:
        holder.kill()
        holder.wait()
    result = CliRunner().invoke(app, ["bench", "--dataset", str(_locomo(tmp_path)),
                                      "--providers", "no_memory", "--out", str(out)])
    assert result.exit_code == 0, result.output  # the lock died with its process
    assert not (out / ".nanobot-memory-run.lock").exists()
