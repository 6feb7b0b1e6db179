"""BEAM conversations (mohammadtavakoli78/BEAM, ``chats/<scale>/<n>/``) -> one unit each.

A conversation folder holds ``chat.json`` -- a list of batches ``{"batch_number": N,
"turns": [[turn, ...], ...]}``, each turn ``{"role", "id", "content"}`` plus, on the user
turn that opens a group, ``time_anchor`` (``"March-15-2024"``) -- and
``probing_questions/probing_questions.json``: ``{ability: [question, ...]}``, each with
``question``, a ``rubric`` (the nuggets it is graded on), ``source_chat_ids`` (turn ids:
a list, or a dict of lists) and an ideal answer (``answer`` / ``ideal_answer`` /
``ideal_response``). ``--dataset`` is such a folder, or a folder of them (``chats/100K``).

Batches are the sessions (their time anchors are the session dates: the first anchor of
a batch, else the previous date + 1 day); the probing questions are asked once,
read-only, after the last batch. Turn ``k`` (1-based) of batch ``b`` is ``Db:k``;
``source_chat_ids`` become the evidence turns.
"""

from __future__ import annotations

import json
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
)
from nanobot_memory_adapters.json_files import JsonFileError, load_json_file

ABILITIES: tuple[str, ...] = (
    "abstention", "contradiction_resolution", "event_ordering", "information_extraction",
    "instruction_following", "knowledge_update", "multi_session_reasoning",
    "preference_following", "summarization", "temporal_reasoning",
)
# ``Question.category`` of a BEAM question: 100 + its ability's index (never 1-5, the
# LoCoMo categories).
CATEGORY_BASE = 100
GOLD_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")


def ability_of(category: int) -> str:
    return ABILITIES[category - CATEGORY_BASE]


