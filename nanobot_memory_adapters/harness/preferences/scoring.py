"""Scores of behavioural test sessions: behaviour, recognition, exposure, aggregates.

- **Behaviour** (the headline): the first reply to the normal request acts on the current
  value, read by the test's value phrases (``lexicon.act_of``: current / other / both /
  none); **resolved**: it acted on it within the session's turns with the simulated user.
- **Recognition** (option tasks, exact): the chosen option satisfies the target
  preference; a wrong choice is classified (``stale``: a superseded value of the same
  attribute; ``wrong_context``: another context's value; ``violates``; ``neutral``;
  ``unparsed``: no option could be read from the reply).
- **Current-preference exposure** (judge-free, no model): the memory context holds a cue
  of the target preference (whole words, case-insensitive).
- **Stale exposure**: the context holds a cue of a superseded value on an item that has
  no end-of-validity mark (``valid=..<date>`` or ``expired=``).
- **Reversion** and **contamination** (``consistency.py``): rates over opportunities, so
  an agent that never acts on a remembered value has none (n/a), never a clean 0.

Every figure has its 95 % interval (``stats.mean_ci``) two ways: ``ci``, clustered by
persona (a persona's tests share one memory), and ``ci_by_attribute``, clustered by the
tested attribute (coffee order, language, travels with a dog...): the one that
generalises, since every persona has the same design and what varies between providers
is which attributes a memory handles. Both cluster from ``stats.MIN_CLUSTERS`` clusters
up (fewer: the tests unclustered) and are never narrower than Wilson on n for 0/1 scores.
``pairwise`` gives paired differences with verdicts (``stats.paired_difference``) the same
two ways. Per dimension (CS, PET, IQI), per test point, overall.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from typing import Any

from nanobot_memory_adapters.formatting import ended_validity
from nanobot_memory_adapters.harness.metrics import canonical_sha256
from nanobot_memory_adapters.harness.preferences.consistency import annotate
from nanobot_memory_adapters.harness.preferences.format import (
    DIMENSIONS,
    Persona,
    TestSession,
)
from nanobot_memory_adapters.harness.preferences.lexicon import has_any, memory_items
from nanobot_memory_adapters.stats import MIN_CLUSTERS, rounded

_PAREN = re.compile(r"\(([a-z])\)", re.I)
_LEAD = re.compile(r"^\s*\**\s*(?:option\s+|answer\s*:?\s*|choice\s*:?\s*)?([a-z])\s*[).:\]]",
                   re.I)
_NAMED = re.compile(r"\b(?:option|choice|answer|pick|choose|go with)\s*:?\s*\(?([a-z])\b\)?",
                    re.I)


def parse_choice(reply: str, test: TestSession) -> str | None:
    """The option the reply picks: "(b)", "b) ...", "option b", or one option's own text."""
    letters = {o.id for o in test.options}
    text = reply or ""
    for pattern in (_LEAD, _PAREN, _NAMED):
        for match in pattern.finditer(text):
            letter = match.group(1).lower()
            if letter in letters:
                return letter
    lowered = " ".join(text.lower().split())
    quoted = [o.id for o in test.options if " ".join(o.text.lower().split()) in lowered]
    return quoted[0] if len(quoted) == 1 else None


def judge_choice(choice: str | None, test: TestSession, persona: Persona) -> dict[str, Any]:
    if choice is None:
        return {"choice": None, "correct": False, "error": "unparsed"}
    option = next(o for o in test.options if o.id == choice)
    if test.target in option.satisfies:
        return {"choice": choice, "correct": True, "error": None}
    target = persona.preference(test.target)
    stale = {p.id for p in persona.superseded(target)}
    other = {p.id for p in persona.other_contexts(target)}
    if stale & set(option.satisfies):
        error = "stale"
    elif other & set(option.satisfies):
        error = "wrong_context"
    elif test.target in option.violates:
        error = "violates"
    else:
        error = "neutral"
    return {"choice": choice, "correct": False, "error": error}


def exposure(context: str, test: TestSession, persona: Persona) -> dict[str, Any]:
    target = persona.preference(test.target)
    shown = html.unescape(context or "")
    superseded = [p for p in persona.superseded(target) if p.cues]
    stale = None
    if superseded:
        stale = any(
            has_any(item, p.cues) and not ended_validity(item.split("\n", 1)[0])
            for item, _at in memory_items(context) for p in superseded
        )
    current = has_any(shown, target.cues) if target.cues else None  # n/a without cues
    return {"current": current, "stale": stale}


def _mean(values: list[float]) -> float | None:
    return rounded(sum(values) / len(values)) if values else None


