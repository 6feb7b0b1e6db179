"""Statistics, one place for each: percentiles, intervals of a mean, paired differences.

Public API (stable; the LoCoMo report and the preference benchmark both call it)::

    percentile(values, p) -> float | None
    mean_ci(values, *, clusters=None, level=0.95, n_boot=2000, seed=0,
            method="auto") -> Estimate
    wilson_ci(successes, n, *, level=0.95) -> Estimate
    newcombe_paired(a, b, *, level=0.95) -> tuple[float, float]  # 0/1 pairs, no clusters
    rounded(x, digits=6) -> float | None     # significant digits: a p of 3e-9 stays 3e-9
    MIN_CLUSTERS = 5                         # fewer clusters: resample items instead
    paired_difference(a, b, *, clusters=None, level=0.95, n_boot=2000, seed=0,
                      names=("A", "B")) -> Difference
    median_difference(a, b, *, level=0.95, n_boot=2000, seed=0) -> Estimate
                                             # median(a) - median(b), independent samples
    format_estimate(e, digits=3) -> str      # "0.571 [0.55, 0.59] n=120"
    format_difference(d, digits=3) -> str    # "+0.083 [-0.14, +0.31] not distinguishable"
    format_p(p) -> str                       # "0.036", "<0.001", "–" for None

    class Estimate(BaseModel):   value, low, high, n, n_clusters, level, method
    class Difference(BaseModel): value, low, high, n, n_clusters, level, method,
                                 p_value, distinguishable, verdict, a, b

Methods (``Estimate.method`` names the one used):

- ``"bootstrap"``: percentile bootstrap of the mean, items resampled with replacement.
- ``"cluster-bootstrap"``: clusters (e.g. LoCoMo conversations, preference personas)
  resampled with replacement, each bringing all its items; the statistic is the pooled mean
  of the resampled items. Use it whenever items share a cluster: correlated items make the
  plain bootstrap too narrow. With one cluster there is nothing to resample; the items are
  resampled instead and the method says ``"bootstrap (1 cluster)"``.
- ``"wilson"``: Wilson score interval of a proportion. ``mean_ci(method="auto")`` uses it
  for unclustered 0/1 values (it behaves at 0 and 1, where a bootstrap collapses to a
  point); non-binary values get the bootstrap.
- ``"cluster-bootstrap+wilson"``: what ``method="auto"`` gives clustered 0/1 values: the
  union of the cluster-bootstrap interval and the Wilson interval on all n items. A cluster
  bootstrap of 0/1 values collapses to a point when every item is 0 or 1, or when every
  cluster has the same mean (a design where each cluster holds the same tests), and is
  then narrower than treating the items as independent, which clustering never justifies;
  the union is never narrower than Wilson and is as wide as the clusters' own spread when
  that is larger. ``method="bootstrap"`` keeps the plain cluster bootstrap.

Clustering needs clusters to resample: callers pass ``clusters`` only from
``MIN_CLUSTERS`` (5) clusters up (fewer: the items, unclustered). ``rounded`` is the one
rounding rule for figures written to results files (significant digits, so a small
p-value is never written as 0.0).

``median_difference`` compares two independent samples (e.g. reply latencies with and
without a plugin, which are not the same turns): each is resampled on its own and the
interval is the percentile interval of the resampled medians' difference (method
``"bootstrap (independent)"``, ``n`` the smaller sample).

``paired_difference`` bootstraps mean(a - b) over the same items (clustered when
``clusters`` is given). When both sides are 0/1 it also reports McNemar's exact p-value
(two-sided binomial test on the discordant pairs; it ignores clusters), and the interval
is the union of the bootstrap and Newcombe's score interval for paired proportions
(``newcombe_paired``, method 10 of Newcombe 1998, built on Wilson): the same floor as
``"cluster-bootstrap+wilson"`` (a difference that is the same in every cluster, or in
every item, would otherwise get a point interval). The method then ends ``+newcombe``.
``distinguishable`` is True when the interval excludes 0 **and** (for 0/1 values)
McNemar's p is below ``1 - level``: with few discordant pairs all on one side the
percentile bootstrap never reaches 0 (every resample that draws a discordant pair draws
one of the same sign), so the interval alone would call 4 discordant tests of 200 a
difference (p = 0.125). The verdict names the larger side. Every bootstrap is
deterministic for a given ``seed``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

N_BOOT = 2000
LEVEL = 0.95
SEED = 0
MIN_CLUSTERS = 5  # fewer clusters than this: resample items instead (callers decide)
SIGNIFICANT = 6


def rounded(x: float | None, digits: int = SIGNIFICANT) -> float | None:
    """``x`` to ``digits`` significant digits (None stays None; 0 stays 0)."""
    if x is None:
        return None
    if x == 0:
        return 0.0  # never -0.0 (printed as -0.00)
    if not math.isfinite(x):
        return float(x)
    return float(f"{x:.{digits}g}")


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    data = sorted(values)
    k = (len(data) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return data[lo]
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


class Estimate(BaseModel):
    """A mean with its interval: ``low <= value <= high`` at ``level`` over ``n`` items."""

    model_config = ConfigDict(frozen=True)

    value: float
    low: float
    high: float
    n: int
    n_clusters: int | None = None
    level: float = LEVEL
    method: str


class Difference(BaseModel):
    """mean(a - b) over paired items, its interval, and whether it separates a from b."""

    model_config = ConfigDict(frozen=True)

    a: str
    b: str
    value: float
    low: float
    high: float
    n: int
    n_clusters: int | None = None
    level: float = LEVEL
    method: str
    p_value: float | None = None  # McNemar's exact test, when both sides are 0/1
    distinguishable: bool
    verdict: str  # "<a> > <b>", "<b> > <a>" or "not distinguishable"


def _array(values: Sequence[float], name: str) -> Any:
    import numpy as np

    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}: need a non-empty list of numbers")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: holds NaN or infinite values")
    return arr


def _binary(arr: Any) -> bool:
    import numpy as np

    return bool(np.all((arr == 0) | (arr == 1)))


def _cluster_index(clusters: Sequence[Hashable] | None, n: int) -> tuple[Any, int]:
    """Integer cluster codes 0..k-1 (each item its own cluster when ``clusters`` is None)."""
    import numpy as np

    if clusters is None:
        return np.arange(n), n
    if len(clusters) != n:
        raise ValueError(f"clusters: {len(clusters)} labels for {n} values")
    codes: dict[Hashable, int] = {}
    idx = np.fromiter((codes.setdefault(c, len(codes)) for c in clusters), dtype=int, count=n)
    return idx, len(codes)


def _bootstrap(arr: Any, codes: Any, k: int, *, level: float, n_boot: int,
               seed: int) -> tuple[float, float]:
    """Percentile interval of the pooled mean when the k clusters are resampled."""
    import numpy as np

    sums = np.bincount(codes, weights=arr, minlength=k)
    counts = np.bincount(codes, minlength=k).astype(float)
    rng = np.random.default_rng(seed)
    step = max(1, 4_000_000 // k)  # resamples per block: memory stays bounded for large k
    parts = []
    for start in range(0, n_boot, step):
        draw = rng.integers(0, k, size=(min(step, n_boot - start), k))
        parts.append(sums[draw].sum(axis=1) / counts[draw].sum(axis=1))
    means = np.concatenate(parts)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def _check(level: float, n_boot: int) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level: {level} is not between 0 and 1 (e.g. 0.95)")
    if n_boot < 100:
        raise ValueError(f"n_boot: {n_boot} resamples are too few (use >= 1000)")


def wilson_ci(successes: int, n: int, *, level: float = LEVEL) -> Estimate:
    """Wilson score interval of ``successes / n`` (no clustering)."""
    from scipy.stats import norm

    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson_ci: {successes} successes of {n} is not a proportion")
    _check(level, N_BOOT)
    z = float(norm.ppf(1 - (1 - level) / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Estimate(value=p, low=max(0.0, centre - half), high=min(1.0, centre + half),
                    n=n, level=level, method="wilson")


def mean_ci(values: Sequence[float], *, clusters: Sequence[Hashable] | None = None,
            level: float = LEVEL, n_boot: int = N_BOOT, seed: int = SEED,
            method: Literal["auto", "bootstrap", "wilson"] = "auto") -> Estimate:
    """The mean of ``values`` with a ``level`` interval (see the module docstring)."""
    arr = _array(values, "values")
    _check(level, n_boot)
    binary = _binary(arr)
    if method == "wilson" or (method == "auto" and clusters is None and binary):
        if not binary:
            raise ValueError("method='wilson' needs 0/1 values")
        if clusters is not None:
            raise ValueError("method='wilson' ignores clusters; use the bootstrap")
        return wilson_ci(int(arr.sum()), int(arr.size), level=level)
    codes, k = _cluster_index(clusters, arr.size)
    name = "bootstrap" if clusters is None else "cluster-bootstrap"
    if clusters is not None and k < 2:
        codes, k, name = _cluster_index(None, arr.size)[0], arr.size, "bootstrap (1 cluster)"
    low, high = _bootstrap(arr, codes, k, level=level, n_boot=n_boot, seed=seed)
    value = float(arr.mean())
    if method == "auto" and binary:
        # clustered 0/1 values: never narrower than Wilson on n (see the module docstring)
        w = wilson_ci(int(arr.sum()), int(arr.size), level=level)
        low, high, name = min(low, w.low), max(high, w.high), f"{name}+wilson"
    return Estimate(value=value, low=min(low, value), high=max(high, value), n=int(arr.size),
                    n_clusters=None if clusters is None else len(set(clusters)),
                    level=level, method=name)


def newcombe_paired(a: Sequence[float], b: Sequence[float], *, level: float = LEVEL
                    ) -> tuple[float, float]:
    """Newcombe's hybrid score interval of p(a) - p(b) for paired 0/1 outcomes (his
    method 10: each side's Wilson interval, combined with the pairs' correlation)."""
    x, y = _array(a, "a"), _array(b, "b")
    if x.size != y.size or not (_binary(x) and _binary(y)):
        raise ValueError("newcombe_paired: needs two 0/1 lists of the same length")
    n = int(x.size)
    both = int(((x == 1) & (y == 1)).sum())
    only_a = int(((x == 1) & (y == 0)).sum())
    only_b = int(((x == 0) & (y == 1)).sum())
    neither = n - both - only_a - only_b
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    w1 = wilson_ci(both + only_a, n, level=level)
    w2 = wilson_ci(both + only_b, n, level=level)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = 0.0 if margins == 0 else (both * neither - only_a * only_b) / math.sqrt(margins)
    down = math.sqrt(max(0.0, (p1 - w1.low) ** 2 - 2 * phi * (p1 - w1.low) * (w2.high - p2)
                         + (w2.high - p2) ** 2))
    up = math.sqrt(max(0.0, (w1.high - p1) ** 2 - 2 * phi * (w1.high - p1) * (p2 - w2.low)
                       + (p2 - w2.low) ** 2))
    return max(-1.0, p1 - p2 - down), min(1.0, p1 - p2 + up)


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided exact McNemar p-value for paired 0/1 outcomes (1.0 with no discordant pair)."""
    from scipy.stats import binomtest

    x, y = _array(a, "a"), _array(b, "b")
    if x.size != y.size or not (_binary(x) and _binary(y)):
        raise ValueError("mcnemar_exact: needs two 0/1 lists of the same length")
    only_a = int(((x == 1) & (y == 0)).sum())
    only_b = int(((x == 0) & (y == 1)).sum())
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def paired_difference(a: Sequence[float], b: Sequence[float], *,
                      clusters: Sequence[Hashable] | None = None, level: float = LEVEL,
                      n_boot: int = N_BOOT, seed: int = SEED,
                      names: tuple[str, str] = ("A", "B")) -> Difference:
    """mean(a - b) over the same items, bootstrapped (by cluster when given)."""
    x, y = _array(a, "a"), _array(b, "b")
    if x.size != y.size:
        raise ValueError(f"paired_difference: {x.size} values against {y.size}; pair them")
    _check(level, n_boot)
    est = mean_ci(x - y, clusters=clusters, level=level, n_boot=n_boot, seed=seed,
                  method="bootstrap")
    binary = _binary(x) and _binary(y)
    p_value = mcnemar_exact(x, y) if binary else None
    low, high, method = est.low, est.high, est.method
    if binary:  # never narrower than Newcombe's interval (see the module docstring)
        n_low, n_high = newcombe_paired(x, y, level=level)
        low, high, method = min(low, n_low), max(high, n_high), f"{method}+newcombe"
    # the interval alone is not enough: when every discordant pair favours one side the
    # percentile bootstrap never crosses 0 (4 discordant tests of 200 gave "A > B" with
    # McNemar p 0.125), so a 0/1 verdict also needs the exact test at the same level
    distinguishable = (low > 0 or high < 0) and (p_value is None or p_value < 1 - level)
    na, nb = names
    verdict = ("not distinguishable" if not distinguishable
               else f"{na} > {nb}" if est.value > 0 else f"{nb} > {na}")
    return Difference(a=na, b=nb, value=est.value, low=low, high=high, n=est.n,
                      n_clusters=est.n_clusters, level=level, method=method,
                      p_value=p_value, distinguishable=distinguishable, verdict=verdict)


