"""``bench --task beam``: the BEAM block of results.json and its table. The run is the
timeline driver's: one unit per conversation (fresh scope), batches recorded in order
with their time anchors, the probing questions asked read-only after the last batch at
the equal budget, graded per ability by harness/beam_judge.py."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.datasets.beam import ABILITIES, ability_of

NOTE = ("BEAM: per ability, the mean nugget score (each rubric item judged 1 / 0.5 / 0, "
        "averaged per question); 'overall' is over every ability but abstention (a "
        "provider that stores nothing scores 0 there), 'abstention' apart with its own n. "
        "event_ordering: tau_norm (Kendall's tau-b of the reply's order against the "
        "rubric's, normalised to [0, 1]) and tau_norm x F1, as BEAM defines them. "
        "'retrieval': the evidence turns source_chat_ids name -- turn recall within the "
        "equal budget and any@k / strict@k over the provider's own ranking; questions "
        "without source_chat_ids are counted under 'evidence_stand_in', never scored. 95 % "
        "intervals, by conversation from five conversations on (harness/estimates.py). "
        "Judged figures need --llm-base-url/--llm-model; not in metrics_sha256.")
ORDERING = ("tau_norm", "ordering")  # BEAM's ordering detail -> our keys below
RETRIEVAL = ("turn_any@5", "turn_all@5", "session_any@5", "session_all@5")


def _est(pairs: list[tuple[float, str]]) -> dict[str, Any] | None:
    from nanobot_memory_adapters.harness.estimates import estimate

    return estimate([v for v, _ in pairs], [c for _, c in pairs])


def evidence_block(rows: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """The evidence turns (source_chat_ids) scored judge-free: turn recall within the
    budget, ranked any/strict@5; stand-in evidence counted apart. ``rows``: (conversation,
    question id, the final ask's ``evidence_scored``, ``turn_recall`` and ``ranked``), in
    any order -- what the run and ``recompute_from_traces`` both pass."""
    rows = sorted(rows, key=lambda r: (r[0], r[1]))  # the traces' order is the workers'
    scored = [(a, c) for c, _, a in rows if a.get("evidence_scored")]
    out: dict[str, Any] = {"questions": len(scored),
                           "evidence_stand_in": len(rows) - len(scored),
                           "turn_recall": _est([(float(a["turn_recall"]), c)
                                                for a, c in scored])}
    for key in RETRIEVAL:
        out[key] = _est([(float(v), c) for a, c in scored
                         if (v := (a.get("ranked") or {}).get(key)) is not None])
    return out


def retrieval_block(units: list[dict[str, Any]]) -> dict[str, Any]:
    """``evidence_block`` of the units' final asks (one budget's: see ``beam_block``)."""
    return evidence_block([(u["conversation"], a["qid"], a) for u in units
                           for a in u["asks"] if a.get("is_final")])


def recompute_from_traces(path: str | Path, budget: int | None = None
                          ) -> dict[str, dict[str, Any]]:
    """Each provider's ``retrieval`` block from ``traces.jsonl`` only: the BEAM ask lines
    at the last test point of their unit (in a sweep, at ``budget``); ranked scores as
    the run derived them (``lme_fields`` on the ask line and the record lines' event ->
    turn map), turn recall as every recall recompute scores an ask's context
    (``metrics.score_traces``)."""
    from nanobot_memory_adapters.harness.lme_metrics import lme_fields, read_asks
    from nanobot_memory_adapters.harness.metrics import score_traces

    events, every = read_asks(path, lambda rec: rec.get("benchmark") == "beam" and (
        budget is None or rec.get("budget_tokens", budget) == budget))
    recall = {(p, s["conversation"], s["qid"], s["point"]): s["turn_recall"]
              for p, asks in score_traces(path, budget)[0].items() for s in asks}
    last: dict[str, int] = defaultdict(int)
    for rec in every:
        last[rec["unit"]] = max(last[rec["unit"]], int(rec["point"]))
    rows: dict[str, list[tuple[str, str, dict[str, Any]]]] = defaultdict(list)
    for rec in every:
        if int(rec["point"]) != last[rec["unit"]]:
            continue
        conv, qid = rec.get("conversation") or "", rec["question_id"]
        fields = lme_fields(None, rec, events[rec["unit"]])
        fields["turn_recall"] = recall[(rec["provider"], conv, qid, rec["point"])]
        rows[rec["provider"]].append((conv, qid, fields))
    return {provider: evidence_block(r) for provider, r in rows.items()}


def verify(results: dict[str, Any], traces: Path) -> list[str]:
    """``provider (beam retrieval: figure, ...)`` for each provider whose evidence block
    in results.json differs from the one recomputed from traces."""
    block = results.get("beam")
    if block is None:
        return []
    again = recompute_from_traces(traces, results["budget_tokens"]
                                  if results.get("budgets") else None)
    bad = []
    for name, entry in block["providers"].items():
        mine = entry.get("retrieval") or {}
        theirs = again.get(name) or evidence_block([])  # no ask line: an empty block
        keys = [k for k in dict.fromkeys([*mine, *theirs]) if mine.get(k) != theirs.get(k)]
        if keys:
            bad.append(f"{name} (beam retrieval: {', '.join(keys)})")
    return bad


def provider_block(units: list[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, list[tuple[float, str]]] = defaultdict(list)
    ordering: dict[str, list[tuple[float, str]]] = defaultdict(list)
    unparsed = 0
    for u in units:
        for j in u["judged"]:
            score = j["verdict"].get("score")
            if score is None:
                unparsed += 1
                continue
            rows[ability_of(int(j["category"]))].append((float(score), u["conversation"]))
            detail = json.loads(j["verdict"].get("raw") or "{}")
            for key in ORDERING:
                if key in detail:
                    ordering[key].append((float(detail[key]), u["conversation"]))
    head = [r for a in ABILITIES if a != "abstention" for r in rows.get(a, [])]
    return {
        "overall": _est(head),
        "abstention": _est(rows.get("abstention", [])),
        "by_ability": {a: _est(rows[a]) for a in ABILITIES if rows.get(a)},
        "event_ordering_tau_norm": _est(ordering["tau_norm"]),
        "event_ordering_tau_f1": _est(ordering["ordering"]),
        "not_graded": unparsed,
        "retrieval": retrieval_block(units),
    }


def beam_block(by_provider: dict[str, list[dict[str, Any]]], graded: bool,
               budget: int) -> dict[str, Any]:
    """Per provider: the judged figures (None without a judge) and the retrieval block,
    from the asks at the headline ``budget`` (a sweep asks at every budget)."""
    from nanobot_memory_adapters.harness.metrics import asks_at

    return {"note": NOTE, "graded": graded,
            "providers": {n: provider_block(asks_at(u, budget, budget))
                          for n, u in by_provider.items()}}


def print_table(results: dict[str, Any], title: str) -> None:
    from rich.table import Table

    from nanobot_memory_adapters.console import console
    from nanobot_memory_adapters.harness.estimates import ci_cell

    block = results["beam"]
    t = Table(title=title, title_justify="left")
    for head in ("provider", "nugget score", "abstention", "tau_norm", "turn any@5"):
        t.add_column(head, overflow="fold")
    for name, p in block["providers"].items():
        t.add_row(name, ci_cell(p.get("overall"), n=True), ci_cell(p.get("abstention")),
                  ci_cell(p.get("event_ordering_tau_norm")),
                  ci_cell(p["retrieval"]["turn_any@5"]))
    console.print(t)
    if not block["graded"]:
        console.print("BEAM grading (nugget score, tau_norm) needs --llm-base-url/"
                      "--llm-model (a judge)", highlight=False)
