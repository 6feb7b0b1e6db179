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
from nanobot_memory_adapters.nanobot.audience import Piece
from nanobot_memory_adapters.nanobot.plugin_state import PluginState
from nanobot_memory_adapters.nanobot.state import LOG, ago
from nanobot_memory_adapters.nanobot.switching import SwitchFailed

if TYPE_CHECKING:
    from nanobot_memory_adapters.nanobot.delivery import Delivery


@dataclass
class BackfillProgress:
    provider: str
    queued: int  # planned turns until they are queued, then the rows queued
    turns: int
    started_at: float
    scopes: list[MemoryScope]
    done: bool = False
    readiness: list[str] = field(default_factory=list)
    waiting: bool = True  # for the delivery in progress to finish before queueing
    stopped: str | None = None  # why it ended before it was done
    stopped_by_error: bool = False  # ``stopped`` quotes an error: the operator's only


class BackfillNotStarted(Exception):
    """The state changed while the backfill waited for the delivery in progress."""


#: The plugin's provider switch (``/memory-mode NAME``): its reply (raises
#: ``SwitchFailed`` when the provider cannot be built).
Switch = Callable[[str], Awaitable[str]]

#: How long the command waits for a delivery in progress before replying that the turns
#: are queued once it finishes (/memory-health shows when).
QUEUE_WAIT_S = 5.0


