"""Capabilities are declared data (``ProviderInfo.capabilities``), which may depend on
config: ``supports``, ``capabilities_of`` and ``isinstance(adapter, Supports*)`` all read
the declaration, so a provider needs no subclass per capability."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.backends.memos import MemOSAdapter, MemOSConfig
from nanobot_memory_adapters.contract import (
    AdapterError,
    FeedbackRequest,
    MemoryScope,
    SupportsFeedback,
    SupportsReadiness,
    capabilities_of,
    supports,
    undelivered_capabilities,
)
from nanobot_memory_adapters.testing.reference import ReferenceAdapter


async def test_memos_feedback_is_declared_by_config_not_by_a_subclass():
    plain = MemOSAdapter(MemOSConfig(base_url="http://127.0.0.1:9"))
    fed = MemOSAdapter(MemOSConfig(base_url="http://127.0.0.1:9", feedback=True))
    try:
        assert type(plain) is type(fed)
        assert capabilities_of(plain) == ["readiness", "native_query"]
        assert capabilities_of(fed) == ["feedback", "readiness", "native_query"]
        assert not supports(plain, "feedback") and supports(fed, "feedback")
        assert isinstance(plain, SupportsReadiness)
        with pytest.raises(AdapterError, match="feedback is not enabled"):
            await plain.apply_feedback(FeedbackRequest(
                scope=MemoryScope(run_id="r", persona_id="p"), feedback="no"))
        # the Protocols' isinstance reads the declaration too (old call sites keep working)
        assert not isinstance(plain, SupportsFeedback) and isinstance(fed, SupportsFeedback)
    finally:
        await plain.aclose()
        await fed.aclose()


class Undeclared:
    """A provider written before declarations: its methods are its capabilities."""

    async def readiness(self, scope): ...  # type: ignore[no-untyped-def]
    async def wait_until_ready(self, scope, timeout_s): ...  # type: ignore[no-untyped-def]


def test_an_undeclared_provider_is_read_from_its_methods():
    assert capabilities_of(Undeclared()) == ["readiness"]
    assert undelivered_capabilities(Undeclared()) == []


def test_a_declaration_without_methods_is_reported():
    adapter = ReferenceAdapter()
    adapter.info = adapter.info.model_copy(update={"capabilities": ("bulk_ingest",)})
    assert capabilities_of(adapter) == []
    assert undelivered_capabilities(adapter) == ["bulk_ingest"]
