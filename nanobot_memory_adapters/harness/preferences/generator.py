"""A seeded generator of behavioural preference scenarios (license-clean: every line is
from this project's own phrase bank, ``bank.py``, and ``lexicon.py``).

Per persona: seven accumulation chat sessions (work or personal, each on its channel),
six preferences buried in everyday chat, and twelve behavioural tests at three test
points (after sessions 3, 5 and 7), four per dimension:

- two **PET** attributes: a value stated early, replaced later by a switch that never
  names the old value; tested before and after the switch;
- two **CS** attributes: one value stated in a work session, another in a personal one;
  tested in both contexts, with distinct openings arriving on each context's channel;
- two **IQI** attributes: never stated, only implied twice by telling details.

With ``later_sessions`` N > 0: N chat-only sessions follow, and a last test point after
them tests every value only memory can give again (reversion and contamination probes);
the first seven sessions and twelve tests are unchanged.

Each test is a normal request (no options) scored by its value phrases (``acts``), with
a recognition option set shown only after recall and a rubric for a judge. The default
17 personas give 204 tests per provider. The same ``seed`` and ``GENERATOR_VERSION``
give the same set, byte for byte. The generator checks its own output: every cue occurs
only in the turns that reveal its preference, and nothing a retriever sees in a test
session (the opening, the scripted user's neutral turns) holds a cue, a name or an act
phrase of any value of the test's attribute.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from nanobot_memory_adapters.harness.preferences.bank import (
    DOMAINS,
    FILLER,
    GREETING_REPLIES,
    GREETINGS,
    PERSONAS,
    DomainSpec,
    ScenarioSpec,
)
from nanobot_memory_adapters.harness.preferences.format import (
    FORMAT,
    ScenarioError,
    ScenarioSet,
    parse_scenarios,
)
from nanobot_memory_adapters.harness.preferences.lexicon import (
    ACTS,
    CHANNELS,
    CONTEXT_OPENINGS,
    cue_pattern,
    domain_of,
)

GENERATOR_NAME = "nanobot-memory-preferences"
GENERATOR_VERSION = "2.1"
DEFAULT_PERSONAS = 17  # 12 behavioural tests each: 204 per provider, 68 per dimension
SESSIONS = 7
TEST_POINTS = (3, 5, 7)
FILLERS_PER_SESSION = 6
_START = datetime(2024, 1, 8, 9, 0, tzinfo=UTC)
LETTERS = "abcd"

T = TypeVar("T")


class _Session:
    def __init__(self, index: int, context: str, start: datetime) -> None:
        self.index = index
        self.context = context
        self.start = start
        self.items: list[tuple[str, str, str | None]] = []  # (user, assistant, pref key)


def _pick(rng: random.Random, options: Sequence[T]) -> T:
    return options[rng.randrange(len(options))]


def _domains(rng: random.Random, persona: int) -> dict[str, list[DomainSpec]]:
    out: dict[str, list[DomainSpec]] = {}
    for dim in ("PET", "CS", "IQI"):
        pool = [d for d in DOMAINS if d.dimension == dim]
        rng.shuffle(pool)
        # Rotate through the pool so consecutive personas differ.
        start = (persona * 2) % len(pool)
        out[dim] = [pool[(start + k) % len(pool)] for k in range(2)]
    return out


def persona_name(i: int) -> tuple[str, str]:
    """The i-th persona: the bank's named ones, then combinations of their first names,
    surnames and occupations (distinct for i < MAX_PERSONAS)."""
    if i < len(PERSONAS):
        return PERSONAS[i]
    n = len(PERSONAS)
    first = PERSONAS[i % n][0].split()[0]
    last = PERSONAS[(i // n + i) % n][0].split()[-1]
    role = PERSONAS[(i // n + 2 * i + 1) % n][1]
    return f"{first} {last}", role


MAX_PERSONAS = 48


MAX_LATER_SESSIONS = 20


def generate(personas: int = DEFAULT_PERSONAS, seed: int = 0,
             later_sessions: int = 0) -> ScenarioSet:
    """A scenario set of ``personas`` personas (at most ``MAX_PERSONAS``).

    ``later_sessions`` > 0 appends that many chat-only sessions (no preference in them)
    and a last test point after them that tests every value an agent can only know from
    memory again (the PET switches, the personal CS values with their work twins, the
    implied values): the reversion and contamination probes. The first seven sessions and
    twelve tests stay exactly those of ``later_sessions=0`` (the default set)."""
    if not 1 <= personas <= MAX_PERSONAS:
        raise ValueError(f"personas must be 1..{MAX_PERSONAS}, got {personas}")
    if not 0 <= later_sessions <= MAX_LATER_SESSIONS:
        raise ValueError(f"later sessions must be 0..{MAX_LATER_SESSIONS}, got "
                         f"{later_sessions}")
    rng = random.Random(f"{GENERATOR_NAME}:{GENERATOR_VERSION}:{seed}")
    source: dict[str, Any] = {"generator": GENERATOR_NAME, "version": GENERATOR_VERSION,
                              "seed": seed, "personas": personas}
    if later_sessions:
        source["later_sessions"] = later_sessions
    data: dict[str, Any] = {
        "format": FORMAT,
        "name": f"generated-{personas}p-seed{seed}"
        + (f"-later{later_sessions}" if later_sessions else ""),
        "source": source,
        "personas": [_persona(rng, i, _later(seed, i, later_sessions))
                     for i in range(personas)],
    }
    scenario = parse_scenarios(data, origin="generator")
    for persona in scenario.personas:
        _check_cues(persona)
    return scenario


def _later(seed: int, persona: int, sessions: int) -> tuple[random.Random, int] | None:
    """The later sessions' own random stream (the default set's stream is untouched)."""
    if not sessions:
        return None
    return random.Random(f"{GENERATOR_NAME}:{GENERATOR_VERSION}:{seed}:later:{persona}"), sessions


def _turns(rng: random.Random, pid: str, s: _Session,
           body: list[tuple[str, str, str | None]]
           ) -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """A session's turns (a greeting first, then ``body`` shuffled; times a few minutes
    apart) and (preference key, turn id, time) of each statement."""
    rng.shuffle(body)
    body.insert(0, (_pick(rng, GREETINGS), _pick(rng, GREETING_REPLIES), None))
    turns: list[dict[str, Any]] = []
    said: list[tuple[str, str, str]] = []
    t = s.start
    for n, (user, assistant, key) in enumerate(body, start=1):
        uid = f"{pid}-s{s.index}-t{2 * n - 1}"
        turns.append({"turn_id": uid, "role": "user", "content": user, "at": t.isoformat()})
        t += timedelta(seconds=rng.randint(20, 90))
        turns.append({"turn_id": f"{pid}-s{s.index}-t{2 * n}", "role": "assistant",
                      "content": assistant, "at": t.isoformat()})
        t += timedelta(minutes=rng.randint(1, 4))
        if key is not None:
            said.append((key, uid, turns[-2]["at"]))
    return turns, said


def _persona(rng: random.Random, i: int,
             later: tuple[random.Random, int] | None = None) -> dict[str, Any]:
    name, description = persona_name(i)
    pid = f"p{i + 1:02d}"
    doms = _domains(rng, i)
    start = _START + timedelta(days=3 * i)
    contexts = ["personal", "work"] * 4
    rng.shuffle(contexts)
    # Both contexts in sessions 1-4 (CS statements need one of each early).
    if len(set(contexts[:4])) == 1:
        contexts[3] = "work" if contexts[0] == "personal" else "personal"
    sessions: list[_Session] = []
    when = start
    for k in range(1, SESSIONS + 1):
        sessions.append(_Session(k, contexts[k - 1], when.replace(hour=rng.randint(8, 19))))
        when += timedelta(days=rng.randint(3, 9))

    prefs: dict[str, dict[str, Any]] = {}  # key -> preference dict (times filled later)

    def say(session: int, key: str, line: str, domain: DomainSpec) -> None:
        sessions[session - 1].items.append((line, _pick(rng, domain.acks or ("Noted.",)), key))

    def session_in(context: str, among: range) -> int:
        found = [s.index for s in sessions if s.context == context and s.index in among]
        return found[0] if found else among.start

    # PET: first value early, the switch later.
    for n, domain in enumerate(doms["PET"]):
        first, second = domain.values[domain.first], domain.values[domain.second]
        stated, switched = (1, 4) if n == 0 else (2, 5)
        for spec, at, kind in ((first, stated, "first"), (second, switched, "second")):
            key = f"{pid}-{domain.attribute}-{spec.key}"
            prefs[key] = {"spec": spec, "domain": domain, "role": kind}
            say(at, key, _pick(rng, spec.state), domain)
    # CS: each context's value in a session of that context.
    for n, domain in enumerate(doms["CS"]):
        window = range(1, 5) if n == 0 else range(2, 6)
        for context, value_key in sorted(domain.by_context.items()):
            spec = domain.values[value_key]
            key = f"{pid}-{domain.attribute}-{spec.key}"
            prefs[key] = {"spec": spec, "domain": domain, "role": context, "context": context}
            say(session_in(context, window), key, _pick(rng, spec.state), domain)
    # IQI: two hints, never the value.
    for n, domain in enumerate(doms["IQI"]):
        spec = next(iter(domain.values.values()))
        key = f"{pid}-{domain.attribute}-{spec.key}"
        prefs[key] = {"spec": spec, "domain": domain, "role": "implied"}
        hints = list(spec.imply)
        rng.shuffle(hints)
        for at, line in zip((2, 4) if n == 0 else (3, 6), hints, strict=False):
            say(at, key, line, domain)

    # Turns: a greeting, fillers and statements mixed, in order; times a few minutes apart.
    fillers = list(FILLER)
    rng.shuffle(fillers)
    out_sessions: list[dict[str, Any]] = []
    evidence: dict[str, list[str]] = {k: [] for k in prefs}
    first_seen: dict[str, datetime] = {}
    for s in sessions:
        body: list[tuple[str, str, str | None]] = [
            *s.items,
            *[(u, a, None) for u, a in (fillers.pop() for _ in range(FILLERS_PER_SESSION))]]
        turns, said = _turns(rng, pid, s, body)
        for key, uid, at in said:
            evidence[key].append(uid)
            first_seen.setdefault(key, datetime.fromisoformat(at))
        s.items = []
        channel, chat = CHANNELS[s.context]
        out_sessions.append({"session_id": f"{pid}-s{s.index}", "index": s.index,
                             "context": s.context, "channel": channel, "chat_id": chat,
                             "turns": turns})
    if later is not None:  # chat only: the bank's everyday exchanges again, no preference
        extra, count = later
        when = sessions[-1].start
        for k in range(SESSIONS + 1, SESSIONS + count + 1):
            when += timedelta(days=extra.randint(3, 9))
            s = _Session(k, extra.choice(("personal", "work")), when.replace(
                hour=extra.randint(8, 19)))
            chat_only: list[tuple[str, str, str | None]] = [
                (u, a, None) for u, a in extra.sample(FILLER, FILLERS_PER_SESSION)]
            turns, _ = _turns(extra, pid, s, chat_only)
            channel, chat = CHANNELS[s.context]
            out_sessions.append({"session_id": f"{pid}-s{k}", "index": k,
                                 "context": s.context, "channel": channel, "chat_id": chat,
                                 "turns": turns})
    last_turn = {s["index"]: datetime.fromisoformat(s["turns"][-1]["at"]) for s in out_sessions}

    preferences = []
    for key, info in prefs.items():
        spec, domain = info["spec"], info["domain"]
        preferences.append({
            "id": key, "attribute": domain.attribute, "value": spec.value,
            "context": info.get("context"), "valid_from": first_seen[key].isoformat(),
            "revealed": "implicit" if domain.dimension == "IQI" else "explicit",
            "cues": sorted({*spec.cues, *spec.names}), "evidence": evidence[key],
        })

    tests: list[dict[str, Any]] = []

    def add_test(domain: DomainSpec, target: str, point: int, *,
                 context: str | None = None, r: random.Random = rng) -> None:
        scenario = _pick(r, domain.scenarios)
        at = last_turn[point] + timedelta(hours=1) + timedelta(minutes=len(tests))
        spec = prefs[target]["spec"]
        channel, chat = CHANNELS[context]
        openings = (CONTEXT_OPENINGS.get(domain.attribute, {}).get(context or "")
                    or scenario.openings)
        used = {t["opening"] for t in tests}
        fresh = [o for o in openings if o not in used] or list(openings)
        others = [k for k in ACTS[domain.attribute] if k != spec.key]
        kind = {"PET": "superseded" if prefs[target]["role"] == "second" else "other_value",
                "CS": "other_context", "IQI": "violating"}[domain.dimension]
        test: dict[str, Any] = {
            "test_id": f"{pid}-t{len(tests) + 1:02d}",
            "after_session": point, "dimension": domain.dimension, "target": target,
            "scenario": scenario.name, "context": context, "attribute": domain.attribute,
            "channel": channel, "chat_id": chat, "kind": "behaviour", "at": at.isoformat(),
            "opening": _pick(r, fresh),
            "acts": {"current": list(ACTS[domain.attribute][spec.key]),
                     "other": [p for k in others for p in ACTS[domain.attribute][k]],
                     "other_kind": kind},
            "rubric": (f"The user's current preference here is: {spec.value}. A correct "
                       f"reply {spec.good} (e.g. "
                       + ", ".join(ACTS[domain.attribute][spec.key][:3])
                       + "); it does not act on "
                       + "; ".join(_value_text(domain, k) for k in others) + "."),
            "options": _options(r, domain, scenario, target, prefs, pid),
        }
        tests.append(test)

    for n, domain in enumerate(doms["PET"]):
        first = f"{pid}-{domain.attribute}-{domain.first}"
        second = f"{pid}-{domain.attribute}-{domain.second}"
        add_test(domain, first, 3)
        add_test(domain, second, 7 if n == 0 else 5)
    for n, domain in enumerate(doms["CS"]):
        point = 5 if n == 0 else 7
        for context, value_key in sorted(domain.by_context.items()):
            add_test(domain, f"{pid}-{domain.attribute}-{value_key}", point, context=context)
    for n, domain in enumerate(doms["IQI"]):
        spec = next(iter(domain.values.values()))
        target = f"{pid}-{domain.attribute}-{spec.key}"
        for point in ((5, 7) if n == 0 else (7, 7)):
            add_test(domain, target, point)
    if later is not None:  # every value only memory can give, once more, at the last point
        extra, count = later
        last = SESSIONS + count
        for domain in doms["PET"]:
            add_test(domain, f"{pid}-{domain.attribute}-{domain.second}", last, r=extra)
        for domain in doms["CS"]:
            for context, value_key in sorted(domain.by_context.items()):
                add_test(domain, f"{pid}-{domain.attribute}-{value_key}", last,
                         context=context, r=extra)
        for domain in doms["IQI"]:
            spec = next(iter(domain.values.values()))
            add_test(domain, f"{pid}-{domain.attribute}-{spec.key}", last, r=extra)
    tests.sort(key=lambda t: (t["after_session"], t["test_id"]))

    return {"persona_id": pid, "name": name, "description": description,
            "preferences": preferences, "sessions": out_sessions, "tests": tests}


def _options(rng: random.Random, domain: DomainSpec, scenario: ScenarioSpec, target: str,
             prefs: dict[str, dict[str, Any]], pid: str) -> list[dict[str, Any]]:
    """The target's option, the tempting wrong one(s), neutral fill; shuffled, a-d."""
    target_key = prefs[target]["spec"].key
    chosen: list[dict[str, Any]] = [
        {"text": _pick(rng, scenario.options[target_key]), "satisfies": [target],
         "violates": []}]
    if domain.dimension == "IQI":
        wrong_keys = [k for k in domain.violating if k in scenario.options]
        texts = list(scenario.options[wrong_keys[0]])
        rng.shuffle(texts)
        for text in texts[:2]:
            chosen.append({"text": text, "satisfies": [], "violates": [target]})
    else:
        for other_key in domain.values:
            if other_key == target_key or other_key not in scenario.options:
                continue
            other = f"{pid}-{domain.attribute}-{other_key}"
            chosen.append({"text": _pick(rng, scenario.options[other_key]),
                           "satisfies": [other] if other in prefs else [],
                           "violates": [target]})
    neutral = list(scenario.neutral)
    rng.shuffle(neutral)
    for text in neutral[: max(0, 4 - len(chosen))]:
        chosen.append({"text": text, "satisfies": [], "violates": []})
    rng.shuffle(chosen)
    return [{"id": LETTERS[i], **o} for i, o in enumerate(chosen)]


