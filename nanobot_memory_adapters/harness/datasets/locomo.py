"""LoCoMo-format files -> conversations with timed turns and placed questions.

The file is a JSON list; each item has ``sample_id``, ``conversation`` (``speaker_a``,
``speaker_b``, ``session_N_date_time``, ``session_N``: turns ``{speaker, dia_id, text,
[blip_caption]}``) and ``qa`` (``question``, ``answer`` | ``adversarial_answer``,
``evidence``: dia ids, ``category``).

Everything here is lenient and counted: evidence strings are repaired when the intent is
unambiguous (``'D8:6; D9:17'`` -> two ids, ``'D:11:26'`` -> ``D11:26``, ``'D30:05'`` ->
``D30:5``), dropped when not (``'D'``) or when they name a turn the conversation does not
have; questions left without evidence cannot be placed on the timeline and are skipped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.metrics import normalize_text, session_of
from nanobot_memory_adapters.json_files import JsonFileError, load_json_file

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_TOKEN = re.compile(r"^D:?(\d+):(\d+)$")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I
)
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
    )
}
# A turn shorter than this cannot attribute a context to its session (e.g. "Thanks!").
DISTINCTIVE_MIN_CHARS = 20


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    index: int
    speaker: str
    text: str
    content: str  # what gets recorded: text plus the image caption when there is one
    timestamp: datetime
    distinctive: bool


@dataclass(frozen=True)
class Session:
    number: int
    date_text: str
    start: datetime
    turns: tuple[Turn, ...]
    date_parsed: bool = True


@dataclass(frozen=True)
class Question:
    qid: str
    index: int
    question: str
    category: int
    evidence: tuple[str, ...]
    raw_evidence: tuple[str, ...]
    answer: str | None = None
    adversarial_answer: str | None = None

    @property
    def evidence_sessions(self) -> tuple[int, ...]:
        return tuple(sorted({session_of(e) for e in self.evidence}))

    @property
    def ready_after(self) -> int:
        """The session after which all of this question's evidence has been recorded."""
        return max(self.evidence_sessions)

    @property
    def gold(self) -> str | None:
        return self.answer if self.answer is not None else self.adversarial_answer

    @property
    def answer_recall_applicable(self) -> bool:
        """Whether "the gold's words are in the context" means anything: LoCoMo categories
        1-4 (category 5's gold is a premise the conversation does not support). Other
        benchmarks' questions say for themselves."""
        return 1 <= int(self.category) <= 4 and self.answer is not None


@dataclass(frozen=True)
class FinalQuestion(Question):
    """A question asked once, after the conversation's last session, whatever its
    evidence (LongMemEval, BEAM). ``has_turn_evidence`` False: ``evidence`` is a stand-in
    the bookkeeping needs (no evidence turn is named), never scored."""

    has_turn_evidence: bool = True
    last_session: int = 0

    @property
    def ready_after(self) -> int:
        return self.last_session

    @property
    def turn_evidence(self) -> list[str]:
        """The named evidence turns ([] when ``evidence`` is a stand-in)."""
        return list(self.evidence) if self.has_turn_evidence else []


@dataclass
class EvidenceStats:
    """What lenient evidence parsing did, so a report can say what was skipped."""

    questions: int = 0
    placed: int = 0
    no_evidence: int = 0  # questions with an empty evidence list
    malformed_strings: int = 0  # evidence strings that were not a plain existing dia id
    repaired_ids: int = 0  # ids recovered from a malformed string
    dropped_tokens: int = 0  # parts that could not be read as a dia id
    unknown_ids: int = 0  # well-formed ids naming a turn the conversation lacks
    skipped_questions: int = 0  # questions left without usable evidence
    # questions that cannot be asked as written (no question text, no answer, a category
    # outside 1-5): dropped, counted here and named in ``examples``
    malformed_questions: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, other: EvidenceStats) -> None:
        for name in (
            "questions",
            "placed",
            "no_evidence",
            "malformed_strings",
            "repaired_ids",
            "dropped_tokens",
            "unknown_ids",
            "skipped_questions",
            "malformed_questions",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.examples.extend(e for e in other.examples if e not in self.examples)

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "placed": self.placed,
            "no_evidence": self.no_evidence,
            "malformed_strings": self.malformed_strings,
            "repaired_ids": self.repaired_ids,
            "dropped_tokens": self.dropped_tokens,
            "unknown_ids": self.unknown_ids,
            "skipped_questions": self.skipped_questions,
            "malformed_questions": self.malformed_questions,
            "examples": self.examples[:20],
        }


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    evidence_stats: EvidenceStats

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]

    def turn(self, dia_id: str) -> Turn:
        return self._index()[dia_id]

    def first_sessions(self, n: int) -> Conversation:
        """The conversation cut after its first ``n`` sessions, with the questions whose
        evidence all lies in them (a smaller run of the same timeline)."""
        kept = self.sessions[:n]
        last = kept[-1].number if kept else 0
        questions = tuple(q for q in self.questions if q.ready_after <= last)
        return Conversation(self.sample_id, self.speaker_a, self.speaker_b, kept, questions,
                            self.evidence_stats)

    def _index(self) -> dict[str, Turn]:
        cached = self.__dict__.get("_turn_index")
        if cached is None:
            cached = {t.dia_id: t for t in self.turns}
            object.__setattr__(self, "_turn_index", cached)
        return cached


