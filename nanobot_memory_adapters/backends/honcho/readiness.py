"""Honcho readiness: the deriver's queue for this persona, settled (``SupportsReadiness``)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from honcho import Honcho
from honcho.peer import Peer

from nanobot_memory_adapters.backends.honcho.config import Dirty, HonchoConfig, ScopeState
from nanobot_memory_adapters.contract import MemoryScope, Readiness


class HonchoReadiness:
    """The deriver's queue for a persona, and what this store knows that the queue cannot
    show yet (a write just accepted, sessions still being deleted). The store builds it
    and offers its ``readiness`` (the wrapper polls it); it reaches Honcho through the
    store's scope state and clients."""

    def __init__(
        self,
        config: HonchoConfig,
        *,
        scope_state: Callable[[MemoryScope], Awaitable[ScopeState]],
        client: Callable[[str], Honcho],
        state_key: Callable[[MemoryScope], str],
    ) -> None:
        self.config = config
        self._scope_state = scope_state
        self._client = client
        self.state_key = state_key
        self._dirty: dict[str, Dirty] = {}

    def mark_dirty(self, key: str) -> None:
        """A write was accepted for this scope: the queue may not show its work yet."""
        dirty = self._dirty.setdefault(key, Dirty(last_write=time.monotonic()))
        dirty.last_write = time.monotonic()
        dirty.seen_work = False

    def mark_deleted(self, key: str, sessions: set[str]) -> None:
        """Sessions whose deletion Honcho finishes asynchronously: pending until gone."""
        dirty = self._dirty.setdefault(key, Dirty(last_write=time.monotonic()))
        dirty.deleted_sessions |= sessions

    async def _probe(self, scope: MemoryScope) -> tuple[int, int, set[str]]:
        state = await self._scope_state(scope)
        aio = self._client(state.workspace).aio
        senders = [state.user_peer] + ([state.assistant_peer] if self.config.observe_assistant
                                       else [])
        busy = total = 0
        for sender in senders:
            # sender_id (payload "observed") is the filter the server honours for
            # representation work; observer_id matches nothing for it (docs/honcho.md).
            q = await aio.queue_status(sender=sender)
            busy += q.pending_work_units + q.in_progress_work_units
            total += q.total_work_units
        dirty = self._dirty.get(self.state_key(scope))
        still_deleting: set[str] = set()
        if dirty and dirty.deleted_sessions:
            alive = await self.peer_sessions(state)
            still_deleting = {s for s in dirty.deleted_sessions if s in alive}
            dirty.deleted_sessions = still_deleting
        return busy, total, still_deleting

    async def peer_sessions(self, state: ScopeState) -> dict[str, bool]:
        peer = Peer(state.user_peer, self._client(state.workspace))
        page = await peer.aio.sessions(size=100)
        # AsyncPage declares ``async def __aiter__``, an async generator pyright misreads
        return {s.id: bool(s.is_active) async for s in page}  # pyright: ignore[reportGeneralTypeIssues]

    async def readiness(self, scope: MemoryScope) -> Readiness:
        started = time.perf_counter()
        busy, _, deleting = await self._probe(scope)
        dirty = self._dirty.get(self.state_key(scope))
        if busy:
            if dirty:
                dirty.seen_work = True
            status, detail = "pending", f"{busy} Honcho work unit(s) pending or in progress"
        elif deleting:
            status, detail = "pending", f"{len(deleting)} deleted session(s) not yet removed"
        elif dirty and not dirty.seen_work and (
            time.monotonic() - dirty.last_write < self.config.readiness_settle_s
        ):
            status, detail = "pending", "write just accepted; the server enqueues after replying"
        else:
            status, detail = "ready", "queue drained for this persona"
        return Readiness(status=status, pending_count=busy + len(deleting),
                         waited_ms=(time.perf_counter() - started) * 1000, detail=detail)

