"""Processes on this machine: is one still running, which one is it (a pid is reused), and
how a script runs in another Python (MemOS's venv, the local Postgres helpers).

One place for what the MemOS launcher (its servers), the local Postgres and the plugin's
outbox (who owns a turn still being answered) need to know.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
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


def python_env() -> dict[str, str]:
    """The environment for another interpreter: offline, one thread, and none of this
    venv's paths (they would leak our packages into MemOS's venv)."""
    env = dict(os.environ)
    env.update(
        {
            "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
        }
    )
    for key in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(key, None)
    return env


class ScriptFailed(RuntimeError):
    """A script run by :func:`run_python` exited non-zero (its exit code and stderr tail)."""


def run_python(py: Path, code: str, *args: str, timeout: float = 120.0) -> str:
    """Run ``code`` with interpreter ``py`` in :func:`python_env`; its stdout, or
    :class:`ScriptFailed` (callers name it in their own error)."""
    proc = subprocess.run(
        [str(py), "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=python_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise ScriptFailed(f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout
