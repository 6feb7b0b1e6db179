"""LongMemEval files (``longmemeval_s``, ``_m``, ``_oracle``) -> one unit per question.

The layout (xiaowu0162/LongMemEval, README "Dataset Format"): a JSON list of instances,
each with ``question_id`` (ending in ``_abs`` for an abstention question),
``question_type`` (one of ``QUESTION_TYPES``), ``question``, ``answer``, ``question_date``,
``haystack_session_ids``, ``haystack_dates``, ``haystack_sessions`` (a list of sessions,
each a list of turns ``{"role": "user"|"assistant", "content": str, "has_answer": true}``
-- ``has_answer`` only on evidence turns) and ``answer_session_ids``.

Each question has its own haystack, so each becomes a ``Conversation`` of its own (the
unit, a fresh scope): its sessions in ``haystack_dates`` order (the oracle file is not
sorted; ties keep the file order), numbered 1..N, turn ``i`` (1-based, both roles) of
session ``n`` is ``Dn:i`` -- the benchmark's own turn id is ``<session_id>_<i>``. The
question is asked once, after the last session, at ``question_date`` (``as_of``).

Evidence: turn level = the turns marked ``has_answer`` (either role); session level =
``answer_session_ids``. Abstention questions and questions without evidence keep their
QA grading but are left out of the retrieval metrics, as the benchmark does.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.datasets.locomo import (
    Conversation,
    DatasetError,
    EvidenceStats,
    FinalQuestion,
    Session,
    Turn,
    _mark_distinctive,  # pyright: ignore[reportPrivateUsage]
)
from nanobot_memory_adapters.json_files import JsonFileError, load_json_file

QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
    "single-session-preference",
)
# ``Question.category`` of a LongMemEval question: its type's code; abstention adds 10.
TYPE_CODE = {t: i + 1 for i, t in enumerate(QUESTION_TYPES)}
ABSTENTION_OFFSET = 10
REQUIRED = ("question_id", "question_type", "question", "answer", "question_date",
            "haystack_session_ids", "haystack_dates", "haystack_sessions",
            "answer_session_ids")
_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]{3}\))?\s*"
                   r"(?:(\d{1,2}):(\d{2}))?\s*$")


def type_of(category: int) -> tuple[str, bool]:
    """(question type, abstention) of a category code."""
    abstention = category > ABSTENTION_OFFSET
    return QUESTION_TYPES[category - (ABSTENTION_OFFSET if abstention else 0) - 1], abstention


def parse_date(text: str) -> datetime | None:
    """``'2023/05/20 (Sat) 02:21'`` -> an aware datetime (UTC; the data has no zone)."""
    m = _DATE.match(text or "")
    if not m:
        return None
    y, mo, d, h, mi = m.groups()
    try:
        return datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), tzinfo=UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class LmeQuestion(FinalQuestion):
    """A LongMemEval question: asked after the last session, whatever its evidence."""

    question_type: str = ""
    question_date: str = ""
    abstention: bool = False
    answer_sessions: tuple[int, ...] = ()  # session numbers of answer_session_ids
    answer_session_ids: tuple[str, ...] = ()
    @property
    def retrieval_applicable(self) -> bool:
        """The benchmark leaves abstention questions out of retrieval; so do we, and
        questions whose file names no evidence at that level."""
        return not self.abstention

    @property
    def answer_recall_applicable(self) -> bool:
        """Answer recall (the gold's words in the context): every answerable question but
        the preference ones, whose gold is a rubric, not an answer."""
        return not self.abstention and self.question_type != "single-session-preference"

    @property
    def answer_prompt(self) -> str:
        """What the answer model is asked: the question with its date."""
        return f"(Current date: {self.question_date}) {self.question}"

    @property
    def trace_fields(self) -> dict[str, Any]:
        """Written on the ask line, so ``--verify`` needs nothing but traces.jsonl."""
        return {
            "benchmark": "longmemeval",
            "question_type": self.question_type,
            "abstention": self.abstention,
            "answer_sessions": list(self.answer_sessions),
            "turn_evidence": self.turn_evidence,  # no has_answer turn: []
            "question_date": self.question_date,
        }


@dataclass(frozen=True)
class LmeConversation(Conversation):
    """One question's haystack; ``asked_at`` is its ``question_date``."""

    asked_at: datetime | None = None
    session_ids: tuple[str, ...] = ()  # haystack_session_ids, in session-number order


def _fail(p: Path, where: str, msg: str) -> DatasetError:
    return DatasetError(f"{p}: {where}: {msg}")


def _check(p: Path, index: int, item: Any) -> None:
    where = f"instance #{index}"
    if not isinstance(item, dict):
        raise _fail(p, where, f"is {type(item).__name__}, not an object with "
                    + ", ".join(repr(k) for k in REQUIRED))
    missing = [k for k in REQUIRED if k not in item]
    if missing:
        raise _fail(p, where, f"field {missing[0]!r} is missing (is this a LongMemEval "
                    "file? see docs/harness.md)")
    where = f"question {str(item['question_id'])[:80]!r}"
    if item["question_type"] not in TYPE_CODE:
        raise _fail(p, where, f"question_type {item['question_type']!r} is not one of "
                    + ", ".join(QUESTION_TYPES))
    ids, dates, sessions = (item[k] for k in ("haystack_session_ids", "haystack_dates",
                                              "haystack_sessions"))
    if not all(isinstance(x, list) for x in (ids, dates, sessions, item["answer_session_ids"])):
        raise _fail(p, where, "haystack_session_ids, haystack_dates, haystack_sessions and "
                    "answer_session_ids must be lists")
    for name in ("haystack_session_ids", "answer_session_ids"):
        odd = next((x for x in item[name] if not isinstance(x, str | int) or
                    isinstance(x, bool)), None)
        if odd is not None:
            raise _fail(p, where, f"{name} holds {type(odd).__name__} "
                        f"{json.dumps(odd, default=str)[:40]}; each entry must be a session id "
                        "(a string)")
    if not len(ids) == len(dates) == len(sessions):
        raise _fail(p, where, f"{len(ids)} haystack_session_ids, {len(dates)} haystack_dates "
                    f"and {len(sessions)} haystack_sessions: they must pair up")
    for n, session in enumerate(sessions):
        if not isinstance(session, list) or not all(
            isinstance(t, dict) and t.get("role") in ("user", "assistant") and "content" in t
            for t in session
        ):
            raise _fail(p, where, f"haystack_sessions[{n}] is not a list of turns "
                        "{'role': 'user'|'assistant', 'content': ...}")
    if parse_date(str(item["question_date"])) is None:
        raise _fail(p, where, f"question_date {item['question_date']!r} is not "
                    "'YYYY/MM/DD (Day) HH:MM'")


UNIT_ID_CHARS = 120  # a scope id (run + persona) must stay within 200 characters


def _unit_id(question_id: str) -> str:
    """The question id as a scope/folder name (ids are hex or ``gpt4_...``; be safe): a
    long one keeps its first characters and 16 hex digits of its SHA-256 (unique)."""
    plain = re.sub(r"[^A-Za-z0-9_.-]+", "_", question_id).strip("._") or "question"
    if len(plain) <= UNIT_ID_CHARS:
        return plain
    digest = hashlib.sha256(question_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{plain[:UNIT_ID_CHARS - 17]}-{digest}"


def to_conversation(item: dict[str, Any]) -> LmeConversation:
    """One instance -> one unit (see the module docstring)."""
    qid = str(item["question_id"])
    raw = list(zip(item["haystack_session_ids"], item["haystack_dates"],
                   item["haystack_sessions"], strict=True))
    parsed = [(parse_date(str(d)), i) for i, (_, d, _) in enumerate(raw)]
    floor = datetime(2000, 1, 1, tzinfo=UTC)
    order = sorted(range(len(raw)), key=lambda i: (parsed[i][0] or floor, i))
    sessions: list[Session] = []
    session_ids: list[str] = []
    evidence: list[str] = []
    previous: datetime | None = None
    for number, i in enumerate(order, start=1):
        sid, date_text, turns_raw = raw[i]
        start = parsed[i][0]
        ok = start is not None
        if start is None:
            start = (previous or floor) + timedelta(days=1)
        previous = start
        turns = []
        for j, t in enumerate(turns_raw):
            dia = f"D{number}:{j + 1}"
            if t.get("has_answer") is True:
                evidence.append(dia)
            text = str(t.get("content") or "")
            turns.append(Turn(dia_id=dia, session=number, index=j, speaker=str(t["role"]),
                              text=text, content=text,
                              timestamp=start + timedelta(seconds=j), distinctive=False))
        sessions.append(Session(number, str(date_text), start, tuple(turns), ok))
        session_ids.append(str(sid))
    sessions = _mark_distinctive(sessions)
    number_of = {sid: n for n, sid in enumerate(session_ids, start=1)}
    answer_sessions = tuple(sorted({number_of[s] for s in item["answer_session_ids"]
                                    if s in number_of}))
    has_turns = bool(evidence)
    if not has_turns:  # the LoCoMo bookkeeping needs a turn: the answer sessions' turns
        pool = [t for s in sessions if s.number in answer_sessions for t in s.turns] or \
               list(sessions[-1].turns if sessions else ())
        evidence = [t.dia_id for t in pool]
    stats = EvidenceStats(questions=1, placed=1 if sessions and evidence else 0)
    question = LmeQuestion(
        qid=qid,
        index=0,
        question=str(item["question"]),
        category=TYPE_CODE[item["question_type"]]
        + (ABSTENTION_OFFSET if qid.endswith("_abs") else 0),
        evidence=tuple(evidence),
        raw_evidence=tuple(str(s) for s in item["answer_session_ids"]),
        answer=str(item["answer"]),
        question_type=str(item["question_type"]),
        question_date=str(item["question_date"]),
        abstention=qid.endswith("_abs"),
        answer_sessions=answer_sessions,
        answer_session_ids=tuple(str(s) for s in item["answer_session_ids"]),
        has_turn_evidence=has_turns,
        last_session=len(sessions),
    )
    if not (sessions and evidence):
        stats.skipped_questions = 1
    return LmeConversation(
        sample_id=_unit_id(qid),
        speaker_a="user",
        speaker_b="assistant",
        sessions=tuple(sessions),
        questions=(question,) if sessions and evidence else (),
        evidence_stats=stats,
        asked_at=parse_date(str(item["question_date"])),
        session_ids=tuple(session_ids),
    )


def load_longmemeval(path: str | Path, questions: list[str] | None = None
                     ) -> list[LmeConversation]:
    """Read a LongMemEval file; ``questions`` selects question ids (in file order). Bad
    input raises ``FileNotFoundError`` or ``DatasetError`` with one line naming the file,
    the question and the field."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise DatasetError(f"LongMemEval file {str(p)!r} is a directory; pass the JSON file "
                           "(longmemeval_s.json, longmemeval_m.json or longmemeval_oracle.json)")
    if not p.exists() and not p.is_symlink():
        raise FileNotFoundError(f"LongMemEval file {str(p)!r} not found; pass --dataset PATH "
                                "(the files are not shipped: see docs/harness.md)")
    try:
        data = load_json_file(p, what="LongMemEval file",
                              fix="pass a LongMemEval JSON file (docs/harness.md)")
    except JsonFileError as exc:
        raise DatasetError(str(exc)) from None
    if not isinstance(data, list):
        raise DatasetError(f"{p}: expected a JSON list of LongMemEval instances")
    for index, item in enumerate(data):
        _check(p, index, item)
    if questions:
        have = {str(d["question_id"]) for d in data}
        missing = [q for q in questions if q not in have]
        if missing:
            raise DatasetError(f"questions not in {p.name}: {', '.join(missing[:5])}")
        data = [d for d in data if str(d["question_id"]) in questions]
    units = [to_conversation(d) for d in data]
    seen: set[str] = set()
    for u in units:
        if u.sample_id in seen:
            raise DatasetError(f"{p}: two questions map to the unit id {u.sample_id!r}")
        seen.add(u.sample_id)
    return units
