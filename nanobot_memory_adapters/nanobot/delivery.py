"""The plugin's write path: a durable local append, then background delivery in order.

A turn is written to the SQLite outbox twice, in one row: the user's message when it
arrives (before the model answers; status ``open``) and the whole turn when nanobot
reports ``SessionTurnPersisted`` (user + assistant, ``pending``). A process killed while
the model answers leaves an ``open`` row; the next process's plugin promotes it on start
and delivers the user's message alone. A background pass (tracked by nanobot, flushed by
``AgentLoop.aclose``) delivers pending events in order.

The reply never waits for the outbox or the backend: writes run in the background; one
the outbox cannot take (locked, full or read-only disk, damaged file) is kept in memory
(``unqueued.py``) and retried. A write that was not accepted by the backend stays pending
(retryable) or is parked (not). When the loop closes, delivery gets ``exit_delivery_s``
(memory.json ``nanobot``, default 3) more seconds; what is left stays in the outbox for the
next process (one line says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryScope,
    supports,
)
from nanobot_memory_adapters.events import MemoryEvent
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import exit_executor, seams
from nanobot_memory_adapters.nanobot.outbox import OUTBOX_ERRORS, OutboxRow, describe_failure
from nanobot_memory_adapters.nanobot.plugin_state import EnsureAdapter, EnsureScope, PluginState
from nanobot_memory_adapters.nanobot.state import LOG, Activity
from nanobot_memory_adapters.nanobot.turns import (
    build_event,
    event_from_messages,
    turn_event_id,
    turn_messages,
)
from nanobot_memory_adapters.nanobot.unqueued import Write

#: How long a write on the turn's path waits for the outbox's write lock before the turn
#: is kept in memory instead (it runs in the background: the reply never waits for it).
WRITE_WAIT_S = 2.0
#: The same wait on the turn's own path (nanobot awaits the persisted-turn event before
#: it replies): a held lock costs the reply this much, never the 30 s it once did.
REPLY_WAIT_S = 0.25
#: How long delivery may go on once the AgentLoop closes (``nanobot agent -m``, ``exit``).


class Delivery:
    """The write path: turns into the outbox, the outbox into the provider, in order."""

    def __init__(self, state: PluginState, *, ensure_adapter: EnsureAdapter,
                 ensure_scope: EnsureScope) -> None:
        self.state = state
        self._ensure_adapter = ensure_adapter
        self._ensure_scope = ensure_scope
        self.retry_task: asyncio.Task[Any] | None = None
        self.watch_task: asyncio.Task[Any] | None = None  # other processes' turns
        # Turns this process queued and not yet settled, per session (read-your-writes).
        self._unsettled: dict[str, int] = {}
        # Per (provider, session): the (scope, session id) of turns this process delivered,
        # for that provider's session-end call (``session_end``) when nanobot archives the
        # session (keyed by provider: a /memory-mode switch never hands them to another).
        self._ended: dict[tuple[str, str], dict[str, tuple[MemoryScope, str]]] = {}
        self._settled: asyncio.Condition | None = None
        self._recovered = False  # open rows of dead processes promoted (once per process)
        self._exit_deadline: float | None = None
        self._exit_timeouts: set[asyncio.Timeout] = set()
        self._left_said = False
        # told the session of each write that landed (the recall prepares its next section)
        self.on_settled: Callable[[str], None] | None = None

    async def on_turn_persisted(self, event: Any) -> None:
        """Bus subscriber: queue the whole turn. Never raises; waits for the outbox at most
        ``REPLY_WAIT_S`` (then the turn is kept in memory and written in the background)."""
        try:
            if await self._record_turn(event) and not self.state.queues.writing().locked():
                await self.write_out(REPLY_WAIT_S)
        except Exception as exc:
            self.state.health.note_error("enqueue", exc, retryable=False)
            logger.exception("{}: could not queue the turn for memory", LOG)

    async def open_turn(self, request: Any) -> None:
        """Runtime-context hook (before the model is called): queue the user's message now,
        so a process killed while the model answers still remembers it. Never raises;
        adds no context block."""
        try:
            await self._record_arrival(request)
        except Exception as exc:
            self.state.health.note_error("enqueue", exc, retryable=False)
            logger.exception("{}: could not queue the user's message for memory", LOG)

    def _recording(self, key: str | None) -> bool:
        return (self.state.status == "active" and not self.state.read_only and not self.state.closed
                and bool(key) and not str(key).startswith("dream:"))

    async def _record_arrival(self, request: Any) -> None:
        key, text, turn_id = request.session_key, request.original_user_text, request.turn_id
        if (not self._recording(key) or not isinstance(text, str) or not text.strip()
                or not turn_id or not seams.session_persists(self.state.sessions, key)):
            return
        if seams.session_message_source(getattr(request, "metadata", None)) is not None:
            return  # another session's model typed it: nobody's words (``turns.is_recorded``)
        memory = self.state.settings.memory
        assert memory is not None
        # the same attribution as the finished turn's (cron turns: the session's person)
        who = await self.state.audiences.attribute(
            session_key=key, channel=request.channel, chat_id=request.chat_id,
            sender_id=request.sender_id, metadata=getattr(request, "metadata", None))
        if who.person is None:
            return
        try:
            event = event_from_messages(
                memory=memory, chosen=[{"role": "user", "content": text,
                                        "timestamp": datetime.now().isoformat()}],
                event_id=turn_event_id(key, turn_id), turn_id=turn_id,
                channel=request.channel, chat_id=request.chat_id,
                sender_id=who.person, session_key=key,
                attributes=request.attributes)
        except ValueError:
            return  # a bad scope template: reported when the turn is recorded
        if event is not None:
            self._queue(Write(self.state.provider, event, key,
                              (request.channel, request.chat_id, who.person),
                              open_turn=True))

    async def _record_turn(self, event: Any) -> bool:
        """Queue the persisted turn; True when there was one to queue."""
        ctx = event.context
        key = ctx.session_key
        if not self._recording(key):
            if self.state.read_only and self.state.status == "active":
                logger.debug("{}: read-only, turn {} not recorded", LOG, event.turn_id)
            return False
        session = seams.session_of(self.state.sessions, key)
        if session is None:
            return False
        memory = self.state.settings.memory
        assert memory is not None
        # a turn from no person (cron, a subagent...) is the session's person's, or nobody's
        channel, chat_id = seams.routed_chat(ctx.channel, ctx.chat_id)
        who = await self.state.audiences.attribute(
            session_key=key, channel=channel, chat_id=chat_id,
            sender_id=event.sender_id, metadata=ctx.metadata)
        if who.person is None:
            logger.debug("{}: turn {} belongs to no person; not recorded", LOG, event.turn_id)
            return False
        try:
            memory_event = build_event(
                memory=memory, messages=list(session.messages), turn_id=event.turn_id,
                channel=channel, chat_id=chat_id, sender_id=who.person,
                session_key=key, attributes=ctx.attributes,
                include_tools=self.state.settings.plugin.include_tool_messages,
            )
        except ValueError as exc:  # a scope template or id the backend must not see
            self.state.health.note_error("build_event", exc, retryable=False)
            logger.warning("{}: turn {} not recorded: {}", LOG, event.turn_id, exc)
            return False
        if memory_event is None:
            return False  # a slash command or nothing the user said
        self._unsettled[key] = self._unsettled.get(key, 0) + 1
        self._queue(Write(self.state.provider, memory_event, key,
                          (channel, chat_id, who.person)))
        return True

    def _queue(self, write: Write) -> None:
        """Keep the write in order and let a background task put it in the outbox."""
        self.state.queues.unqueued.add(write)
        self.schedule_drain()

    async def write_out(self, wait_s: float = WRITE_WAIT_S) -> bool:
        """Put the kept writes into the outbox, oldest first; False while it refuses them
        (each write waits at most ``wait_s`` for the write lock)."""
        async with self.state.queues.writing():
            while self.state.queues.unqueued.writes:
                write = self.state.queues.unqueued.writes[0]
                started = time.perf_counter()
                try:
                    added = await asyncio.to_thread(
                        self.state.queues.outbox.enqueue, write.provider, write.event,
                        write.session_key, write.identity, wait_s=wait_s,
                        open_turn=write.open_turn)
                except OUTBOX_ERRORS as exc:
                    self._outbox_failed(exc)
                    return False
                self.state.queues.unqueued.written(write)
                if not write.open_turn:
                    self.state.health.enqueue_stats.add((time.perf_counter() - started) * 1000)
                    if not added:  # a replay of a turn the outbox already holds
                        self._unsettle(write.session_key)
            if self.state.queues.unqueued.failing_since is not None:
                logger.info("{}: the outbox takes turns again; the kept ones are queued", LOG)
            self.state.queues.unqueued.recovered()
            return True

    def _outbox_failed(self, exc: BaseException) -> None:
        line = describe_failure(self.state.queues.outbox.path, exc)
        self.state.health.note_error("outbox", RuntimeError(line), retryable=True)
        if self.state.queues.unqueued.failed(line):
            logger.debug("{}: {} turn(s) kept in memory until the outbox takes them: {}",
                         LOG, self.state.queues.unqueued.turns(), line)

    async def recover_open_turns(self) -> int:
        """Promote ``open`` rows of processes that died before the reply: each becomes a
        pending turn holding the user's message (with the time nanobot saved it at, when
        nanobot's session file has it). Returns how many."""
        orphans = await asyncio.to_thread(self.state.queues.outbox.orphaned_turns)
        for row in orphans:
            event = self._saved_user_half(row)
            await asyncio.to_thread(self.state.queues.outbox.promote, row.seq, event)
        if orphans:
            logger.info("{}: {} turn(s) cut short by an earlier process's end queued for "
                        "memory (the user's message alone)", LOG, len(orphans))
        return len(orphans)

    def _saved_user_half(self, row: OutboxRow) -> MemoryEvent:
        event = row.event()
        try:
            session = seams.session_of(self.state.sessions, row.session_key)
            started = seams.turn_started_at(event.turn_id)
            if session is None or started is None:
                return event
            users = [m for m in turn_messages(list(session.messages), event.turn_id)
                     if m.get("role") == "user"]
            stamp = users[0].get("timestamp") if users else None
            when = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
        except Exception:  # nanobot's file unreadable: keep the time of arrival
            return event
        if when is None or when.tzinfo is not None or when < started:
            return event
        return event.model_copy(update={"timestamp": when.astimezone().astimezone(UTC)})

    def schedule_drain(self) -> None:
        if self.state.closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        seams.schedule_background(self.state.loop, self.drain())

    def _schedule_retry(self) -> None:
        if self.state.closed or self._exit_deadline is not None:
            return
        if self.retry_task is not None and not self.retry_task.done():
            return
        delay = self.state.retry_delay
        self.state.retry_delay = min(self.state.retry_delay * 2,
                                     self.state.settings.plugin.retry_max_s)

        async def later() -> None:
            await asyncio.sleep(delay)
            self.retry_task = None
            await self.drain()

        # Not tracked by nanobot: shutdown must not wait out a backoff sleep.
        self.retry_task = asyncio.get_running_loop().create_task(later())

    def watch_others(self) -> None:
        """While this process holds the provider, deliver what other processes queue: one
        that cannot open an embedded store leaves its turns in the shared outbox, and this
        one would otherwise deliver them only at its own next turn. The outbox's SQLite
        ``data_version`` (it changes when another connection commits) is read every
        ``outbox_poll_s``; a change starts a delivery pass. Not tracked by nanobot:
        shutdown never waits on it."""
        if self.state.closed or (self.watch_task is not None and not self.watch_task.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        async def watch() -> None:
            seen: int | None = None
            while not self.state.closed and self._exit_deadline is None:
                await asyncio.sleep(self.state.settings.plugin.outbox_poll_s)
                if (self.state.status != "active" or self.state.read_only
                        or self.state.adapter is None):
                    continue
                try:
                    version = await asyncio.to_thread(self.state.queues.outbox.data_version)
                except OUTBOX_ERRORS:
                    continue  # the drain reports an outbox problem; the watch only looks
                if version != seen and seen is not None and not (
                        self.retry_task is not None and not self.retry_task.done()):
                    await self.drain()
                seen = version

        self.watch_task = loop.create_task(watch())

    async def drain(self) -> None:
        """Queue kept writes, then deliver pending events in order until the outbox is
        empty or the backend fails. Never raises: an outbox or backend problem is noted
        (``/memory-health``) and retried later."""
        if self.state.status != "active" or self.state.closed:
            return
        exit_executor.install()  # a backend call stuck in a thread cannot hold the exit
        try:
            await self._drain_once()
        except OUTBOX_ERRORS as exc:
            self._outbox_failed(exc)
            self._schedule_retry()
        except Exception as exc:  # never "Task exception was never retrieved"
            self.state.health.note_error("deliver", exc, retryable=True)
            logger.opt(exception=exc).debug("{}: delivery pass failed; retrying", LOG)
            self._schedule_retry()
        finally:
            self._said_left_behind()

    async def _drain_once(self) -> None:
        if not await self.write_out():
            self._schedule_retry()
            return
        if self.state.read_only:
            return
        drain_lock = self.state.queues.draining()
        async with drain_lock:
            if self.state.status != "active" or self.state.read_only or self._exit_over():
                return
            if not self._recovered:
                await self.recover_open_turns()
                self._recovered = True
            try:
                async with self._bounded_at_exit(None):
                    ready = await self._ensure_adapter()
            except TimeoutError:
                return  # the process is leaving while the provider starts
            if not ready:
                if self.state.status == "active":
                    self._schedule_retry()
                return
            provider = self.state.provider
            with self.state.queues.outbox.drain_lock() as mine:
                if not mine:  # another process is draining this outbox
                    self._schedule_retry()
                    return
                while True:
                    rows = await asyncio.to_thread(self.state.queues.outbox.pending, provider, 50)
                    if not rows:
                        break
                    for row in rows:
                        state = self.state
                        if (state.read_only or state.provider != provider or state.adapter is None
                                or state.closed or self._exit_over()):
                            return
                        if not await self._deliver(row):
                            self._schedule_retry()
                            return
            self.state.retry_delay = self.state.settings.plugin.retry_initial_s
            self.state.health.writes_failing_since = None

    # -- the end of the process ------------------------------------------------------
    def loop_closing(self) -> None:
        """``AgentLoop.aclose`` begins: delivery gets ``exit_delivery_s`` more seconds."""
        if self._exit_deadline is None:
            self._exit_deadline = time.monotonic() + self.state.settings.plugin.exit_delivery_s
        if self.retry_task is not None:
            self.retry_task.cancel()  # nothing waits out a backoff at exit
        if self.watch_task is not None:
            self.watch_task.cancel()
        with contextlib.suppress(RuntimeError):
            when = asyncio.get_running_loop().time() + self.state.settings.plugin.exit_delivery_s
            for cm in list(self._exit_timeouts):  # a write already waiting on the backend
                if cm.when() is None or cm.when() > when:  # type: ignore[operator]
                    cm.reschedule(when)
        if self.state.queues.unqueued.writes or self.state.status == "active":
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop()
                seams.schedule_background(self.state.loop, self.drain())

    @contextlib.asynccontextmanager
    async def _bounded_at_exit(self, timeout_s: float | None
                               ) -> AsyncIterator[asyncio.Timeout]:
        """``asyncio.timeout(timeout_s)``, cut short when the loop starts closing (also
        while already waiting: ``loop_closing`` reschedules it)."""
        left = self._exit_left()
        if left is not None:
            timeout_s = left if timeout_s is None else min(timeout_s, left)
        async with asyncio.timeout(timeout_s) as cm:
            self._exit_timeouts.add(cm)
            try:
                yield cm
            finally:
                self._exit_timeouts.discard(cm)

    def _exit_over(self) -> bool:
        return self._exit_deadline is not None and time.monotonic() >= self._exit_deadline

    def _exit_left(self) -> float | None:
        if self._exit_deadline is None:
            return None
        return max(0.0, self._exit_deadline - time.monotonic())

    def _said_left_behind(self) -> None:
        """At exit, once: how many turns stay in the outbox for the next process."""
        if self._exit_deadline is None or self._left_said or not self._exit_over():
            return
        self._left_said = True
        try:
            pending = self.state.queues.outbox.stats(self.state.provider).pending
        except OUTBOX_ERRORS:
            pending = -1
        kept = self.state.queues.unqueued.turns()
        if pending or kept:
            what = (f"{pending} turn(s) left in the outbox" if pending >= 0
                    else "turns left in the outbox")
            if kept:
                what += f", {kept} not queued ({self.state.queues.unqueued.problem})"
            logger.warning("{}: delivery stopped {:.0f}s after exit began: {}; the next nanobot "
                           "process delivers them", LOG,
                           self.state.settings.plugin.exit_delivery_s, what)

    async def _deliver(self, row: OutboxRow) -> bool:
        """True when the row is settled (delivered or parked); False to stop and retry later.
        While it runs, ``activity`` says so (``/memory-health``: "busy: recording turn …")."""
        self.state.health.activity = Activity("recording a turn", time.time(),
                                              f"turn {row.seq} of {row.session_key}")
        try:
            return await self._deliver_row(row)
        finally:
            self.state.health.activity = None

    async def _deliver_row(self, row: OutboxRow) -> bool:
        assert self.state.adapter is not None
        event = row.event()
        started = time.perf_counter()
        try:
            async with self._bounded_at_exit(self.state.settings.plugin.write_timeout_s):
                await self._ensure_scope(event.scope())
                receipt = await self.state.adapter.record_event(event)
        except TimeoutError:
            if self._exit_over():  # not the backend's fault: the process is leaving
                return False
            error = f"record_event took longer than {self.state.settings.plugin.write_timeout_s}s"
            return await self._write_failed(row, TimeoutError(error), retryable=True)
        except AdapterError as exc:
            return await self._write_failed(row, exc, retryable=exc.retryable)
        except Exception as exc:
            return await self._write_failed(row, exc, retryable=False)
        if not receipt.accepted:  # e.g. skipped_read_only: not accepted, keep it
            await asyncio.to_thread(self.state.queues.outbox.mark_retry, row.seq,
                                    f"backend returned {receipt.status}")
            return False
        latency = (time.perf_counter() - started) * 1000
        self.state.health.record_stats.add(latency)
        await asyncio.to_thread(self.state.queues.outbox.mark_delivered, row.seq,
                                status=receipt.status, native_ids=receipt.native_ids,
                                latency_ms=latency)
        self.state.health.writes_failing_since = None
        self.state.health.store_lock.cleared()
        if supports(self.state.adapter, "session_end"):
            key = (self.state.provider, row.session_key)
            self._ended.setdefault(key, {})[event.scope().key] = (event.scope(),
                                                                   event.session_id)
        await self._settle(row)
        return True

    def _condition(self) -> asyncio.Condition:
        if self._settled is None:
            self._settled = asyncio.Condition()
        return self._settled

    async def _settle(self, row: OutboxRow) -> None:
        self._unsettle(row.session_key)
        if self.on_settled is not None and self._exit_deadline is None:  # not when leaving
            self.on_settled(row.session_key)
        async with self._condition():
            self._condition().notify_all()

    def _unsettle(self, key: str) -> None:
        if self._unsettled.get(key):
            self._unsettled[key] -= 1
            if not self._unsettled[key]:
                del self._unsettled[key]

    async def wait_for_own_writes(self, session_key: str, timeout_s: float) -> None:
        """Let this session's just-queued turns land first, when the backend is healthy."""
        def failing() -> bool:  # the backend or the outbox refuses writes: do not wait
            return (self.state.health.writes_failing_since is not None
                    or self.state.queues.unqueued.failing_since is not None)

        if (timeout_s <= 0 or not self._unsettled.get(session_key) or self.state.read_only
                or failing()):
            return
        condition = self._condition()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s), condition:
                await condition.wait_for(
                    lambda: not self._unsettled.get(session_key) or failing())

    async def _write_failed(self, row: OutboxRow, exc: BaseException, *, retryable: bool) -> bool:
        detail = exc.to_dict() if isinstance(exc, AdapterError) else {"message": str(exc)}
        error = json.dumps(detail, default=str)[:4000]
        self.state.health.note_error("record_event", exc, retryable=retryable)
        if retryable:
            if self.state.health.writes_failing_since is None:
                self.state.health.writes_failing_since = time.time()
            await asyncio.to_thread(self.state.queues.outbox.mark_retry, row.seq, error)
            # the held-store notice is one line, once; any other retry goes to DEBUG (the log
            # file), not the terminal: it is routine, shows in /memory-health, and a warning
            # would print over the interactive prompt.
            health = self.state.health
            if not health.store_lock.report(self.state.provider, self.state.data_dir, exc,
                                            health.writes_failing_since):
                logger.debug("{}: '{}' did not accept event {} ({}); kept in the outbox, "
                             "retrying in {:.1f}s", LOG, self.state.provider, row.event_id, exc,
                             self.state.retry_delay)
            return False
        await asyncio.to_thread(self.state.queues.outbox.mark_failed, row.seq, error)
        await self._settle(row)
        logger.error("{}: '{}' rejected event {} ({}); parked in the outbox as failed",
                     LOG, self.state.provider, row.event_id, exc)
        return True

    async def before_archive(self, session_key: str) -> None:
        """Session hook: deliver this session's queued turns before nanobot archives or
        compacts it (``/new``, ``/compact``, idle compaction), bounded by
        ``session_end_timeout_s``; a failing backend is not waited for (the turns stay in
        the outbox)."""
        if self.state.status != "active" or self.state.read_only or self.state.closed:
            return
        self.schedule_drain()
        await self.wait_for_own_writes(session_key,
                                       self.state.settings.plugin.session_end_timeout_s)
        await self._end_session(session_key)

    async def _end_session(self, session_key: str) -> None:
        """A provider's session-end call (``session_end``, e.g. Honcho's dream) for each
        scope whose turns this process delivered in the session, once they all landed;
        bounded by ``session_end_timeout_s``; a failure is noted, never raised."""
        adapter = self.state.adapter
        limit = self.state.settings.plugin.session_end_timeout_s
        if adapter is None or not supports(adapter, "session_end") or limit <= 0:
            return  # (0: nothing at a session's end may hold nanobot up)
        if self._unsettled.get(session_key):
            logger.debug("{}: session {} ends with turns still queued; no session-end call",
                         LOG, session_key)
            return
        assert supports(adapter, "session_end")
        ended = self._ended.pop((self.state.provider, session_key), {})
        for scope, session_id in ended.values():
            try:
                async with asyncio.timeout(limit):
                    answer = await adapter.end_session(scope, session_id)
            except Exception as exc:  # noted (/memory-health), never raised into nanobot
                self.state.health.note_error("end_session", exc,
                                      retryable=getattr(exc, "retryable", False))
                continue
            logger.debug("{}: session {} ended for {}: {}", LOG, session_key, scope.key,
                         answer.get("status"))

    async def flush(self, timeout_s: float = 30.0) -> int:
        """Drain now and wait until nothing is pending (or time runs out); returns pending."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.state.status != "active":
                return 0
            await self.drain()
            try:
                pending = (await asyncio.to_thread(self.state.queues.outbox.stats,
                                                   self.state.provider)).pending
            except OUTBOX_ERRORS:
                pending = 0
            pending += self.state.queues.unqueued.turns()
            if pending == 0 or self.state.read_only or time.monotonic() >= deadline:
                return pending
            await asyncio.sleep(0.05)

