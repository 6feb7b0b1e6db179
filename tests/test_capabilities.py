"""Capabilities are declared data (``ProviderInfo.capabilities``), which may depend on
config: ``supports`` and ``capabilities_of`` read the declaration, so a provider needs no
subclass per capability."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.backends.memos import MemOSAdapter, MemOSConfig
from nanobot_memory_adapters.contract import (
    AdapterError,
    FeedbackRequest,
    MemoryScope,
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
        assert supports(plain, "readiness")
        with pytest.raises(AdapterError, match="feedback is not enabled"):
            await plain.apply_feedback(FeedbackRequest(
                scope=MemoryScope(run_id="r", persona_id="p"), feedback="no"))
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


class Mutates(ReferenceAdapter):
    """A native mutation that writes whenever it is reached: only the gate can stop it."""

    native_mutations = frozenset({"rename", "peek"})
    read_mutations = frozenset({"peek"})

    def __init__(self) -> None:
        super().__init__()
        self.info = self.info.model_copy(update={"capabilities": ("native_mutation",)})
        self.reached: list[str] = []

    async def _native_mutation(self, scope, operation, payload):  # type: ignore[no-untyped-def]
        self.reached.append(operation)
        return {"status": "committed", "operation": operation}


async def test_the_read_only_gate_for_native_mutation_is_the_base_class_s_not_the_backend_s():
    from nanobot_memory_adapters.contract import AdapterMode

    adapter, scope = Mutates(), MemoryScope(run_id="r", persona_id="p")
    await adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
    # any write operation, declared or not, is refused before the backend sees it
    for operation in ("rename", "no-such-op"):
        answer = await adapter.native_mutation(scope, operation, {})
        assert answer == {"status": "skipped_read_only", "operation": operation}
    # a declared read passes the gate
    assert (await adapter.native_mutation(scope, "peek", {}))["status"] == "committed"
    assert adapter.reached == ["peek"]
    await adapter.set_mode(AdapterMode(read_only=False, reason="test_session_end"))
    assert (await adapter.native_mutation(scope, "rename", {}))["status"] == "committed"


async def test_a_base_adapter_offers_a_gated_capability_only_with_its_hook():
    plain = ReferenceAdapter()
    assert not supports(plain, "native_mutation") and not supports(plain, "feedback")
    assert capabilities_of(Mutates()) == ["native_mutation"]
    with pytest.raises(AdapterError, match="does not offer apply_feedback"):
        await plain.apply_feedback(FeedbackRequest(
            scope=MemoryScope(run_id="r", persona_id="p"), feedback="no"))
    # declared without its hook: reported, not offered
    hollow = ReferenceAdapter()
    hollow.info = hollow.info.model_copy(update={"capabilities": ("session_end",)})
    assert undelivered_capabilities(hollow) == ["session_end"] and not capabilities_of(hollow)
