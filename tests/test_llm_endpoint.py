from __future__ import annotations

from nanobot_memory_adapters.llm_endpoint import probe_models


async def test_probe_reports_unreachable_and_malformed_endpoints_without_raising():
    down = await probe_models("http://127.0.0.1:9/v1", timeout_s=2.0)
    assert not down.reachable and down.status_code is None and down.error
    malformed = await probe_models("http://[not-a-host/v1", timeout_s=2.0)
    assert not malformed.reachable and malformed.error
