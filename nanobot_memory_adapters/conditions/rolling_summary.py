"""rolling_summary: nanobot's own file memory as a labeled control, not a fifth architecture.

Each scope gets a nanobot workspace; turns go into nanobot's ``history.jsonl`` journal
through nanobot's own ``MemoryStore`` (the same bounded raw checkpoint nanobot writes when
it archives without a summary), and retrieve returns exactly what nanobot would put in its
system prompt: ``MEMORY.md``. Only nanobot's Dream (an LLM pass) turns the journal into
MEMORY.md, so without an LLM this control stores turns but shows none of them back, and
says so in ``health`` — it never gets extra context the real backends do not get.

Inside a live nanobot (the plugin), this condition means "leave nanobot's memory alone":
MEMORY.md, history.jsonl and Dream run exactly as without the plugin.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from nanobot_memory_adapters.base import BaseAdapter, NativeHealth, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.registry import ProviderEnv
from nanobot_memory_adapters.tracing import TraceSink

INFO = ProviderInfo(
    name="rolling_summary",
    condition_kind="control",
    consistency_model="async_derived",
    # Turns reach MEMORY.md only through Dream, which needs an LLM.
    stores_events=False,
    item_fields=("native_id",),
    native_ingest_modes=("history.jsonl",),
    description="nanobot's own MEMORY.md / history.jsonl / Dream, as a control.",
)


class RollingSummaryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace_root: str | None = None  # default: <data_dir>/rolling_summary


def _memory_store(workspace: Path) -> Any:
    from nanobot.agent.memory import MemoryStore

    return MemoryStore(workspace)


class RollingSummary(BaseAdapter):
    config_model = RollingSummaryConfig

    def __init__(self, root: str | Path, *, trace_sink: TraceSink | None = None) -> None:
        super().__init__(info=INFO, trace_sink=trace_sink)
        self.root = Path(root)
        self._stores: dict[str, Any] = {}

    @classmethod
    def from_config(cls, config: RollingSummaryConfig, env: ProviderEnv) -> RollingSummary:
        root = (
            Path(config.workspace_root).expanduser()
            if config.workspace_root
            else env.data_dir / "rolling_summary"
        )
        return cls(root, trace_sink=env.trace_sink)

    def workspace(self, scope: MemoryScope) -> Path:
        digest = hashlib.sha256(scope.key.encode()).hexdigest()[:16]
        return self.root / digest

    def store(self, scope: MemoryScope) -> Any:
        key = scope.key
        if key not in self._stores:
            self._stores[key] = _memory_store(self.workspace(scope))
        return self._stores[key]

    async def _setup(self, scope: MemoryScope) -> None:
        await asyncio.to_thread(self.store, scope)

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        store = self.store(event.scope())
        messages = [
            {"role": m.role, "content": m.content, "timestamp": event.timestamp.isoformat()}
            for m in event.messages
        ]

        def write() -> int:
            entry = store._build_raw_checkpoint(messages)  # nanobot's own journal format
            return store.append_history(entry, session_key=event.session_id)

        cursor = await asyncio.to_thread(write)
        return NativeWrite(
            status="committed",
            native_ids=[f"history:{cursor}"],
            native_operation="MemoryStore.append_history",
            warnings=["turn journaled; only nanobot's Dream (LLM) moves it into MEMORY.md"],
        )

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        store = self.store(request.scope)
        memory = await asyncio.to_thread(store.read_memory)
        items = []
        if memory.strip():
            items.append(
                RetrievedItem(
                    native_id="MEMORY.md", text=memory.strip(), native_type="long_term_memory"
                )
            )
        return NativeRetrieval(
            items=items,
            raw={"memory_file": str(store.memory_file)},
            native_operation="MemoryStore.read_memory",
        )

    async def _reset(self, scope: MemoryScope) -> str | None:
        store = self.store(scope)

        def clear() -> None:
            store.write_memory("")
            for path in (store.history_file, store._cursor_file, store._dream_cursor_file):
                Path(path).unlink(missing_ok=True)

        await asyncio.to_thread(clear)
        return "MEMORY.md emptied and history.jsonl removed for this scope's workspace"

    async def _health(self) -> NativeHealth:
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        return NativeHealth(
            status="degraded",
            details={"workspace_root": str(self.root)},
            warnings=[
                "no LLM configured for Dream: turns are journaled in history.jsonl but never "
                "consolidated into MEMORY.md, so retrieve returns only what MEMORY.md already holds"
            ],
        )