def _ci(values: list[float], clusters: list[str | None]) -> dict[str, Any] | None:
    """A 95 % interval from the one statistics module, clustered from ``MIN_CLUSTERS``
    clusters up (None: the cluster is unknown for some test, e.g. an old checkpoint)."""
    if not values or any(c is None for c in clusters):
        return None
    from nanobot_memory_adapters.stats import mean_ci

    by = clusters if len(set(clusters)) >= MIN_CLUSTERS else None
    est = mean_ci(values, clusters=by)
    return {"value": rounded(est.value), "low": rounded(est.low), "high": rounded(est.high),
            "n": est.n, "n_clusters": est.n_clusters, "method": est.method}


def _binary(records: list[dict[str, Any]], get: Any
            ) -> tuple[list[float], list[str | None], list[str | None]]:
    """The score's 0/1 values with each test's persona and attribute."""
    values: list[float] = []
    personas: list[str | None] = []
    attributes: list[str | None] = []
    for r in records:
        v = get(r)
        if v is not None:
            values.append(1.0 if v else 0.0)
            personas.append(r["persona"])
            attributes.append(r.get("attribute"))
    return values, personas, attributes


def _agrees(r: dict[str, Any]) -> bool | None:
    judged = SCORES["judged_behaviour"](r)
    if judged is None or not r.get("behaviour"):
        return None
    return judged == r["behaviour"]["correct"]


SCORES: dict[str, Any] = {
    # the headline: the first reply to a normal request acts on the current value
    "behaviour": lambda r: (r.get("behaviour") or {}).get("correct"),
    # after the simulated user's turns: acting on the current value within max turns
    "resolved": lambda r: (r.get("behaviour") or {}).get("resolved"),
    # recognition: the multiple-choice task (options shown after recall)
    "recognition": lambda r: (r.get("outcome") or {}).get("correct")
    if r.get("outcome") else None,
    "current_exposure": lambda r: _exposure(r, "current"),
    "stale_exposure": lambda r: _exposure(r, "stale"),
    "judged_behaviour": lambda r: None if not r.get("verdict") or r["verdict"].get("score")
    is None else r["verdict"]["score"] >= 0.5,
    # across tests (``consistency.annotate``), over opportunities only (lower is better):
    # a reply that no longer acts on a value acted on at an earlier point...
    "reversion": lambda r: r.get("reversion"),
    # ...and one that acts on the value of another context
    "contamination": lambda r: r.get("contamination"),
}


def _exposure(record: dict[str, Any], key: str) -> bool | None:
    """A failed test (its record has an ``error``) is out of exposure as it is out of
    behaviour: its context is what a failed recall or agent left (often nothing), not what
    the memory shows, and counting it would read a model's failure as a memory's miss."""
    if record.get("error"):
        return None
    return record["exposure"][key]


def _block(records: list[dict[str, Any]]) -> dict[str, Any]:
    options = [r for r in records if r.get("outcome")]
    behaved = [r for r in records if r.get("behaviour")]
    stale = [v for r in records if (v := _exposure(r, "stale")) is not None]
    errors: dict[str, int] = defaultdict(int)
    for r in options:
        if r["outcome"]["error"]:
            errors[r["outcome"]["error"]] += 1
    acts: dict[str, int] = defaultdict(int)
    for r in behaved:
        acts[r["behaviour"]["first_act"]] += 1
    fixed = [r for r in behaved if r["behaviour"]["resolved"]]
    ci: dict[str, Any] = {}
    by_attribute: dict[str, Any] = {}
    for name, get in {**SCORES, "judge_agreement": _agrees}.items():
        values, personas, attributes = _binary(records, get)
        ci[name] = _ci(values, personas)
        by_attribute[name] = _ci(values, attributes)
    corrections = [float(r["behaviour"]["corrections"]) for r in fixed]
    ci["corrections"] = _ci(corrections, [r["persona"] for r in fixed])
    by_attribute["corrections"] = _ci(corrections, [r.get("attribute") for r in fixed])

    def value(name: str) -> float | None:
        return ci[name]["value"] if ci[name] else None

    return {
        "tests": len(records),
        "behaviour_tests": len(behaved),
        "behaviour": value("behaviour"),
        "acts": {k: acts.get(k, 0) for k in ("current", "other", "both", "none")},
        "resolved": value("resolved"),
        "mean_corrections_when_resolved": value("corrections"),
        "option_tasks": len(options),
        "accuracy": value("recognition"),
        "errors": dict(sorted(errors.items())),
        "current_exposure": value("current_exposure"),
        "stale_exposure": value("stale_exposure"),
        "stale_tests": len(stale),
        # scored tests (not failed) whose memory section was empty: a derived memory that
        # is empty in every test produced nothing, and its row is the model without memory
        "scored_tests": sum(1 for r in records if not r.get("error")),
        # None when a record predates the count (no ``context_tokens``): unknown, not 0
        "empty_memory": None if any("context_tokens" not in r for r in records
                                    if not r.get("error"))
        else sum(1 for r in records if not r.get("error") and r["context_tokens"] == 0),
        "query_leaks": sum(1 for r in records if r.get("query_leak")),
        "judged_behaviour": value("judged_behaviour"),
        "judge_agreement": value("judge_agreement"),
        "reversion": value("reversion"),
        "reversion_opportunities": sum(1 for r in records if r.get("reversion") is not None),
        "contamination": value("contamination"),
        "contamination_opportunities": sum(1 for r in records
                                           if r.get("contamination") is not None),
        "ci": ci,
        "ci_by_attribute": by_attribute,
    }


