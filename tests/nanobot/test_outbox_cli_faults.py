"""``nanobot-memory outbox status|requeue`` on a damaged or unwritable outbox: one line
that names the file and the remedy, a non-zero exit, never a traceback; ``status`` only
reads (the file stays byte-identical, even when it is healthy)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nanobot_memory_adapters.events import MemoryEvent, Message
from nanobot_memory_adapters.nanobot.outbox import Outbox
from tests.nanobot.faults import fill, hold_write_lock, remount, small_disk
from tests.nanobot.test_outbox_recovery import outbox_cli

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

FILE = "nanobot-outbox.sqlite3"


def _healthy(path: Path, failed: int = 1) -> None:
    """An outbox with ``failed`` parked rows (as the plugin leaves them), closed."""
    box = Outbox(path)
    for i in range(failed):
        box.enqueue("full_history", MemoryEvent(
            event_id=f"parked-{i}", run_id="default", user_id="cli-user", agent_id="nanobot",
            session_id="cli:direct", turn_id=f"t{i}", timestamp=datetime.now(UTC),
            messages=[Message(role="user", content=f"I collect teapot number {i}.")]),
            "cli:direct")
    for row in box.pending("full_history"):
        box.mark_failed(row.seq, "AdapterError: refused (test)")
    box.close()


def _digest(path: Path) -> dict[str, str]:
    """Every file beside the outbox, hashed: ``status`` must change none of them."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.parent.iterdir()) if p.is_file()}


def _one_line_error(done, path: Path, *words: str) -> str:
    err = done.stderr.strip()
    assert done.returncode == 1, (done.returncode, done.stdout, err)
    assert "Traceback" not in err + done.stdout
    assert len(err.splitlines()) == 1, err
    assert str(path) in err and "error:" in err, err
    for word in words:
        assert word in err, err
    return err


@pytest.fixture
def config(home) -> Path:
    home.write_memory({"memory": {"condition": "full_history"}})
    home.data_dir.mkdir(parents=True, exist_ok=True)
    return home.memory_path


def test_status_on_a_healthy_outbox_changes_no_byte(home, config):
    path = home.data_dir / FILE
    _healthy(path)
    before = _digest(path)
    done = outbox_cli("status", "--config", str(config), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["failed"] == 1
    assert _digest(path) == before  # no -wal / -shm created, the file untouched


def test_an_unknown_provider_is_refused_not_shown_as_an_empty_outbox(home, config):
    """``--provider NOSUCH`` read as "0 pending, 0 failed" (exit 0), requeued nothing and
    a migrate-scopes dry run would queue nothing: as backfill does, the names are listed."""
    path = home.data_dir / FILE
    _healthy(path)
    before = _digest(path)
    for args in (("outbox", "status"), ("outbox", "requeue"), ("migrate-scopes", "--dry-run")):
        done = subprocess.run([sys.executable, "-m", "nanobot_memory_adapters.cli", *args,
                               "--config", str(config), "--provider", "NOSUCH"],
                              capture_output=True, text=True, timeout=300)
        err = done.stderr.strip()
        assert done.returncode == 2 and len(err.splitlines()) == 1, (args, done.stdout, err)
        assert "--provider NOSUCH: unknown" in err and "full_history" in err, err
    assert _digest(path) == before
    assert json.loads(outbox_cli("status", "--config", str(config), "--json").stdout
                      )["failed"] == 1  # the real provider's row is still there


def test_a_provider_whose_plugin_is_gone_keeps_its_rows_reachable(home, config):
    """Rows of a provider no longer registered (its plugin uninstalled) are still counted
    and requeued by name; a name with neither a plugin nor rows is refused."""
    path = home.data_dir / FILE
    box = Outbox(path)
    box.enqueue("gone_plugin", MemoryEvent(
        event_id="orphan-0", run_id="default", user_id="cli-user", agent_id="nanobot",
        session_id="cli:direct", turn_id="t0", timestamp=datetime.now(UTC),
        messages=[Message(role="user", content="I keep bees.")]), "cli:direct")
    for row in box.pending("gone_plugin"):
        box.mark_failed(row.seq, "AdapterError: refused (test)")
    box.close()
    shown = outbox_cli("status", "--config", str(config), "--provider", "gone_plugin", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["failed"] == 1
    again = outbox_cli("requeue", "--config", str(config), "--provider", "gone_plugin")
    assert again.returncode == 0 and "requeued 1" in again.stdout, again.stderr
    pending = outbox_cli("status", "--config", str(config), "--provider", "gone_plugin",
                         "--json")
    assert json.loads(pending.stdout)["pending"] == 1
    unknown = outbox_cli("status", "--config", str(config), "--provider", "never_here")
    assert unknown.returncode == 2 and "unknown and no rows here" in unknown.stderr


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "directory"])
def test_a_damaged_outbox_gets_one_line_and_exit_1(home, config, damage):
    path = home.data_dir / FILE
    if damage == "garbage":
        path.write_bytes(b"this is not sqlite\n" * 500)
    elif damage == "truncated":
        _healthy(path, failed=40)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage == "empty":  # cut to nothing: status must not write a schema into it
        path.write_bytes(b"")
    else:
        path.mkdir()
    before = _digest(path) if path.is_file() else None
    # an empty file is a valid empty database to SQLite: requeue may make it an outbox
    for command in ("status",) if damage == "empty" else ("status", "requeue"):
        done = outbox_cli(command, "--config", str(config))
        err = _one_line_error(done, path)
        if damage == "directory":
            assert "is a directory" in err and "move" in err
        else:
            assert "damaged" in err and "mv " in err
        if before is not None and command == "status":
            assert _digest(path) == before


