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


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.servers)


@pytest.fixture(scope="session")
def llm_double():
    with LLMDouble() as double:
        yield double


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "memory-data"
    path.mkdir()
    return path
