"""Fault test: the plugin's process is killed with SIGKILL at random points during turns
and delivery (6 times); after a clean process drains the outbox, every user turn nanobot
saved is in mem0's store exactly once — none lost, none stored twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from nanobot_memory_adapters.store import StoreProvider
from tests.nanobot.conftest import VENV_BIN

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

pytest.importorskip("mem0")
WORKER = Path(__file__).with_name("kill_worker.py")
REPO = Path(__file__).resolve().parents[2]


def _worker(config: Path, start: int, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False"}
    env.pop("NANOBOT_MEMORY_CONFIG", None)
    return subprocess.Popen([str(VENV_BIN / "python"), str(WORKER), str(config), str(start),
                             str(count)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


@pytest.mark.long(80)
async def test_sigkill_during_turns_and_delivery_stores_each_turn_once(home):
    home.write_memory({"memory": {"condition": "simple_rag"}})
    rng = random.Random(7)
    kills = 0
    for k in range(6):
        proc = _worker(home.config_path, k * 100, 8)
        assert proc.stdout is not None
        wanted = rng.randint(1, 6)  # kill after this many replies, mid-delivery
        for _ in range(wanted):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()[-3000:] if proc.stderr else ""
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        kills += proc.returncode == -signal.SIGKILL
    assert kills == 6
    final = _worker(home.config_path, 900, 1)  # a clean process delivers what is pending
    out, err = final.communicate(timeout=600)
    assert final.returncode == 0 and "done" in out, err[-3000:]

    said = Counter()
    for session in home.root.rglob("sessions/*/*.jsonl"):
        for raw in session.read_text(encoding="utf-8").splitlines():
            msg = json.loads(raw)
            text = str(msg.get("content", ""))
            if msg.get("role") == "user" and text.startswith("Fact "):
                # nanobot saves the recalled section with the message (user_message
                # placement); the plugin records the user's own words
                said[text.split("\n\n<memory-context", 1)[0].strip()] += 1
    assert len(said) >= 7, said  # nanobot saved turns from every process

    from nanobot_memory_adapters.backends.mem0 import simple_rag_store
    from nanobot_memory_adapters.scope import MemoryScope

    adapter = StoreProvider(simple_rag_store(home.data_dir))
    try:
        listed = await adapter.provenance(MemoryScope(run_id="default",
                                                      persona_id="telegram-kim",
                                                      agent_id="nanobot"), top_k=1000)
    finally:
        await adapter.aclose()
    stored = Counter(m["memory"] for m in listed["memories"]
                     if str(m["memory"]).startswith("Fact "))
    missing = [t for t in said if stored[t] == 0]
    twice = {t: n for t, n in stored.items() if n > 1}
    assert not missing, missing
    assert not twice, twice
