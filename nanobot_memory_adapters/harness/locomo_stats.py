"""The LoCoMo task's intervals, pairwise verdicts and the answer-recall baseline.

Computed from ``traces.jsonl`` alone (``metrics.score_traces``), so ``bench --verify``
recomputes them exactly. They live in results.json under ``intervals``, outside
``providers``: ``metrics_sha256`` covers ``providers`` only, so adding them changes no hash.

- Every headline figure gets a 95 % percentile bootstrap interval (``stats.mean_ci``) over
  the same asks the figure averages; asks are resampled by **conversation** when the run
  has at least five (LoCoMo has ten), else by **question** (a question asked at several
  test points stays one cluster): with two to four clusters a cluster bootstrap only
  shuffles a handful of means, so such a run's intervals speak for its conversations only.
- **Answer baseline** (issue 30): the same answer-recall test on a *no-evidence context*
  of equal length: the conversation's turns up to the ask's test point, minus the
  question's evidence turns, in a seeded random order (seed, conversation, question,
  point), each taken when it still fits within the ask's context tokens (a turn too long
  for what is left is skipped, not the end of the draw). The order
  does not depend on the provider, so baselines of two providers differ only by length.
  **Answer lift** = answer hit - baseline hit per ask, a paired difference.
- **Category 5 apart** (issue 30): the headline, its intervals and the pairwise verdicts
  are over categories 1-4; category 5 (adversarial: the gold is a premise the
  conversation does not support) is reported under ``category_5`` (and in
  ``by_category``), never averaged in.
- **Pairwise**: for each pair of providers and each ranked metric, the paired difference
  over the asks both made (same conversation, question, test point), its interval and a
  verdict ("not distinguishable" when the interval covers 0).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Hashable
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from nanobot_memory_adapters.harness.estimates import cluster_by_conversation
from nanobot_memory_adapters.harness.metrics import answer_present, normalize_answer, score_traces
from nanobot_memory_adapters.stats import LEVEL, N_BOOT, SEED, mean_ci, paired_difference
from nanobot_memory_adapters.tokens import count_tokens_cached

# The metrics that rank providers (headline), and what is kept for detail.
HEADLINE = ("turn", "provenance", "answer_lift")
DETAIL = ("session", "answer", "answer_baseline")
PAIRWISE = ("turn", "provenance", "answer", "answer_lift")
SHORT_GOLD_WORDS = 2
SATURATED = ("session recall is saturated: one short turn per evidence session already "
             "scores 1.0, so it cannot rank providers (kept for detail, not a headline)")
_ROUND = 6


def _dump(model: BaseModel) -> dict[str, Any]:
    # + 0.0: a bound that rounds to -0.0 is printed as +0.00, not -0.00
    return {k: (float(f"{v:.{_ROUND}g}") if k == "p_value" else round(v, _ROUND) + 0.0)
            if isinstance(v, float) else v for k, v in model.model_dump().items()}


def short_gold(gold: object) -> bool:
    """A gold answer of at most two words: a context matches it by accident more often."""
    return len(normalize_answer(str(gold)).split()) <= SHORT_GOLD_WORDS


def _order(turns: dict[str, tuple[int, str]], conversation: str, qid: str, point: int,
           evidence: tuple[str, ...], seed: int) -> list[str]:
    """The no-evidence turns up to ``point`` in the ask's seeded order (any provider)."""
    pool = sorted(d for d, (s, _) in turns.items() if s <= point and d not in evidence)
    key = f"{seed}|{conversation}|{qid}|{point}".encode()
    random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big")).shuffle(pool)
    return pool


def baseline_hit(ask: dict[str, Any], turns: dict[str, tuple[int, str]], seed: int,
                 cache: dict[tuple[Any, ...], list[str]] | None = None) -> bool:
    """Whether the gold answer is in a no-evidence context as long as the ask's context."""
    budget = int(ask.get("tokens") or 0)
    if budget <= 0:
        return False
    args = (ask["conversation"], str(ask["qid"]), int(ask["point"]),
            tuple(sorted(ask["evidence"])))
    cache = {} if cache is None else cache
    pool = cache.get(args)
    if pool is None:
        pool = cache[args] = _order(turns, *args, seed=seed)
    shown, used = [], 0
    for d in pool:
        text = turns[d][1]
        cost = count_tokens_cached(text) + 1
        if used + cost > budget:
            continue  # a turn too long for what is left: skip it, shorter ones may fit
        shown.append(_normalized(text))
        used += cost
    # == normalize_answer("\n".join(texts)): a line break is a separator like any other
    return answer_present(ask["gold"], " ".join(t for t in shown if t))


@lru_cache(maxsize=65536)
def _normalized(text: str) -> str:
    return normalize_answer(text)


def _key(ask: dict[str, Any]) -> tuple[str, str, int]:
    return (ask["conversation"], str(ask["qid"]), int(ask["point"]))


