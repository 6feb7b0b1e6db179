"""PersonaMem (Jiang et al. 2025) -> the scenario format, from files the user supplies.

PersonaMem ships ``questions_{32k,128k,1M}.csv`` and ``shared_contexts_*.jsonl``. Each
context line is ``{shared_context_id: [{"role", "content"}, ...]}``: a long chat history
in which ``system`` messages open the sessions (the first carries the persona). Each
question row names its context and ``end_index_in_shared_context`` (the history up to
that message is what the model may know), the user's message, ``all_options`` (a Python
list literal of ``"(a) ..."`` strings) and ``correct_answer`` (``"(c)"``).

Mapping (this project's, documented in docs/preferences.md):

- one shared context = one persona timeline here (``<persona_id>-<context id[:8]>``);
  sessions split at system messages; no timestamps in PersonaMem, so session k is placed
  on day k and messages a minute apart (order is what matters);
- a question = an option task placed where its window ends
  (``end_index_in_shared_context``): a session that holds that point is split there, and
  the test follows the part before it, so memory holds exactly the history PersonaMem
  shows the model (a window ending on a user turn keeps that turn's reply: sessions
  always open with the user and alternate); its target is a preference synthesized
  from the correct option (no ground-truth cues: exposure metrics are n/a for
  PersonaMem, only choices are scored);
- question types -> dimensions: the latest preference, the full evolution and the
  reasons behind updates -> **PET**; preference-aligned recommendations -> **PET**
  (acting on the latest values); generalizing to new scenarios -> **CS** (a preference
  carried into another context); suggesting new ideas -> **IQI** (inferring what the user
  would like but never said); recalling shared facts is not preference behaviour and is
  skipped (counted).

Both the renamed and the original type names are accepted (the released files differ by
size; check the counts the command prints).
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.preferences.format import (
    FORMAT,
    ScenarioError,
    ScenarioSet,
    parse_scenarios,
)
from nanobot_memory_adapters.json_files import JsonFileError, read_text, regular_file_problem

DIMENSION_OF: dict[str, str | None] = {
    "acknowledge_latest_preferences": "PET",
    "acknowledge_latest_user_preferences": "PET",
    "recalling_the_latest_user_preferences": "PET",
    "track_full_preference_evolution": "PET",
    "track_full_preference_updates": "PET",
    "tracking_the_full_sequence_of_preference_updates": "PET",
    "revisit_reasons_behind_preference_updates": "PET",
    "recalling_the_reasons_behind_previous_updates": "PET",
    "provide_preference_aligned_recommendations": "PET",
    "recommendation_aligned_with_users_latest_preferences": "PET",
    "generalize_to_new_scenarios": "CS",
    "generalizing_to_new_scenarios": "CS",
    "generalizing_past_reasons_in_memory_to_new_scenarios": "CS",
    "suggest_new_ideas": "IQI",
    "identifying_new_things_not_mentioned_by_the_user": "IQI",
    "recall_user_shared_facts": None,
    "recalling_facts_mentioned_by_the_user": None,
}
_OPTION = re.compile(r"^\s*\(([a-z])\)\s*(.*)$", re.S)
_DAY0 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
QUESTIONS_BYTES = 512 * 1024**2  # the released questions_*.csv are tens of MiB


def _options(raw: str, where: str) -> list[tuple[str, str]]:
    try:
        values = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        raise ScenarioError(f"{where}: all_options is not a list literal") from None
    out = []
    for value in values if isinstance(values, list | tuple) else []:
        match = _OPTION.match(str(value))
        if match:
            out.append((match.group(1), " ".join(match.group(2).split())))
    if len(out) < 2:
        raise ScenarioError(f"{where}: all_options holds fewer than two '(x) ...' options")
    return out


def _end_index(row: dict[str, str]) -> int:
    """``end_index_in_shared_context``: the question sees messages ``[0, end)``."""
    try:
        return int(float(row["end_index_in_shared_context"]))
    except ValueError:
        return -1


def _read_contexts(path: Path, wanted: set[str]) -> dict[str, list[dict[str, Any]]]:
    """The wanted contexts, streamed (the 1M release's file is large); a line of another
    shape is one error naming the file and line, not a traceback deep in the mapping."""
    shape = ('{"<shared_context_id>": [{"role": ..., "content": ...}, ...]}, as in '
             "PersonaMem's shared_contexts_*.jsonl")
    contexts: dict[str, list[dict[str, Any]]] = {}
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ScenarioError(f"{path}: line {n} is not UTF-8 text; give the "
                                    "shared_contexts_*.jsonl file as released") from None
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                raise ScenarioError(f"{path}: line {n} is not JSON; each line must be "
                                    f"{shape}") from None
            if not isinstance(item, dict):
                raise ScenarioError(f"{path}: line {n} is a JSON {_json_type(item)}, not an "
                                    f"object; each line must be {shape}")
            for key, messages in item.items():
                if key not in wanted:
                    continue
                if not isinstance(messages, list) or not all(
                        isinstance(m, dict) for m in messages):
                    raise ScenarioError(f"{path}: line {n}: context {key[:16]} is not a list "
                                        f"of message objects; each line must be {shape}")
                contexts[key] = messages
    return contexts


def _json_type(value: object) -> str:
    """JSON's name for a parsed value's type (what the user sees in the file)."""
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else "object"


def _read_questions(path: Path) -> list[dict[str, str]]:
    """The question rows; a file that is not UTF-8 CSV is one error naming it (missing
    trailing fields read as empty, so a short row is skipped or named, not a crash)."""
    try:
        text = read_text(path, what="PersonaMem questions_*.csv file",
                         max_bytes=QUESTIONS_BYTES)
    except JsonFileError as exc:
        raise ScenarioError(f"--questions {exc}") from None
    try:
        return list(csv.DictReader(io.StringIO(text, newline=""), restval=""))
    except csv.Error as exc:
        raise ScenarioError(f"{path}: not a readable CSV file ({exc}); give the "
                            "questions_*.csv file as released") from None


def load_personamem(
    questions: Path, contexts: Path, *, limit: int | None = None,
    personas: list[str] | None = None,
) -> tuple[ScenarioSet, dict[str, int]]:
    for p, what in ((questions, "--questions"), (contexts, "--contexts")):
        problem = regular_file_problem(p)
        if problem == "is a directory":
            raise ScenarioError(f"{what} {p} is a directory; give the PersonaMem file inside "
                                "it that you downloaded")
        if problem is not None:
            raise ScenarioError(f"{what} {p} {problem}; give the PersonaMem file you "
                                "downloaded")
    if limit is not None and limit < 1:
        raise ScenarioError(f"--limit {limit}: give 1 or more (at most this many questions)")
    rows = _read_questions(questions)
    stats = {"rows": len(rows), "used": 0, "skipped_fact_recall": 0, "skipped_unknown_type": 0,
             "skipped_bad_index": 0}
    if not rows:
        raise ScenarioError(f"{questions}: no question rows")
    need = {"shared_context_id", "end_index_in_shared_context", "correct_answer", "all_options"}
    missing = need - set(rows[0])
    if missing:
        raise ScenarioError(f"{questions}: missing columns {sorted(missing)}")
    if personas:
        known = {r.get("persona_id") or "" for r in rows} - {""}
        if not known.intersection(personas):
            sample = ", ".join(sorted(known, key=lambda k: (len(k), k))[:5])
            fix = (f"use one of its ids (e.g. {sample})" if known else
                   "it has no persona_id column; drop --persona")
            raise ScenarioError(f"--persona {', '.join(personas)}: no question row of "
                                f"{questions} has that persona_id; {fix}")
        rows = [r for r in rows if r.get("persona_id") in personas]
    if limit is not None:
        rows = rows[:limit]
    ctx = _read_contexts(contexts, {r["shared_context_id"] for r in rows})
    by_context: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_context.setdefault(r["shared_context_id"], []).append(r)
    out_personas = []
    for cid, qs in by_context.items():
        messages = ctx.get(cid)
        if messages is None:
            raise ScenarioError(f"{contexts}: no context {cid[:16]}... named by {questions}")
        persona = _persona(cid, qs, messages, stats)
        if persona is not None:
            out_personas.append(persona)
    if not out_personas:
        raise ScenarioError(f"{questions}: no usable preference question (see the counts: "
                            f"{stats})")
    data = {"format": FORMAT, "name": f"personamem-{questions.stem}",
            "source": {"loader": "personamem", "questions": questions.name,
                       "contexts": contexts.name, **stats},
            "personas": out_personas}
    return parse_scenarios(data, origin=str(questions)), stats


def _exchange_end(messages: list[dict[str, Any]], end: int) -> int:
    """Where a session may end for a question that sees ``[0, end)``: a window ending on
    a user turn keeps that turn's assistant reply, so no session starts with an assistant
    turn (a cut between the two would hand the reply to the next session, and a provider
    would read it as that session's opening; the reply adds nothing the user said)."""
    if 0 < end < len(messages) and messages[end].get("role") == "assistant" \
            and messages[end - 1].get("role") == "user":
        return end + 1
    return end


def _persona(cid: str, rows: list[dict[str, str]], messages: list[dict[str, Any]],
             stats: dict[str, int]) -> dict[str, Any] | None:
    pid = f"{(rows[0].get('persona_id') or 'persona').strip() or 'persona'}-{cid[:8]}"
    pid = re.sub(r"[^A-Za-z0-9_.:-]+", "_", pid)
    # A question sees the history before its end index: the session holding that point
    # is split there, so memory holds exactly what PersonaMem shows (never the rest of
    # the question's own session, which may change the preference).
    cuts = set()
    for r in rows:
        end = _exchange_end(messages, _end_index(r))
        if end > 0:
            cuts.add(end)
    sessions: list[dict[str, Any]] = []
    description = ""
    at = _DAY0
    for i, m in enumerate(messages):
        role, content = m.get("role"), str(m.get("content") or "").strip()
        cut = i in cuts and bool(sessions) and bool(sessions[-1]["turns"])
        if role == "system" or not sessions or cut:
            if role == "system" and not description:
                description = content[:500]
            at = _DAY0 + timedelta(days=len(sessions))
            sessions.append({"session_id": f"{pid}-s{len(sessions) + 1}",
                             "index": len(sessions) + 1, "turns": [], "last": i})
            if role == "system":
                continue
        if role not in ("user", "assistant") or not content:
            continue
        at += timedelta(minutes=1)
        sessions[-1]["turns"].append({"turn_id": f"{pid}-m{i}", "role": role,
                                      "content": content, "at": at.isoformat()})
        sessions[-1]["last"] = i
    kept = [s for s in sessions if s["turns"]]
    last_message = {n: s.pop("last") for n, s in enumerate(kept, start=1)}
    for n, s in enumerate(kept, start=1):
        s["index"] = n
    last_turn = {s["index"]: s["turns"][-1]["at"] for s in kept}
    preferences, tests = [], []
    for r in rows:
        qtype = (r.get("question_type") or "").strip()
        if qtype not in DIMENSION_OF:
            stats["skipped_unknown_type"] += 1
            continue
        dimension = DIMENSION_OF[qtype]
        if dimension is None:
            stats["skipped_fact_recall"] += 1
            continue
        end = _exchange_end(messages, _end_index(r))
        # the last session whose every message comes before the question's end index
        before = [n for n, last in last_message.items() if last < end]
        session = max(before) if end > 0 and before else None
        if session is None:
            stats["skipped_bad_index"] += 1
            continue
        where = f"question {r.get('question_id', '?')}"
        options = _options(r["all_options"], where)
        correct = r["correct_answer"].strip().strip("()").lower()
        qid = re.sub(r"[^A-Za-z0-9_.:-]+", "_", r.get("question_id") or f"q{len(tests)}")
        pref_id = f"{pid}-{qid}"
        chosen = dict(options).get(correct)
        if chosen is None:
            raise ScenarioError(f"{where}: correct_answer {r['correct_answer']!r} is not an "
                                "option")
        preferences.append({
            "id": pref_id, "attribute": (r.get("topic") or "preference").strip() or "preference",
            "scenario": qid, "value": chosen, "valid_from": kept[0]["turns"][0]["at"],
            "cues": [], "revealed": "explicit",
        })
        test_at = datetime.fromisoformat(last_turn[session]) + timedelta(minutes=30)
        tests.append({
            "test_id": f"{pid}-{qid}", "after_session": session, "dimension": dimension,
            "target": pref_id, "scenario": qid, "attribute": r.get("topic") or None,
            "opening": (r.get("user_question_or_message") or r.get("question") or "").strip()
            or "Which response suits me best?",
            "kind": "option", "at": test_at.isoformat(),
            "options": [{"id": letter, "text": text,
                         "satisfies": [pref_id] if letter == correct else [],
                         "violates": [] if letter == correct else [pref_id]}
                        for letter, text in options],
        })
        stats["used"] += 1
    if not tests:
        return None
    return {"persona_id": pid, "name": pid, "description": description,
            "preferences": preferences, "sessions": kept, "tests": tests}
