"""Processes on this machine: is one still running, and which one is it (a pid is reused).

One place for what the MemOS launcher (its servers) and the plugin's outbox (who owns a
turn still being answered) both need to know.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (field 3 onwards), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()


def pid_alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs: it answers ``kill(0)`` and is not a zombie (an unreaped
    child still answers, though it will never run again)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(IndexError, TypeError):
        if (_stat_fields(pid) or [""])[0] == "Z":
            return False
    return True


def started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, stat field 22), or None where
    /proc cannot say."""
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def process_token(pid: int | None = None) -> str:
    """``pid:start``, a process's identity: a pid alone is reused (after a restart a
    container's main process is pid 1 again), the start time tells them apart."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{started(pid) or ''}"


def token_alive(token: int | str | None) -> bool:
    """Whether the process a :func:`process_token` names still runs (a bare pid: by pid)."""
    if token in (None, ""):
        return False
    pid_text, _, start = str(token).partition(":")
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    return pid_alive(pid) and (not start or started(pid) in (None, start))