@pytest.mark.long(34)
def test_a_locked_outbox_reads_and_refuses_requeue_in_one_line(home, config):
    path = home.data_dir / FILE
    _healthy(path)
    holder = hold_write_lock(path)  # a real second process inside BEGIN IMMEDIATE
    try:
        status = outbox_cli("status", "--config", str(config), "--json")
        assert status.returncode == 0, status.stderr  # reading needs no lock (WAL)
        assert json.loads(status.stdout)["failed"] == 1
        began = time.monotonic()
        requeue = outbox_cli("requeue", "--config", str(config))
        _one_line_error(requeue, path, "write lock")
        # requeue waits 5 s for the lock, opening the file included (it once waited 30 s
        # there: CREATE ... IF NOT EXISTS takes the write lock); 20 s leaves room for load
        assert time.monotonic() - began < 20
    finally:
        holder.kill()
        holder.wait()
    requeue = outbox_cli("requeue", "--config", str(config))
    assert requeue.returncode == 0 and "requeued 1 failed turn(s)" in requeue.stdout


def test_read_only_and_full_disks(home, config):
    with small_disk(home.data_dir, "512k") as disk:
        path = disk / FILE
        _healthy(path)
        filler = fill(disk)
        before = _digest(path)
        status = outbox_cli("status", "--config", str(config), "--json")
        assert status.returncode == 0 and json.loads(status.stdout)["failed"] == 1
        assert _digest(path) == before
        full = outbox_cli("requeue", "--config", str(config))
        _one_line_error(full, path, "disk is full", "free space")
        filler.unlink()
        remount(disk, "ro")
        try:
            status = outbox_cli("status", "--config", str(config), "--json")
            assert status.returncode == 0 and json.loads(status.stdout)["failed"] == 1
            ro = outbox_cli("requeue", "--config", str(config))
            _one_line_error(ro, path, "writable")
        finally:
            remount(disk, "rw")
        done = outbox_cli("requeue", "--config", str(config))
        assert done.returncode == 0 and "requeued 1 failed turn(s)" in done.stdout
        shutil.rmtree(disk / "unused", ignore_errors=True)
