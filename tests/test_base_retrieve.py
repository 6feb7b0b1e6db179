"""BaseAdapter.retrieve over what backends really return (naive times included)."""

from __future__ import annotations

from datetime import UTC, datetime

from nanobot_memory_adapters.base import BaseAdapter, NativeRetrieval
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)

INFO = ProviderInfo(name="mixed_times", condition_kind="control", consistency_model="immediate",
                    stores_events=False, description="returns naive and aware times")


class MixedTimes(BaseAdapter):
    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        return NativeRetrieval(
            items=[
                RetrievedItem(native_id="a", text="aware early",
                              created_at=datetime(2024, 1, 1, tzinfo=UTC)),
                RetrievedItem(native_id="n", text="naive", created_at=datetime(2025, 6, 1)),
                RetrievedItem(native_id="b", text="aware late",
                              created_at=datetime(2024, 3, 1, tzinfo=UTC)),
            ],
            raw={}, native_operation="fake", native_request={},
        )


async def test_naive_and_aware_times_do_not_break_retrieve():
    adapter = MixedTimes(info=INFO)
    result = await adapter.retrieve(RetrieveRequest(
        query="q", scope=MemoryScope(run_id="r", persona_id="p"),
        budget=ContextBudget(max_tokens=500),
    ))
    assert [i.native_id for i in result.items] == ["a", "n", "b"]
    assert result.trace.oldest_retrieved_at == datetime(2024, 1, 1, tzinfo=UTC)
    assert result.trace.newest_retrieved_at == datetime(2024, 3, 1, tzinfo=UTC)
    assert "naive" in result.formatted_context
