"""LongMemEval's retrieval metrics, from what a provider returned and showed.

The benchmark (``src/retrieval/eval_utils.py`` upstream) scores a ranked list of
documents against the evidence: ``recall_any@k`` (some evidence in the top k),
``recall_all@k`` (all of it) and ``ndcg@k`` (binary relevance; upstream's discount:
rank 1 and rank 2 both count in full, rank i >= 2 (1-based) by ``1/log2(i)``, i.e.
``dcg = rel[0] + sum_{i>=1} rel[i]/log2(i+1)`` 0-based; ideal = every evidence document
first, discounted the same way). Session level: the evidence is ``answer_session_ids``;
turn level: the turns marked ``has_answer``. Its session-level score over turn rankings
widens k until k distinct sessions are in (``turn2session``); so do we, by ranking
distinct ids in order of first appearance.

A memory item is not a document: one item may come from several turns (a chunk, an
extracted fact). An item is mapped through its ``source_event_ids`` to the turns (and
sessions) it came from; an item that names no source takes a rank of its own and is
never relevant -- a provider that cannot say where its items came from scores n/a
(never a made-up 0) when none of its items can.

Two readings per ask:

- ``*_shown``: the items the provider actually put in the section at the run's equal
  token budget, in their order; k = everything shown.
- ``*@k`` (k = 1, 5, 10): the provider's own ranking (every item ``retrieve`` returned,
  before the budget cut) -- the figure a published "R@5" is comparable to.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

KS: tuple[int, ...] = (1, 5, 10)
LEVELS = ("session", "turn")
MEASURES = ("any", "all", "ndcg")


def _r(x: float) -> float:
    return round(x, 6)


def ranked_ids(items: Sequence[Sequence[str] | None], events: dict[str, str],
               level: str, evidence_turns: set[str] | None = None) -> tuple[list[str], int]:
    """Distinct turn (``Dn:i``) or session (``Dn``) ids in order of first appearance; an
    item with no known source is a rank of its own (``?k``). Also: items with a source.

    ``evidence_turns`` (LongMemEval): a session is keyed through its evidence turns only,
    as upstream's ``run_retrieval.py`` renames every other turn of an answer session
    ``noans_...``: such a turn ranks as a session of its own (``noans:Dn``) that is never
    relevant. A turn of a session without evidence keeps its session id (never relevant
    either)."""
    out: list[str] = []
    seen: set[str] = set()
    known = 0
    answer = {d.split(":", 1)[0] for d in evidence_turns or ()}
    for k, item in enumerate(items):
        dias = [events[e] for e in (item or []) if e in events]
        if not dias:
            out.append(f"?{k}")
            continue
        known += 1
        for d in dias:
            key = d if level == "turn" else d.split(":", 1)[0]
            if (level == "session" and evidence_turns is not None and key in answer
                    and d not in evidence_turns):
                key = f"noans:{key}"
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out, known


def _dcg(gains: Sequence[float]) -> float:
    """Upstream's DCG (LongMemEval ``eval_utils.dcg``): the first gain in full, gain i
    (0-based, i >= 1) over ``log2(i + 1)`` -- ranks 1 and 2 weigh the same."""
    return sum(g if i == 0 else g / math.log2(i + 1) for i, g in enumerate(gains))


def retrieval_scores(ranking: Sequence[str], relevant: set[str], k: int) -> dict[str, float]:
    """recall_any@k, recall_all@k and ndcg@k of one ranking (as the benchmark defines them)."""
    top = ranking[:k]
    got = [1.0 if r in relevant else 0.0 for r in top]
    dcg = _dcg(got)
    ideal = _dcg([1.0] * min(k, len(relevant)))
    return {
        "any": float(any(got)),
        "all": float(relevant <= set(top)),
        "ndcg": dcg / ideal if ideal else 0.0,
    }


def ask_scores(shown: Sequence[Sequence[str] | None], ranked: Sequence[Sequence[str] | None],
               events: dict[str, str], turn_evidence: Sequence[str],
               answer_sessions: Sequence[int], abstention: bool,
               readings: tuple[str, ...] = ("shown", "native"),
               session_via_evidence: bool = True) -> dict[str, float | None]:
    """One ask's LongMemEval retrieval metrics (flat keys ``<level>_<measure>_shown`` and
    ``<level>_<measure>@k``); a level without evidence (or an abstention question) has
    no keys; a list none of whose items names a source gives None.

    ``session_via_evidence`` (LongMemEval, the default): only an evidence turn gives its
    session credit (``ranked_ids``), and an answer session none of whose turns is marked
    ``has_answer`` is not relevant (upstream's ``noans``), so a question with answer
    sessions but no ``has_answer`` turn has no session-level keys. False (LoCoMo's ranked@k, as peer
    harnesses count it): any turn of an evidence session credits it."""
    out: dict[str, float | None] = {}
    if abstention:
        return out
    relevant = {"turn": set(turn_evidence), "session": {f"D{n}" for n in answer_sessions}}
    if session_via_evidence:  # upstream renames an answer session without one "noans"
        relevant["session"] &= {d.split(":", 1)[0] for d in turn_evidence}
    via = set(turn_evidence) if session_via_evidence else None
    for level in LEVELS:
        if not relevant[level]:
            continue
        for where, items in (("shown", shown), ("native", ranked)):
            if where not in readings:
                continue
            ranking, known = ranked_ids(items, events, level, via)
            blind = bool(items) and not known
            ks = [("_shown", len(ranking))] if where == "shown" else [(f"@{k}", k) for k in KS]
            for suffix, k in ks:
                scores = retrieval_scores(ranking, relevant[level], k)
                for m in MEASURES:
                    out[f"{level}_{m}{suffix}"] = None if blind else _r(scores[m])
    return out


def metric_names() -> list[str]:
    return [f"{lv}_{m}{s}" for lv in LEVELS for s in ("_shown", *(f"@{k}" for k in KS))
            for m in MEASURES]


def _estimate(values: list[float]) -> dict[str, Any] | None:
    from nanobot_memory_adapters.harness.estimates import estimate

    return estimate(values)  # one unit per question: resampled by question


def summarize(asks: list[dict[str, Any]]) -> dict[str, Any]:
    """Every metric overall and per question type, each a mean with its 95 % interval
    (Wilson for 0/1 values, bootstrap for ndcg); n/a metrics are left out, with a count."""
    def block(rows: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"questions": len(rows)}
        for name in metric_names():
            values = [r["lme"][name] for r in rows if r["lme"].get(name) is not None]
            blind = sum(1 for r in rows if name in r["lme"] and r["lme"][name] is None)
            out[name] = _estimate(values)
            if blind:
                out[f"{name}_unattributed"] = blind
        return out

    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for a in asks:
        by_type[a["question_type"]].append(a)
    return {"overall": block(asks),
            "by_type": {t: block(rows) for t, rows in sorted(by_type.items())}}


def accuracy(judged: list[dict[str, Any]]) -> dict[str, Any]:
    """QA accuracy (judge's yes = 1) over the answerable questions (the headline: a
    provider that stores nothing scores 0 there), per question type and, apart, for the
    abstention (``_abs``) questions, each with its 95 % interval; errors and unparsed
    verdicts are counted."""
    def block(rows: list[dict[str, Any]]) -> dict[str, Any]:
        scored = [float(r["verdict"]["score"]) for r in rows
                  if r["verdict"].get("score") is not None]
        return {"accuracy": _estimate(scored), "questions": len(rows),
                "not_graded": len(rows) - len(scored)}

    from nanobot_memory_adapters.harness.datasets.longmemeval import type_of

    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    abstention, answerable = [], []
    for j in judged:
        qtype, abs_ = type_of(int(j["category"]))
        by_type[qtype].append(j)
        (abstention if abs_ else answerable).append(j)
    return {"overall": block(answerable),
            "by_type": {t: block(rows) for t, rows in sorted(by_type.items())},
            "abstention": block(abstention)}


def asks_from_units(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The final asks of a provider's units, in unit order (what ``summarize`` takes)."""
    return [a for u in units for a in u["asks"] if a.get("lme") is not None]


def read_asks(path: str | Path, keep: Callable[[dict[str, Any]], bool]
              ) -> tuple[dict[str, dict[str, str]], list[dict[str, Any]]]:
    """From ``traces.jsonl`` alone: per unit, which turn each event id recorded (the
    ``record`` lines), and the ``ask`` lines ``keep`` accepts, in file order. What every
    recompute from traces (this module's, ranked_k's) reads."""
    events: dict[str, dict[str, str]] = defaultdict(dict)
    asks: list[dict[str, Any]] = []
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            kind = rec.get("kind")
            if kind == "record" and rec.get("event_id") and rec.get("dia_id"):
                events[rec.get("unit")][rec["event_id"]] = rec["dia_id"]
            elif kind == "ask" and keep(rec):
                asks.append(rec)
    return events, asks


def recompute_from_traces(path: str | Path, budget_tokens: int | None = None
                          ) -> dict[str, dict[str, Any]]:
    """The LongMemEval block per provider from ``traces.jsonl`` only: the record lines
    (which event recorded which turn) and the ask lines (shown and ranked sources, the
    turn and session evidence, the question type)."""
    events, every = read_asks(path, lambda rec: rec.get("benchmark") == "longmemeval")
    asks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in every:
        if budget_tokens is None or rec.get("budget_tokens", budget_tokens) == budget_tokens:
            asks[rec["provider"]].append(rec)
    out: dict[str, dict[str, Any]] = {}
    for provider, recs in asks.items():
        rows = [{"question_type": r["question_type"],
                 "lme": ask_scores(r.get("shown_sources") or [], r.get("ranked_sources") or [],
                                   events[r["unit"]], r["turn_evidence"],
                                   r["answer_sessions"], bool(r["abstention"]))}
                for r in recs]
        out[provider] = summarize(rows)
    return out


def lme_fields(q: Any, extra: dict[str, Any], events: dict[str, str]) -> dict[str, Any]:
    """For the unit's ask record, from the ask line's fields (as the recomputes from
    traces read them): a LongMemEval ask's type and retrieval metrics; any other ask's
    ranked retrieval at fixed k over the provider's own ranking (harness/ranked_k.py)."""
    if extra.get("benchmark") != "longmemeval":
        # BEAM: the turns source_chat_ids name (none: a stand-in, not scored, and said so)
        evidence = extra.get("turn_evidence", extra["evidence"])
        if not evidence:
            return {"ranked": None, "evidence_scored": False}
        return {"ranked": ask_scores([], extra["ranked_sources"], events, evidence,
                                     sorted({int(d.split(":")[0][1:]) for d in evidence}),
                                     False, readings=("native",), session_via_evidence=False),
                "evidence_scored": True}
    return {"question_type": q.question_type, "lme": ask_scores(
        extra["shown_sources"], extra["ranked_sources"], events, extra["turn_evidence"],
        extra["answer_sessions"], extra["abstention"])}
