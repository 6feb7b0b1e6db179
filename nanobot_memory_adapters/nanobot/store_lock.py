"""Another process holds the provider's embedded store (a gateway and a terminal on one
local Qdrant or Kuzu folder): said in one line, once per outage, naming the holder when
``/proc`` shows it — not the backend's whole error on every retry."""

from __future__ import annotations

from pathlib import Path

from nanobot_memory_adapters.diagnostics import mentions_lock_contention, store_holders
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot.state import LOG, OUTBOX_FILE


def holder_text(data_dir: Path | None) -> str:
    """``pid N (command)`` of the processes holding files under ``data_dir``."""
    holders = store_holders(data_dir, skip=(OUTBOX_FILE,)) if data_dir else []
    return ", ".join(holders[:3]) if holders else "another process (not identifiable here)"


class StoreLockNotice:
    """Says "the store is held" once, until this process itself writes to the store again
    (the holder may deliver this process's turns meanwhile: that is not the store coming
    free)."""

    def __init__(self) -> None:
        self._said = False

    def cleared(self) -> None:
        """This process wrote to its store: a later hold is a new one, said again."""
        self._said = False

    def report(self, provider: str, data_dir: Path | None, exc: BaseException,
               outage: float | None) -> bool:
        """True when ``exc`` is lock contention (then logged, once until ``cleared``);
        False when it is something else, for the caller to log as usual. (``outage`` is
        kept for callers; the notice no longer depends on it.)"""
        if not mentions_lock_contention(exc):
            return False
        if self._said:
            logger.debug("{}: '{}' store still held by another process", LOG, provider)
            return True
        self._said = True
        logger.warning("{}: '{}' keeps an embedded store that {} holds open; this process "
                       "answers without recall and keeps its turns in the outbox for that "
                       "process (said once; /memory-health shows it)", LOG, provider,
                       holder_text(data_dir))
        return True