def parse_session_date(text: str) -> datetime | None:
    """``'1:56 pm on 8 May, 2023'`` -> an aware datetime (UTC; the data has no zone)."""
    m = _DATE.match(text or "")
    if not m:
        return None
    hour, minute, ampm, day, month, year = m.groups()
    month_no = _MONTHS.get(month.lower())
    if month_no is None:
        return None
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    try:
        return datetime(int(year), month_no, int(day), h, int(minute), tzinfo=UTC)
    except ValueError:
        return None


def parse_evidence(
    raw: Iterable[Any], known: set[str], stats: EvidenceStats, qid: str
) -> list[str]:
    """Lenient: split on ``;``/``,``/spaces, accept ``D:s:t`` and zero-padded numbers."""
    found: list[str] = []
    for item in raw:
        text = str(item)
        if text in known:
            if text not in found:
                found.append(text)
            continue
        stats.malformed_strings += 1
        for token in filter(None, re.split(r"[;,\s]+", text)):
            m = _EVIDENCE_TOKEN.match(token)
            if not m:
                stats.dropped_tokens += 1
                stats.examples.append(f"{qid}: dropped {token!r}")
                continue
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia not in known:
                stats.unknown_ids += 1
                stats.examples.append(f"{qid}: unknown turn {dia!r} (from {text!r})")
                continue
            stats.repaired_ids += 1
            stats.examples.append(f"{qid}: read {text!r} as {dia!r}")
            if dia not in found:
                found.append(dia)
    return found


