"""What the plugin tells the user: ``/memory-mode`` and ``/memory-health`` replies."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import BackendHealth, capabilities_of
from nanobot_memory_adapters.diagnostics import raw_mentions_lock_contention
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.audience import Piece
from nanobot_memory_adapters.nanobot.outbox import OUTBOX_ERRORS, OutboxStats, describe_failure
from nanobot_memory_adapters.nanobot.plugin_state import EnsureAdapter, PluginState
from nanobot_memory_adapters.nanobot.state import KnownHealth
from nanobot_memory_adapters.nanobot.state import ago as _ago
from nanobot_memory_adapters.nanobot.store_lock import holder_text
from nanobot_memory_adapters.nanobot.turns import command_scope

if TYPE_CHECKING:
    from nanobot_memory_adapters.nanobot.backfill_chat import Backfill
    from nanobot_memory_adapters.nanobot.recall import Recall

# what a held embedded store means in this process (said after who holds it)
HELD_STORE_MEANS = (
    "this process keeps answering, without recall (no memory reaches its replies while the "
    "store is held), and its turns wait in the shared outbox for whichever process can open "
    "the store; /memory-forget works in that process (or stop it)")


class Reports:
    """The replies of ``/memory-mode`` and ``/memory-health``, from the state and from what
    recall and backfill last did; owns the bounded live health check. Replies are
    ``audience.Piece``s: the asker's own scope's state is a memory piece of that scope,
    backend error text and other people's ids are operator pieces (the commands release
    them through the audience gate)."""

    def __init__(self, state: PluginState, *, ensure_adapter: EnsureAdapter, recall: Recall,
                 backfill: Backfill) -> None:
        self.state = state
        self._ensure_adapter = ensure_adapter
        self._recall = recall
        self._backfill = backfill
        self.known_health: KnownHealth | None = None
        self.health_task: asyncio.Task[Any] | None = None

    def scope_line(self, ctx: Any) -> Piece:
        memory = self.state.settings.memory
        if memory is None:
            return Piece.plain("scope: -")
        try:
            scope, session_id = command_scope(memory, ctx)
        except ValueError as exc:
            return Piece.operator(f"scope: cannot be built ({exc})",
                                  withheld="scope: cannot be built (see the gateway's log)")
        return Piece.memory(f"scope (this chat): run={scope.run_id} user={scope.persona_id} "
                            f"agent={scope.agent_id} session={session_id}", scope.key,
                            withheld="scope: this chat is not known to be yours alone, so "
                            "no personal memory is shown here")

    def mode_report(self, ctx: Any) -> list[Piece]:
        lines: list[Piece | str] = []
        if self.state.status == "active":
            kind = "backend" if self.state.settings.memory and self.state.settings.memory.backend \
                else "condition"
            lines.append(f"memory provider: {self.state.provider} ({kind})")
            adapter = self.state.adapter
            if adapter is not None and adapter.backend_name != self.state.provider:
                lines.append(f"runs as: {adapter.backend_name} — {adapter.info.description}")
            lines.append("mode: " + ("read-only (turns are not saved)" if self.state.read_only
                                     else "read-write (turns are saved after each reply)"))
            if self.state.health.activity is not None:  # e.g. a turn being saved, a switch waiting
                lines.append(self.state.health.activity.line())
            lines.append(self.scope_line(ctx))
            lines.append(f"data dir: {self.state.data_dir}")
        elif self.state.status == "passthrough":
            lines.append(f"memory provider: {self.state.provider} (control)")
            lines.append("mode: nanobot's own MEMORY.md / history.jsonl / Dream, untouched")
        else:
            lines.append(f"memory: {self.state.status} — {self.state.reason}")
        lines.append(f"config: {self.state.settings.path}")
        lines.append("switch: /memory-mode <provider> | /memory-mode read-only on|off")
        return [p if isinstance(p, Piece) else Piece.plain(p) for p in lines]

    async def health_report(self, ctx: Any) -> list[Piece]:
        """``/memory-health``: the provider's health for anyone; the asker's own last
        recall as a memory piece of their scope; error text for the operator only."""
        lines: list[Piece | str] = []
        if self.state.status == "passthrough":
            return [Piece.plain("\n".join([
                f"memory: {self.state.provider} (control) — nanobot's own memory is in charge",
                *self._native_memory_lines(),
                f"config: {self.state.settings.path}",
            ]))]
        if self.state.status != "active":
            # the reason is memory.json's (a key and its fix), nobody's conversation
            return [Piece.plain(f"memory: {self.state.status} — {self.state.reason}\n"
                                f"config: {self.state.settings.path}\n"
                                "nanobot is running with its own memory (MEMORY.md).")]
        store_locked = False
        fresh = self.state.adapter is None and self.state.health.activity is None
        if fresh:
            await self._await_start()
        activity = self.state.health.activity  # read first: what the plugin was doing when asked
        health, health_line = await self._bounded_health(
            # a provider started just now for this question (a one-shot run) gets its
            # whole check: it is what the user asked for, not an interruption of a gateway
            self.state.settings.plugin.health_timeout_s if fresh else None)
        unreadable: str | None = None
        stats: OutboxStats | None = None
        try:
            stats = await asyncio.wait_for(
                asyncio.shield(asyncio.to_thread(self.state.queues.outbox.stats,
                                                 self.state.provider)),
                self.state.settings.plugin.health_live_s)
        except TimeoutError:
            unreadable = "busy (another process or a write holds it); try again"
        except OUTBOX_ERRORS as exc:
            unreadable = describe_failure(self.state.queues.outbox.path, exc)
        status = health.status if health is not None else \
            ("busy" if activity is not None else "unavailable")
        health_state = self.state.health
        if status == "ok" and (health_state.writes_failing_since
                               or health_state.reads_failing_since):
            status = "degraded"
        if self.state.health.writes_failing_since and (stats is None or stats.pending):
            status = "unavailable" if status != "ok" else "degraded"
        if status == "ok" and (stats is None or self.state.queues.unqueued.writes):
            status = "degraded"
        info = getattr(self.state.adapter, "info", None)
        lines.append(f"memory: {self.state.provider} — {status}")
        if activity is not None:
            lines.append(activity.line())
        if health_line:
            lines.append(health_line)
        if self.state.health.writes_failing_since:
            lines.append(f"writes failing since {_ago(self.state.health.writes_failing_since)}; "
                         "turns are kept in the outbox")
        if self.state.health.reads_failing_since:
            lines.append(f"reads failing since {_ago(self.state.health.reads_failing_since)}; "
                         "answering with stale or no memory")
        if health is not None:
            lines.append(f"backend health: {health.status}"
                         + (f" ({health.latency_ms:.0f} ms)" if health.latency_ms else ""))
            lines.append(f"kind: {health.condition_kind}; consistency: "
                         f"{health.consistency_model}")
            lines.append("capabilities: " + (", ".join(health.capabilities) or "none"))
            if health.native_memory_types:
                lines.append("native memory types: " + ", ".join(health.native_memory_types))
            if health.native_ingest_modes:
                lines.append("ingest modes: " + ", ".join(health.native_ingest_modes))
            error = health.details.get("error")
            if health.status != "ok" and isinstance(error, dict):
                lines.append(Piece.operator(
                    f"backend error: {str(error.get('type', '')).rsplit('.', 1)[-1]}: "
                    f"{str(error.get('message', ''))[:300]}",
                    withheld="backend error: (the gateway's log has it)"))
                store_locked = raw_mentions_lock_contention(error)
            for warning in health.warnings[:3]:
                lines.append(Piece.operator(f"warning: {warning}", withheld=""))
        elif info is not None:
            lines.append(f"kind: {info.condition_kind}; consistency: {info.consistency_model}; "
                         "capabilities: "
                         + (", ".join(capabilities_of(self.state.adapter)) or "none"))
        elif activity is None:
            lines.append("backend health: unavailable (provider could not be started)")
        lines.append("mode: " + ("read-only" if self.state.read_only else "read-write"))
        lines.extend(self._outbox_lines(stats, unreadable))
        # error text can quote another user's turn (MemOS and FastAPI bodies echo what was
        # sent): the operation and its age for everyone, the text for the operator only
        not_here = " (its text is in the gateway's log and `nanobot-memory status`)"
        if self.state.health.last_error is not None:
            e = self.state.health.last_error
            head = f"last error: {e.operation} {_ago(e.at)}"
            lines.append(Piece.operator(f"{head}: {e.message[:300]}", withheld=head + not_here))
            store_locked = store_locked or e.store_locked
        elif stats is not None and stats.last_error:
            # an earlier process's delivery error, kept on the outbox row (while this
            # process's own health check is still running, it is what says the store is
            # held by another process)
            head = "last error: record (outbox)"
            lines.append(Piece.operator(f"{head}: {stats.last_error[:300]}",
                                        withheld=head + not_here))
            store_locked = raw_mentions_lock_contention({"message": stats.last_error})
        else:
            lines.append("last error: none")
        if store_locked:
            who = await asyncio.to_thread(holder_text, self.state.data_dir)
            # who holds it names a process and its command line (which can hold someone's
            # words): the operator's; the rest is fixed text, said in every chat
            lines.append(Piece.operator(f"store: held by {who}; {HELD_STORE_MEANS}",
                                        withheld=f"store: held by another process; "
                                        f"{HELD_STORE_MEANS}"))
        mine = self._recall.last_recall_for(ctx)
        if mine is not None:
            lines.append(mine)
        lines.append(f"retrieve latency: {self.state.health.retrieve_stats.line()}")
        lines.append(f"record latency: {self.state.health.record_stats.line()}")
        lines.append(f"config: {self.state.settings.path}")
        return [p if isinstance(p, Piece) else Piece.plain(p) for p in lines]

    async def _await_start(self) -> None:
        """A provider not started yet (a fresh ``nanobot agent -m "/memory-health"``) is
        started now, bounded by ``startup_timeout_s``, so its health is a real answer
        rather than "unavailable"."""
        try:
            async with asyncio.timeout(self.state.settings.plugin.startup_timeout_s):
                await self._ensure_adapter()
        except Exception:  # noted by the build itself; health says what it can
            return

    async def _bounded_health(self, wait_s: float | None = None
                              ) -> tuple[BackendHealth | None, str | None]:
        """A live health check bounded by ``health_live_s``; past that, the last known
        health and its age (the check keeps running, bounded by ``health_timeout_s``, and
        its result serves the next call). Never waits on a busy backend."""
        task = self.health_task
        if task is None or task.done():
            task = self.health_task = asyncio.get_running_loop().create_task(
                self._check_health())
            # nanobot's aclose awaits its background tasks: a check still running in a
            # thread (health_timeout_s at most) is not abandoned at exit
            seams.schedule_background(self.state.loop, asyncio.wait({task}))
        done, _ = await asyncio.wait(
            {task}, timeout=wait_s if wait_s is not None else
            self.state.settings.plugin.health_live_s)
        known = self.known_health
        if done:  # a finished check: its result, or none when it failed (see last error)
            if task.result() and known is not None:
                return known.health, None
            return None, None
        if known is None:
            return None, "backend health: not known yet; a live check is still running"
        return known.health, (f"health checked {_ago(known.at)}; a live check is still "
                              "running")

    async def _check_health(self) -> bool:
        """One health check; True when it finished (its result is ``known_health``)."""
        building = self.state.adapter is None
        try:
            async with asyncio.timeout(self.state.settings.plugin.health_timeout_s):
                if not await self._ensure_adapter():
                    return False
                assert self.state.adapter is not None
                health = await self.state.adapter.health()
        except Exception as exc:
            self.state.health.note_error("build_provider" if building and self.state.adapter is None
                                  else "health", exc, retryable=True)
            return False
        self.known_health = KnownHealth(health, time.time())
        return True

    def _outbox_lines(self, stats: OutboxStats | None, unreadable: str | None
                      ) -> list[Piece | str]:
        """The outbox's depth, the turns it could not take, failed rows and the remedy."""
        lines: list[Piece | str] = []
        if stats is None:
            lines.append(Piece.operator(f"outbox: cannot be read — {unreadable}",
                                        withheld="outbox: cannot be read (see the gateway's "
                                        "log)"))
        else:
            outbox = f"outbox: {stats.pending} pending"
            if stats.pending:
                outbox += f" (oldest {_ago(stats.oldest_pending_at)})"
            outbox += f", {stats.failed} failed, {stats.delivered} delivered"
            if stats.open:
                outbox += f"; {stats.open} awaiting a reply"
            if stats.pending_other_providers:
                outbox += f"; {stats.pending_other_providers} pending for other providers"
            lines.append(outbox)
        kept = self.state.queues.unqueued.turns()
        if kept:
            problem = self.state.queues.unqueued.problem
            if problem is None and stats is None and unreadable and unreadable.startswith("busy"):
                # the writer is still waiting for the SQLite write lock (it has not timed
                # out yet), which is also why the outbox cannot be read within the bound
                problem = describe_failure(self.state.queues.outbox.path,
                                           sqlite3.OperationalError("database is locked"))
            problem = problem or "being written"
            head = (f"{kept} turns not queued (kept in this process's memory and "
                    "retried; lost if it is killed before then)")
            lines.append(Piece.operator(f"{head}: {problem}", withheld=head))
        backfill = self._backfill.line()
        if backfill:
            lines.append(backfill)
        if stats is not None and stats.failed:
            remedy = ("requeue them with /memory-mode retry-failed or `nanobot-memory outbox "
                      "requeue`")
            lines.append(Piece.operator(
                f"failed turns: {stats.failed} (last error: "
                f"{(stats.last_failed_error or 'not recorded')[:300]}); {remedy}",
                withheld=f"failed turns: {stats.failed}; {remedy}"))
        return lines

    def _native_memory_lines(self) -> list[str]:
        return seams.native_memory_summary(self.state.loop)

    def status_dict(self) -> dict[str, Any]:
        s = self.state
        return {
            "status": s.status, "reason": s.reason, "provider": s.provider,
            "read_only": s.read_only, "config": str(s.settings.path),
            "data_dir": str(s.data_dir) if s.data_dir else None,
            "at": datetime.now(UTC).isoformat(),
        }


