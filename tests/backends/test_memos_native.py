"""MemOS native settings and diagnostics that need no server: ``use_multi_db`` (refused
when true, recorded in the run manifest) and the request/parse path of ``native_query``
(httpx MockTransport answering with MemOS 2.0.33's response shapes)."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.backends.memos import MemOSConfig, MemOSStore
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.harness.manifest import native_config, provider_entry
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.store import StoreProvider

URL = "http://memos.test"


def test_use_multi_db_true_is_refused_with_one_line(tmp_path):
    """Physical isolation cannot be honoured by MemOS's postgres server mode: refused,
    never faked."""
    with pytest.raises(ConfigError) as err:
        load_provider({"backend": "memos", "memos": {"base_url": URL, "use_multi_db": True}},
                      data_dir=tmp_path)
    line = str(err.value)
    assert "\n" not in line and "memory.memos.use_multi_db" in line
    assert "use_multi_db: false" in line and "logically" in line


async def test_use_multi_db_is_recorded_in_the_manifest(tmp_path):
    source = {"backend": "memos", "memos": {"base_url": URL}}
    name, kind, block = native_config(source)
    assert block["use_multi_db"] is False
    adapter = load_provider(source, data_dir=tmp_path)
    try:
        scope = MemoryScope(run_id="r1", persona_id="alice")
        entry = provider_entry(name, kind, block, adapter, scope)
        assert entry["config"]["use_multi_db"] is False
        native = entry["scope_mapping"]["native"]
        assert native["use_multi_db"] is False and native["isolation"].startswith("logical")
        assert native["cube_id"] == "nbm__r1__alice"
        explicit = StoreProvider(MemOSStore(MemOSConfig(base_url=URL, use_multi_db=False)))
        assert explicit.native_scope(scope)["use_multi_db"] is False
        await explicit.aclose()
    finally:
        await adapter.aclose()


def _bucket(cube: str, stats: dict[str, int]) -> dict:
    """One cube of MemOS 2.0.33's ``/product/get_all`` answer (``handle_get_all_memories``):
    the sampled tree in ``memories`` and the exact per-type counts in
    ``memory_statistics``."""
    return {"cube_id": cube, "memories": [{"nodes": [], "edges": [], "tree_structure": {}}],
            "memory_statistics": stats}


async def test_native_query_inventory_request_parse_and_trace():
    """``inventory`` sends the cube's ``GetMemoryPlaygroundRequest``, counts only the
    scope's cube by native type, and traces one ``native_query`` (never a prompt)."""
    import json

    import httpx

    from nanobot_memory_adapters.contract import (
        AdapterError,
        capabilities_of,
        supports,
    )

    sent: list[tuple[str, dict]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append((request.url.path, body))
        cube = body["mem_cube_ids"][0]
        return httpx.Response(200, json={"code": 200, "message": "ok", "data": [
            _bucket(cube, {"UserMemory": 3, "LongTermMemory": 1}),
            _bucket("someone-else", {"UserMemory": 99}),
        ]})

    traces = []

    class Sink:
        def emit(self, trace, **extra):
            traces.append(trace)

    adapter = StoreProvider(MemOSStore(MemOSConfig(base_url=URL),
                           transport=httpx.MockTransport(handler)), trace_sink=Sink())
    try:
        assert supports(adapter, "native_query")
        assert capabilities_of(adapter) == ["readiness", "native_query"]
        scope = MemoryScope(run_id="r1", persona_id="alice")
        out = await adapter.native_query(scope, "inventory")
        assert sent == [("/product/get_all", {"user_id": "r1__alice", "memory_type": "text_mem",
                                              "mem_cube_ids": ["nbm__r1__alice"]})]
        assert {k: v for k, v in out.items() if k != "native_request"} == {
            "native_operation": "POST /product/get_all", "cube_id": "nbm__r1__alice",
            "group": "text_mem", "total": 4, "retrieved_count": 4,
            "memory_types": {"LongTermMemory": 1, "UserMemory": 3}}
        queried = [t for t in traces if t.operation == "native_query"]
        assert [(t.native_operation, t.scope, t.retrieved_count) for t in queried] == [
            ("POST /product/get_all", scope.key, 4)]
        assert queried[0].native_request["mem_cube_ids"] == ["nbm__r1__alice"]
        assert queried[0].latency_ms is not None and queried[0].latency_ms > 0
        with pytest.raises(AdapterError, match="unknown diagnostic"):
            await adapter.native_query(scope, "What does alice like?")
        assert len(sent) == 1  # refused before calling MemOS
    finally:
        await adapter.aclose()


async def test_native_query_inventory_refuses_an_answer_without_statistics():
    """An answer without this cube's statistics is an error, never an inventory of 0."""
    import httpx

    from nanobot_memory_adapters.contract import AdapterError

    answers = [
        [{"cube_id": "nbm__r1__alice", "memories": []}],  # no statistics
        [_bucket("someone-else", {"UserMemory": 2})],  # not this cube: never "0 memories"
        [],
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"code": 200, "message": "ok", "data": answers.pop(0)})

    adapter = StoreProvider(MemOSStore(MemOSConfig(base_url=URL),
                                       transport=httpx.MockTransport(handler)))
    try:
        for _ in range(3):
            with pytest.raises(AdapterError, match="no memory_statistics"):
                await adapter.native_query(MemoryScope(run_id="r1", persona_id="alice"),
                                           "inventory")
    finally:
        await adapter.aclose()
