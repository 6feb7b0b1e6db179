"""The plugin's write path: a durable local append, then background delivery in order.

When nanobot reports ``SessionTurnPersisted`` the turn becomes a ``MemoryEvent`` and is
appended to the SQLite outbox; a background pass (tracked by nanobot, flushed by
``AgentLoop.aclose``) delivers pending events in order. The reply never waits for the
backend; a write that was not accepted stays pending (retryable) or is parked (not).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from nanobot_memory_adapters.contract import AdapterError
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.outbox import OutboxRow
from nanobot_memory_adapters.nanobot.plugin_state import PluginState
from nanobot_memory_adapters.nanobot.state import LOG
from nanobot_memory_adapters.nanobot.turns import build_event


class DeliveryMixin(PluginState):
    async def on_turn_persisted(self, event: Any) -> None:
        """Bus subscriber: durable local append, then background delivery. Never raises."""
        try:
            await self._record_turn(event)
        except Exception as exc:
            self._note_error("enqueue", exc, retryable=False)
            logger.exception("{}: could not queue the turn for memory", LOG)

    async def _record_turn(self, event: Any) -> None:
        if self.status != "active":
            return
        ctx = event.context
        key = ctx.session_key
        if not key or key.startswith("dream:"):
            return
        if self.read_only:
            logger.debug("{}: read-only, turn {} not recorded", LOG, event.turn_id)
            return
        session = seams.session_of(self.sessions, key)
        if session is None:
            return
        memory = self.settings.memory
        assert memory is not None
        # a turn from no person (cron, a subagent...) is the session's person's, or nobody's
        who = await self._attribute(session_key=key, channel=ctx.channel, chat_id=ctx.chat_id,
                                    sender_id=event.sender_id, metadata=ctx.metadata)
        if who.person is None:
            logger.debug("{}: turn {} belongs to no person; not recorded", LOG, event.turn_id)
            return
        try:
            memory_event = build_event(
                memory=memory, messages=list(session.messages), turn_id=event.turn_id,
                channel=ctx.channel, chat_id=ctx.chat_id, sender_id=who.person,
                session_key=key, attributes=ctx.attributes,
                include_tools=self.settings.plugin.include_tool_messages,
            )
        except ValueError as exc:  # a scope template or id the backend must not see
            self._note_error("build_event", exc, retryable=False)
            logger.warning("{}: turn {} not recorded: {}", LOG, event.turn_id, exc)
            return
        if memory_event is None:
            return  # a slash command or nothing the user said
        started = time.perf_counter()
        added = await asyncio.to_thread(self.outbox.enqueue, self.provider, memory_event, key,
                                        (ctx.channel, ctx.chat_id, who.person))
        self.enqueue_stats.add((time.perf_counter() - started) * 1000)
        if added:
            self._unsettled[key] = self._unsettled.get(key, 0) + 1
        self._schedule_drain()

    def _schedule_drain(self) -> None:
        if self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        seams.schedule_background(self.loop, self._drain())

    def _schedule_retry(self) -> None:
        if self._closed:
            return
        if self._retry_task is not None and not self._retry_task.done():
            return
        delay = self._retry_delay
        self._retry_delay = min(self._retry_delay * 2, self.settings.plugin.retry_max_s)

        async def later() -> None:
            await asyncio.sleep(delay)
            self._retry_task = None
            await self._drain()

        # Not tracked by nanobot: shutdown must not wait out a backoff sleep.
        self._retry_task = asyncio.get_running_loop().create_task(later())

    async def _drain(self) -> None:
        """Deliver pending events in order until the outbox is empty or the backend fails."""
        if self.status != "active" or self.read_only or self._closed:
            return
        drain_lock = self._lock()
        async with drain_lock:
            if self.status != "active" or self.read_only:
                return
            if not await self._ensure_adapter():
                if self.status == "active":
                    self._schedule_retry()
                return
            provider = self.provider
            with self.outbox.drain_lock() as mine:
                if not mine:  # another process is draining this outbox
                    self._schedule_retry()
                    return
                while True:
                    rows = await asyncio.to_thread(self.outbox.pending, provider, 50)
                    if not rows:
                        break
                    for row in rows:
                        if (self.read_only or self.provider != provider or self.adapter is None
                                or self._closed):
                            return
                        if not await self._deliver(row):
                            self._schedule_retry()
                            return
            self._retry_delay = self.settings.plugin.retry_initial_s
            self.writes_failing_since = None

    async def _deliver(self, row: OutboxRow) -> bool:
        """True when the row is settled (delivered or parked); False to stop and retry later."""
        assert self.adapter is not None
        event = row.event()
        started = time.perf_counter()
        try:
            await self._ensure_scope(event.scope())
            receipt = await asyncio.wait_for(
                self.adapter.record_event(event), self.settings.plugin.write_timeout_s
            )
        except TimeoutError:
            error = f"record_event took longer than {self.settings.plugin.write_timeout_s}s"
            return await self._write_failed(row, TimeoutError(error), retryable=True)
        except AdapterError as exc:
            return await self._write_failed(row, exc, retryable=exc.retryable)
        except Exception as exc:
            return await self._write_failed(row, exc, retryable=False)
        if not receipt.accepted:  # e.g. skipped_read_only: not accepted, keep it
            await asyncio.to_thread(self.outbox.mark_retry, row.seq,
                                    f"backend returned {receipt.status}")
            return False
        latency = (time.perf_counter() - started) * 1000
        self.record_stats.add(latency)
        await asyncio.to_thread(self.outbox.mark_delivered, row.seq, status=receipt.status,
                                native_ids=receipt.native_ids, latency_ms=latency)
        self.writes_failing_since = None
        await self._settle(row)
        return True

    def _condition(self) -> asyncio.Condition:
        if self._settled is None:
            self._settled = asyncio.Condition()
        return self._settled

    async def _settle(self, row: OutboxRow) -> None:
        key = row.session_key
        if self._unsettled.get(key):
            self._unsettled[key] -= 1
            if not self._unsettled[key]:
                del self._unsettled[key]
        async with self._condition():
            self._condition().notify_all()

    async def _wait_for_own_writes(self, session_key: str, timeout_s: float) -> None:
        """Let this session's just-queued turns land first, when the backend is healthy."""
        if (timeout_s <= 0 or not self._unsettled.get(session_key) or self.read_only
                or self.writes_failing_since is not None):
            return
        condition = self._condition()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s), condition:
                await condition.wait_for(
                    lambda: not self._unsettled.get(session_key)
                    or self.writes_failing_since is not None
                )

    async def _write_failed(self, row: OutboxRow, exc: BaseException, *, retryable: bool) -> bool:
        detail = exc.to_dict() if isinstance(exc, AdapterError) else {"message": str(exc)}
        error = json.dumps(detail, default=str)[:4000]
        self._note_error("record_event", exc, retryable=retryable)
        if retryable:
            if self.writes_failing_since is None:
                self.writes_failing_since = time.time()
            await asyncio.to_thread(self.outbox.mark_retry, row.seq, error)
            if not self.store_lock.report(self.provider, self.data_dir, exc,
                                          self.writes_failing_since):
                logger.warning("{}: '{}' did not accept event {} ({}); kept in the outbox, "
                               "retrying in {:.1f}s", LOG, self.provider, row.event_id, exc,
                               self._retry_delay)
            return False
        await asyncio.to_thread(self.outbox.mark_failed, row.seq, error)
        await self._settle(row)
        logger.error("{}: '{}' rejected event {} ({}); parked in the outbox as failed",
                     LOG, self.provider, row.event_id, exc)
        return True

    async def flush(self, timeout_s: float = 30.0) -> int:
        """Drain now and wait until nothing is pending (or time runs out); returns pending."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.status != "active":
                return 0
            await self._drain()
            pending = (await asyncio.to_thread(self.outbox.stats, self.provider)).pending
            if pending == 0 or self.read_only or time.monotonic() >= deadline:
                return pending
            await asyncio.sleep(0.05)