def parse_anchor(text: str | None) -> datetime | None:
    """``'March-15-2024'`` -> an aware datetime (UTC); None when unreadable."""
    try:
        return datetime.strptime(str(text), "%B-%d-%Y").replace(tzinfo=UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class BeamQuestion(FinalQuestion):
    ability: str = ""
    rubric: tuple[str, ...] = ()

    @property
    def answer_recall_applicable(self) -> bool:
        """BEAM is graded by rubric; an ideal answer's exact words are not a hit test."""
        return False

    @property
    def judge_gold(self) -> str:
        """What the judge grades against: the rubric (JSON list), not the ideal answer."""
        return json.dumps(list(self.rubric), ensure_ascii=False)

    @property
    def trace_fields(self) -> dict[str, Any]:
        return {"benchmark": "beam", "ability": self.ability, "rubric": list(self.rubric),
                "turn_evidence": self.turn_evidence}  # source_chat_ids' turns


def _ids(value: Any) -> list[int]:
    """``source_chat_ids`` as a flat list of ints (a list, or a dict of lists)."""
    if isinstance(value, dict):
        return [i for v in value.values() for i in _ids(v)]
    if isinstance(value, list):
        return [int(v) for v in value if isinstance(v, int | str) and str(v).isdigit()]
    return []


def _read(path: Path) -> Any:
    if not path.exists() and not path.is_symlink():
        raise DatasetError(f"{path.parent}: {path.name} is missing (a BEAM conversation "
                           "folder holds chat.json and probing_questions/)")
    try:
        return load_json_file(path, what="BEAM file", fix=FIX)
    except JsonFileError as exc:
        raise DatasetError(str(exc)) from None


FIX = ("fix the file or fetch the folder again from mohammadtavakoli78/BEAM "
       "(chats/<scale>/<n>/); layout: docs/harness.md (BEAM)")


def load_conversation(folder: Path, sample_id: str) -> Conversation:
    """One conversation folder; a file not in BEAM's layout is one DatasetError naming
    the file, what is wrong and the fix (never a traceback)."""
    chat_path = folder / "chat.json"
    probes_path = folder / "probing_questions" / "probing_questions.json"
    chat = _read(chat_path)
    probes = _read(probes_path)
    if not isinstance(chat, list) or not all(isinstance(b, dict) and "turns" in b for b in chat):
        raise DatasetError(f"{chat_path}: expected a list of batches "
                           "{'batch_number', 'turns'}; " + FIX)
    if not isinstance(probes, dict) or not all(
            isinstance(v, list) and all(isinstance(i, dict) for i in v)
            for v in probes.values()):
        raise DatasetError(f"{probes_path}: expected {{ability: [question objects]}}; " + FIX)
    try:
        sessions = _sessions(chat, chat_path)
    except DatasetError:
        raise
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        raise DatasetError(f"{chat_path}: not in BEAM's layout ({type(exc).__name__}: "
                           f"{exc}); " + FIX) from None
    try:
        return _questions(sessions, probes, folder, sample_id)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        raise DatasetError(f"{probes_path}: not in BEAM's layout ({type(exc).__name__}: "
                           f"{exc}); " + FIX) from None


def _sessions(chat: list[dict[str, Any]], chat_path: Path) -> tuple[list[Session],
                                                                     dict[int, str]]:
    sessions: list[Session] = []
    dia_of_id: dict[int, str] = {}
    previous: datetime | None = None
    seen: set[int] = set()
    for b, batch in enumerate(chat, start=1):
        number = _batch_number(batch.get("batch_number", b), b, chat_path)
        if number in seen:
            raise DatasetError(f"{chat_path}: batch_number {number} appears twice (batch {b}); "
                               "each batch needs its own number; " + FIX)
        seen.add(number)
        flat = [t for group in batch["turns"] for t in (group if isinstance(group, list)
                                                        else [group])]
        anchor = next((parse_anchor(t.get("time_anchor")) for t in flat
                       if t.get("time_anchor")), None)
        start = anchor or (previous or datetime(2024, 1, 1, tzinfo=UTC)) + timedelta(days=1)
        previous = start
        turns = []
        for k, t in enumerate(flat):
            if t.get("role") not in ("user", "assistant") or "content" not in t:
                raise DatasetError(f"{chat_path}: batch {number}, turn {k}: not "
                                   "{'role': 'user'|'assistant', 'content': ...}; " + FIX)
            dia = f"D{number}:{k + 1}"
            if isinstance(t.get("id"), int):
                dia_of_id[t["id"]] = dia
            text = str(t["content"])
            turns.append(Turn(dia_id=dia, session=number, index=k, speaker=str(t["role"]),
                              text=text, content=text, timestamp=start + timedelta(seconds=k),
                              distinctive=False))
        sessions.append(Session(number, str(anchor.date() if anchor else ""), start,
                                tuple(turns), anchor is not None))
    return sessions, dia_of_id


def _batch_number(value: Any, position: int, chat_path: Path) -> int:
    """A batch's number: a positive whole number (a repeated, negative or fractional one
    would give other sessions, other turn ids and other metrics, silently)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        shown = json.dumps(value)[:40]
        raise DatasetError(f"{chat_path}: batch {position} has batch_number {shown}; give a "
                           "positive whole number, each batch its own; " + FIX)
    return value


def _questions(read: tuple[list[Session], dict[int, str]], probes: dict[str, Any],
               folder: Path, sample_id: str) -> Conversation:
    sessions, dia_of_id = read
    last = sessions[-1].number if sessions else 0
    stats = EvidenceStats()
    questions = []
    for ability, items in probes.items():
        if ability not in ABILITIES:
            raise DatasetError(f"{folder / 'probing_questions' / 'probing_questions.json'}: "
                               f"probing ability {ability!r} is not one of "
                               + ", ".join(ABILITIES))
        for i, item in enumerate(items):
            stats.questions += 1
            if not isinstance(item.get("rubric") or [], list):
                raise ValueError(f"{ability}[{i}]: 'rubric' is not a list of criteria")
            rubric = tuple(str(r) for r in item.get("rubric") or [])
            if not rubric or "question" not in item:
                stats.skipped_questions += 1
                stats.examples.append(f"{sample_id}:{ability}:{i}: no question or rubric")
                continue
            evidence = [dia_of_id[c] for c in _ids(item.get("source_chat_ids"))
                        if c in dia_of_id]
            has = bool(evidence)
            if not has:  # the bookkeeping needs a turn: the last batch's (not scored)
                evidence = [t.dia_id for t in sessions[-1].turns] if sessions else []
            gold = next((str(item[k]) for k in GOLD_KEYS if item.get(k)), "")
            stats.placed += 1
            questions.append(BeamQuestion(
                qid=f"{sample_id}:{ability}:{i}", index=len(questions),
                question=str(item["question"]), category=CATEGORY_BASE + ABILITIES.index(ability),
                evidence=tuple(dict.fromkeys(evidence)), raw_evidence=(), answer=gold,
                ability=ability, rubric=rubric, has_turn_evidence=has, last_session=last))
    return Conversation(sample_id=sample_id, speaker_a="user", speaker_b="assistant",
                        sessions=tuple(sessions), questions=tuple(questions),
                        evidence_stats=stats)


def load_beam(path: str | Path, selected: list[str] | None = None) -> list[Conversation]:
    """A conversation folder, or a folder of numbered conversation folders."""
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"BEAM folder {str(p)!r} not found; pass --dataset with a "
                                "conversation folder (chats/100K/1) or a scale folder "
                                "(chats/100K); nothing is shipped: see docs/harness.md")
    if not p.is_dir():
        raise DatasetError(f"{p}: a BEAM dataset is a folder (chat.json + probing_questions/)")
    if (p / "chat.json").exists():
        folders = [(p, f"beam-{p.parent.name}-{p.name}")]
    else:
        subs = sorted((d for d in p.iterdir() if (d / "chat.json").exists()),
                      key=lambda d: (not d.name.isdigit(), int(d.name) if d.name.isdigit()
                                     else 0, d.name))
        folders = [(d, f"beam-{p.name}-{d.name}") for d in subs]
        if not folders:
            raise DatasetError(f"{p}: no conversation folder with a chat.json in it")
    if selected:
        folders = [f for f in folders if f[1] in selected or f[0].name in selected]
    return [load_conversation(d, sid) for d, sid in folders]
