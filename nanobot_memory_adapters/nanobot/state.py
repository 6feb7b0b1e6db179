"""Small shared pieces of the plugin: the recall cache entry, errors, latency figures."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from nanobot_memory_adapters.contract import BackendHealth
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.audience import Piece
from nanobot_memory_adapters.stats import percentile

LOG = seams.LOG_PREFIX
OUTBOX_FILE = "nanobot-outbox.sqlite3"
CACHE_SESSIONS = 512


class LatencyStats:
    """The last ``size`` samples; percentiles as everywhere else (``stats.percentile``)."""

    def __init__(self, size: int = 1000) -> None:
        self.samples: deque[float] = deque(maxlen=size)

    def add(self, ms: float) -> None:
        self.samples.append(ms)

    def percentile(self, p: float) -> float | None:
        return percentile(list(self.samples), p)

    def line(self) -> str:
        if not self.samples:
            return "no samples yet"
        p50, p95 = self.percentile(50) or 0.0, self.percentile(95) or 0.0
        return f"p50 {p50:.1f} ms, p95 {p95:.1f} ms (n={len(self.samples)})"


@dataclass
class CacheEntry:
    text: str
    scope_key: str
    provider: str
    at: float
    query: str
    stale: bool = False
    in_system: bool = False  # served in the system prompt (a shared chat's recall)


@dataclass
class LastError:
    at: float
    operation: str
    message: str
    retryable: bool
    store_locked: bool = False  # another process holds the embedded store


@dataclass
class Activity:
    """What the plugin is doing with the backend right now (from its own state, so a
    command can say it without asking the busy backend)."""

    what: str  # said in any chat ("recording a turn")
    since: float  # time.time()
    detail: str = ""  # which turn of whose session: the operator's only (a gated piece)

    def public_line(self) -> str:
        return f"busy: {self.what} for {max(0.0, time.time() - self.since):.0f} s"

    def line(self) -> Piece:
        """The line for a reply: a session key names a person (a phone number, an
        e-mail address), so the detail passes the audience gate as the operator's."""
        public = self.public_line()
        if not self.detail:
            return Piece.plain(public)
        return Piece.operator(f"{public} ({self.detail})", withheld=public)


@dataclass
class KnownHealth:
    """The last finished health check, shown with its age while a new one is running."""

    health: BackendHealth
    at: float  # time.time()


def ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    secs = max(0.0, time.time() - ts)
    if secs < 120:
        return f"{secs:.0f}s ago"
    if secs < 7200:
        return f"{secs / 60:.0f}m ago"
    return f"{secs / 3600:.1f}h ago"