def median_difference(a: Sequence[float], b: Sequence[float], *, level: float = LEVEL,
                      n_boot: int = N_BOOT, seed: int = SEED) -> Estimate:
    """median(a) - median(b) of two independent samples, each resampled on its own."""
    import numpy as np

    x, y = _array(a, "a"), _array(b, "b")
    _check(level, n_boot)
    rng = np.random.default_rng(seed)
    diffs = (np.median(x[rng.integers(0, x.size, size=(n_boot, x.size))], axis=1)
             - np.median(y[rng.integers(0, y.size, size=(n_boot, y.size))], axis=1))
    alpha = (1 - level) / 2
    low, high = (float(v) for v in np.quantile(diffs, [alpha, 1 - alpha]))
    value = float(np.median(x) - np.median(y))
    return Estimate(value=value, low=min(low, value), high=max(high, value),
                    n=int(min(x.size, y.size)), level=level,
                    method="bootstrap (independent)")


def percentile_ci(values: Sequence[float], p: float, *, level: float = LEVEL,
                  n_boot: int = N_BOOT, seed: int = SEED) -> Estimate:
    """The ``p``-th percentile (``percentile``'s interpolation) with a bootstrap interval
    (the sample resampled with replacement): a latency's p50 or p95 with its 95 %."""
    import numpy as np

    x = _array(values, "values")
    _check(level, n_boot)
    rng = np.random.default_rng(seed)
    boot = np.percentile(x[rng.integers(0, x.size, size=(n_boot, x.size))], p, axis=1)
    alpha = (1 - level) / 2
    low, high = (float(v) for v in np.quantile(boot, [alpha, 1 - alpha]))
    value = float(percentile(list(map(float, x)), p) or 0.0)
    return Estimate(value=value, low=min(low, value), high=max(high, value), n=int(x.size),
                    level=level, method=f"bootstrap p{p:g}")


