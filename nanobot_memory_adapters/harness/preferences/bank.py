"""The phrase bank the preference generator draws from (written for this project): the
data lives in ``bank.json`` beside this module (shipped in the package); this module
holds its types and loads it once.

Each *domain* is one preference attribute with the values a user can hold, the ways a
user mentions a value in ordinary chat, and the everyday requests (scenarios) in which
an assistant must act on it. Three kinds of domain, one per behavioural dimension:

- ``PET`` (preference evolution): the user states one value, later switches to another.
  A switch line never names the old value, so only a memory that keeps time (or
  replaces the old fact) shows the current one cleanly.
- ``CS`` (context sensitivity): one value holds at work, another in personal life;
  each is stated in a session of its own context.
- ``IQI`` (implicit-preference inference, this project's definition): the value is
  never said; the user only mentions things that imply it (a dog's name, an upset
  stomach after cheese). A test asks the assistant to act on the implied value.

``cues`` are the words that identify a value's evidence in a memory context (the value's
own words for stated preferences, the telling details for implicit ones). They drive the
judge-free exposure metrics, so the generator checks that every cue occurs only in the
turns that reveal its value (never in filler, openings of tests, or other domains).
Openings never contain a value's cue: the retriever has to connect "team dinner" to
"plant-based", not match a keyword.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class ValueSpec:
    key: str
    value: str  # the IPAS value, as the ground truth states it
    cues: tuple[str, ...]  # words of the turns that reveal it
    state: tuple[str, ...] = ()  # saying it (PET first value, PET switch, CS)
    imply: tuple[str, ...] = ()  # implying it without naming it (IQI)
    good: str = ""  # what an answer that respects it does (rubrics of open tasks)
    # Words that name the value (in ``value``); for an implied value they never occur in
    # the chat, only in ground truth and in what a memory inferred from the chat.
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    openings: tuple[str, ...]
    options: dict[str, tuple[str, ...]]  # value key -> option texts that satisfy it
    neutral: tuple[str, ...]  # options that satisfy no value of the domain
    open_openings: tuple[str, ...] = ()  # the same request without options (open tasks)


@dataclass(frozen=True)
class DomainSpec:
    attribute: str
    dimension: str  # PET | CS | IQI
    values: dict[str, ValueSpec]
    scenarios: tuple[ScenarioSpec, ...]
    # PET: (first, second) value keys; CS: {context: value key}; IQI: the implied value
    first: str = ""
    second: str = ""
    by_context: dict[str, str] = field(default_factory=dict)
    # IQI: the option keys that violate the implied value (usual, tempting choices)
    violating: tuple[str, ...] = ()
    acks: tuple[str, ...] = ()  # assistant replies to a mention of this domain


def _value(raw: dict[str, Any]) -> ValueSpec:
    return ValueSpec(raw["key"], raw["value"], tuple(raw["cues"]), tuple(raw["state"]),
                     tuple(raw["imply"]), raw["good"], tuple(raw["names"]))


def _scenario(raw: dict[str, Any]) -> ScenarioSpec:
    return ScenarioSpec(raw["name"], tuple(raw["openings"]),
                        {k: tuple(v) for k, v in raw["options"].items()},
                        tuple(raw["neutral"]), tuple(raw["open_openings"]))


def _domain(raw: dict[str, Any]) -> DomainSpec:
    return DomainSpec(
        attribute=raw["attribute"], dimension=raw["dimension"],
        values={k: _value(v) for k, v in raw["values"].items()},
        scenarios=tuple(_scenario(s) for s in raw["scenarios"]),
        first=raw["first"], second=raw["second"], by_context=dict(raw["by_context"]),
        violating=tuple(raw["violating"]), acks=tuple(raw["acks"]))


_BANK_FILE = resources.files("nanobot_memory_adapters.harness.preferences") / "bank.json"
_BANK: dict[str, Any] = json.loads(_BANK_FILE.read_text(encoding="utf-8"))

DOMAINS: tuple[DomainSpec, ...] = tuple(_domain(d) for d in _BANK["domains"])
PERSONAS: tuple[tuple[str, str], ...] = tuple((n, d) for n, d in _BANK["personas"])
# Everyday chat the preferences are buried in. None of it may contain a cue (checked).
FILLER: tuple[tuple[str, str], ...] = tuple((u, a) for u, a in _BANK["filler"])
GREETINGS: tuple[str, ...] = tuple(_BANK["greetings"])
GREETING_REPLIES: tuple[str, ...] = tuple(_BANK["greeting_replies"])
