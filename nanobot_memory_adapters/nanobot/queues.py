"""Where kept turns wait: the plugin's queues collaborator.

It owns the outbox (opened lazily in the data directory, reopened when a switch moves the
provider's data), the turns the outbox could not take yet (``unqueued``, retried in
order) and this process's two locks: delivery (delivery, forget, backfill, a switch) and
putting turns into the outbox. Delivery, forget, backfill, reports and the runtime ask
it; nobody else keeps queue state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.state import OUTBOX_FILE
from nanobot_memory_adapters.nanobot.unqueued import UnqueuedTurns


class TurnQueues:
    """The outbox, the turns waiting for it, and the process's delivery and write locks.
    ``base_dir`` and ``keep_delivered`` are read when the outbox opens."""

    def __init__(self, base_dir: Callable[[], Path], keep_delivered: Callable[[], int]
                 ) -> None:
        self._base_dir = base_dir
        self._keep_delivered = keep_delivered
        self.opened_outbox: Outbox | None = None
        self.unqueued = UnqueuedTurns()  # turns the outbox could not take yet, in order
        self.drain_lock: asyncio.Lock | None = None
        self._write_lock: asyncio.Lock | None = None

    @property
    def outbox(self) -> Outbox:
        if self.opened_outbox is None:
            self.opened_outbox = Outbox(self._base_dir() / OUTBOX_FILE,
                                        keep_delivered=self._keep_delivered())
        return self.opened_outbox

    def draining(self) -> asyncio.Lock:
        """This process's delivery lock (delivery, forget, backfill, a switch)."""
        if self.drain_lock is None:
            self.drain_lock = asyncio.Lock()
        return self.drain_lock

    def writing(self) -> asyncio.Lock:
        """This process's lock on putting kept turns into the outbox."""
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        return self._write_lock

    def close_outbox(self, unless_in: Path | None = None) -> None:
        """Close the outbox (``unless_in``: keep it when it already lives there)."""
        opened = self.opened_outbox
        if opened is None or (unless_in is not None and opened.path.parent == unless_in):
            return
        opened.close()
        self.opened_outbox = None
