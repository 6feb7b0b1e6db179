"""Judge-free metrics: evidence recall, context tokens, latencies, failures.

Four ways to ask "did the context show the evidence?", each able to see a different kind
of memory (``ProviderInfo.memory_form`` says which applies to whom):

- **Turn recall** (data README): the fraction of a question's evidence turns whose text is
  present in the context. Right for providers that show turns verbatim; a provider that
  shows what it *derived* from turns (extracted facts, summaries) reads ~0 here by
  construction, whatever it stored.
- **Session recall**: the fraction of the evidence sessions (``D<s>:``) the context shows
  a turn of — an evidence turn of that session, or a *distinctive* turn of it (long
  enough and found in no other session).
- **Provenance recall**: the fraction of evidence turns that an item shown whole in the
  context derives from, by the backend's own provenance (``RetrievedItem.
  source_event_ids``: mem0's add metadata, Graphiti's source episodes, Honcho's message
  metadata, MemOS's ``info``). Sees paraphrase. A provider that cannot say where any shown
  item came from reads ``None`` (n/a), never 0; ``provenance_coverage`` is the share of
  shown items that could say, ``sources_per_item`` how many events one item claims (an
  item derived from a batch of ten turns credits all ten, so read the two together).
- **Answer recall** (categories 1-4): the normalized gold answer is contained in the
  normalized context (lower case, punctuation as spaces; a gold date such as "7 May 2023"
  also matches its ISO form 2023-05-07, the form context labels use). Sees extracted
  facts that keep the answer's words; misses an answer the context implies.

"Present" (turn and session level) compares normalized text: the context is
HTML-unescaped (formatting escapes memory text) and whitespace is collapsed on both
sides; case is kept. A turn cut short by the budget is not present.

Everything that is timing (latencies, ingest time, readiness waits) lives under a
``timing`` key so ``metrics_sha256`` can cover everything else: two runs of the same
command must give the same hash.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.formatting import section_body
from nanobot_memory_adapters.stats import percentile

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


_NON_WORD = re.compile(r"[^0-9a-z]+")
_DIGIT_LETTER = re.compile(r"(?<=[0-9])(?=[a-z])|(?<=[a-z])(?=[0-9])")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_DAY_MONTH_YEAR = re.compile(r"^(\d{1,2}) ([a-z]+),? (\d{4})$")
_MONTH_DAY_YEAR = re.compile(r"^([a-z]+) (\d{1,2}),? (\d{4})$")
_MONTH_YEAR = re.compile(r"^([a-z]+),? (\d{4})$")


def normalize_answer(text: str) -> str:
    """Lower case, HTML-unescaped, every run of non-alphanumerics one space, digits and
    letters apart ("2023-05-07T13:56" -> "2023 05 07 t 13 56")."""
    lowered = _NON_WORD.sub(" ", html.unescape(text or "").lower())
    return " ".join(_DIGIT_LETTER.sub(" ", lowered).split())


def answer_forms(gold: object) -> list[str]:
    """The normalized gold answer, plus its ISO form when the whole answer is a date."""
    text = normalize_answer(str(gold)) if gold is not None else ""
    if not text:
        return []
    forms = [text]
    plain = " ".join(str(gold).lower().replace(",", " ").split())
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy"),
                           (_MONTH_YEAR, "my")):
        match = pattern.match(plain)
        if not match:
            continue
        parts = dict(zip(order, match.groups(), strict=True))
        if parts["m"] not in _MONTHS:
            continue
        month = _MONTHS.index(parts["m"]) + 1
        iso = f"{parts['y']}-{month:02d}" + (f"-{int(parts['d']):02d}" if "d" in parts else "")
        forms.append(normalize_answer(iso))
    return forms


def context_answer_text(context: str) -> str:
    """A formatted context as answer recall reads it: its body (not the frame, whose
    ``backend="no_memory_named"`` would hold the gold "no"), ``normalize_answer``-ed."""
    return normalize_answer(section_body(context))


def answer_present(gold: object, context_answer_norm: str) -> bool:
    """Whether the gold answer appears (whole words) in an ``normalize_answer``-ed context."""
    padded = f" {context_answer_norm} "
    return any(f" {form} " in padded for form in answer_forms(gold))


def provenance_counts(
    evidence: list[str], shown_sources: list[list[str] | None], dia_of_event: dict[str, str]
) -> dict[str, int]:
    """Evidence turns a shown item derives from, and how many shown items could say."""
    derived: set[str] = set()
    known = sources = 0
    for item in shown_sources:
        if item is None:
            continue
        known += 1
        sources += len(item)
        derived.update(dia_of_event.get(e, "") for e in item)
    return {
        "prov_hits": sum(1 for d in evidence if d in derived),
        "prov_items": len(shown_sources),
        "prov_items_known": known,
        "prov_sources": sources,
    }


def session_of(dia_id: str) -> int:
    """The session number of a LoCoMo turn id: ``"D12:3"`` -> 12."""
    return int(dia_id[1:].split(":", 1)[0])




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


def stored_nothing_summary(units: list[dict[str, Any]]) -> dict[str, Any]:
    """``events_stored_nothing``: accepted writes whose backend kept nothing new from the
    event (mem0's extraction found no fact), beside ``events_recorded``; left out when a
    unit predates the count (unknown, not 0)."""
    if not units or any(u.get("stored_nothing") is None for u in units):
        return {}
    return {"events_stored_nothing": sum(u["stored_nothing"] for u in units)}


def recall_block(asks: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(asks)
    items = sum(a.get("prov_items", 0) for a in asks)
    known = sum(a.get("prov_items_known", 0) for a in asks)
    answered = [a for a in asks if a.get("answer_hit") is not None]
    provenance = None
    if n and not (items and not known):  # shown items that could not say: n/a, never 0
        provenance = _r(sum(a.get("prov_hits", 0) / a["n_evidence"] for a in asks) / n)
    return {
        "count": n,
        "turn": _r(sum(a["turn_recall"] for a in asks) / n) if n else None,
        "session": _r(sum(a["session_recall"] for a in asks) / n) if n else None,
        "provenance": provenance,
        "answer": _r(sum(bool(a["answer_hit"]) for a in answered) / len(answered))
        if answered else None,
        "answer_count": len(answered),
    }


def provenance_summary(asks: list[dict[str, Any]]) -> dict[str, Any]:
    items = sum(a.get("prov_items", 0) for a in asks)
    known = sum(a.get("prov_items_known", 0) for a in asks)
    sources = sum(a.get("prov_sources", 0) for a in asks)
    return {
        "shown_items": items,
        "coverage": _r(known / items) if items else None,
        "sources_per_item": _r(sources / known) if known else None,
    }


APPLICABILITY: dict[str, dict[str, str]] = {
    "verbatim": {
        "turn": "applies: items show recorded turns verbatim",
        "session": "applies: a session counts when one of its turns is shown",
        "provenance": "applies: items name the turns they are",
        "answer": "applies",
    },
    "derived": {
        "turn": "not comparable: items show what the backend derived (extracted facts, "
        "summaries), so turn text rarely survives and turn recall reads ~0 by construction",
        "session": "not comparable: a session counts only when one of its turns is shown "
        "verbatim, which derived items rarely do (~0 by construction, as turn recall)",
        "provenance": "applies when the backend keeps provenance (see coverage; n/a if not)",
        "answer": "applies: sees derived facts that keep the answer's words",
    },
    "mixed": {
        "turn": "partial: only the verbatim part (messages) can match",
        "session": "partial: only the verbatim part (messages) can match",
        "provenance": "partial: derived parts without provenance lower coverage",
        "answer": "applies",
    },
    "none": {
        "turn": "reads 0 by design: nothing recorded is shown",
        "session": "reads 0 by design: nothing recorded is shown",
        "provenance": "reads 0 by design: nothing recorded is shown",
        "answer": "reads 0 by design unless the fixed text happens to contain answers",
    },
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
    ingested = sum(u.get("ingest_tokens", 0) for u in units)
    ingest_s = sum(u["ingest_s"] for u in units)
    return {
        "provider": provider,
        "conversations": [u["conversation"] for u in units],
        "asks": len(asks),
        "questions": len({a["qid"] for a in asks}),
        "events_recorded": sum(u["events"] for u in units),
        **stored_nothing_summary(units),
        "ingest_mode": sorted({u["ingest_mode"] for u in units}),
        "recall": recall_summary(asks),
        "provenance": provenance_summary(asks),
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
            # with a judge only (a run without one keeps its old shape and hash): answer
            # or judge calls that raised (a timeout, a refused connection), not answers
            # the judge could not grade
            **({"judge": sum(1 for u in units for j in u["judged"]
                             if j["verdict"].get("label") == "error")}
               if any(u.get("judged") for u in units) else {}),
        },
        "gate_probes": sum(u["gate_probes"] for u in units),
        TIMING_KEY: {
            "retrieve_latency_ms": _dist(retrieve_lat),
            "record_latency_ms": _dist(record_lat),
            "record_latency_per_event_ms": _dist(
                [x for u in units for x in u.get("record_latency_per_event_ms", [])]
            ),
            "ingest_s": _r(sum(u["ingest_s"] for u in units)),
            # of which the provider's ingest_lookahead (where it has one)
            **({"ingest_lookahead_s": _r(sum(u.get("lookahead_s", 0.0) for u in units))}
               if any("lookahead_s" in u for u in units) else {}),
            # throughput: tokens of the turns sent over the time spent recording them
            # (summed over units, so per worker); timing, so outside metrics_sha256
            "ingest_tokens": ingested,
            "ingest_tokens_per_s": _r(ingested / ingest_s) if ingest_s > 0 else None,
            "readiness_wait_s": {
                "waits": len(waits),
                "total": _r(sum(w["waited_s"] for w in waits)),
                "max": _r(max((w["waited_s"] for w in waits), default=0.0)),
            },
            "unit_wall_s": _r(sum(u.get("wall_s", 0.0) for u in units)),
            # process CPU per unit (units run in one attempt only): what a run costs
            **({"unit_cpu_s": [u["cpu_s"] for u in units if "cpu_s" in u]}
               if any("cpu_s" in u for u in units) else {}),
            # units an interrupted run resumed after these sessions (how, not what: unhashed)
            "resumed_after_sessions": {u["conversation"]: u["resumed_after_sessions"]
                                       for u in units if u.get("resumed_after_sessions")},
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
    """Hash of the judge-free, non-timing metrics (same command twice -> same hash); the
    judge's failure count is the judge's, so it stays out like the judged figures."""
    judge_free = {
        name: {**m, "failures": {k: v for k, v in m["failures"].items() if k != "judge"}}
        if isinstance(m, dict) and isinstance(m.get("failures"), dict) else m
        for name, m in providers.items()
    }
    return canonical_sha256(strip_timing(judge_free))


# -- recomputation from traces alone --------------------------------------------------


def asks_at(units: list[dict[str, Any]], budget: int, headline: int) -> list[dict[str, Any]]:
    """The units with only the asks made at ``budget`` (asks of a one-budget run carry no
    budget: they are the headline's)."""
    return [{**u, "asks": [a for a in u["asks"] if a.get("budget", headline) == budget]}
            for u in units]


def score_traces(
    path: str | Path, budget_tokens: int | None = None
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, tuple[int, str]]]]:
    """Every ask's recall scores per provider, from ``traces.jsonl`` only (in a budget
    sweep, the asks at ``budget_tokens``; None: every ask), and each conversation's turns
    (``dia_id -> (session, text)``, from the record lines).

    Uses the ``record`` lines (turn text, session, distinctive flag, which event recorded
    which turn) and the ``ask`` lines (question, evidence text, gold answer, the sources of
    the items shown, and the context or the hash of a context given earlier in the unit).
    """
    turns: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    dialogue: dict[str, dict[str, tuple[int, str]]] = defaultdict(dict)
    events: dict[str, dict[str, str]] = defaultdict(dict)
    contexts: dict[str, dict[str, str]] = defaultdict(dict)
    asks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with Path(path).open(encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for rec in lines:
        kind = rec.get("kind")
        unit = rec.get("unit")
        if kind == "record":
            if rec.get("event_id") and rec.get("dia_id"):
                events[unit][rec["event_id"]] = rec["dia_id"]
            if rec.get("speaker_copy", 0) == 0 and rec.get("dia_id"):
                dialogue[rec.get("conversation") or ""][rec["dia_id"]] = (
                    int(rec["session"]), rec.get("text") or "")
            if rec.get("distinctive") and rec.get("speaker_copy", 0) == 0:
                turns[unit][int(rec["session"])].append(rec["text"])
        elif kind == "ask":
            if "context" in rec:
                contexts[unit][rec["context_sha256"]] = rec["context"]
            at = rec.get("budget_tokens", budget_tokens)
            if budget_tokens is None or at == budget_tokens:
                asks[rec["provider"]].append(rec)
    out: dict[str, list[dict[str, Any]]] = {}
    for provider, recs in asks.items():
        scored = []
        for rec in recs:
            unit = rec["unit"]
            raw = contexts[unit].get(rec.get("context_sha256") or "", "")
            ctx = normalize_text(raw)
            ev = rec["evidence_text"]
            sessions = sorted({session_of(d) for d in ev})
            answer = None
            if rec.get("answer_applicable"):
                answer = answer_present(rec.get("gold"), context_answer_text(raw))
            scored.append(
                {
                    "conversation": rec.get("conversation") or "",
                    "qid": rec.get("question_id"),
                    "point": rec.get("point"),
                    "gold": rec.get("gold"),
                    "evidence": list(ev),
                    "tokens": rec.get("context_tokens") or 0,
                    "category": rec["category"],
                    "n_evidence": len(ev),
                    "turn_recall": turn_hits(ev, ctx) / len(ev),
                    "session_recall": session_hits(sessions, ev, turns[unit], ctx) / len(sessions),
                    "answer_hit": answer,
                    **provenance_counts(list(ev), rec.get("shown_sources") or [], events[unit]),
                }
            )
        out[provider] = scored
    return out, dict(dialogue)


def recompute_from_traces(
    path: str | Path, budget_tokens: int | None = None
) -> dict[str, dict[str, Any]]:
    """Every recall metric per provider, overall and per category, from ``traces.jsonl``
    only (``score_traces`` scores each ask)."""
    scored, _ = score_traces(path, budget_tokens)
    return {provider: recall_summary(asks) for provider, asks in scored.items()}


def kendall_tau(a: list[float], b: list[float]) -> float | None:
    """Kendall's tau-b of two paired lists (None when fewer than two pairs or no order)."""
    pairs = list(zip(a, b, strict=True))
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(pairs)):
        for j in range(i + 1, len(pairs)):
            da, db = pairs[i][0] - pairs[j][0], pairs[i][1] - pairs[j][1]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    n_a = concordant + discordant + ties_a
    n_b = concordant + discordant + ties_b
    if not n_a or not n_b:
        return None
    return _r((concordant - discordant) / math.sqrt(n_a * n_b))
