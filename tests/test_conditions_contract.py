"""The reusable contract suite on every built-in condition."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.conditions.full_history import FullHistory
from nanobot_memory_adapters.conditions.no_memory import NoMemory, NoMemoryNamed
from nanobot_memory_adapters.conditions.oracle_ipas import OracleIPAS, Preference
from nanobot_memory_adapters.conditions.rolling_summary import DreamLLM, RollingSummary
from nanobot_memory_adapters.conditions.static_profile import StaticProfile
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget


def _blocked_path(tmp_path):
    """A path whose parent is a regular file: any store under it fails natively."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    return blocker / "store"


class TestNoMemory(ContractSuite):
    @pytest.fixture
    def contract_target(self):
        async def make():
            return NoMemory()

        return SuiteTarget(make=make, no_native_backend="no_memory has no native store")


class TestNoMemoryNamed(ContractSuite):
    @pytest.fixture
    def contract_target(self):
        async def make():
            return NoMemoryNamed("Alice")

        return SuiteTarget(make=make, no_native_backend="no_memory_named is configuration only")


class TestFullHistory(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path):
        async def make():
            return FullHistory(tmp_path / "history.sqlite3")

        async def make_failing():
            return FullHistory(_blocked_path(tmp_path) / "history.sqlite3")

        return SuiteTarget(make=make, make_failing=make_failing)


class TestRollingSummary(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path):
        async def make():
            return RollingSummary(tmp_path / "rolling")

        async def make_failing():
            return RollingSummary(_blocked_path(tmp_path))

        return SuiteTarget(make=make, make_failing=make_failing)


class TestRollingSummaryWithDream(ContractSuite):
    """nanobot's own Dream (a real AgentLoop) consolidates the journal; LLM = the double."""

    @pytest.fixture
    def contract_target(self, tmp_path, llm_double):
        llm = DreamLLM(base_url=llm_double.base_url)

        async def make():
            return RollingSummary(tmp_path / "rolling", llm=llm)

        async def make_failing():
            return RollingSummary(_blocked_path(tmp_path), llm=llm)

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=60)


class TestStaticProfile(ContractSuite):
    @pytest.fixture
    def contract_target(self):
        async def make():
            return StaticProfile("Prefers short answers; vegetarian.")

        return SuiteTarget(make=make, no_native_backend="static_profile is configuration only")


class TestOracleIPAS(ContractSuite):
    @pytest.fixture
    def contract_target(self):
        prefs = {"alice": [Preference(attribute="diet", value="vegetarian", context="personal")]}

        async def make():
            return OracleIPAS(prefs)

        return SuiteTarget(make=make, no_native_backend="oracle_ipas is configuration only")


async def test_dream_loop_never_loads_the_users_memory_plugin(tmp_path, llm_double, monkeypatch):
    """A user's memory.json must not turn the private Dream loop into a plugin host."""
    home = tmp_path / "home"
    (home / ".nanobot").mkdir(parents=True)
    (home / ".nanobot" / "memory.json").write_text('{"memory": {"condition": "full_history"}}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NANOBOT_MEMORY_CONFIG", str(home / ".nanobot" / "memory.json"))
    from nanobot_memory_adapters.contract import MemoryScope
    from nanobot_memory_adapters.nanobot import plugin_for

    adapter = RollingSummary(tmp_path / "rolling", llm=DreamLLM(base_url=llm_double.base_url))
    try:
        loop = adapter._dream_loop(MemoryScope(run_id="r", persona_id="alice"))
        assert plugin_for(loop) is None
    finally:
        await adapter.aclose()
