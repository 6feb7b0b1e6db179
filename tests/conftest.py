"""Shared fixtures: the LLM double (session-wide) and a fresh data dir per test."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
import threading

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
# One ONNX export of the bundled MiniLM for every test, worker and child process (mem0's
# default embedder): a test that gives a child process another HOME would export again.
if "NANOBOT_MEMORY_CACHE_DIR" not in os.environ:
    from nanobot_memory_adapters.onnx_embedder import default_cache_dir

    os.environ["NANOBOT_MEMORY_CACHE_DIR"] = str(default_cache_dir())

import pytest

from tests.llm_double import LLMDouble

# Fixtures that provision a server of their own (a MemOS venv, Postgres and Redis: minutes
# on a cold machine). Tests using them carry the ``servers`` marker, so a contributor can
# run the fast suite with ``-m "not servers"``; CI runs everything. Any other test that
# starts a process (nanobot, a bench run, a server) says so with ``@pytest.mark.servers``:
# ``_no_unmarked_processes`` fails one that does not.
SERVER_FIXTURES = frozenset({"memos_server"})
_running: list[pytest.Item] = []
_started_a_process: set[str] = set()
_popen_init = subprocess.Popen.__init__


def _note_a_process_start() -> None:
    # The main thread only: a thread an earlier test left behind must not blame this one.
    if (_running and threading.current_thread() is threading.main_thread()
            and not _running[-1].get_closest_marker("servers")):
        _started_a_process.add(_running[-1].nodeid)


def _watched_popen_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    _note_a_process_start()
    _popen_init(self, *args, **kwargs)


subprocess.Popen.__init__ = _watched_popen_init  # type: ignore[method-assign]
_process_start = multiprocessing.process.BaseProcess.start


def _watched_process_start(self):  # type: ignore[no-untyped-def]
    _note_a_process_start()  # multiprocessing (a pool's workers) does not go through Popen
    _process_start(self)


multiprocessing.process.BaseProcess.start = _watched_process_start  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.fixture(autouse=True)
def _no_unmarked_processes(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The fast suite (``-m "not servers"``) stays fast only if every test that starts a
    process is marked: a test (or its module fixture) that starts one unmarked fails."""
    yield
    if request.node.nodeid in _started_a_process:
        pytest.fail("this test (or a fixture it uses) started a process: mark it "
                    "@pytest.mark.servers (or the module's pytestmark)", pytrace=False)


def _declared_seconds(item: pytest.Item) -> float:
    """A test's own estimate of its cost, ``@pytest.mark.long(seconds)``; 0 if short."""
    mark = item.get_closest_marker("long")
    return float(mark.args[0]) if mark and mark.args else 0.0


# tryfirst: markers must exist before xdist's own hook names each test's group.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.servers)
    # The longest work first (scripts/test.sh passes --no-loadscope-reorder so xdist keeps
    # this order): the workers then end together instead of one running a 6-min test last.
    # A stable sort keeps each module's, and each group's, own order.
    items.sort(key=lambda item: -_declared_seconds(item))


@pytest.fixture(scope="session")
def llm_double():
    with LLMDouble() as double:
        yield double


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "memory-data"
    path.mkdir()
    return path


def pytest_configure(config: pytest.Config) -> None:
    """Refuse, in one line, the versions known to drop every group (pytest-xdist#1386)."""
    if config.getoption("dist", "no") != "loadgroup":
        return
    from importlib.metadata import version

    from packaging.version import Version

    if Version(pytest.__version__) >= Version("9.2") and Version(
            version("pytest-xdist")) <= Version("3.8.0"):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with pytest-xdist {version('pytest-xdist')} does "
            "not group tests (pytest-xdist#1386): install 'pytest<9.2' (./scripts/"
            "bootstrap.sh does), or run without workers (NANOBOT_MEMORY_TEST_WORKERS=0)")


# A worker cannot stop the run in one line (an error raised there is an INTERNALERROR
# traceback on the controller), so it marks the ungrouped tests' ids, which it sends to the
# controller, and the controller stops the run (as xdist itself marks ids with "@group").
UNGROUPED = "@ungrouped-by-this-xdist"


@pytest.hookimpl(tryfirst=True)  # before the worker sends its ids to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    """On an xdist worker with ``--dist loadgroup``, every grouped test's id must carry its
    group: when it does not (pytest 9.2 with xdist 3.8, pytest-xdist#1386), tests that share
    a server or a module fixture would silently run on both workers at once."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    for item in session.items:
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
            item._nodeid = item.nodeid + UNGROUPED


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):  # type: ignore[no-untyped-def]
    lost = [i.removesuffix(UNGROUPED) for i in ids if i.endswith(UNGROUPED)]
    if lost:
        pytest.exit(
            f"xdist_group is not applied ({len(lost)} tests, e.g. {lost[0]}): this pytest "
            "and pytest-xdist do not group tests (pytest-xdist#1386); install pytest<9.2, "
            "or run without workers (NANOBOT_MEMORY_TEST_WORKERS=0)", returncode=4)
