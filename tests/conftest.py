"""Shared fixtures: the LLM double (session-wide) and a fresh data dir per test."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

import pytest

from tests.llm_double import LLMDouble

# Fixtures that provision a server of their own (a MemOS venv, Postgres and Redis: minutes
# on a cold machine). Tests using them carry the ``servers`` marker, so a contributor can
# run the fast suite with ``-m "not servers"``; CI runs everything.
SERVER_FIXTURES = frozenset({"memos_server"})




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
    # this order): two workers then end together instead of one running a 6-min test last.
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


def pytest_collection_finish(session: pytest.Session) -> None:
    """On an xdist worker with ``--dist loadgroup``, every grouped test's id must carry its
    group: when it does not (pytest 9.2 with xdist 3.8, pytest-xdist#1386), tests that share
    a server or a module fixture would silently run on both workers at once."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(
            f"xdist_group is not applied ({len(lost)} tests, e.g. {lost[0]}): this pytest "
            "and pytest-xdist do not group tests (pytest-xdist#1386); install pytest<9.2, "
            "or run without workers (NANOBOT_MEMORY_TEST_WORKERS=0)")