def _values(asks: list[dict[str, Any]], metric: str) -> dict[tuple[str, str, int], float]:
    """Per ask (by key), the metric's value; asks the metric does not apply to are left out."""
    out: dict[tuple[str, str, int], float] = {}
    if metric == "provenance":
        items = sum(a.get("prov_items", 0) for a in asks)
        if items and not sum(a.get("prov_items_known", 0) for a in asks):
            return {}  # shown items that could not say where they came from: n/a
    for a in asks:
        if metric == "turn":
            out[_key(a)] = a["turn_recall"]
        elif metric == "session":
            out[_key(a)] = a["session_recall"]
        elif metric == "provenance":
            out[_key(a)] = a.get("prov_hits", 0) / a["n_evidence"]
        elif a.get("answer_hit") is not None:
            hit, base = float(a["answer_hit"]), float(a["baseline_hit"])
            out[_key(a)] = {"answer": hit, "answer_baseline": base,
                            "answer_lift": hit - base}[metric]
    return out


class _Clusters:
    def __init__(self, by_conversation: bool) -> None:
        self.by_conversation = by_conversation
        self.name = "conversation" if by_conversation else "question"

    def of(self, keys: list[tuple[str, str, int]]) -> list[Hashable]:
        return [k[0] if self.by_conversation else (k[0], k[1]) for k in keys]


def _estimate(values: dict[tuple[str, str, int], float], cl: _Clusters, *,
              seed: int, n_boot: int, level: float) -> dict[str, Any] | None:
    if not values:
        return None
    keys = sorted(values)
    return _dump(mean_ci([values[k] for k in keys], clusters=cl.of(keys), level=level,
                         n_boot=n_boot, seed=seed))


def _lift(asks: list[dict[str, Any]], cl: _Clusters, *, seed: int, n_boot: int,
          level: float) -> dict[str, Any] | None:
    hits, base = _values(asks, "answer"), _values(asks, "answer_baseline")
    if not hits:
        return None
    keys = sorted(hits)
    d = paired_difference([hits[k] for k in keys], [base[k] for k in keys],
                          clusters=cl.of(keys), level=level, n_boot=n_boot, seed=seed,
                          names=("answer", "baseline"))
    return _dump(d)


def locomo_intervals(traces: str | Path, providers: list[str], budget_tokens: int | None = None,
                     *, seed: int = SEED, n_boot: int = N_BOOT,
                     level: float = LEVEL) -> dict[str, Any]:
    """results.json's ``intervals`` block for the providers, in their order."""
    scored, dialogue = score_traces(traces, budget_tokens)
    asks = {p: scored.get(p, []) for p in providers}
    orders: dict[tuple[Any, ...], list[str]] = {}  # the same draw for every provider
    for p_asks in asks.values():
        for a in p_asks:
            if a.get("answer_hit") is not None:
                a["baseline_hit"] = baseline_hit(a, dialogue.get(a["conversation"], {}), seed,
                                                 orders)
    conversations = {a["conversation"] for p_asks in asks.values() for a in p_asks}
    cl = _Clusters(cluster_by_conversation(list(conversations)))
    kw: dict[str, Any] = {"seed": seed, "n_boot": n_boot, "level": level}
    per: dict[str, Any] = {}
    every = asks
    asks = {p: [a for a in v if 1 <= int(a["category"]) <= 4] for p, v in every.items()}
    for name, p_asks in asks.items():
        block = {m: _estimate(_values(p_asks, m), cl, **kw)
                 for m in ("turn", "provenance", "session", "answer", "answer_baseline")}
        adversarial = [a for a in every[name] if int(a["category"]) == 5]
        block["category_5"] = {"n": len(adversarial), **{
            m: _estimate(_values(adversarial, m), cl, **kw)
            for m in ("turn", "provenance", "session")}}
        block["answer_lift"] = _lift(p_asks, cl, **kw)
        for label, short in (("short_gold", True), ("long_gold", False)):
            part = [a for a in p_asks if a.get("answer_hit") is not None
                    and short_gold(a["gold"]) == short]
            block[label] = {"n": len(part),
                            "answer": _estimate(_values(part, "answer"), cl, **kw),
                            "answer_baseline": _estimate(_values(part, "answer_baseline"),
                                                         cl, **kw),
                            "answer_lift": _lift(part, cl, **kw)}
        block["by_category"] = {
            str(c): {m: _estimate(_values(part, m), cl, **kw)
                     for m in ("turn", "provenance", "session", "answer")}
            for c in sorted({int(a["category"]) for a in every[name]})
            for part in [[a for a in every[name] if int(a["category"]) == c]]}
        per[name] = block
    pairwise: dict[str, list[dict[str, Any]]] = {}
    for metric in PAIRWISE:
        rows = []
        for a, b in combinations(providers, 2):
            va, vb = _values(asks[a], metric), _values(asks[b], metric)
            keys = sorted(set(va) & set(vb))
            if not keys:
                continue
            d = paired_difference([va[k] for k in keys], [vb[k] for k in keys],
                                  clusters=cl.of(keys), names=(a, b), **kw)
            rows.append(_dump(d))
        pairwise[metric] = rows
    return {
        "note": "95 % intervals and pairwise verdicts from traces.jsonl; not in "
        "metrics_sha256 (which covers 'providers' only)",
        "categories": "headline, detail and pairwise: categories 1-4; category 5 "
        "(adversarial) apart under each provider's 'category_5', never averaged in",
        "level": level, "n_boot": n_boot, "seed": seed, "cluster": cl.name,
        "headline": list(HEADLINE), "detail": list(DETAIL), "saturated": {"session": SATURATED},
        "providers": per,
        "pairwise": pairwise,
    }
