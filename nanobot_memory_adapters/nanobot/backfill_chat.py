"""``/memory-mode NAME --backfill``: switch, then rebuild the new provider's view from
nanobot's session files (``backfill.py``). The turns are queued in the outbox at once and
delivered in the background through the provider's bulk ingest where it has it (a row a
crash left in flight goes again through ``record_event``, replay-checked); what is left
goes through the plugin's usual drain. ``/memory-health`` shows the progress and, at the
end, the provider's readiness."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import backfill
from nanobot_memory_adapters.nanobot.plugin_state import PluginState
from nanobot_memory_adapters.nanobot.state import LOG, ago

if TYPE_CHECKING:
    from nanobot_memory_adapters.nanobot.delivery import Delivery


@dataclass
class BackfillProgress:
    provider: str
    queued: int
    turns: int
    started_at: float
    scopes: list[MemoryScope]
    done: bool = False
    readiness: list[str] = field(default_factory=list)


#: The plugin's provider switch (``/memory-mode NAME``): its reply.
Switch = Callable[[str], Awaitable[str]]


class Backfill:
    """A switch followed by a backfill, delivered in the background; its progress line."""

    def __init__(self, state: PluginState, *, switch: Switch, delivery: Delivery) -> None:
        self.state = state
        self._switch = switch
        self._delivery = delivery
        self.progress: BackfillProgress | None = None
        self._task: asyncio.Task[Any] | None = None

    async def switch_with_backfill(self, name: str, *, include_forgotten: bool = False) -> str:
        switched = await self._switch(name)
        if self.state.provider != name or self.state.status != "active":
            return switched + "\nbackfill: not started (no provider of this plugin is active)"
        if self.state.read_only:
            return switched + "\nbackfill: not started (read-only mode: nothing is written)"
        memory = self.state.settings.memory
        assert memory is not None
        plan = await asyncio.to_thread(
            backfill.plan_backfill, self.state.sessions, memory, self.state.outbox,
            self.state.provider,
            include_tools=self.state.settings.plugin.include_tool_messages,
            include_forgotten=include_forgotten)
        queued: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._task = asyncio.get_running_loop().create_task(
            self._finish_backfill(self.state.provider, plan, queued))
        count = await queued  # the enqueue's error, if any, is this command's
        notes = "".join(f"\nnote: {n}" for n in plan.notes())
        return (f"{switched}\nbackfill: {count} turn(s) from {plan.sessions} nanobot "
                f"session(s) queued ({plan.turns} found, {plan.already_delivered} already "
                f"delivered, {plan.already_queued} already queued); /memory-health shows the "
                f"progress{notes}").replace("--include-forgotten",
                                            f"/memory-mode {name} --backfill --include-forgotten")

    async def _finish_backfill(self, provider: str, plan: backfill.BackfillPlan,
                               queued: asyncio.Future[int]) -> None:
        try:
            await self._queue_and_deliver_in_bulk(provider, plan, queued)
            progress = self.progress
            assert progress is not None
            # what bulk left (retries, another drainer)
            while await self._delivery.flush(timeout_s=60.0):
                state = self.state
                if state.closed or state.provider != progress.provider or state.read_only:
                    return
                await asyncio.sleep(1.0)
            if self.state.adapter is not None:
                progress.readiness = await backfill.wait_ready(
                    self.state.adapter, progress.scopes,
                    self.state.settings.plugin.startup_timeout_s)
            progress.done = True
        except Exception as exc:  # background work: report, never raise
            if not queued.done():
                queued.set_exception(exc)
                return
            self.state.note_error("backfill", exc, retryable=True)
            logger.warning("{}: backfill did not finish: {}", LOG, exc)
        finally:
            if not queued.done():  # cancelled before queueing: the command must not hang
                queued.cancel()

    async def _queue_and_deliver_in_bulk(self, provider: str, plan: backfill.BackfillPlan,
                                         queued: asyncio.Future[int]) -> None:
        """Queue the turns, then deliver them through the provider's bulk ingest
        (``backfill.deliver``), all under this process's drain lock: a drain the switch
        started cannot take the fresh rows one by one between the two. The outbox's drain
        lock keeps other processes' drainers out; when another process is draining, the
        usual per-turn drain takes over."""
        async with self.state.draining():
            count = await asyncio.to_thread(backfill.enqueue, self.state.outbox, provider,
                                            plan)
            scopes = list({e.scope().key: e.scope() for _, e in plan.events}.values())
            self.progress = BackfillProgress(provider, count, plan.turns, time.time(), scopes)
            queued.set_result(count)
            with self.state.outbox.drain_lock() as mine:
                if not mine or self.state.adapter is None or self.state.provider != provider:
                    return
                await backfill.deliver(self.state.adapter, self.state.outbox, provider)

    def line(self) -> str | None:
        progress = self.progress
        if progress is None:
            return None
        if not progress.done:
            stats = self.state.outbox.stats(progress.provider)
            return (f"backfill into {progress.provider}: {progress.queued} turn(s) queued "
                    f"{ago(progress.started_at)}, {stats.pending} still pending")
        return (f"backfill into {progress.provider}: done ({progress.queued} turn(s)); "
                + "; ".join(progress.readiness))
