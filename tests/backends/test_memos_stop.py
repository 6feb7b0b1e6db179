"""``memos-server stop`` stops the processes its state file recorded, and only them: a
pid in a stale ``state.json`` (after a reboot) or under a wrong ``--home`` may belong to
any process by then."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nanobot_memory_adapters.backends.memos.server import stop_server
from nanobot_memory_adapters.processes import pid_alive, process_token

pytestmark = pytest.mark.servers  # starts processes


def _sleeper(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *args])


def _state(home: Path, **state: object) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "state.json").write_text(json.dumps(state))


def _gone(proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return True
        time.sleep(0.1)
    return False


def test_stop_leaves_a_process_the_state_did_not_start(tmp_path):
    other = _sleeper()
    try:
        # a state written with the process's identity: a reused pid has another start
        _state(tmp_path / "tokened", pid=other.pid, pid_token=f"{other.pid}:1",
               redis={"pid": other.pid, "pid_token": f"{other.pid}:1", "port": 1})
        stop_server(tmp_path / "tokened")
        # a state from before identities were recorded: checked by its command line
        _state(tmp_path / "legacy", pid=other.pid, redis={"pid": other.pid, "port": 1})
        status = stop_server(tmp_path / "legacy")
        assert pid_alive(other.pid) and other.poll() is None
        assert status["process_alive"] is False and status["redis"]["running"] is False
    finally:
        other.kill()
        other.wait()


def test_stop_stops_the_process_the_state_recorded(tmp_path):
    home = tmp_path / "home"
    ours = _sleeper(str(home))  # the server's command line names its home
    recorded = _sleeper()
    try:
        _state(home, pid=ours.pid)
        stop_server(home)
        assert _gone(ours)
        _state(home, pid=recorded.pid, pid_token=process_token(recorded.pid))
        stop_server(home)
        assert _gone(recorded)
        assert json.loads((home / "state.json").read_text())["pid_token"] is None
    finally:
        for proc in (ours, recorded):
            proc.kill()
            proc.wait()


def test_a_home_that_is_a_file_or_missing_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from nanobot_memory_adapters.cli import app

    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for args in (["start", "--home", str(a_file)], ["stop", "--home", str(a_file)],
                 ["stop", "--home", str(tmp_path / "typo")],
                 ["status", "--home", str(tmp_path / "typo")]):
        result = CliRunner().invoke(app, ["memos-server", *args])
        assert result.exit_code == 2, result.output
        assert "--home" in result.output and "Traceback" not in result.output
    assert a_file.read_text() == "mine" and not (tmp_path / "typo").exists()
