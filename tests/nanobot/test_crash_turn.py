"""A turn said before a crash is kept: a real nanobot process (``AgentLoop`` + plugin) is
killed with SIGKILL while the model is answering (the LLM double holds the answer open).
The user's message was queued when it arrived; the next process delivers it on start,
before any turn or command, and it is stored once — as the user's message alone, at the
time nanobot saved it. A normal turn afterwards is stored once, user and assistant."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nanobot_memory_adapters.nanobot.outbox import Outbox
from tests.llm_double.server import HOLD_MARKER
from tests.nanobot.conftest import VENV_BIN

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

WORKER = Path(__file__).with_name("crash_worker.py")
REPO = Path(__file__).resolve().parents[2]
CRASHED = "My passport is in the blue drawer under the atlas."
NORMAL = "My bicycle key hangs by the kitchen door."


def _worker(mode: str, config: Path, text: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False"}
    env.pop("NANOBOT_MEMORY_CONFIG", None)
    return subprocess.Popen([str(VENV_BIN / "python"), str(WORKER), mode, str(config), text],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _stored(data_dir: Path) -> list[str]:
    db = sqlite3.connect(data_dir / "full_history.sqlite3")
    try:
        return [t for (t,) in db.execute("SELECT transcript FROM events")]
    finally:
        db.close()


async def test_a_turn_killed_mid_reply_is_delivered_on_restart_once(home, llm_double):
    home.write_memory({"memory": {"condition": "full_history"}})
    llm_double.hold_calls()
    proc = _worker("ask", home.config_path, f"{CRASHED} {HOLD_MARKER}")
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "asking"
        deadline = time.monotonic() + 120
        while not any(CRASHED in r.last_user for r in llm_double.held()):
            assert time.monotonic() < deadline and proc.poll() is None, \
                proc.stderr.read()[-3000:] if proc.stderr else ""
            time.sleep(0.1)
        time.sleep(0.5)  # the model is answering; the plugin's background write has run
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        llm_double.release_held()
    assert proc.returncode == -signal.SIGKILL

    outbox = Outbox(home.data_dir / "nanobot-outbox.sqlite3")
    rows = outbox.rows("full_history")
    outbox.close()
    assert [(r["status"], CRASHED in r["payload"]) for r in rows] == [("open", True)], rows

    restart = _worker("restart", home.config_path, NORMAL)
    out, err = restart.communicate(timeout=300)
    assert restart.returncode == 0 and "done" in out, err[-3000:]
    waited = json.loads(out.splitlines()[0])
    # delivered by the plugin's start alone (no turn, no command yet)
    assert (waited["delivered"], waited["pending"]) == (1, 0), (waited, err[-3000:])

    stored = _stored(home.data_dir)
    crashed = [t for t in stored if CRASHED in t]
    normal = [t for t in stored if NORMAL in t]
    assert len(crashed) == 1 and len(normal) == 1, stored
    assert "assistant" not in crashed[0].lower(), crashed  # the user's message alone
    assert "assistant" in normal[0].lower(), normal  # a normal turn: user and assistant

    # the crash-time row carries the time nanobot saved the message at, so a later
    # backfill of nanobot's session recognises the turn as already delivered
    outbox = Outbox(home.data_dir / "nanobot-outbox.sqlite3")
    live = outbox.turn_times("full_history", "telegram:kim")
    outbox.close()
    saved = [json.loads(line) for f in home.root.rglob("*.jsonl") if "sessions" in f.parts
             for line in f.read_text().splitlines()]
    stamps = [m["timestamp"] for m in saved
              if m.get("role") == "user" and str(m.get("content")).startswith(CRASHED)]
    assert len(stamps) == 1, saved
    assert datetime.fromisoformat(stamps[0]).astimezone().astimezone(UTC).isoformat() in live