def _value_text(domain: DomainSpec, key: str) -> str:
    """Another value, as the rubric names it (no parentheses: those hold the target's)."""
    spec = domain.values.get(key)
    text = spec.value if spec is not None else " / ".join(ACTS[domain.attribute][key][:3])
    return re.sub(r"\s*\([^)]*\)", "", text)


def attribute_cues(attribute: str | None) -> list[str]:
    """Every word that names or reveals any value of an attribute: the statement cues,
    the names, and the phrases of acting on each value (``lexicon.ACTS``)."""
    domain = domain_of(attribute)
    if domain is None:
        return []
    words = {c for v in domain.values.values() for c in (*v.cues, *v.names)}
    words |= {a for acts in ACTS[domain.attribute].values() for a in acts}
    return sorted(words)


def retrievable_texts(test: Any) -> list[tuple[str, str]]:
    """What a retriever can see of a test session: the opening, the scripted user's
    turns that are not corrections (a correction names the current value by design and
    follows a wrong act; it is marked in the trace), the recognition task's follow-up
    turn, and the request tags (all of them: ``--test-tags all`` sends every one; a tag's
    underscores read as spaces, as a retriever's tokenizer splits them). Options are
    never retrieved on."""
    from nanobot_memory_adapters.harness.preferences import lexicon
    from nanobot_memory_adapters.harness.preferences.simulator import NEUTRAL_TURNS

    texts = [("opening", test.opening), *(("simulator", t) for t in NEUTRAL_TURNS)]
    if test.options:
        texts.append(("follow-up", lexicon.FOLLOW_UP))
    texts += [(f"{k} tag", v.replace("_", " ")) for k, v in test.tags().items()]
    return texts


