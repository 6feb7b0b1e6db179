"""AcmeAdapter: turns kept in one JSON-lines file per scope; retrieval ranks them by shared
words with the query (a toy backend, but a real file store, with its own failure mode)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
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

INFO = ProviderInfo(
    name="acme",
    condition_kind="architecture",
    consistency_model="immediate",
    stores_events=True,
    tag_mapping="metadata",
    memory_form="verbatim",
    item_fields=("native_id", "score", "source_event_ids"),
    description="Acme's file-backed memory (a third-party provider under test).",
)
_WORD = re.compile(r"[a-z0-9]+")


class AcmeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    directory: str | None = None


class AcmeAdapter(BaseAdapter):
    config_model: ClassVar[type[BaseModel]] = AcmeConfig

    def __init__(self, directory: Path) -> None:
        super().__init__(info=INFO)
        self.directory = directory

    @classmethod
    def from_config(cls, config: AcmeConfig, env: ProviderEnv) -> AcmeAdapter:
        return cls(Path(config.directory) if config.directory else env.data_dir / "acme")

    @classmethod
    def failing_variant(cls, block: Any) -> AcmeAdapter:
        return cls(Path("/dev/null/acme"))  # no directory can exist under a device

    def _file(self, scope: MemoryScope) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", scope.key)
        return self.directory / f"{safe}.jsonl"

    def _load(self, scope: MemoryScope) -> list[dict[str, Any]]:
        path = self._file(scope)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    async def _setup(self, scope: MemoryScope) -> None:
        await asyncio.to_thread(self.directory.mkdir, parents=True, exist_ok=True)

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        row = {"id": event.event_id, "text": event.transcript(), "tags": event.tags()}

        def append() -> None:
            self.directory.mkdir(parents=True, exist_ok=True)
            with self._file(event.scope()).open("a") as f:
                f.write(json.dumps(row) + "\n")

        await asyncio.to_thread(append)
        return NativeWrite("committed", [event.event_id], "acme.append")

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        if not self.directory.parent.is_dir():
            raise OSError(f"acme store {self.directory} cannot exist")
        words = set(_WORD.findall(request.query.lower()))
        rows = await asyncio.to_thread(self._load, request.scope)
        scored = []
        for row in rows:
            overlap = len(words & set(_WORD.findall(row["text"].lower())))
            if overlap:
                scored.append((overlap / (len(words) or 1), row))
        scored.sort(key=lambda x: -x[0])
        top_k = sizing.top_k(request.budget)
        items = [
            RetrievedItem(native_id=row["id"], text=row["text"], score=score,
                          source_event_ids=[row["id"]], metadata=dict(row["tags"]), raw=row)
            for score, row in scored[:top_k]
        ]
        return NativeRetrieval(items, {"rows": len(rows)}, "acme.scan",
                               native_request={"top_k": top_k})

    async def _reset(self, scope: MemoryScope) -> str | None:
        await asyncio.to_thread(self._file(scope).unlink, missing_ok=True)
        return "acme removed the scope's file"
