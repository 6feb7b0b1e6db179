"""Real MCP memory servers for the tests, installed once into a cache directory by their
ordinary clients (npm, pip) and started by each adapter over stdio. Installing never
happens at a user's run time: these helpers are test-only.

- ``@modelcontextprotocol/server-memory`` (npm, the official reference server).
- ``mcp-memory-service`` (PyPI) in its own venv, on a Python that can load SQLite
  extensions (sqlite-vec); it runs offline on its own hash-embedding fallback, since no
  embedding model may be downloaded here.

``$NANOBOT_MEMORY_TEST_CACHE`` moves the cache (default ``~/.cache/nanobot-memory-tests``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

SERVER_MEMORY_VERSION = "2026.8.31"
MCP_MEMORY_SERVICE_VERSION = "12.4.0"


def cache_dir() -> Path:
    env = os.environ.get("NANOBOT_MEMORY_TEST_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "nanobot-memory-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _fresh(path: Path) -> None:
    """Drop a dangling link left where an install used to be, so it can be redone."""
    if path.is_symlink() and not path.exists():
        path.unlink()


def _run(cmd: list[str], timeout: float) -> str | None:
    """None on success, else why it failed (one line)."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cmd[0]}: {exc}"
    if done.returncode:
        return f"{' '.join(cmd[:3])} exited {done.returncode}: {done.stderr.strip()[-300:]}"
    return None


def server_memory_command() -> tuple[list[str] | None, str]:
    """``node <index.js>`` of the reference server, or (None, why it is unavailable)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return None, "node/npm not on PATH: cannot install @modelcontextprotocol/server-memory"
    home = cache_dir() / f"server-memory-{SERVER_MEMORY_VERSION}"
    entry = home / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if not entry.exists():
        _fresh(home)
        home.mkdir(parents=True, exist_ok=True)
        why = _run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(home),
                    f"@modelcontextprotocol/server-memory@{SERVER_MEMORY_VERSION}"], 600)
        if why or not entry.exists():
            return None, f"npm could not install the reference server: {why or 'no entry'}"
    return [node, str(entry)], ""


def _python_with_extensions() -> str | None:
    """A Python whose sqlite3 can load extensions (sqlite-vec needs it)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        probe = ("import sqlite3;c=sqlite3.connect(':memory:');c.enable_load_extension(True)")
        if Path(candidate).exists() and _run([candidate, "-c", probe], 60) is None:
            return candidate
    return None


def mcp_memory_service_command() -> tuple[list[str] | None, str]:
    venv = cache_dir() / f"mcp-memory-service-{MCP_MEMORY_SERVICE_VERSION}"
    entry = venv / "bin" / "memory"
    if not entry.exists():
        _fresh(venv)
        python = _python_with_extensions()
        if python is None:
            return None, ("no Python here can load SQLite extensions "
                          f"(sqlite {sqlite3.sqlite_version}); mcp-memory-service needs sqlite-vec")
        why = _run([python, "-m", "venv", str(venv)], 300) or _run(
            [str(venv / "bin" / "pip"), "install", "-q",
             f"mcp-memory-service=={MCP_MEMORY_SERVICE_VERSION}"], 1200)
        if why or not entry.exists():
            return None, f"pip could not install mcp-memory-service: {why or 'no entry'}"
    return [str(entry), "server"], ""
