"""The MemOS launcher's services: MemOS's own venv, Postgres+pgvector, Redis, and the
helper scripts that run in that venv (``runtime_scripts/``, shipped as package data)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from nanobot_memory_adapters import local_postgres
from nanobot_memory_adapters.backends.memos.launcher import (
    MARKER_FILE,
    MEMOS_REQUIREMENTS,
    TORCH_REQUIREMENT,
    MemosServerError,
    default_venv,
    free_port,
    port_in_use,
    tail,
)
from nanobot_memory_adapters.local_postgres import LocalPostgresError
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.processes import (
    ScriptFailed,
    pid_alive,
    process_token,
    run_python,
    token_alive,
)

# --------------------------------------------------------------------------- provisioning


def requirements_fingerprint() -> dict[str, Any]:
    return {"torch": TORCH_REQUIREMENT, "requirements": list(MEMOS_REQUIREMENTS)}


def pip(py: Path, args: list[str], log: Path) -> None:
    cmd = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args]
    logger.info("memos-server: pip install {}", " ".join(args))
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise MemosServerError(
            f"pip install failed (exit {proc.returncode}); see {log}:\n{tail(log)}"
        )


def provision(home: Path, python: str = sys.executable, venv: Path | None = None) -> Path:
    """Create (or complete) MemOS's own venv; returns its python. Idempotent."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "logs").mkdir(exist_ok=True)
    venv = (venv or default_venv(home)).absolute()
    venv.parent.mkdir(parents=True, exist_ok=True)
    py = venv / "bin" / "python"
    marker = venv / MARKER_FILE
    wanted = requirements_fingerprint()
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
        pip(py, [TORCH_REQUIREMENT], log)
        pip(py, list(MEMOS_REQUIREMENTS), log)
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

_SCRIPTS = resources.files("nanobot_memory_adapters.backends.memos") / "runtime_scripts"


def script(name: str) -> str:
    """A helper that runs in MemOS's venv (shipped as package data, linted like the rest)."""
    return (_SCRIPTS / name).read_text(encoding="utf-8")


def run_helper(py: Path, script: str, *args: str, timeout: float = 120.0) -> str:
    try:
        return run_python(py, script, *args, timeout=timeout)
    except ScriptFailed as exc:
        raise MemosServerError(f"helper failed ({exc})") from None


# --------------------------------------------------------------------------- postgres / redis


def start_postgres(home: Path, py: Path) -> dict[str, Any]:
    """Postgres+pgvector from MemOS's venv (the local server ``local_postgres`` runs)."""
    try:
        return local_postgres.start_server(home, py)
    except LocalPostgresError as exc:
        raise MemosServerError(str(exc)) from exc


stop_postgres = local_postgres.stop_server
postgres_running = local_postgres.server_running


def start_redis(home: Path) -> dict[str, Any]:
    exe = shutil.which("redis-server")
    if not exe:
        raise MemosServerError(
            "redis-server not found (Debian: apt-get install redis-server), or use --no-redis"
        )
    port = free_port()
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
            raise MemosServerError(f"redis-server exited ({proc.returncode}):\n{tail(log)}")
        if port_in_use(port):
            logger.info("memos-server: redis running (pid {}, 127.0.0.1:{})", proc.pid, port)
            return {"pid": proc.pid, "pid_token": process_token(proc.pid), "port": port}
        time.sleep(0.1)
    raise MemosServerError(f"redis-server did not listen on 127.0.0.1:{port}:\n{tail(log)}")


def recorded_alive(pid: int | None, token: str | None, expect: str) -> bool:
    """Whether the process ``state.json`` recorded still runs as that process: by its
    :func:`process_token` (pid and start time; a pid is reused after a reboot), or, for a
    state written without one, by ``expect`` in its command line (where /proc can say)."""
    if not pid_alive(pid):
        return False
    if token:
        return token_alive(token)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            "utf-8", "replace")
    except OSError:
        return True  # no /proc: the pid is all there is
    return expect in cmdline


def terminate(pid: int | None, name: str, timeout: float = 20.0, *,
              token: str | None = None, expect: str = "") -> None:
    """Stop the process ``state.json`` recorded, and only it: a pid now held by another
    process (a stale state file, a wrong ``--home``) is left running, with a warning."""
    if not pid_alive(pid):
        return
    assert pid is not None
    if not recorded_alive(pid, token, expect):
        logger.warning("memos-server: the {} pid {} recorded in state.json is another "
                       "process now (the state outlived it); left running", name, pid)
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            logger.info("memos-server: {} stopped (pid {})", name, pid)
            return
        time.sleep(0.2)
    logger.warning("memos-server: {} (pid {}) ignored SIGTERM; killing it", name, pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
