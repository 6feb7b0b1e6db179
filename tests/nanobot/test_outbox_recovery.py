"""Failed outbox rows are visible and recoverable: ``/memory-health`` shows their error,
``/memory-mode retry-failed`` and ``nanobot-memory outbox requeue`` put them back, and the
next nanobot process delivers them. Real ``nanobot agent`` processes on one config dir."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from nanobot_memory_adapters.events import MemoryEvent, Message
from nanobot_memory_adapters.nanobot.outbox import Outbox
from tests.nanobot.test_cli import reply_of

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers


def _park_failed(home, event_id: str, text: str) -> None:
    box = Outbox(home.data_dir / "nanobot-outbox.sqlite3")
    box.enqueue("full_history", MemoryEvent(
        event_id=event_id, run_id="default", user_id="cli-user", agent_id="nanobot",
        session_id="cli:direct", turn_id="t1", timestamp=datetime.now(UTC),
        messages=[Message(role="user", content=text)]), "cli:direct")
    [row] = box.pending("full_history")
    box.mark_failed(row.seq, "AdapterError: Storage folder is already accessed (test)")
    box.close()


def outbox_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nanobot_memory_adapters.cli", "outbox", *args],
                          capture_output=True, text=True, timeout=300)


async def test_failed_rows_show_and_requeue_from_chat(home):
    home.write_memory({"memory": {"condition": "full_history"}})
    reply_of(home.cli("/memory-health"))  # the plugin creates its data dir and outbox
    _park_failed(home, "parked-1", "I collect blue teapots.")
    health = reply_of(home.cli("/memory-health"))
    assert "1 failed" in health
    assert "failed turns: 1 (last error: AdapterError: Storage folder is already accessed" \
        in health
    assert "/memory-mode retry-failed" in health
    requeued = reply_of(home.cli("/memory-mode retry-failed"))
    assert "requeued 1 failed turn(s) for 'full_history'" in requeued
    after = reply_of(home.cli("/memory-health"))
    assert "0 pending, 0 failed" in after and "failed turns" not in after
    recall = reply_of(home.cli("What do I collect?"))
    assert "memory sections: full_history" in recall


async def test_cli_outbox_status_and_requeue(home):
    home.write_memory({"memory": {"condition": "full_history"}})
    reply_of(home.cli("/memory-health"))
    _park_failed(home, "parked-2", "I collect green kettles.")
    status = outbox_cli("status", "--config", str(home.memory_path), "--json")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert (data["provider"], data["failed"], data["pending"]) == ("full_history", 1, 0)
    assert "already accessed" in data["last_failed_error"]
    requeue = outbox_cli("requeue", "--config", str(home.memory_path))
    assert requeue.returncode == 0 and "requeued 1 failed turn(s)" in requeue.stdout
    reply_of(home.cli("Hello."))  # the next process delivers what was requeued
    final = json.loads(outbox_cli("status", "--config", str(home.memory_path),
                                  "--json").stdout)
    assert (final["failed"], final["pending"]) == (0, 0) and final["delivered"] >= 2
    missing = outbox_cli("status", "--config", str(home.root / "nope.json"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr
