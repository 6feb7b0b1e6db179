"""The behavioural preference scenario format (``nanobot-memory-preferences/1``).

One JSON document holds personas; each has

- ``preferences``: the ground truth (IPAS: attribute, value, context/scenario, valid from /
  until). A later preference for the same attribute and context ends the earlier one: its
  ``valid_until`` is the successor's ``valid_from`` (filled in when missing, refused when
  it contradicts). ``cues`` are the words that identify the preference's evidence in a
  memory context (the judge-free exposure metrics look for them);
- ``sessions``: accumulation sessions of timestamped chat turns (user / assistant), each
  optionally in a ``context`` (``work``, ``personal``);
- ``tests``: test sessions placed ``after_session`` N (the test point). Each has a
  scenario, tags, the channel and chat it arrives on, the user's opening message, the
  ``target`` preference it measures and its ``dimension`` (CS, PET or IQI). A
  ``behaviour`` test is a normal request scored by its value phrases (``acts``), with
  optional ``options`` (a recognition task, shown only after recall) and a ``rubric``;
  an ``option`` test has options only; an ``open`` test a rubric only.

``load_scenarios`` reads and validates a file; every mistake names the persona, the item
and the fix in one line.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from nanobot_memory_adapters.json_files import JsonFileError, load_json_file

FORMAT = "nanobot-memory-preferences/1"
Dimension = Literal["CS", "PET", "IQI"]
DIMENSIONS: tuple[str, ...] = ("CS", "PET", "IQI")


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names where and how to fix it."""


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError("time is naive; give an ISO time with a timezone, e.g. ...+00:00")
    return value


class PreferenceFact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    attribute: str = Field(min_length=1)
    value: str = Field(min_length=1)
    context: str | None = None
    scenario: str | None = None
    valid_from: datetime
    valid_until: datetime | None = None
    revealed: Literal["explicit", "implicit"] = "explicit"
    cues: list[str] = Field(
        default_factory=list,
        description="Words identifying its evidence in a memory context; empty when unknown "
        "(exposure is then n/a for tests of it).",
    )
    evidence: list[str] = Field(default_factory=list, description="Turn ids revealing it.")

    @field_validator("valid_from", "valid_until")
    @classmethod
    def _times(cls, v: datetime | None) -> datetime | None:
        return None if v is None else _aware(v)

    def valid_at(self, at: datetime) -> bool:
        return self.valid_from <= at and (self.valid_until is None or at < self.valid_until)


class ChatTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    turn_id: str = Field(min_length=1)
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)
    at: datetime

    @field_validator("at")
    @classmethod
    def _time(cls, v: datetime) -> datetime:
        return _aware(v)