def leaks(test: Any) -> list[str]:
    """The cues of any value of the test's attribute found in what the retriever sees."""
    found = []
    for where, text in retrievable_texts(test):
        found += [f"{cue!r} in the {where}" for cue in attribute_cues(test.attribute)
                  if cue_pattern(cue).search(text)]
    return found


def _check_cues(persona: Any) -> None:
    """Every cue occurs only in its own evidence turns; nothing a retriever sees in a test
    session holds a cue of any value of the test's attribute."""
    turns = {t.turn_id: t.content for s in persona.sessions for t in s.turns}
    for test in persona.tests:
        found = leaks(test)
        if found:
            raise ScenarioError(f"generator: test {test.test_id} leaks its answer: "
                                f"{found[:3]} (fix the phrase bank)")
        for option in test.options:
            if test.acts and test.target in option.satisfies and not any(
                    cue_pattern(p).search(option.text) for p in test.acts.current):
                raise ScenarioError(f"generator: option {option.text!r} of {test.test_id} "
                                    "holds no phrase of its value (fix lexicon.ACTS)")
    for pref in persona.preferences:
        own = set(pref.evidence)
        for cue in pref.cues:
            pattern = cue_pattern(cue)
            elsewhere = [tid for tid, text in turns.items()
                         if tid not in own and pattern.search(text)]
            if elsewhere:
                raise ScenarioError(f"generator: cue {cue!r} of {pref.id} also occurs in "
                                    f"{elsewhere[:3]} (fix the phrase bank)")
        if pref.revealed == "explicit" and not any(
            cue_pattern(c).search(turns[t]) for c in pref.cues for t in own
        ):
            raise ScenarioError(f"generator: no cue of {pref.id} occurs in its evidence")
