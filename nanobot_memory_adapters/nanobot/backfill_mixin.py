"""``/memory-mode NAME --backfill``: switch, then rebuild the new provider's view from
nanobot's session files (``backfill.py``). The turns are queued in the outbox at once and
delivered in the background through the provider's bulk ingest where it has it (a row a
crash left in flight goes again through ``record_event``, replay-checked); what is left
goes through the plugin's usual drain. ``/memory-health`` shows the progress and, at the
end, the provider's readiness."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import backfill
from nanobot_memory_adapters.nanobot.plugin_state import PluginState
from nanobot_memory_adapters.nanobot.state import LOG, ago


@dataclass
class BackfillProgress:
    provider: str
    queued: int
    turns: int
    started_at: float
    scopes: list[MemoryScope]
    done: bool = False
    readiness: list[str] = field(default_factory=list)


class BackfillMixin(PluginState):
    backfill_progress: BackfillProgress | None = None
    _backfill_task: asyncio.Task[Any] | None = None

    if TYPE_CHECKING:  # provided by MemoryPlugin / DeliveryMixin
        async def switch_provider(self, name: str) -> str: ...
        async def flush(self, timeout_s: float = 30.0) -> int: ...

    async def switch_with_backfill(self, name: str, *, include_forgotten: bool = False) -> str:
        switched = await self.switch_provider(name)
        if self.provider != name or self.status != "active":
            return switched + "\nbackfill: not started (no provider of this plugin is active)"
        if self.read_only:
            return switched + "\nbackfill: not started (read-only mode: nothing is written)"
        memory = self.settings.memory
        assert memory is not None
        plan = await asyncio.to_thread(
            backfill.plan_backfill, self.sessions, memory, self.outbox, self.provider,
            include_tools=self.settings.plugin.include_tool_messages,
            include_forgotten=include_forgotten)
        queued = await asyncio.to_thread(backfill.enqueue, self.outbox, self.provider, plan)
        scopes = list({e.scope().key: e.scope() for _, e in plan.events}.values())
        self.backfill_progress = BackfillProgress(self.provider, queued, plan.turns,
                                                  time.time(), scopes)
        self._backfill_task = asyncio.get_running_loop().create_task(self._finish_backfill())
        notes = "".join(f"\nnote: {n}" for n in plan.notes())
        return (f"{switched}\nbackfill: {queued} turn(s) from {plan.sessions} nanobot "
                f"session(s) queued ({plan.turns} found, {plan.already_delivered} already "
                f"delivered, {plan.already_queued} already queued); /memory-health shows the "
                f"progress{notes}").replace("--include-forgotten",
                                            f"/memory-mode {name} --backfill --include-forgotten")

    async def _finish_backfill(self) -> None:
        progress = self.backfill_progress
        assert progress is not None
        try:
            await self._deliver_in_bulk(progress.provider)
            while await self.flush(timeout_s=60.0):  # what bulk left (retries, another drainer)
                if self._closed or self.provider != progress.provider or self.read_only:
                    return
                await asyncio.sleep(1.0)
            if self.adapter is not None:
                progress.readiness = await backfill.wait_ready(
                    self.adapter, progress.scopes, self.settings.plugin.startup_timeout_s)
            progress.done = True
        except Exception as exc:  # background work: report, never raise
            self._note_error("backfill", exc, retryable=True)
            logger.warning("{}: backfill did not finish: {}", LOG, exc)

    async def _deliver_in_bulk(self, provider: str) -> None:
        """The queued turns through the provider's bulk ingest (``backfill.deliver``),
        holding this process's and the outbox's drain locks so no other drainer runs beside
        it; when another process is draining, the usual per-turn drain takes over."""
        async with self._lock():
            with self.outbox.drain_lock() as mine:
                if not mine or self.adapter is None or self.provider != provider:
                    return
                await backfill.deliver(self.adapter, self.outbox, provider)

    def backfill_line(self) -> str | None:
        progress = self.backfill_progress
        if progress is None:
            return None
        if not progress.done:
            stats = self.outbox.stats(progress.provider)
            return (f"backfill into {progress.provider}: {progress.queued} turn(s) queued "
                    f"{ago(progress.started_at)}, {stats.pending} still pending")
        return (f"backfill into {progress.provider}: done ({progress.queued} turn(s)); "
                + "; ".join(progress.readiness))
