"""What memory did for a turn: the recall note, the opt-in per-turn line, trivial turns.

A trivial turn (an acknowledgement such as "ok" or "thanks", or a slash command) skips
recall: no retrieve call, so memory adds no latency to it. The list is configurable
(``nanobot.trivial_prompts``, regular expressions matched against the whole message).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from functools import lru_cache

from nanobot_memory_adapters.nanobot.state import ago


@lru_cache(maxsize=8)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE | re.DOTALL) for p in patterns)


def is_trivial(text: str, patterns: list[str]) -> bool:
    """Whether a message is trivial (matches one pattern in full, after stripping)."""
    stripped = text.strip()
    return any(p.fullmatch(stripped) for p in _compiled(tuple(patterns)))


@dataclass
class RecallNote:
    """One turn's recall, as the per-turn line and ``/memory-health`` show it."""

    provider: str
    outcome: str  # recalled | skipped (trivial) | unavailable | stale
    items: int = 0
    tokens: int = 0
    latency_ms: float = 0.0
    detail: str = ""
    at: float = 0.0

    def __post_init__(self) -> None:
        if not self.at:
            self.at = time.time()

    def line(self) -> str:
        """The per-turn line: ``memory: mem0 — 3 items, 120 tokens, 340 ms``."""
        if self.outcome == "recalled":
            return (f"memory: {self.provider} — {self.items} item"
                    f"{'' if self.items == 1 else 's'}, {self.tokens} tokens, "
                    f"{self.latency_ms:.0f} ms{f' ({self.detail})' if self.detail else ''}")
        extra = f" ({self.detail})" if self.detail else ""
        return f"memory: {self.provider} — {self.outcome}{extra}"

    def withheld_line(self) -> str:
        """The line in a chat that may not see the speaker's counts (a shared chat's
        personal recall): which memory answered, not how much one person has stored."""
        return f"memory: {self.provider} — personal recall (counts in direct chats only)"

    def health_line(self) -> str:
        return f"last recall ({ago(self.at)}): {self.line().removeprefix('memory: ')}"
