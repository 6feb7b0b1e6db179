"""One line per ratio: the mean over rounds (or runs) with its 95 % bootstrap interval."""

from __future__ import annotations

from collections.abc import Sequence


def ratio_line(label: str, ratios: Sequence[float], of: str = "rounds") -> str:
    """``label: mean [low, high] (mean of n <of>, 95 % bootstrap)``; one value alone has
    no interval and says so."""
    if len(ratios) < 2:
        return f"{label}: {ratios[0]:.2f} (one only: no interval)"
    from nanobot_memory_adapters.stats import mean_ci

    est = mean_ci(list(ratios))
    return (f"{label}: {est.value:.2f} [{est.low:.2f}, {est.high:.2f}] "
            f"(mean of {est.n} {of}, 95 % bootstrap)")
