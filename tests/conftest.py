"""Shared fixtures: the LLM double (session-wide) and a fresh data dir per test."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

import pytest

from tests.llm_double import LLMDouble


@pytest.fixture(scope="session")
def llm_double():
    with LLMDouble() as double:
        yield double


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "memory-data"
    path.mkdir()
    return path
