"""Ranked retrieval at fixed k on LoCoMo: the figures peer harnesses publish ("R@5").

Over each provider's own ranking (every item ``retrieve`` returned, in its order, before
the budget cut), at the final test point, categories 1-4 (category 5, adversarial, is
reported apart and never averaged in):

- ``any@k``: some evidence turn (session) is in the top k distinct turns (sessions);
- ``strict@k``: every evidence turn (session) is.

k = 1, 5, 10; turn level and session level (sessions ranked by their first ranked turn,
LongMemEval's turn-to-session rule). Items are mapped to turns through their
``source_event_ids`` (harness/lme_metrics.py); a ranking none of whose items names a
source is n/a. Each figure: a mean over questions with a 95 % interval clustered by
conversation from ``estimates.MIN_CONVERSATIONS`` conversations on, else by question
(``harness/estimates.py``). Recall within the equal budget stays the headline: a
provider that returns 100 items and shows 10 is scored here on all 100.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.lme_metrics import KS, ask_scores, read_asks

NOTE = ("any@k / strict@k over the provider's native ranking (before the budget cut), "
        "final test point; 'categories_1_4' and 'category_5' apart; 95 % intervals "
        "clustered by conversation from five conversations on, else by question. Not "
        "the headline: recall within the equal budget is.")


def _est(values: list[float], clusters: list[str]) -> dict[str, Any] | None:
    from nanobot_memory_adapters.harness.estimates import estimate

    return estimate(values, clusters)  # by conversation from MIN_CONVERSATIONS on


def summarize(rows: list[tuple[str, int, dict[str, float | None]]]) -> dict[str, Any]:
    """rows: (conversation, category, ask_scores native keys) -> the block of a provider."""
    out: dict[str, Any] = {}
    for group, keep in (("categories_1_4", lambda c: 1 <= c <= 4),
                        ("category_5", lambda c: c == 5)):
        mine = [(conv, s) for conv, c, s in rows if keep(c)]
        block: dict[str, Any] = {"questions": len(mine)}
        for level in ("turn", "session"):
            for k in KS:
                for name, key in (("any", "any"), ("strict", "all")):
                    pairs = [(float(v), conv) for conv, s in mine
                             if (v := s.get(f"{level}_{key}@{k}")) is not None]
                    block[f"{level}_{name}@{k}"] = _est([v for v, _ in pairs],
                                                        [c for _, c in pairs])
        out[group] = block
    return out


def ranked_block(units_by_provider: dict[str, list[dict[str, Any]]], budget: int,
                 headline: int) -> dict[str, Any]:
    """Per provider, from the units' final asks at the headline budget."""
    providers = {}
    for name, units in units_by_provider.items():
        rows = [(u["conversation"], int(a["category"]), a["ranked"]) for u in units
                for a in u["asks"] if a.get("is_final") and a.get("ranked") is not None
                and a.get("budget", headline) == budget]
        providers[name] = summarize(rows)
    return {"note": NOTE, "ks": list(KS), "providers": providers}


def recompute_from_traces(path: str | Path, budget: int | None = None) -> dict[str, Any]:
    """The same block's providers from ``traces.jsonl`` only."""
    events, every = read_asks(path, lambda rec: rec.get("benchmark") is None)  # LoCoMo
    asks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    last: dict[str, int] = defaultdict(int)
    for rec in every:
        last[rec["unit"]] = max(last[rec["unit"]], int(rec["point"]))
        if budget is None or rec.get("budget_tokens", budget) == budget:
            asks[rec["provider"]].append(rec)
    out = {}
    for provider, recs in asks.items():
        rows = []
        for r in recs:
            if int(r["point"]) != last[r["unit"]]:
                continue
            ev = r["evidence"]
            scores = ask_scores([], r.get("ranked_sources") or [], events[r["unit"]], ev,
                                sorted({int(d.split(":")[0][1:]) for d in ev}), False,
                                readings=("native",), session_via_evidence=False)
            rows.append((r.get("conversation") or "", int(r["category"]), scores))
        out[provider] = summarize(rows)
    return out