class Backfill:
    """A switch followed by a backfill, delivered in the background; its progress line."""

    def __init__(self, state: PluginState, *, switch: Switch, delivery: Delivery) -> None:
        self.state = state
        self._switch = switch
        self._delivery = delivery
        self.progress: BackfillProgress | None = None
        self._task: asyncio.Task[Any] | None = None

    async def switch_with_backfill(self, name: str, *, include_forgotten: bool = False) -> str:
        try:
            switched = await self._switch(name)
        except SwitchFailed as failed:
            failed.then.append("backfill: not started (the switch failed)")
            raise
        if switched.startswith("switching to"):  # deferred behind a write in progress
            return switched + ("\nbackfill: not started (it follows the switch: send "
                               f"/memory-mode {name} --backfill again once it is done)")
        if (self.state.provider or "").lower() == name.lower():
            name = self.state.provider or name  # FULL_HISTORY switched to full_history
        if self.state.provider != name or self.state.status != "active":
            return switched + "\nbackfill: not started (no provider of this plugin is active)"
        if self.state.read_only:
            return switched + "\nbackfill: not started (read-only mode: nothing is written)"
        memory = self.state.settings.memory
        assert memory is not None
        plan = await asyncio.to_thread(
            backfill.plan_backfill, self.state.sessions, memory, self.state.queues.outbox,
            self.state.provider,
            include_tools=self.state.settings.plugin.include_tool_messages,
            include_forgotten=include_forgotten)
        scopes = list({e.scope().key: e.scope() for _, e in plan.events}.values())
        progress = BackfillProgress(self.state.provider, len(plan.events), plan.turns,
                                    time.time(), scopes)
        self.progress = progress
        queued: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._task = asyncio.get_running_loop().create_task(
            self._finish_backfill(progress, plan, queued))
        counts = (f"from {plan.sessions} nanobot session(s)", f"({plan.turns} found, "
                  f"{plan.already_delivered} already delivered, {plan.already_queued} "
                  "already queued); /memory-health shows the progress")
        try:
            # shielded: a /stop of this command leaves the backfill running
            count = await asyncio.wait_for(asyncio.shield(queued), QUEUE_WAIT_S)
        except TimeoutError:
            queued.add_done_callback(_retrieved)  # the task notes its own failure
            what = (f"backfill: {len(plan.events)} turn(s) {counts[0]} to queue once the "
                    f"delivery in progress finishes {counts[1]}")
        except BackfillNotStarted as exc:
            return f"{switched}\nbackfill: not started ({exc})"
        else:
            what = f"backfill: {count} turn(s) {counts[0]} queued {counts[1]}"
        notes = "".join(f"\nnote: {n}" for n in plan.notes(name_scopes=False))
        return f"{switched}\n{what}{notes}".replace(
            "--include-forgotten", f"nanobot-memory backfill --provider {name} "
            "--include-forgotten, on the machine,")

    async def _finish_backfill(self, progress: BackfillProgress, plan: backfill.BackfillPlan,
                               queued: asyncio.Future[int]) -> None:
        try:
            await self._queue_and_deliver_in_bulk(progress, plan, queued)
            # what bulk left (retries, another drainer)
            while await self._delivery.flush(timeout_s=60.0):
                try:
                    _still_wanted(self.state, progress.provider)
                except BackfillNotStarted as exc:
                    progress.stopped = f"stopped ({exc}); the rest stays queued"
                    return
                await asyncio.sleep(1.0)
            if self.state.adapter is not None:
                progress.readiness = await backfill.wait_ready(
                    self.state.adapter, progress.scopes,
                    self.state.settings.plugin.startup_timeout_s, detail=False)
            progress.done = True
        except BackfillNotStarted as exc:
            progress.stopped = f"not started ({exc})"
            if not queued.done():
                queued.set_exception(exc)
        except Exception as exc:  # background work: report, never raise
            progress.stopped = (f"not started ({exc})" if progress.waiting else
                                f"did not finish ({exc}); what is queued goes through the "
                                "usual delivery")
            progress.stopped_by_error = True
            self.state.health.note_error("backfill", exc, retryable=True)
            logger.warning("{}: backfill did not finish: {}", LOG, exc)
            if not queued.done():  # the command, if it still waits, says so too
                queued.set_exception(exc)
        finally:
            if not queued.done():  # cancelled (nanobot closing): the command must not hang
                progress.stopped = "not started (nanobot is closing)"
                queued.set_exception(BackfillNotStarted("nanobot is closing"))

    async def _queue_and_deliver_in_bulk(self, progress: BackfillProgress,
                                         plan: backfill.BackfillPlan,
                                         queued: asyncio.Future[int]) -> None:
        """Queue the turns, then deliver them through the provider's bulk ingest
        (``backfill.deliver``), all under this process's drain lock: a drain the switch
        started cannot take the fresh rows one by one between the two. The outbox's drain
        lock keeps other processes' drainers out; when another process is draining, the
        usual per-turn drain takes over."""
        provider = progress.provider
        async with self.state.queues.draining():
            _still_wanted(self.state, provider)  # what changed while this waited
            count = await asyncio.to_thread(backfill.enqueue, self.state.queues.outbox, provider,
                                            plan)
            progress.queued, progress.waiting = count, False
            if not queued.done():
                queued.set_result(count)
            with self.state.queues.outbox.drain_lock() as mine:
                state = self.state
                if (not mine or state.adapter is None or state.provider != provider
                        or state.read_only or state.closed):
                    return
                await backfill.deliver(state.adapter, state.queues.outbox, provider)

    def line(self) -> Piece | None:
        """The backfill's line for /memory-health: its readiness names scopes (people) and
        an error may quote a backend's answer, so those parts are the operator's (the
        gate)."""
        progress = self.progress
        if progress is None:
            return None
        head = f"backfill into {progress.provider}"
        if progress.stopped:
            line = f"{head}: {progress.stopped}"
            if not progress.stopped_by_error:  # the plugin's own reason (read-only mode)
                return Piece.plain(line)
            return Piece.operator(line, withheld=f"{head}: stopped by an error "
                                  "(details are in the gateway's log)")
        if progress.done:
            done = f"{head}: done ({progress.queued} turn(s))"
            return Piece.operator("; ".join([done, *progress.readiness]), withheld=done)
        return Piece.plain(self._running_line(progress, head))

    def _running_line(self, progress: BackfillProgress, head: str) -> str:
        if progress.waiting:
            return (f"{head}: {progress.queued} turn(s) planned {ago(progress.started_at)}, "
                    "queued once the delivery in progress finishes")
        stats = self.state.queues.outbox.stats(progress.provider)
        return (f"{head}: {progress.queued} turn(s) queued {ago(progress.started_at)}, "
                f"{stats.pending} still pending")


def _still_wanted(state: PluginState, provider: str) -> None:
    """Raise ``BackfillNotStarted`` if the backfill no longer applies."""
    if state.closed:
        raise BackfillNotStarted("nanobot is closing")
    if state.provider != provider or state.status != "active":
        raise BackfillNotStarted(f"the provider changed to '{state.provider}' meanwhile")
    if state.read_only:
        raise BackfillNotStarted("read-only mode: nothing is written")


def _retrieved(future: asyncio.Future[int]) -> None:
    """Mark a result nobody awaits any more as seen (no 'exception never retrieved')."""
    if not future.cancelled():
        future.exception()