class AccumulationSession(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str = Field(min_length=1)
    index: int = Field(ge=1, description="Order on the timeline (1 = first).")
    context: str | None = None
    channel: str | None = Field(None, description="Where the chat happened (nanobot's "
                                "channel, e.g. slack, whatsapp); None when unknown.")
    chat_id: str | None = Field(None, description="The chat on that channel (a work "
                                "workspace, a family chat).")
    turns: list[ChatTurn] = Field(min_length=1)


class Option(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z]$")
    text: str = Field(min_length=1)
    satisfies: list[str] = Field(default_factory=list)
    violates: list[str] = Field(default_factory=list)


class ValuePhrases(BaseModel):
    """How a reply that acts on a value reads: the generator knows every value's surface
    forms, so the judge-free behaviour score is exact for its own data (and only there)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    current: list[str] = Field(min_length=1, description="Phrases of acting on the target.")
    other: list[str] = Field(default_factory=list, description="Phrases of acting on another "
                             "value of the attribute (superseded, other context, or the "
                             "usual choice an implied value rules out).")
    other_kind: Literal["superseded", "other_context", "other_value", "violating"] = (
        "other_value")


class TestSession(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    test_id: str = Field(min_length=1)
    after_session: int = Field(ge=1)
    dimension: Dimension
    target: str = Field(min_length=1, description="The preference that is current here.")
    scenario: str | None = None
    context: str | None = None
    attribute: str | None = None
    channel: str | None = Field(None, description="The channel the request arrives on.")
    chat_id: str | None = Field(None, description="The chat on that channel.")
    opening: str = Field(min_length=1)
    kind: Literal["behaviour", "option", "open"] = Field(
        description="behaviour: a normal request, the reply scored by value phrases "
        "(options, if any, are a secondary recognition task shown only after recall); "
        "option: a multiple-choice task only; open: a rubric-judged request only.")
    options: list[Option] = Field(default_factory=list)
    acts: ValuePhrases | None = None
    rubric: str | None = None
    at: datetime

    @field_validator("at")
    @classmethod
    def _time(cls, v: datetime) -> datetime:
        return _aware(v)

    def tags(self) -> dict[str, str]:
        return {k: v for k in ("scenario", "context", "attribute")
                if (v := getattr(self, k))}


class Persona(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    persona_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    name: str = Field(min_length=1)
    description: str = ""
    preferences: list[PreferenceFact]
    sessions: list[AccumulationSession] = Field(min_length=1)
    tests: list[TestSession] = Field(min_length=1)

    def preference(self, pref_id: str) -> PreferenceFact:
        for p in self.preferences:
            if p.id == pref_id:
                return p
        raise KeyError(pref_id)

    def superseded(self, target: PreferenceFact) -> list[PreferenceFact]:
        """Earlier values of the target's attribute and context (ended before it)."""
        return [p for p in self.preferences
                if p.attribute == target.attribute and p.context == target.context
                and p.scenario == target.scenario and p.id != target.id
                and p.valid_until is not None and p.valid_until <= target.valid_from]

    def other_contexts(self, target: PreferenceFact) -> list[PreferenceFact]:
        """Values of the same attribute that hold in another context."""
        return [p for p in self.preferences
                if p.attribute == target.attribute and p.context != target.context
                and p.context is not None and target.context is not None]


class ScenarioSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["nanobot-memory-preferences/1"] = FORMAT
    name: str = Field(min_length=1)
    source: dict[str, Any] = Field(
        default_factory=dict,
        description="Where the set came from: {generator, version, seed} or {loader, ...}.",
    )
    personas: list[Persona] = Field(min_length=1)


# -- validation ------------------------------------------------------------------------


def _fill_validity(persona: dict[str, Any]) -> None:
    """A change ends the previous value: fill ``valid_until`` from the successor."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for pref in persona.get("preferences") or []:
        if isinstance(pref, dict):
            key = (pref.get("attribute"), pref.get("context"), pref.get("scenario"))
            groups.setdefault(key, []).append(pref)
    for prefs in groups.values():
        prefs.sort(key=lambda p: str(p.get("valid_from")))
        for earlier, later in pairwise(prefs):
            if earlier.get("valid_until") in (None, ""):
                earlier["valid_until"] = later.get("valid_from")


def _check(persona: Persona) -> None:
    where = f"persona {persona.persona_id!r}"
    ids = [p.id for p in persona.preferences]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ScenarioError(f"{where}: preference ids {dup} appear twice; make each id unique")
    known = set(ids)
    by_key: dict[tuple[Any, ...], list[PreferenceFact]] = {}
    for p in persona.preferences:
        by_key.setdefault((p.attribute, p.context, p.scenario), []).append(p)
        if p.valid_until is not None and p.valid_until <= p.valid_from:
            raise ScenarioError(f"{where}: preference {p.id!r} ends before it starts; fix "
                                "valid_from / valid_until")
    for prefs in by_key.values():
        prefs.sort(key=lambda p: p.valid_from)
        for a, b in pairwise(prefs):
            if a.valid_until is None or a.valid_until > b.valid_from:
                raise ScenarioError(
                    f"{where}: preferences {a.id!r} and {b.id!r} (attribute {a.attribute!r}) "
                    f"overlap; a change must end the previous value (set {a.id}.valid_until "
                    f"to {b.valid_from.isoformat()} or remove it)")
    indexes = [s.index for s in persona.sessions]
    if sorted(indexes) != indexes or len(set(indexes)) != len(indexes):
        raise ScenarioError(f"{where}: session indexes {indexes} must be unique and in order")
    turn_ids = [t.turn_id for s in persona.sessions for t in s.turns]
    dup_turns = sorted({t for t in turn_ids if turn_ids.count(t) > 1})
    if dup_turns:
        raise ScenarioError(f"{where}: turn ids {dup_turns[:5]} appear twice")
    for p in persona.preferences:
        unknown = [t for t in p.evidence if t not in turn_ids]
        if unknown:
            raise ScenarioError(f"{where}: preference {p.id!r} names evidence turns "
                                f"{unknown[:5]} that no session has")
    test_ids = [t.test_id for t in persona.tests]
    if len(set(test_ids)) != len(test_ids):
        raise ScenarioError(f"{where}: test ids must be unique")
    last = max(indexes)
    for t in persona.tests:
        at = f"{where}, test {t.test_id!r}"
        if t.after_session not in indexes:
            raise ScenarioError(f"{at}: after_session {t.after_session} is not a session "
                                f"index (have {indexes[0]}..{last})")
        if t.target not in known:
            raise ScenarioError(f"{at}: target {t.target!r} is not a preference id")
        target = persona.preference(t.target)
        if not target.valid_at(t.at):
            raise ScenarioError(f"{at}: target {t.target!r} is not valid at the test's time "
                                f"{t.at.isoformat()}")
        if t.kind == "behaviour" and t.acts is None:
            raise ScenarioError(f"{at}: a behaviour task needs 'acts' (the value phrases that "
                                "score its reply)")
        if t.options or t.kind == "option":
            if len(t.options) < 2:
                raise ScenarioError(f"{at}: an option task needs at least two options")
            letters = [o.id for o in t.options]
            if len(set(letters)) != len(letters):
                raise ScenarioError(f"{at}: option ids {letters} must be unique")
            for o in t.options:
                bad = [r for r in (*o.satisfies, *o.violates) if r not in known]
                if bad:
                    raise ScenarioError(f"{at}: option {o.id!r} names unknown preferences {bad}")
            if not any(t.target in o.satisfies for o in t.options):
                raise ScenarioError(f"{at}: no option satisfies the target {t.target!r}")
        elif t.kind == "open" and not t.rubric:
            raise ScenarioError(f"{at}: an open task needs a rubric")


def parse_scenarios(data: Any, *, origin: str = "scenario data") -> ScenarioSet:
    if not isinstance(data, dict):
        raise ScenarioError(f"{origin}: expected a JSON object with 'format' and 'personas'")
    if data.get("format") != FORMAT:
        raise ScenarioError(f"{origin}: 'format' is {data.get('format')!r}; expected {FORMAT!r}")
    data = json.loads(json.dumps(data))  # a private copy to fill validity into
    for persona in data.get("personas") or []:
        if isinstance(persona, dict):
            _fill_validity(persona)
    try:
        scenario = ScenarioSet.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"])
        raise ScenarioError(f"{origin}: {path}: {first['msg']}") from None
    for persona in scenario.personas:
        _check(persona)
    ids = [p.persona_id for p in scenario.personas]
    if len(set(ids)) != len(ids):
        raise ScenarioError(f"{origin}: persona ids must be unique")
    return scenario


def load_scenarios(path: str | Path) -> ScenarioSet:
    p = Path(path)
    if p.is_dir():
        raise ScenarioError(f"{p} is a directory; give a scenario JSON file")
    if not p.is_file():
        raise ScenarioError(f"{p} not found; give a scenario JSON file (nanobot-memory "
                            "preferences generate writes one)")
    try:
        data = load_json_file(p, what="scenario JSON file",
                              fix="nanobot-memory preferences generate writes one")
    except JsonFileError as exc:
        raise ScenarioError(str(exc)) from None
    return parse_scenarios(data, origin=str(p))


def dump_scenarios(scenario: ScenarioSet) -> str:
    return json.dumps(scenario.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n"


def scenario_sha256(scenario: ScenarioSet) -> str:
    return hashlib.sha256(dump_scenarios(scenario).encode("utf-8")).hexdigest()
