"""The ideal reader: a deterministic agent double that acts only on what the memory
section says (a stand-in for nanobot's model, labelled as one everywhere).

It isolates a memory's contribution from a model's reasoning. For a test of attribute A
in context C it reads the memory section item by item and finds the statements of A's
values (a value's own words: its statement cues, its names, the telling details of an
implied value; ``bank.py``). It drops items whose label marks them ended
(``valid=..<date>``, ``expired=``) and statements of another context (an item that says
"work" / "family" / "friends"..., or a ``work:`` / ``personal:`` label), and acts on the
newest remaining statement (the item's time from its day heading and clock; the later
item when times tie or are missing), preferring one of C over one with no context. The
session's own user turns count as the newest statements (a correction is taken). With no
statement it acts on the attribute's default (``lexicon.DEFAULT``): its score with no
memory is the default rate.

It knows the vocabulary of every value (as any model knows what "decaf" means), never
which value is current: that is what the memory must supply. Generated scenarios only
(PersonaMem has no value vocabulary): ``preferences run --agent ideal-reader``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryAdapter,
    MemoryScope,
    RetrieveRequest,
)
from nanobot_memory_adapters.formatting import ended_validity
from nanobot_memory_adapters.harness.preferences.bank import DomainSpec
from nanobot_memory_adapters.harness.preferences.format import TestSession
from nanobot_memory_adapters.harness.preferences.lexicon import (
    ACTS,
    cue_pattern,
    default_key,
    domain_of,
    has_any,
    memory_items,
)
from nanobot_memory_adapters.harness.preferences.session import Said

_PERSONAL = ("personal:", "family", "friends", "social", "outside of work", "grandmother",
             "days off", "context=personal")
_WORK = ("work:", "work", "work-related", "office", "company", "colleague", "colleagues",
         "client", "context=work")


@dataclass(frozen=True)
class Statement:
    value: str
    context: str | None
    at: datetime | None
    position: int


def _context_of(text: str) -> str | None:
    lowered = text.lower()
    if any(cue_pattern(w).search(lowered) for w in _PERSONAL):
        return "personal"
    if any(cue_pattern(w).search(lowered) for w in _WORK):
        return "work"
    return None


def _value_words(domain: DomainSpec) -> dict[str, tuple[str, ...]]:
    return {k: (*v.cues, *v.names) for k, v in domain.values.items()}


def _values_in(text: str, words: dict[str, tuple[str, ...]]) -> list[str]:
    return [k for k, ws in words.items() if has_any(text, ws)]


def statements(memory: str, domain: DomainSpec) -> list[Statement]:
    """The memory section's statements of the domain's values, in reading order."""
    words = _value_words(domain)
    out: list[Statement] = []
    for n, (item, at) in enumerate(memory_items(memory)):
        if ended_validity(item.split("\n", 1)[0]):
            continue
        found = _values_in(item, words)
        if len(found) != 1:
            continue  # no statement, or one that names two values (it cannot tell)
        when = datetime.fromisoformat(at) if at else None
        out.append(Statement(found[0], _context_of(item), when, n))
    return out


def choose(memory: str, test: TestSession, user_turns: list[str]) -> tuple[str, str]:
    """The value the reader acts on and why (``memory``, ``conversation`` or ``default``)."""
    domain = domain_of(test.attribute)
    if domain is None:
        raise ValueError(f"test {test.test_id}: attribute {test.attribute!r} is not in the "
                         "phrase bank; the ideal reader reads generated scenarios only")
    words = _value_words(domain)
    for turn in reversed(user_turns):
        found = _values_in(turn, words)
        if len(found) == 1:
            return found[0], "conversation"
    found = [s for s in statements(memory, domain) if s.context in (None, test.context)
             or test.context is None]
    if not found:
        return default_key(domain), "default"
    own = [s for s in found if test.context is not None and s.context == test.context]
    pool = own or found
    newest = max(pool, key=lambda s: (s.at or datetime.min, s.position))
    return newest.value, "memory"


def reply_for(test: TestSession, value: str) -> str:
    """A reply acting on ``value`` in the words the behaviour score reads."""
    assert test.attribute is not None
    return f"Sure, I'll go with {ACTS[test.attribute][value][0]} for you."


def pick_option(test: TestSession, value: str) -> str:
    """The recognition answer: the option that reads as ``value`` (else the first)."""
    assert test.attribute is not None
    for option in test.options:
        if has_any(option.text, ACTS[test.attribute][value]):
            return f"({option.id}) {option.text}"
    return f"({test.options[0].id}) {test.options[0].text}"


def check_readable(tests: list[TestSession]) -> str | None:
    """Why the reader cannot run these tests (one line), or None."""
    unknown = sorted({t.attribute or "-" for t in tests if domain_of(t.attribute) is None})
    if unknown:
        return (f"the ideal reader knows the generator's attributes only; these tests have "
                f"{unknown[:3]} (use --agent-base-url for PersonaMem)")
    return None


@dataclass(frozen=True)
class IdealReaderAgent:
    """``--agent ideal-reader``: the test sessions are answered by the ideal reader."""

    def describe(self) -> dict[str, str]:
        return {"kind": "ideal-reader", "model": "ideal-reader (deterministic agent double: "
                "acts on the newest valid statement in the memory section, else the "
                "attribute's default)"}


class ReaderResponder:
    """The ideal reader as a test-session responder: it recalls as nanobot's plugin does
    (the user's turn as the query, the test's tags, the test's time), then reads."""

    def __init__(self, adapter: MemoryAdapter, scope: MemoryScope, budget_tokens: int) -> None:
        self.adapter = adapter
        self.scope = scope
        self.budget = ContextBudget(max_tokens=budget_tokens)

    async def say(self, test: TestSession, session_key: str, text: str,
                  attributes: dict[str, str], *, options: bool,
                  user_turns: list[str]) -> Said:
        from nanobot_memory_adapters.harness.trace_sink import error_text

        context, error = "", None
        request = RetrieveRequest.with_tags(
            attributes, query=text, scope=self.scope, session_id=session_key,
            budget=self.budget, as_of=test.at)
        try:
            result = await self.adapter.retrieve(request)
            context = result.formatted_context or ""
        except Exception as exc:
            error = f"retrieve: {error_text(exc)}"
        value, why = choose(context, test, user_turns)
        reply = pick_option(test, value) if options else reply_for(test, value)
        # the query and tags of the request the provider got, not the text we meant to send
        return Said(reply, context, request.query, error, {"reader": why, "value": value},
                    tags=request.tags())


def default_rate(scenario: Any) -> float | None:
    """The share of behavioural tests whose current value is the attribute's default:
    the ideal reader's score with no memory (None for scenarios outside the bank)."""
    hits, n = 0, 0
    for persona in scenario.personas:
        for test in persona.tests:
            domain = domain_of(test.attribute)
            if test.acts is None or domain is None:
                continue
            n += 1
            prefix = f"{persona.persona_id}-{domain.attribute}-"
            hits += test.target.removeprefix(prefix) == default_key(domain)
    return round(hits / n, 6) if n else None
