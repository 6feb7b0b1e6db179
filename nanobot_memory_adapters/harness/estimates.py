"""One place for how the harness turns per-question values into a reported estimate: the
mean with its 95 % interval and n (``stats.mean_ci``), when asks are resampled by
conversation, and how an estimate is printed in a terminal cell."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from nanobot_memory_adapters.stats import MIN_CLUSTERS, format_bounds, format_number

# Fewer conversations than this: resample questions, not conversations (with two to four
# clusters a cluster bootstrap only shuffles a handful of means). The one rule for every
# clustered interval (``stats.MIN_CLUSTERS``), named for what the harness clusters by.
MIN_CONVERSATIONS = MIN_CLUSTERS
_ROUND = 6


def cluster_by_conversation(conversations: Sequence[Hashable]) -> bool:
    """Whether a run's asks are resampled by conversation (enough of them) or by question."""
    return len(set(conversations)) >= MIN_CONVERSATIONS


def estimate(values: Sequence[float], clusters: Sequence[Hashable] | None = None, *,
             method: str = "auto") -> dict[str, Any] | None:
    """``{value, low, high, n, method}`` (rounded) of the values, or None when there are
    none. ``clusters`` is ignored below ``MIN_CONVERSATIONS`` distinct clusters."""
    from nanobot_memory_adapters.stats import mean_ci

    if not values:
        return None
    if clusters is not None and not cluster_by_conversation(clusters):
        clusters = None
    e = mean_ci(list(values), clusters=clusters, method=method)  # type: ignore[arg-type]
    return {"value": round(e.value, _ROUND), "low": round(e.low, _ROUND),
            "high": round(e.high, _ROUND), "n": e.n, "method": e.method}


def ci_cell(e: dict[str, Any] | None, digits: int = 2, *, signed: bool = False,
            n: bool = False, sep: str = " ") -> str:
    """``0.57 [0.55,0.59]`` (optionally ``n=40``) for a terminal cell, or n/a."""
    if e is None:
        return "n/a"
    text = (f"{format_number(e['value'], digits, signed=signed)}{sep}"
            f"{format_bounds(e['low'], e['high'], signed=signed, sep=',')}")
    return text + (f"{sep}n={e['n']}" if n else "")