def median_ratio(a: Sequence[float], b: Sequence[float], *, level: float = LEVEL,
                 n_boot: int = N_BOOT, seed: int = SEED) -> Estimate:
    """median(a) / median(b) of two independent samples, each resampled on its own (how
    many times slower one set of timings is than another, measured in one run)."""
    import numpy as np

    x, y = _array(a, "a"), _array(b, "b")
    _check(level, n_boot)
    rng = np.random.default_rng(seed)
    ratios = (np.median(x[rng.integers(0, x.size, size=(n_boot, x.size))], axis=1)
              / np.median(y[rng.integers(0, y.size, size=(n_boot, y.size))], axis=1))
    alpha = (1 - level) / 2
    low, high = (float(v) for v in np.quantile(ratios, [alpha, 1 - alpha]))
    value = float(np.median(x) / np.median(y))
    return Estimate(value=value, low=min(low, value), high=max(high, value),
                    n=int(min(x.size, y.size)), level=level,
                    method="bootstrap ratio of medians (independent)")


def format_number(x: float, digits: int, *, signed: bool = False) -> str:
    """``x`` to ``digits`` decimals (``+`` when ``signed``); a value that rounds to zero
    prints without a minus sign (a bound of -0.0026 is ``+0.00``, never ``-0.00``)."""
    sign = "+" if signed else ""
    text = f"{x:{sign}.{digits}f}"
    return f"{0.0:{sign}.{digits}f}" if float(text) == 0 else text


def format_bounds(low: float, high: float, digits: int = 2, *, signed: bool = False,
                  sep: str = ", ") -> str:
    """``[0.55, 0.59]``: an interval as every table prints it (``format_number``)."""
    return (f"[{format_number(low, digits, signed=signed)}{sep}"
            f"{format_number(high, digits, signed=signed)}]")


def format_estimate(e: Estimate, digits: int = 3) -> str:
    """``0.571 [0.55, 0.59] n=120``: the value, its interval one digit coarser, and n."""
    lo = max(digits - 1, 1)
    return f"{format_number(e.value, digits)} {format_bounds(e.low, e.high, lo)} n={e.n}"


def format_difference(d: Difference, digits: int = 3) -> str:
    """``+0.083 [-0.14, +0.31] not distinguishable`` (or the verdict, e.g. ``A > B``)."""
    lo = max(digits - 1, 1)
    return (f"{format_number(d.value, digits, signed=True)} "
            f"{format_bounds(d.low, d.high, lo, signed=True)} {d.verdict}")


def format_p(p: float | None) -> str:
    """A p-value for a table: three significant digits, ``<0.001`` below that (never
    ``0.000``, which reads as impossible), ``–`` when there is none."""
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3g}"
