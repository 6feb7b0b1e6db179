"""The reference provider: a whole provider in one page, turns kept in memory and found by
shared words (as httpx ships ``MockTransport``: a real implementation of the interface,
small enough to read). Copy it to start a provider; ``tests/test_reference_provider.py``
runs the contract suite on it. It is a stand-in for teaching and tests, not a memory
architecture: nothing outlives the process."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from nanobot_memory_adapters import sizing
from nanobot_memory_adapters.base import BaseAdapter, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.provider import ProviderEnv

_WORD = re.compile(r"[a-z0-9]+")


class ReferenceConfig(BaseModel):
    """The provider's own block (``memory.<name>``): the registry validates it."""

    model_config = ConfigDict(extra="forbid")
    name: str = "reference"


class ReferenceAdapter(BaseAdapter):
    """Keyword store in a dict: scope key -> rows. ``BaseAdapter`` supplies the contract
    (read-only gate, traces, errors, rendering); this class supplies the native parts."""

    config_model: ClassVar[type[BaseModel]] = ReferenceConfig
    # no native layer that could be unreachable: contract item 7 is not applicable
    no_native_backend: ClassVar[str] = "an in-memory dict cannot fail"

    def __init__(self, config: ReferenceConfig | None = None) -> None:
        name = (config or ReferenceConfig()).name
        super().__init__(info=ProviderInfo(
            name=name, condition_kind="architecture", consistency_model="immediate",
            stores_events=True, tag_mapping="metadata", memory_form="verbatim",
            item_fields=("native_id", "score", "source_event_ids"),
            capabilities=(),  # declares no optional capability
            description="In-memory keyword store (the reference provider).",
        ))
        self._rows: dict[str, list[dict[str, Any]]] = {}

    @classmethod
    def from_config(cls, config: ReferenceConfig, env: ProviderEnv) -> ReferenceAdapter:
        return cls(config)

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        row = {"id": event.event_id, "text": event.transcript(), "tags": event.tags()}
        self._rows.setdefault(event.scope().key, []).append(row)
        return NativeWrite("committed", [event.event_id], "dict.append")

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        words = set(_WORD.findall(request.query.lower()))
        rows = self._rows.get(request.scope.key, [])
        scored = sorted(
            ((len(words & set(_WORD.findall(r["text"].lower()))) / (len(words) or 1), r)
             for r in rows), key=lambda pair: -pair[0])
        top_k = sizing.top_k(request.budget)  # the budget reaches the "native" call
        items = [RetrievedItem(native_id=r["id"], text=r["text"], score=score,
                               source_event_ids=[r["id"]], metadata=dict(r["tags"]), raw=r)
                 for score, r in scored[:top_k] if score > 0]
        return NativeRetrieval(items, {"rows": len(rows)}, "dict.scan", {"top_k": top_k})

    async def _reset(self, scope: MemoryScope) -> str | None:
        self._rows.pop(scope.key, None)
        return "removed the scope's rows"
