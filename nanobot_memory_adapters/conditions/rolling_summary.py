"""rolling_summary: nanobot's own file memory as a labeled control, not a fifth architecture.

Each scope gets a nanobot workspace; turns go into nanobot's ``history.jsonl`` journal
through nanobot's own ``MemoryStore`` (the same bounded raw checkpoint nanobot writes when
it archives without a summary), and retrieve returns what nanobot's native memory would put
in its system prompt: ``MEMORY.md`` and ``USER.md`` (where Dream writes what it learned
about the user; left out while it is still nanobot's untouched template, as nanobot does).
Only nanobot's Dream (an LLM pass) turns the journal into
MEMORY.md. With ``llm`` configured, ``wait_until_ready`` runs nanobot's own Dream on the
scope's workspace — a real nanobot ``AgentLoop`` with nanobot's Dream prompt and tools,
driven the way nanobot's gateway cron job drives it — until the journal is consolidated.
Without an LLM this control stores turns but shows none of them back, and says so in
``health``: it never gets extra context the real backends do not get.

Inside a live nanobot (the plugin), this condition means "leave nanobot's memory alone":
MEMORY.md, history.jsonl and Dream run exactly as without the plugin.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nanobot_memory_adapters.base import NativeHealth, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    Readiness,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.llm_endpoint import OpenAICompatibleEndpoint
from nanobot_memory_adapters.provider import ProviderEnv

INFO = ProviderInfo(
    name="rolling_summary",
    condition_kind="control",
    consistency_model="async_derived",
    # Turns reach MEMORY.md only through Dream, which needs an LLM.
    stores_events=False,
    memory_form="derived",
    item_fields=("native_id",),
    native_ingest_modes=("history.jsonl",),
    capabilities=("readiness",),
    description="nanobot's own MEMORY.md / history.jsonl / Dream, as a control.",
)
DREAM_INFO = INFO.model_copy(update={"stores_events": True, "requires_llm": True})


class DreamLLM(OpenAICompatibleEndpoint):
    """The OpenAI-compatible endpoint nanobot's Dream runs on (nanobot's `custom` provider;
    no key: the placeholder "not-needed")."""

    base_url: str = Field(  # pyright: ignore[reportIncompatibleVariableOverride]
        description="e.g. http://127.0.0.1:8000/v1"
    )
    model: str = "gpt-4o-mini"  # pyright: ignore[reportIncompatibleVariableOverride]


class RollingSummaryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace_root: str | None = None  # default: <data_dir>/rolling_summary
    llm: DreamLLM | None = None
    dream_batches_max: int = Field(default=50, gt=0, description="Dream runs per readiness wait")


def _user_profile(path: Path) -> str:
    """USER.md as nanobot shows it: empty when missing or still the bundled template."""
    if not path.is_file():
        return ""
    content = path.read_text(encoding="utf-8").strip()
    if not content:
        return ""
    from nanobot.agent.context import ContextBuilder

    is_template = getattr(ContextBuilder, "_is_template_content", None)
    if callable(is_template) and is_template(content, "USER.md"):
        return ""
    return content


def _memory_store(workspace: Path) -> Any:
    from nanobot.agent.memory import MemoryStore

    return MemoryStore(workspace)


class RollingSummary:
    config_model = RollingSummaryConfig
    # nanobot's own memory (provider.is_host_native): inside nanobot the plugin leaves
    # MEMORY.md and Dream in charge instead of serving them through the slot
    host_native = True
    query_independent = True  # provider.is_query_independent

    def __init__(
        self,
        root: str | Path,
        *,
        llm: DreamLLM | None = None,
        dream_batches_max: int = 50,
    ) -> None:
        self.info = DREAM_INFO if llm else INFO
        self.root = Path(root)
        self.llm = llm
        self.dream_batches_max = dream_batches_max
        self._stores: dict[str, Any] = {}
        self._loops: dict[str, Any] = {}
        # Dream on request (the wrapper's wait_until_ready; never while read-only)
        self.consolidate = self._dream if llm is not None else None

    @classmethod
    def from_config(cls, config: RollingSummaryConfig, env: ProviderEnv) -> RollingSummary:
        root = (
            Path(config.workspace_root).expanduser()
            if config.workspace_root
            else env.data_dir / "rolling_summary"
        )
        return cls(
            root,
            llm=config.llm,
            dream_batches_max=config.dream_batches_max,
        )

    def workspace(self, scope: MemoryScope) -> Path:
        digest = hashlib.sha256(scope.key.encode()).hexdigest()[:16]
        return self.root / digest

    def memory_store(self, scope: MemoryScope) -> Any:
        """nanobot's ``MemoryStore`` of the scope's workspace."""
        key = scope.key
        if key not in self._stores:
            if self.llm is not None:
                # Dream edits files through the loop's own store: share it.
                self._stores[key] = self._dream_loop(scope).context.memory
            else:
                self._stores[key] = _memory_store(self.workspace(scope))
        return self._stores[key]

    def _dream_loop(self, scope: MemoryScope) -> Any:
        """A real nanobot AgentLoop on the scope's workspace, used only to run Dream."""
        key = scope.key
        if key not in self._loops:
            from nanobot.agent.loop import AgentLoop
            from nanobot.agent.tools.registry import ToolRegistry
            from nanobot.config.schema import Config

            assert self.llm is not None
            config = Config.model_validate(
                {
                    "providers": {
                        "custom": {"apiKey": self.llm.resolved_api_key() or "not-needed",
                                   "apiBase": self.llm.base_url}
                    },
                    "agents": {
                        "defaults": {
                            "workspace": str(self.workspace(scope)),
                            "model": self.llm.model,
                            "provider": "custom",
                        }
                    },
                }
            )
            from nanobot_memory_adapters.hosting import plugin_disabled

            # A private loop for Dream only: the user's memory plugin must not load into it.
            with plugin_disabled():
                self._loops[key] = AgentLoop.from_config(config, tool_registry=ToolRegistry())
        return self._loops[key]

    async def readiness(self, scope: MemoryScope) -> Readiness:
        store = self.memory_store(scope)
        pending = await asyncio.to_thread(
            lambda: len(store.read_unprocessed_history(store.get_last_dream_cursor()))
        )
        if self.llm is None:
            return Readiness(
                status="unknown",
                pending_count=pending,
                detail="no LLM configured: nanobot's Dream never consolidates the journal",
            )
        return Readiness(status="ready" if pending == 0 else "pending", pending_count=pending)

    async def _dream(self, scope: MemoryScope, timeout_s: float) -> None:
        """Run nanobot's Dream until the journal is consolidated (or time runs out)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._dream_until_done(scope), timeout=timeout_s)

    async def _dream_until_done(self, scope: MemoryScope) -> None:
        from nanobot.agent.memory import MemoryStore

        loop = self._dream_loop(scope)
        store = loop.context.memory

        async def silent(*_args: Any, **_kwargs: Any) -> None:
            return None

        for _ in range(self.dream_batches_max):
            built = store.build_dream_prompt()
            if built is None:
                break
            prompt, last_cursor = built
            response = await loop.process_direct(
                prompt,
                session_key=MemoryStore.dream_session_key(),
                ephemeral=True,
                tools=store.build_dream_tools(),
                on_progress=silent,
                runtime=loop.dream_runtime(),
            )
            if not MemoryStore.dream_run_completed(response):
                raise AdapterError(
                    "nanobot Dream did not complete: "
                    + MemoryStore.dream_incompletion_reason(response),
                    backend_name=self.info.name,
                    operation="wait_until_ready",
                    raw={"response": str(getattr(response, "content", response))[:2000]},
                    retryable=True,
                )
            store.set_last_dream_cursor(last_cursor)
        store.compact_history()

    async def setup(self, scope: MemoryScope) -> None:
        await asyncio.to_thread(self.memory_store, scope)

    async def record(self, event: MemoryEvent) -> NativeWrite:
        store = self.memory_store(event.scope())
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

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        store = self.memory_store(request.scope)
        memory = await asyncio.to_thread(store.read_memory)
        user = await asyncio.to_thread(_user_profile, Path(store.user_file))
        items = []
        if memory.strip():
            items.append(
                RetrievedItem(
                    native_id="MEMORY.md", text=memory.strip(), native_type="long_term_memory"
                )
            )
        if user:
            items.append(RetrievedItem(native_id="USER.md", text=user, native_type="user_profile"))
        warnings = []
        if not items:  # an empty section: say whether Dream ran and wrote nothing
            consumed = await asyncio.to_thread(store.get_last_dream_cursor)
            if consumed:
                warnings.append(
                    f"Dream has consumed {consumed} history entries and MEMORY.md is still "
                    "empty: its model made no edit (nanobot's Dream writes memory only "
                    "through its file-edit tools)")
        return NativeRetrieval(
            items=items,
            raw={"memory_file": str(store.memory_file), "user_file": str(store.user_file),
                 "user_profile_shown": bool(user)},
            native_operation="MemoryStore.read_memory + USER.md",
            warnings=warnings,
        )

    async def reset(self, scope: MemoryScope) -> str | None:
        store = self.memory_store(scope)

        def clear() -> None:
            store.write_memory("")
            for path in (store.history_file, store._cursor_file, store._dream_cursor_file,
                         store.user_file, store.soul_file):
                Path(path).unlink(missing_ok=True)

        await asyncio.to_thread(clear)
        return ("MEMORY.md emptied; history.jsonl, USER.md and SOUL.md (Dream's other files) "
                "removed for this scope's workspace")

    async def health(self) -> NativeHealth:
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        if self.llm is not None:
            return NativeHealth(
                status="ok",
                details={"workspace_root": str(self.root), "dream_llm": self.llm.base_url},
            )
        return NativeHealth(
            status="degraded",
            details={"workspace_root": str(self.root)},
            warnings=[
                "no LLM configured for Dream: turns are journaled in history.jsonl but never "
                "consolidated into MEMORY.md, so retrieve returns only what MEMORY.md already holds"
            ],
        )

    async def aclose(self) -> None:
        loops, self._loops = self._loops, {}
        self._stores.clear()
        for loop in loops.values():
            await loop.aclose()
