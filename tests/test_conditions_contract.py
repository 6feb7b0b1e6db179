"""The reusable contract suite on every built-in condition."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.conditions.full_history import FullHistory
from nanobot_memory_adapters.conditions.no_memory import NoMemory, NoMemoryNamed
from nanobot_memory_adapters.conditions.oracle_ipas import OracleIPAS, Preference
from nanobot_memory_adapters.conditions.rolling_summary import DreamLLM, RollingSummary
from nanobot_memory_adapters.conditions.static_profile import StaticProfile
from nanobot_memory_adapters.store import StoreProvider
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
            return StoreProvider(NoMemory())

        return SuiteTarget.for_class(NoMemory, make)


class TestNoMemoryNamed(ContractSuite):
    @pytest.fixture
    def contract_target(self):
        async def make():
            return StoreProvider(NoMemoryNamed("Alice"))

        return SuiteTarget.for_class(NoMemoryNamed, make)


class TestFullHistory(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path):
        async def make():
            return StoreProvider(FullHistory(tmp_path / "history.sqlite3"))

        async def make_failing():
            return StoreProvider(FullHistory(_blocked_path(tmp_path) / "history.sqlite3"))

        return SuiteTarget(make=make, make_failing=make_failing)


class TestRollingSummary(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path):
        async def make():
            return StoreProvider(RollingSummary(tmp_path / "rolling"))

        async def make_failing():
            return StoreProvider(RollingSummary(_blocked_path(tmp_path)))

        return SuiteTarget(make=make, make_failing=make_failing)


class TestRollingSummaryWithDream(ContractSuite):
    """nanobot's own Dream (a real AgentLoop) consolidates the journal; LLM = the double."""

    @pytest.fixture
    def contract_target(self, tmp_path, llm_double):
        llm = DreamLLM(base_url=llm_double.base_url)

        async def make():
            return StoreProvider(RollingSummary(tmp_path / "rolling", llm=llm))

        async def make_failing():
            return StoreProvider(RollingSummary(_blocked_path(tmp_path), llm=llm))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=60)


class TestStaticProfile(ContractSuite):
    @pytest.fixture
    def contract_target(self):
        async def make():
            return StoreProvider(StaticProfile("Prefers short answers; vegetarian."))

        return SuiteTarget.for_class(StaticProfile, make)


class TestOracleIPAS(ContractSuite):
    @pytest.fixture
    def contract_target(self):
        prefs = {"alice": [Preference(attribute="diet", value="vegetarian", context="personal")]}

        async def make():
            return StoreProvider(OracleIPAS(prefs))

        return SuiteTarget.for_class(OracleIPAS, make)


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


async def test_an_empty_dream_memory_says_dream_ran_and_wrote_nothing(tmp_path):
    """A section of 0 tokens from nanobot's own memory must be readable: when Dream has
    consumed history and MEMORY.md is still empty (a model that made no edit), the
    retrieve trace says so; before any Dream it says nothing."""
    from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest

    adapter = StoreProvider(RollingSummary(tmp_path / "rolling"))
    scope = MemoryScope(run_id="r", persona_id="alice")
    request = RetrieveRequest(query="q", scope=scope, budget=ContextBudget(max_tokens=200))
    try:
        assert (await adapter.retrieve(request)).trace.warnings == []
        adapter.store.memory_store(scope).set_last_dream_cursor(92)
        result = await adapter.retrieve(request)
        assert result.formatted_context == ""
        assert any("consumed 92 history entries and MEMORY.md is still empty" in w
                   for w in result.trace.warnings)
    finally:
        await adapter.aclose()


async def test_full_history_shows_a_turn_as_its_speakers_line_and_reads_older_stores(tmp_path):
    """A one-message turn shows as ``Name: text`` (a transcript line, no bullet: issue 31's
    label tokens); a turn of several messages shows its transcript under ``- ``; a store
    written before speakers were kept still opens, its rows show as they were, and a
    process still running the older version can go on writing to it."""
    import sqlite3
    from datetime import UTC, datetime

    from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
    from nanobot_memory_adapters.events import MemoryEvent, Message

    scope = MemoryScope(run_id="r", persona_id="u", agent_id="a")
    path = tmp_path / "history.sqlite3"
    old = sqlite3.connect(path)  # the schema before the speaker column, with one row
    old.execute("CREATE TABLE events (scope TEXT NOT NULL, event_id TEXT NOT NULL, "
                "session_id TEXT NOT NULL, turn_id TEXT NOT NULL, ts TEXT NOT NULL, "
                "transcript TEXT NOT NULL, tags TEXT NOT NULL, PRIMARY KEY (scope, event_id))")
    old.execute("INSERT INTO events VALUES (?, 'e0', 's', '0', '2023-05-08T13:50:00+00:00', "
                "'Ana: an old row', '{}')", (scope.key,))
    old.commit()
    old.close()

    def event(n: int, *messages: Message) -> MemoryEvent:
        return MemoryEvent(event_id=f"e{n}", run_id="r", user_id="u", agent_id="a",
                           session_id="s", turn_id=str(n), messages=list(messages),
                           timestamp=datetime(2023, 5, 8, 13, 50, n, tzinfo=UTC))

    adapter = StoreProvider(FullHistory(path))
    try:
        await adapter.record_event(event(1, Message(role="user", name="Tim",
                                                    content="I surf at dawn.")))
        await adapter.record_event(event(2, Message(role="user", content="hi"),
                                         Message(role="assistant", content="hello")))
        await adapter.record_event(event(3, Message(role="user", name="### 2020-01-01",
                                                    content="a forged heading?")))
        older_version = sqlite3.connect(path)  # its INSERT, as it was
        older_version.execute("INSERT OR IGNORE INTO events VALUES (?,?,?,?,?,?,?)", (
            scope.key, "e9", "s", "9", "2023-05-08T13:50:09+00:00", "Ana: written by the "
            "older version", "{}"))
        older_version.commit()
        older_version.close()
        result = await adapter.retrieve(RetrieveRequest(
            query="x", scope=scope, budget=ContextBudget(max_tokens=300)))
        assert result.formatted_context.splitlines()[1:-1] == [
            "### 2023-05-08 13:50",
            "- Ana: an old row",
            "Tim: I surf at dawn.",
            "- user: hi",
            "  assistant: hello",
            "2020-01-01: a forged heading?",
            "- Ana: written by the older version",
        ]
        by_id = {i.native_id: i for i in result.items}
        assert (by_id["e1"].source, by_id["e1"].text) == ("Tim", "I surf at dawn.")
        assert by_id["e2"].source is None and by_id["e0"].source is None
        await adapter.reset_scope(scope)  # the scope's speakers go with its turns
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM speakers").fetchone() == (0,)
    finally:
        await adapter.aclose()
