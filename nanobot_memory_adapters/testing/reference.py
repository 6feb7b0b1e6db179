"""The reference store: a whole backend in one class, turns kept in memory and found by
shared words (as httpx ships ``MockTransport``: a real implementation of the interface,
small enough to read). It implements ``store.NativeStore``; ``StoreProvider(ReferenceStore())``
is the provider (the registry wraps a registered store class the same way). Copy it to
start a backend; ``tests/test_reference_provider.py`` runs the contract suite on it and CI
runs ``nanobot-memory conformance --provider-class ...reference:ReferenceStore``. It is a
stand-in for teaching and tests, not a memory architecture: nothing outlives the process."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from nanobot_memory_adapters import sizing
from nanobot_memory_adapters.base import NativeHealth, NativeRetrieval, NativeWrite
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


class ReferenceStore:
    """Keyword store in a dict: scope key -> rows. ``StoreProvider`` supplies the contract
    (read-only gate, traces, errors, rendering); this class supplies the native calls."""

    config_model: ClassVar[type[BaseModel]] = ReferenceConfig
    # no native layer that could be unreachable: contract item 7 is not applicable
    no_native_backend: ClassVar[str] = "an in-memory dict cannot fail"

    def __init__(self, config: ReferenceConfig | None = None) -> None:
        name = (config or ReferenceConfig()).name
        self.info = ProviderInfo(
            name=name, condition_kind="architecture", consistency_model="immediate",
            stores_events=True, tag_mapping="metadata", memory_form="verbatim",
            item_fields=("native_id", "score", "source_event_ids"),
            capabilities=(),  # declares no optional capability
            description="In-memory keyword store (the reference provider).",
        )
        self._rows: dict[str, list[dict[str, Any]]] = {}

    @classmethod
    def from_config(cls, config: ReferenceConfig, env: ProviderEnv) -> ReferenceStore:
        return cls(config)

    # optional capabilities: an object (here an async callable) or None
    record_batch = None  # no bulk ingest: record_event one at a time

    async def record(self, event: MemoryEvent) -> NativeWrite:
        row = {"id": event.event_id, "text": event.transcript(), "tags": event.tags()}
        self._rows.setdefault(event.scope().key, []).append(row)
        return NativeWrite("committed", [event.event_id], "dict.append")

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
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

    async def reset(self, scope: MemoryScope) -> str | None:
        self._rows.pop(scope.key, None)
        return "removed the scope's rows"

    # optional lifecycle: setup(scope) and aclose() are not needed here; health reports
    async def health(self) -> NativeHealth:
        return NativeHealth(status="ok", details={"scopes": len(self._rows)})
