"""Scores of behavioural test sessions: option choices, exposure, aggregates.

- **Option tasks** are scored exactly: the chosen option satisfies the target preference
  (correct) or not; a wrong choice is classified (``stale``: it satisfies a superseded
  value of the same attribute; ``wrong_context``: the value of another context;
  ``violates``; ``neutral``; ``unparsed``: no option could be read from the reply).
- **Current-preference exposure** (judge-free, no model): the memory context nanobot got
  holds a cue of the target preference (its words, or the telling details of an implied
  one), whole words, case-insensitive.
- **Stale exposure**: the context holds a cue of a superseded value on an item that has
  no end-of-validity mark (``valid=..<date>`` or ``expired=``): an old preference shown as
  if it still held. Only defined for tests whose target replaced an earlier value.

Accuracy is reported per dimension (CS, PET, IQI), per test point and overall.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from typing import Any

from nanobot_memory_adapters.formatting import ended_validity
from nanobot_memory_adapters.harness.metrics import canonical_sha256
from nanobot_memory_adapters.harness.preferences.format import (
    DIMENSIONS,
    Persona,
    TestSession,
)
from nanobot_memory_adapters.harness.preferences.generator import cue_pattern

_ROUND = 6
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


def _items(context: str) -> list[str]:
    """The context's items: a ``- `` line with its indented continuation lines."""
    items: list[str] = []
    for line in html.unescape(context or "").splitlines():
        if line.startswith("  ") and items:
            items[-1] += "\n" + line
        elif line.startswith("- "):
            items.append(line)
    return items


def _has_cue(text: str, cues: list[str]) -> bool:
    return any(cue_pattern(c).search(text) for c in cues)


def exposure(context: str, test: TestSession, persona: Persona) -> dict[str, Any]:
    target = persona.preference(test.target)
    shown = html.unescape(context or "")
    superseded = [p for p in persona.superseded(target) if p.cues]
    stale = None
    if superseded:
        stale = any(
            _has_cue(item, p.cues) and not ended_validity(item.split("\n", 1)[0])
            for item in _items(context) for p in superseded
        )
    current = _has_cue(shown, target.cues) if target.cues else None  # n/a without cues
    return {"current": current, "stale": stale}


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), _ROUND) if values else None


def _block(records: list[dict[str, Any]]) -> dict[str, Any]:
    options = [r for r in records if r["kind"] == "option" and r.get("outcome")]
    stale = [r["exposure"]["stale"] for r in records if r["exposure"]["stale"] is not None]
    current = [r["exposure"]["current"] for r in records if r["exposure"]["current"] is not None]
    errors: dict[str, int] = defaultdict(int)
    for r in options:
        if r["outcome"]["error"]:
            errors[r["outcome"]["error"]] += 1
    return {
        "tests": len(records),
        "option_tasks": len(options),
        "accuracy": _mean([1.0 if r["outcome"]["correct"] else 0.0 for r in options]),
        "errors": dict(sorted(errors.items())),
        "current_exposure": _mean([1.0 if c else 0.0 for c in current]),
        "stale_exposure": _mean([1.0 if s else 0.0 for s in stale]),
        "stale_tests": len(stale),
    }


def provider_scores(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One provider's test records (all personas) -> accuracy and exposure blocks."""
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
