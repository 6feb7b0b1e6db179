"""MemOS native settings and diagnostics that need no server: ``use_multi_db`` (refused
when true, recorded in the run manifest) and the request/parse path of ``native_query``
(httpx MockTransport answering with MemOS 2.0.33's response shapes)."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.backends.memos import MemOSAdapter, MemOSConfig
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.harness.manifest import native_config, provider_entry
from nanobot_memory_adapters.registry import load_provider

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
        explicit = MemOSAdapter(MemOSConfig(base_url=URL, use_multi_db=False))
        assert explicit.native_scope(scope)["use_multi_db"] is False
        await explicit.aclose()
    finally:
        await adapter.aclose()
