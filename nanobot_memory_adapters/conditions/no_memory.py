"""no_memory: the floor every memory system must beat. Retrieve is always empty."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from nanobot_memory_adapters.base import BaseAdapter, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import MemoryEvent, MemoryScope, ProviderInfo, RetrieveRequest
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.tracing import TraceSink

INFO = ProviderInfo(
    name="no_memory",
    condition_kind="control",
    consistency_model="immediate",
    stores_events=False,
    memory_form="none",
    capabilities=(),
    description="Retrieve returns an empty context; nothing is stored.",
)


class NoMemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoMemory(BaseAdapter):
    config_model = NoMemoryConfig
    no_native_backend = "no_memory has no native store"

    def __init__(self, *, trace_sink: TraceSink | None = None) -> None:
        super().__init__(info=INFO, trace_sink=trace_sink)

    @classmethod
    def from_config(cls, config: NoMemoryConfig, env: ProviderEnv) -> NoMemory:
        return cls(trace_sink=env.trace_sink)

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        return NativeWrite(status="ignored", native_ids=[], native_operation="none")

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        return NativeRetrieval(items=[], raw=None, native_operation="none")

    async def _reset(self, scope: MemoryScope) -> str | None:
        return "no_memory stores nothing"