def _turn_content(turn: dict[str, Any]) -> str:
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def _conversation(item: dict[str, Any]) -> Conversation:
    sample_id = str(item["sample_id"])
    conv = item["conversation"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
    sessions: list[Session] = []
    previous: datetime | None = None
    for n in numbers:
        raw_turns = conv.get(f"session_{n}") or []
        date_text = str(conv.get(f"session_{n}_date_time") or "")
        start = parse_session_date(date_text)
        parsed = start is not None
        if start is None:  # keep the order: one day after the previous session
            try:
                start = (previous or datetime(2000, 1, 1, tzinfo=UTC)) + timedelta(days=1)
            except OverflowError:
                raise DatasetError(
                    f"{sample_id}: session_{n}_date_time {date_text!r} cannot be read and "
                    "the session before it is dated on the calendar's last day, so it has "
                    "no date to take; give it a date") from None
        previous = start
        turns = []
        for i, t in enumerate(raw_turns):
            turns.append(
                Turn(
                    dia_id=str(t["dia_id"]),
                    session=n,
                    index=i,
                    speaker=str(t.get("speaker") or "unknown"),
                    text=str(t.get("text") or ""),
                    content=_turn_content(t),
                    # Turns keep their order within the session's date: one second apart.
                    timestamp=start + timedelta(seconds=i),
                    distinctive=False,
                )
            )
        sessions.append(Session(n, date_text, start, tuple(turns), parsed))
    sessions = _mark_distinctive(sessions)
    known = {t.dia_id for s in sessions for t in s.turns}
    stats = EvidenceStats()
    questions = []
    for index, qa in enumerate(item.get("qa") or []):
        qid = f"{sample_id}:q{index}"
        stats.questions += 1
        problem = _malformed(qa)
        if problem:
            stats.malformed_questions += 1
            stats.examples.append(f"{qid}: dropped, {problem}")
            continue
        raw = list(qa.get("evidence") or [])
        if not raw:
            stats.no_evidence += 1
            stats.skipped_questions += 1
            continue
        evidence = parse_evidence(raw, known, stats, qid)
        if not evidence:
            stats.skipped_questions += 1
            continue
        stats.placed += 1
        answer = qa.get("answer")
        adversarial = qa.get("adversarial_answer")
        questions.append(
            Question(
                qid=qid,
                index=index,
                question=str(qa.get("question") or ""),
                category=int(qa.get("category") or 0),
                evidence=tuple(evidence),
                raw_evidence=tuple(str(e) for e in raw),
                answer=None if answer is None else str(answer),
                adversarial_answer=None if adversarial is None else str(adversarial),
            )
        )
    return Conversation(
        sample_id=sample_id,
        speaker_a=str(conv.get("speaker_a") or "A"),
        speaker_b=str(conv.get("speaker_b") or "B"),
        sessions=tuple(sessions),
        questions=tuple(questions),
        evidence_stats=stats,
    )


def _malformed(qa: dict[str, Any]) -> str | None:
    """Why a question cannot be asked as written, or None."""
    question = qa.get("question")
    if not isinstance(question, str) or not question.strip():
        return "no question text"
    if qa.get("answer") is None and qa.get("adversarial_answer") is None:
        return "neither 'answer' nor 'adversarial_answer'"
    if str(qa.get("category")) not in {"1", "2", "3", "4", "5"}:
        return f"category {qa.get('category')!r} is not 1-5"
    return None


def _mark_distinctive(sessions: list[Session]) -> list[Session]:
    """A turn attributes a context to its session only if it is long enough and no turn of
    another session contains its text (otherwise a match could come from elsewhere)."""
    normed = [(s.number, normalize_text(t.text)) for s in sessions for t in s.turns]
    out = []
    for s in sessions:
        turns = []
        for t in s.turns:
            text = normalize_text(t.text)
            ok = len(text) >= DISTINCTIVE_MIN_CHARS and not any(
                n != s.number and text in other for n, other in normed
            )
            turns.append(Turn(**{**t.__dict__, "distinctive": ok}))
        out.append(Session(s.number, s.date_text, s.start, tuple(turns), s.date_parsed))
    return out


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class DatasetError(ValueError):
    """A LoCoMo file that cannot be read: names the file, the sample and the field."""


def _check_sample(p: Path, index: int, item: Any) -> None:
    """The structure ``_conversation`` relies on; anything else is one DatasetError."""
    where = f"{p}: sample #{index}"
    if not isinstance(item, dict):
        raise DatasetError(f"{where} is {type(item).__name__}, not an object with "
                           "'sample_id', 'conversation' and 'qa'")
    if "sample_id" not in item:
        raise DatasetError(f"{where}: field 'sample_id' is missing")
    where = f"{p}: sample {item['sample_id']!r}"
    conv = item.get("conversation")
    if not isinstance(conv, dict):
        state = "is missing" if conv is None else f"is {type(conv).__name__}, not an object"
        raise DatasetError(f"{where}: field 'conversation' {state} (it holds 'speaker_a', "
                           "'speaker_b', 'session_N' lists and 'session_N_date_time')")
    for key, turns in conv.items():
        if not _SESSION_KEY.match(key):
            continue
        if not isinstance(turns, list):
            raise DatasetError(f"{where}: field 'conversation.{key}' is "
                               f"{type(turns).__name__}, not a list of turns")
        for i, turn in enumerate(turns):
            if not isinstance(turn, dict) or "dia_id" not in turn:
                raise DatasetError(f"{where}: 'conversation.{key}[{i}]' is not a turn with "
                                   "a 'dia_id'")
    qa = item.get("qa", [])
    if not isinstance(qa, list) or not all(isinstance(q, dict) for q in qa):
        raise DatasetError(f"{where}: field 'qa' is not a list of question objects")
    for i, q in enumerate(qa):
        category = q.get("category", 0)
        if category is not None and not str(category).isdigit():
            raise DatasetError(f"{where}: 'qa[{i}].category' is {category!r}, not a number")
        if not isinstance(q.get("evidence", []), list | type(None)):
            raise DatasetError(f"{where}: 'qa[{i}].evidence' is not a list of turn ids")


def load_locomo(path: str | Path, conversations: Iterable[str] | None = None) -> list[Conversation]:
    """Read a LoCoMo-format file; ``conversations`` selects sample ids (in file order).
    A file that is missing, a directory, not UTF-8, not JSON, or not LoCoMo-shaped raises
    ``FileNotFoundError`` or ``DatasetError`` with one line naming the file and the field."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise DatasetError(f"LoCoMo file {str(p)!r} is a directory; pass the JSON file in it")
    if not p.exists() and not p.is_symlink():
        raise FileNotFoundError(
            f"LoCoMo file {str(p)!r} not found; pass --dataset PATH "
            "(e.g. ../shared/data/locomo/locomo7.json from the repo root)"
        )
    try:
        data = load_json_file(p, what="LoCoMo file", fix="pass a LoCoMo JSON file")
    except JsonFileError as exc:
        raise DatasetError(str(exc)) from None
    if not isinstance(data, list):
        raise DatasetError(f"{p}: expected a JSON list of LoCoMo samples")
    seen: dict[str, int] = {}
    for index, item in enumerate(data):
        _check_sample(p, index, item)
        sample_id = str(item["sample_id"])
        if not sample_id:
            raise DatasetError(f"{p}: sample #{index} has an empty 'sample_id'; give each "
                               "sample a name")
        if sample_id in seen:
            raise DatasetError(f"{p}: sample_id {sample_id!r} appears twice (samples "
                               f"#{seen[sample_id]} and #{index}); give each sample its own id")
        seen[sample_id] = index
    wanted = list(conversations) if conversations else None
    items = [d for d in data if wanted is None or str(d.get("sample_id")) in wanted]
    if wanted:
        missing = [w for w in wanted if w not in {str(d.get("sample_id")) for d in items}]
        if missing:
            have = ", ".join(str(d.get("sample_id")) for d in data)
            raise DatasetError(
                f"conversations not in {p.name}: {', '.join(missing)}; have: {have}"
            )
    return [_conversation(d) for d in items]
