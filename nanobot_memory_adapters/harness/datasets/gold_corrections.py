"""Audited LoCoMo: gold-answer corrections in the locomo-audit project's published layout.

The audit (github.com/dial481/locomo-audit, CC BY-NC 4.0; nothing of it is shipped here)
publishes ``errors.json`` (all conversations) and ``audit/errors_conv_N.json`` (one each):
a JSON list of entries ``{question_id, question, golden_answer, category, error_type,
cited_evidence, correct_evidence, reasoning, correct_answer}``. ``question_id`` is
``locomo_<i>_qa<j>``: ``i`` the conversation's position in upstream ``locomo10.json``
(``AUDIT_SAMPLE_IDS``), ``j`` the question's index in that conversation's ``qa`` list
(category 5 included; checked: all 156 entries name the question at that index).

A correction applies when its conversation is in the run, the question at that index is
placed, its text equals the entry's ``question`` and its gold equals ``golden_answer``;
it then replaces the gold answer with ``correct_answer`` and the evidence with
``correct_evidence`` (``WRONG_CITATION`` entries keep the answer, which the audit finds
right, and fix the evidence, which turn and provenance recall read). Every other entry
is **not matched**: counted, named with its reason in the manifest and on the terminal,
never dropped in silence.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.datasets.locomo import (
    Conversation,
    DatasetError,
    EvidenceStats,
    file_sha256,
    parse_evidence,
)
from nanobot_memory_adapters.json_files import JsonFileError, load_json_file

# locomo_<i> -> sample_id, as upstream locomo10.json orders its samples (and the audit's
# own table "All Errors by Conversation" states).
AUDIT_SAMPLE_IDS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44",
                    "conv-47", "conv-48", "conv-49", "conv-50")
LAYOUT = ("locomo-audit errors.json / audit/errors_conv_N.json "
          "(github.com/dial481/locomo-audit)")
CITATION_ONLY = "WRONG_CITATION"
_QID = re.compile(r"^locomo_(\d+)_qa(\d+)$")
_REQUIRED = ("question_id", "question", "correct_answer")
MAX_NAMED = 20  # unmatched entries named in the manifest (all are counted)


@dataclass(frozen=True)
class Correction:
    question_id: str
    sample_id: str | None  # None: a conversation index outside locomo10.json
    index: int
    question: str
    golden_answer: str | None
    correct_answer: str
    correct_evidence: tuple[str, ...]
    error_type: str


def _same(a: object, b: object) -> bool:
    return " ".join(str(a).split()) == " ".join(str(b).split())


# what the user sees in the file, not Python's names for it
_JSON_NAMES: dict[type, str] = {dict: "object", str: "string", int: "number", float: "number",
                                bool: "true/false value", type(None): "null"}


def load_corrections(path: str | Path) -> list[Correction]:
    """Read a corrections file; anything that is not the audit's layout is one
    ``DatasetError`` naming the file, the entry and the field."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise DatasetError(f"--gold-corrections {str(p)!r}: no such file; pass the "
                           "locomo-audit errors.json (see docs/harness.md)")
    try:
        data = load_json_file(p, what="corrections file",
                              fix="expected the locomo-audit errors.json layout")
    except JsonFileError as exc:
        raise DatasetError(str(exc)) from None
    if not isinstance(data, list):
        got = _JSON_NAMES.get(type(data), "value")
        raise DatasetError(f"{p}: expected a JSON list of corrections (locomo-audit "
                           f"errors.json layout), got a JSON {got}")
    out = []
    for n, e in enumerate(data):
        if not isinstance(e, dict):
            raise DatasetError(f"{p}: entry #{n} is not an object")
        missing = [k for k in _REQUIRED if e.get(k) in (None, "")]
        if missing:
            raise DatasetError(f"{p}: entry #{n} has no {', '.join(missing)} (the "
                               "locomo-audit layout has question_id, question, correct_answer)")
        m = _QID.match(str(e["question_id"]))
        if m is None:
            raise DatasetError(f"{p}: entry #{n}: question_id {e['question_id']!r} is not "
                               "locomo_<conversation>_qa<index>")
        i, j = int(m.group(1)), int(m.group(2))
        evidence = e.get("correct_evidence") or []
        if not isinstance(evidence, list):
            raise DatasetError(f"{p}: entry #{n}: correct_evidence is not a list of turn ids")
        out.append(Correction(
            question_id=str(e["question_id"]),
            sample_id=AUDIT_SAMPLE_IDS[i] if i < len(AUDIT_SAMPLE_IDS) else None,
            index=j, question=str(e["question"]),
            golden_answer=None if e.get("golden_answer") is None else str(e["golden_answer"]),
            correct_answer=str(e["correct_answer"]),
            correct_evidence=tuple(str(x) for x in evidence),
            error_type=str(e.get("error_type") or "unspecified"),
        ))
    return out


