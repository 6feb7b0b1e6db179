"""Judge-free metrics: evidence recall, context tokens, latencies, failures.

Evidence recall (data README): the fraction of a question's evidence turns whose text is
present in the memory context the provider returned for it. Session level: the fraction
of the question's evidence sessions (``D<s>:``) the context shows a turn of — an
evidence turn of that session, or a *distinctive* turn of it (long enough and found in no
other session, so the match cannot come from elsewhere).

"Present" compares normalized text: the context is HTML-unescaped (formatting escapes
memory text) and whitespace is collapsed on both sides; case is kept. A turn cut short by
the budget is not present.

Everything that is timing (latencies, ingest time, readiness waits) lives under a
``timing`` key so ``metrics_sha256`` can cover everything else: two runs of the same
command must give the same hash.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TIMING_KEY = "timing"
_ROUND = 6


def normalize_text(text: str) -> str:
    return " ".join(html.unescape(text or "").split())


def present(turn_text: str, context_norm: str) -> bool:
    needle = normalize_text(turn_text)
    return bool(needle) and needle in context_norm


def turn_hits(evidence_text: dict[str, str], context_norm: str) -> int:
    return sum(1 for text in evidence_text.values() if present(text, context_norm))


def session_hits(
    evidence_sessions: Iterable[int],
    evidence_text: dict[str, str],
    session_turns: dict[int, list[str]],
    context_norm: str,
) -> int:
    """Evidence sessions shown by an evidence turn or a distinctive turn of theirs."""
    hits = 0
    for s in evidence_sessions:
        own = [t for d, t in evidence_text.items() if session_of(d) == s]
        if any(present(t, context_norm) for t in [*own, *session_turns.get(s, [])]):
            hits += 1
    return hits


def session_of(dia_id: str) -> int:
    """The session number of a LoCoMo turn id: ``"D12:3"`` -> 12."""
    return int(dia_id[1:].split(":", 1)[0])


def percentile(values: list[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    data = sorted(values)
    k = (len(data) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return data[lo]
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, _ROUND)


def _dist(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": _r(percentile(values, 50)),
        "p95": _r(percentile(values, 95)),
        "mean": _r(sum(values) / len(values)) if values else None,
        "max": _r(max(values)) if values else None,
    }


def recall_block(asks: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(asks)
    return {
        "count": n,
        "turn": _r(sum(a["turn_recall"] for a in asks) / n) if n else None,
        "session": _r(sum(a["session_recall"] for a in asks) / n) if n else None,
    }


def recall_summary(asks: list[dict[str, Any]]) -> dict[str, Any]:
    by_cat: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for a in asks:
        by_cat[int(a["category"])].append(a)
    return {
        "overall": recall_block(asks),
        "categories_1_4": recall_block([a for a in asks if 1 <= int(a["category"]) <= 4]),
        "by_category": {str(c): recall_block(v) for c, v in sorted(by_cat.items())},
    }


def provider_metrics(
    provider: str, units: list[dict[str, Any]], budget_tokens: int
) -> dict[str, Any]:
    """Aggregate one provider's finished units (provider x conversation)."""
    asks = [a for u in units for a in u["asks"]]
    final = [a for a in asks if a.get("is_final")]
    by_point: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for a in asks:
        by_point[int(a["point"])].append(a)
    tokens = [float(a["tokens"]) for a in asks]
    retrieve_lat = [a["latency_ms"] for a in asks if a.get("latency_ms") is not None]
    record_lat = [x for u in units for x in u["record_latency_ms"]]
    waits = [w for u in units for w in u["readiness"]]
    return {
        "provider": provider,
        "conversations": [u["conversation"] for u in units],
        "asks": len(asks),
        "questions": len({a["qid"] for a in asks}),
        "events_recorded": sum(u["events"] for u in units),
        "ingest_mode": sorted({u["ingest_mode"] for u in units}),
        "recall": recall_summary(asks),
        "final_point": recall_summary(final),
        "by_point": {str(p): recall_block(v) for p, v in sorted(by_point.items())},
        "context_tokens": {
            "budget": budget_tokens,
            "mean": _r(sum(tokens) / len(tokens)) if tokens else None,
            "p50": _r(percentile(tokens, 50)),
            "p95": _r(percentile(tokens, 95)),
            "max": int(max(tokens)) if tokens else None,
            "over_budget": sum(1 for a in asks if a["budget_violation"]),
        },
        "failures": {
            "record": sum(u["record_failures"] for u in units),
            "retrieve": sum(1 for a in asks if a.get("failed")),
            "set_mode": sum(u["mode_failures"] for u in units),
            "gate_violations": sum(u["gate_violations"] for u in units),
            "readiness_pending": sum(1 for w in waits if w["status"] == "pending"),
            "reset": sum(1 for u in units if u.get("reset_status") == "failed"),
        },
        "gate_probes": sum(u["gate_probes"] for u in units),
        TIMING_KEY: {
            "retrieve_latency_ms": _dist(retrieve_lat),
            "record_latency_ms": _dist(record_lat),
            "record_latency_per_event_ms": _dist(
                [x for u in units for x in u.get("record_latency_per_event_ms", [])]
            ),
            "ingest_s": _r(sum(u["ingest_s"] for u in units)),
            "readiness_wait_s": {
                "waits": len(waits),
                "total": _r(sum(w["waited_s"] for w in waits)),
                "max": _r(max((w["waited_s"] for w in waits), default=0.0)),
            },
            "unit_wall_s": _r(sum(u.get("wall_s", 0.0) for u in units)),
        },
    }


def strip_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_timing(v) for k, v in value.items() if k != TIMING_KEY}
    if isinstance(value, list):
        return [strip_timing(v) for v in value]
    return value


def canonical_sha256(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def metrics_sha256(providers: dict[str, Any]) -> str:
    """Hash of the judge-free, non-timing metrics (same command twice -> same hash)."""
    return canonical_sha256(strip_timing(providers))


# -- recomputation from traces alone --------------------------------------------------


def recompute_from_traces(path: str | Path) -> dict[str, dict[str, Any]]:
    """Recall per provider, overall and per category, from ``traces.jsonl`` only.

    Uses the ``record`` lines (turn text, session, distinctive flag) and the ``ask`` lines
    (question, evidence text, context or the hash of a context given earlier in the unit).
    """
    turns: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    contexts: dict[str, dict[str, str]] = defaultdict(dict)
    asks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with Path(path).open(encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for rec in lines:
        kind = rec.get("kind")
        unit = rec.get("unit")
        if kind == "record" and rec.get("distinctive"):
            turns[unit][int(rec["session"])].append(rec["text"])
        elif kind == "ask":
            if "context" in rec:
                contexts[unit][rec["context_sha256"]] = rec["context"]
            asks[rec["provider"]].append(rec)
    out: dict[str, dict[str, Any]] = {}
    for provider, recs in asks.items():
        scored = []
        for rec in recs:
            unit = rec["unit"]
            ctx = normalize_text(contexts[unit].get(rec.get("context_sha256") or "", ""))
            ev = rec["evidence_text"]
            sessions = sorted({session_of(d) for d in ev})
            scored.append(
                {
                    "category": rec["category"],
                    "turn_recall": turn_hits(ev, ctx) / len(ev),
                    "session_recall": session_hits(sessions, ev, turns[unit], ctx) / len(sessions),
                }
            )
        out[provider] = recall_summary(scored)
    return out
