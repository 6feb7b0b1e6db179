"""``echo``: a trivial provider for checking a benchmark, not a memory (a labelled
stand-in). It stores nothing and returns the request's own query as its one item.

A benchmark that lets the retrieval query carry the answer (an option list, a hint) gives
it a score; a sound one gives it none: zero current-preference exposure and the
no-memory (default) behaviour. ``tests/harness/test_preferences.py`` registers it the way
a third-party plugin would and holds the preference benchmark to that.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from nanobot_memory_adapters.base import BaseAdapter, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.provider import ProviderEnv

INFO = ProviderInfo(
    name="echo",
    condition_kind="control",
    consistency_model="immediate",
    stores_events=False,
    memory_form="none",
    description="Stores nothing; returns the request's query as its one item (a benchmark "
    "check: it must score nothing).",
)


class EchoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EchoAdapter(BaseAdapter):
    config_model = EchoConfig
    no_native_backend = "echo has no store"

    def __init__(self) -> None:
        super().__init__(info=INFO)

    @classmethod
    def from_config(cls, config: EchoConfig, env: ProviderEnv) -> EchoAdapter:
        return cls()

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        return NativeWrite(status="ignored", native_ids=[], native_operation="none")

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        item = RetrievedItem(native_id="echo", text=request.query)
        return NativeRetrieval(items=[item], raw=None, native_operation="echo.query")

    async def _reset(self, scope: MemoryScope) -> str | None:
        return "echo stores nothing"