def provider_scores(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One provider's test records (all personas) -> behaviour, recognition and exposure
    blocks, reversion and contamination (``consistency``), each figure with its 95 %
    interval (``ci``)."""
    records = annotate(records)
    by_point: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_point[int(r["point"])].append(r)
    open_tasks = [r for r in records if r["kind"] == "open" and r.get("verdict")]
    scored = [r["verdict"]["score"] for r in open_tasks if r["verdict"].get("score") is not None]
    return {
        "overall": _block(records),
        "by_dimension": {d: _block([r for r in records if r["dimension"] == d])
                         for d in DIMENSIONS},
        "by_point": {str(p): _block(v) for p, v in sorted(by_point.items())},
        "open_tasks": {"count": len(open_tasks), "judged_accuracy": _mean(scored),
                       "note": "LLM judge against the rubric; reported apart"},
    }


PAIRED = ("behaviour", "resolved", "recognition", "current_exposure", "reversion",
          "contamination")


def _difference(va: list[float], vb: list[float], clusters: list[str | None],
                names: tuple[str, str]) -> dict[str, Any] | None:
    from nanobot_memory_adapters.stats import paired_difference

    if any(c is None for c in clusters):
        return None
    by = clusters if len(set(clusters)) >= MIN_CLUSTERS else None
    d = paired_difference(va, vb, clusters=by, names=names)
    return {"difference": rounded(d.value), "low": rounded(d.low), "high": rounded(d.high),
            "n": d.n, "n_clusters": d.n_clusters, "method": d.method,
            "mcnemar_p": rounded(d.p_value), "distinguishable": d.distinguishable,
            "verdict": d.verdict}


def pairwise(records: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """For each score and each pair of providers: the paired difference over the tests
    both have, clustered by persona (the row) and by attribute (``by_attribute``: the one
    that generalises), McNemar's exact p, and the verdict ("not distinguishable" when the
    interval covers 0 or McNemar's p is not below 0.05). Reversion and contamination are
    paired over the opportunities both providers had."""
    records = {name: annotate(rs) for name, rs in records.items()}
    names = list(records)
    out: dict[str, list[dict[str, Any]]] = {}
    for score in PAIRED:
        get = SCORES[score]
        rows = []
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                va = {(r["persona"], r["test_id"]): (get(r), r.get("attribute"))
                      for r in records[a]}
                vb = {(r["persona"], r["test_id"]): get(r) for r in records[b]}
                keys = [k for k in va if k in vb and va[k][0] is not None
                        and vb[k] is not None]
                if not keys:
                    continue
                xa = [1.0 if va[k][0] else 0.0 for k in keys]
                xb = [1.0 if vb[k] else 0.0 for k in keys]
                row = _difference(xa, xb, [k[0] for k in keys], (a, b))
                assert row is not None
                rows.append({"a": a, "b": b, **row, "by_attribute": _difference(
                    xa, xb, [va[k][1] for k in keys], (a, b))})
        if rows:
            out[score] = rows
    return out


def exposure_only(scores: dict[str, Any]) -> dict[str, Any]:
    """The judge-free, model-free part of the scores (what the metrics hash covers)."""
    def strip(block: dict[str, Any]) -> dict[str, Any]:
        return {k: block[k] for k in ("tests", "current_exposure", "stale_exposure",
                                      "stale_tests")}
    return {
        "overall": strip(scores["overall"]),
        "by_dimension": {d: strip(b) for d, b in scores["by_dimension"].items()},
        "by_point": {p: strip(b) for p, b in scores["by_point"].items()},
    }


def exposure_sha256(providers: dict[str, dict[str, Any]]) -> str:
    return canonical_sha256({n: exposure_only(s) for n, s in providers.items()})
