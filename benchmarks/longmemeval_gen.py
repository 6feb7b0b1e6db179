"""A generated LongMemEval-shaped set (the benchmark's exact layout; synthetic content).

    python benchmarks/longmemeval_gen.py OUT.json [--questions 50] [--sessions 30] [--seed 0]
                                         [--turns 2] [--turn-words 0]

Each question gets a haystack of its own: ``--sessions`` sessions (user + assistant turn)
in date order, one or two evidence sessions (``answer_<hex>_<k>``, the fact on the user
turn, ``has_answer: true``) among distractors that reuse the same relation for other
people and the same person for other relations (so retrieval is not trivial), and filler
(``sharegpt_*``/``ultrachat_*``). Every eleventh question is an ``_abs`` variant (asks
about a person no session mentions). Evidence sessions are known by construction, which
is what ``benchmarks/dense_session_recall.py`` and ``bench --task longmemeval`` score.
Nothing here is LongMemEval's data; only its shape.

``--turns`` and ``--turn-words`` give LongMemEval-S's size for cost measurements: S has
~50 sessions and ~494 turns per haystack (~115k tokens, ~233 per turn), which
``--sessions 50 --turns 10 --turn-words 200`` approximates (500 turns, ~116k tokens).
Each session gets extra filler exchanges, every filler turn padded with filler sentences
to about that many words; evidence turns keep their one sentence. The defaults give the
set the docs' table was measured on, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

PEOPLE = ["sister", "brother", "cousin", "neighbour", "boss", "aunt", "uncle", "roommate",
          "best friend", "grandmother", "colleague", "landlord"]
NEVER_MENTIONED = ["godmother", "stepfather", "piano teacher", "dentist"]
RELATIONS = [  # (statement, question, values)
    ("My {p}'s dog is called {v}.", "What is my {p}'s dog called?",
     ["Biscuit", "Pepper", "Juniper", "Waffles", "Comet", "Mochi", "Tango", "Pickles"]),
    ("My {p} just moved to {v} for a new job.", "Which city did my {p} move to?",
     ["Lisbon", "Osaka", "Denver", "Tallinn", "Montreal", "Perth", "Bergen", "Tucson"]),
    ("My {p} drives a {v} these days.", "What car does my {p} drive?",
     ["green Subaru", "red Mini", "white Tesla", "blue Volvo", "grey Civic", "black Jeep"]),
    ("My {p} is learning to play the {v}.", "Which instrument is my {p} learning?",
     ["cello", "banjo", "oboe", "ukulele", "harp", "trombone", "accordion", "sitar"]),
    ("My {p}'s birthday dinner will be at {v}.", "Where is my {p}'s birthday dinner?",
     ["Luigi's Trattoria", "the Blue Lantern", "Saffron House", "Harbor Grill", "Kimchi Bar"]),
    ("My {p} works as a {v}.", "What does my {p} do for work?",
     ["dental hygienist", "tram driver", "sommelier", "tax auditor", "beekeeper", "pilot"]),
]
TYPES = ["single-session-user", "multi-session", "knowledge-update", "temporal-reasoning",
         "single-session-preference", "single-session-assistant"]
FILLER = ["Can you help me plan a {a} workout for {b}?", "What is a good recipe with {a} and {b}?",
          "Explain the difference between {a} and {b} in simple terms.",
          "Recommend a book about {a} for someone who likes {b}.",
          "How do I fix a {a} that keeps making a {b} noise?"]
WORDS = ["rowing", "lentils", "ginger", "compilers", "gardening", "violins", "glaciers",
         "spreadsheets", "bicycles", "tea", "origami", "volcanoes", "jazz", "sailing", "radio"]
REPLY = ["Sure, here is a short plan.", "Good question; the short version is this.",
         "Happy to help with that.", "Here are three ideas to start with."]


PAD = ["It has been on my mind for a while and I would like a clear answer.",
       "I tried a few things already, but nothing really stuck so far.",
       "Please keep it practical, with steps I can follow this week.",
       "Some background: I am busy on weekdays and have more time on Sundays.",
       "I read a couple of articles about it and they disagreed with each other.",
       "A friend suggested a different approach, so I am curious what you think."]


def _pad(text: str, words: int, rng: random.Random) -> str:
    """``text`` followed by filler sentences until it has about ``words`` words."""
    parts = [text]
    while words and sum(len(p.split()) for p in parts) < words:
        parts.append(rng.choice(PAD))
    return " ".join(parts)


def _session(user: str, answer: bool | None) -> list[dict[str, Any]]:
    turn: dict[str, Any] = {"role": "user", "content": user}
    if answer is not None:
        turn["has_answer"] = answer
    return [turn, {"role": "assistant", "content": random.choice(REPLY)}]


def _lengthen(session: list[dict[str, Any]], turns: int, words: int,
              rng: random.Random) -> list[dict[str, Any]]:
    """Extra filler exchanges up to ``turns`` turns; filler text padded to ``words``."""
    out = [dict(t) for t in session]
    for t in out:
        if not t.get("has_answer"):
            t["content"] = _pad(t["content"], words, rng)
    while len(out) + 2 <= turns:
        a, b = rng.sample(WORDS, 2)
        out += [{"role": "user", "content": _pad(rng.choice(FILLER).format(a=a, b=b), words,
                                                 rng)},
                {"role": "assistant", "content": _pad(rng.choice(REPLY), words, rng)}]
    return out


def question(i: int, n_sessions: int, rng: random.Random, turns: int = 2,
             words: int = 0) -> dict[str, Any]:
    qtype = TYPES[i % len(TYPES)]
    abstention = i % 11 == 10
    person = rng.choice(PEOPLE)
    stmt, ask, values = rng.choice(RELATIONS)
    first, second = rng.sample(values, 2)
    tag = f"{rng.getrandbits(32):08x}"
    n_evidence = 2 if qtype in ("multi-session", "knowledge-update") else 1
    evidence = [_session(stmt.format(p=person, v=first), True)]
    if n_evidence == 2:  # an update (the later session wins) or a second mention
        evidence.append(_session(f"Update: {stmt.format(p=person, v=second)}", True))
    distract: list[list[dict[str, Any]]] = []
    for _ in range(6):  # same relation, other people; same person, other relations
        s2, _, v2 = rng.choice(RELATIONS)
        who = rng.choice([p for p in PEOPLE if p != person])
        distract.append(_session(stmt.format(p=who, v=rng.choice(values)), None))
        distract.append(_session(s2.format(p=person if s2 != stmt else who,
                                           v=rng.choice(v2)), None))
    sessions = [(f"answer_{tag}_{k + 1}", s) for k, s in enumerate(evidence)]
    sessions += [(f"sharegpt_{rng.getrandbits(24):06x}_{k}", s) for k, s in enumerate(distract)]
    while len(sessions) < n_sessions:
        a, b = rng.sample(WORDS, 2)
        sessions.append((f"ultrachat_{rng.randrange(10**6)}",
                         _session(rng.choice(FILLER).format(a=a, b=b), None)))
    rng.shuffle(sessions)
    if n_evidence == 2:  # keep the update after the first mention
        idx = sorted(k for k, (sid, _) in enumerate(sessions) if sid.startswith("answer_"))
        a_, b_ = (sessions[k] for k in idx)
        if a_[0].endswith("_2"):
            sessions[idx[0]], sessions[idx[1]] = b_, a_
    if turns > 2 or words:  # LongMemEval-S's size; the defaults draw nothing more
        pad_rng = random.Random(rng.getrandbits(64))
        sessions = [(sid, _lengthen(s, turns, words, pad_rng)) for sid, s in sessions]
    start = datetime(2023, 1, 1) + timedelta(days=rng.randrange(200))
    dates = [start + timedelta(days=k * 2, hours=rng.randrange(24)) for k in range(len(sessions))]
    fmt = "%Y/%m/%d (%a) %H:%M"
    # abstention: ask about someone no session mentions (never in PEOPLE)
    q_person = rng.choice(NEVER_MENTIONED) if abstention else person
    gold = second if qtype == "knowledge-update" else first
    return {
        "question_id": f"gen{i:04d}" + ("_abs" if abstention else ""),
        "question_type": qtype,
        "question": ask.format(p=q_person),
        "answer": f"You never mentioned your {q_person}." if abstention else gold,
        "question_date": (dates[-1] + timedelta(days=3)).strftime(fmt),
        "haystack_session_ids": [sid for sid, _ in sessions],
        "haystack_dates": [d.strftime(fmt) for d in dates],
        "haystack_sessions": [s for _, s in sessions],
        "answer_session_ids": [sid for sid, _ in sessions if sid.startswith("answer_")],
    }


def generate(n_questions: int = 50, n_sessions: int = 30, seed: int = 0, turns: int = 2,
             words: int = 0) -> list[dict[str, Any]]:
    """``n_questions`` answerable questions plus the ``_abs`` ones among them."""
    rng = random.Random(seed)
    random.seed(seed)
    out, i = [], 0
    while sum(1 for q in out if not q["question_id"].endswith("_abs")) < n_questions:
        out.append(question(i, n_sessions, rng, turns, words))
        i += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--questions", type=int, default=50, help="answerable questions (>= 1)")
    ap.add_argument("--sessions", type=int, default=30,
                    help="sessions per haystack (>= 1; a haystack always holds its evidence "
                    "and 12 distractor sessions, so fewer than 14 gives 13 or 14)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--turns", type=int, default=2, help="turns per session (even, >= 2)")
    ap.add_argument("--turn-words", type=int, default=0, help="pad filler turns to ~N words")
    a = ap.parse_args()
    check_arguments(ap, a)
    data = generate(a.questions, a.sessions, a.seed, a.turns, a.turn_words)
    try:
        a.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        ap.error(f"{a.out}: cannot write it ({exc.strerror or exc}); give a writable path")
    sizes = sorted({len(q["haystack_sessions"]) for q in data})
    each = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    print(f"{a.out}: {len(data)} questions, {each} sessions each")


def check_arguments(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Refuse what would write a wrong set (no questions, empty haystacks, a user turn
    without its reply) or fail at the write with a traceback, before generating."""
    if a.questions < 1:
        ap.error(f"--questions {a.questions}: give 1 or more")
    if a.sessions < 1:
        ap.error(f"--sessions {a.sessions}: give 1 or more")
    if a.turns < 2 or a.turns % 2:
        ap.error(f"--turns {a.turns}: give an even number, 2 or more (user and assistant "
                 "turns alternate)")
    if a.turn_words < 0:
        ap.error(f"--turn-words {a.turn_words}: give 0 (no padding) or more")
    if a.out.is_dir():
        ap.error(f"{a.out} is a directory; give a file name such as {a.out / 'lme.json'}")
    if not a.out.parent.is_dir():
        ap.error(f"{a.out}: the folder {a.out.parent} does not exist; create it or give "
                 "a path in an existing folder")


if __name__ == "__main__":
    main()