def apply_corrections(
    convs: list[Conversation], path: str | Path
) -> tuple[list[Conversation], dict[str, Any]]:
    """The conversations with the matching corrections applied, and the manifest record."""
    corrections = load_corrections(path)
    by_id = {c.sample_id: c for c in convs}
    changed: dict[str, dict[int, Any]] = {}
    unmatched: list[dict[str, str]] = []
    answers = evidence_fixed = 0
    applied: Counter[str] = Counter()
    for c in corrections:
        conv = by_id.get(c.sample_id) if c.sample_id else None
        reason = None
        q = None
        if c.sample_id is None:
            reason = "conversation index is not in locomo10.json"
        elif conv is None:
            reason = f"{c.sample_id} is not in this run"
        else:
            q = next((x for x in changed.get(c.sample_id, {}).values() if x.index == c.index),
                     None) or next((x for x in conv.questions if x.index == c.index), None)
            if q is None:
                reason = f"{c.sample_id} has no placed question #{c.index}"
            elif not _same(q.question, c.question):
                reason = f"question #{c.index} of {c.sample_id} has other text"
            elif c.golden_answer is not None and not _same(q.answer, c.golden_answer):
                reason = "gold answer differs (another release, or corrected twice)"
        if reason is not None or q is None or conv is None:
            unmatched.append({"question_id": c.question_id, "reason": reason or "?"})
            continue
        new = q
        # WRONG_CITATION: the audit finds the answer right; its correct_answer often adds
        # a remark ("… (answer is correct, citation is wrong)"), so only evidence changes
        if c.error_type != CITATION_ONLY and (
                c.golden_answer is None or not _same(c.correct_answer, c.golden_answer)):
            new = replace(new, answer=c.correct_answer)
            answers += 1
        if c.correct_evidence and set(c.correct_evidence) != set(q.evidence):
            known = {t.dia_id for s in conv.sessions for t in s.turns}
            parsed = parse_evidence(list(c.correct_evidence), known, EvidenceStats(), q.qid)
            if parsed and set(parsed) != set(q.evidence):
                new = replace(new, evidence=tuple(parsed))
                evidence_fixed += 1
        changed.setdefault(conv.sample_id, {})[q.index] = new
        applied[c.error_type] += 1
    out = []
    for conv in convs:
        fix = changed.get(conv.sample_id)
        if fix:
            conv = replace(conv, questions=tuple(fix.get(q.index, q) for q in conv.questions))
        out.append(conv)
    record = {
        "file": Path(path).name,
        "sha256": file_sha256(path),
        "layout": LAYOUT,
        "entries": len(corrections),
        "applied": sum(applied.values()),
        "applied_by_error_type": dict(sorted(applied.items())),
        "answers_changed": answers,
        "evidence_changed": evidence_fixed,
        "not_matched": len(unmatched),
        "not_matched_reasons": dict(sorted(Counter(u["reason"] for u in unmatched).items())),
        "not_matched_examples": unmatched[:MAX_NAMED],
    }
    return out, record


def summary_line(record: dict[str, Any]) -> str:
    """One terminal line: what was applied and what matched nothing."""
    line = (f"gold corrections {record['file']}: {record['applied']} of {record['entries']} "
            f"applied ({record['answers_changed']} answers, {record['evidence_changed']} "
            f"evidence lists)")
    if record["not_matched"]:
        line += f"; {record['not_matched']} matched no question (manifest.json names them)"
    return line
