"""``echo``: a trivial provider for checking a benchmark, not a memory (a labelled
stand-in). It stores nothing and returns the request: its query as one item and, when
the request carries tags (scenario, context, attribute), those as a second item.

A benchmark that lets the request carry the answer (an option list, a hint, a tag) gives
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
    description="Stores nothing; returns the request (its query, then its tags) as items "
    "(a benchmark check: it must score nothing).",
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
        items = [RetrievedItem(native_id="echo", text=request.query)]
        tags = request.tags()
        if tags:
            items.append(RetrievedItem(native_id="echo-tags", text="; ".join(
                f"{k}={v}" for k, v in sorted(tags.items()))))
        return NativeRetrieval(items=items, raw=None, native_operation="echo.query")

    async def _reset(self, scope: MemoryScope) -> str | None:
        return "echo stores nothing"
