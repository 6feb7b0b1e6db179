"""``bench --task beam``: the BEAM block of results.json and its table. The run is the
timeline driver's: one unit per conversation (fresh scope), batches recorded in order
with their time anchors, the probing questions asked read-only after the last batch at
the equal budget, graded per ability by harness/beam_judge.py."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from nanobot_memory_adapters.harness.datasets.beam import ABILITIES, ability_of

NOTE = ("BEAM: per ability, the mean nugget score (each rubric item judged 1 / 0.5 / 0, "
        "averaged per question) and, for event_ordering, tau_norm x F1 (Kendall's tau-b "
        "of the reply's order against the rubric's); 95 % bootstrap intervals clustered "
        "by conversation. Needs --llm-base-url/--llm-model; not in metrics_sha256.")


def _est(values: list[float], clusters: list[str]) -> dict[str, Any] | None:
    from nanobot_memory_adapters.stats import mean_ci

    if not values:
        return None
    e = mean_ci(values, clusters=clusters, method="bootstrap")
    return {"value": round(e.value, 6), "low": round(e.low, 6), "high": round(e.high, 6),
            "n": e.n, "method": e.method}


def provider_block(units: list[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, list[tuple[float, str]]] = defaultdict(list)
    ordering: list[tuple[float, str]] = []
    unparsed = 0
    for u in units:
        for j in u["judged"]:
            score = j["verdict"].get("score")
            if score is None:
                unparsed += 1
                continue
            rows[ability_of(int(j["category"]))].append((float(score), u["conversation"]))
            detail = json.loads(j["verdict"].get("raw") or "{}")
            if "ordering" in detail:
                ordering.append((float(detail["ordering"]), u["conversation"]))
    every = [r for a in ABILITIES for r in rows.get(a, [])]
    return {
        "overall": _est([s for s, _ in every], [c for _, c in every]),
        "by_ability": {a: _est([s for s, _ in rows[a]], [c for _, c in rows[a]])
                       for a in ABILITIES if rows.get(a)},
        "event_ordering_tau_f1": _est([s for s, _ in ordering], [c for _, c in ordering]),
        "not_graded": unparsed,
    }


def beam_block(by_provider: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"note": NOTE, "providers": {n: provider_block(u) for n, u in by_provider.items()}}


def print_table(results: dict[str, Any], title: str) -> None:
    from rich.table import Table

    from nanobot_memory_adapters.console import console

    block = results.get("beam")
    if not block:
        console.print("BEAM grading needs --llm-base-url/--llm-model (a judge)",
                      highlight=False)
        return
    t = Table(title=title, title_justify="left")
    for head in ("provider", "nugget score", "event order"):
        t.add_column(head)
    for name, p in block["providers"].items():
        def cell(e: dict[str, Any] | None) -> str:
            return "n/a" if e is None else f"{e['value']:.2f} [{e['low']:.2f},{e['high']:.2f}]"
        t.add_row(name, cell(p["overall"]), cell(p["event_ordering_tau_f1"]))
    console.print(t)
