"""Turns the outbox could not take yet, kept in memory in turn order until it can.

The outbox is the durable record; when its file cannot be written (another process
holds the write lock, the disk is full or read-only, the file is damaged) a turn is kept
here instead of being dropped, and written out as soon as the outbox takes writes again.
``/memory-health`` reports how many turns wait here ("N turns not queued") and why.
Kept in this process's memory only: a process killed during such an outage loses them
from the plugin (nanobot's own session file still holds them: ``nanobot-memory backfill``
requeues them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from nanobot_memory_adapters.events import MemoryEvent


@dataclass(frozen=True)
class Write:
    """One outbox write: a turn's user half (``open_turn``) or the whole turn."""

    provider: str
    event: MemoryEvent
    session_key: str
    identity: tuple[str, str, str | None]
    open_turn: bool = False


class UnqueuedTurns:
    """Writes waiting for the outbox, oldest first, and why the outbox refuses them."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.failing_since: float | None = None
        self.problem: str | None = None  # one line: the file, what is wrong, the remedy

    def add(self, write: Write) -> None:
        if not write.open_turn:  # the whole turn supersedes its unwritten user half
            self.writes = [w for w in self.writes
                           if not (w.open_turn and w.event.event_id == write.event.event_id
                                   and w.provider == write.provider)]
        self.writes.append(write)

    def written(self, write: Write) -> None:
        """``write`` is in the outbox: drop that very object (not the list's head, which a
        whole turn arriving meanwhile may have replaced, superseding this user half)."""
        for i, w in enumerate(self.writes):
            if w is write:
                del self.writes[i]
                return

    def drop_scope(self, scope_key: str) -> int:
        """Forget: the kept writes of a forgotten scope go too; how many."""
        before = len(self.writes)
        self.writes = [w for w in self.writes if w.event.scope().key != scope_key]
        return before - len(self.writes)

    def turns(self) -> int:
        """Distinct turns waiting (a user half and its whole turn count once)."""
        return len({(w.provider, w.event.event_id) for w in self.writes})

    def failed(self, problem: str) -> bool:
        """Note a refused write; True when this starts an outage (worth one log line)."""
        self.problem = problem
        if self.failing_since is None:
            self.failing_since = time.time()
            return True
        return False

    def recovered(self) -> None:
        self.failing_since = None
        self.problem = None
