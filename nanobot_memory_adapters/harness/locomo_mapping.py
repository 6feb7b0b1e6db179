"""How a LoCoMo conversation becomes nanobot events: the speaker protocols.

LoCoMo has two people talking and no assistant. Two ways to record that:

- ``single`` (the default): one persona per conversation (``persona_id = sample_id``);
  ``speaker_a`` is the ``user``, ``speaker_b`` the ``assistant``, each message named by its
  speaker. Every provider gets identical events and one retrieve per question.
- ``dual`` (mem0's and MemOS's own LoCoMo protocol): each speaker is a persona of their
  own (``<sample_id>-<speaker>``); every session is recorded once for each, with that
  person's own turns as ``user`` and the other's as ``assistant``. A question retrieves
  from both personas, each with half of the budget (less the heading each gets), and the
  two answers are composed into one section. User-centric extractors (mem0 writes
  "User ...") then attribute facts to the right person; verbatim controls pay for it:
  every turn is stored twice, so each half shows the same recent turns.

Event ids are deterministic (``locomo-<sample>-D3-7``, plus ``@<speaker>`` in dual), so
replays are idempotent and runs repeatable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nanobot_memory_adapters.contract import MemoryEvent, MemoryScope, Message
from nanobot_memory_adapters.harness.datasets.locomo import Conversation, Turn

SpeakerProtocol = Literal["single", "dual"]
SPEAKER_PROTOCOLS: tuple[str, ...] = ("single", "dual")


def speaker_name(speaker: str) -> str:
    """A speaker's name as an id part and a message name."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", speaker).strip("_")[:64] or "speaker"


@dataclass(frozen=True)
class Persona:
    """One scope a conversation is recorded into; ``speaker`` is its user (dual) or None."""

    scope: MemoryScope
    speaker: str | None
    label: str  # the heading its part of a composed context gets


def personas(
    conv: Conversation, protocol: SpeakerProtocol, run_id: str, agent_id: str
) -> list[Persona]:
    if protocol == "single":
        return [Persona(MemoryScope(run_id=run_id, persona_id=conv.sample_id,
                                    agent_id=agent_id), None, conv.sample_id)]
    return [
        Persona(
            MemoryScope(run_id=run_id, persona_id=f"{conv.sample_id}-{speaker_name(who)}",
                        agent_id=agent_id),
            who,
            f"{who}'s memory",
        )
        for who in (conv.speaker_a, conv.speaker_b)
    ]


def names_block(
    convs: Sequence[Conversation], protocol: SpeakerProtocol, run_id: str, agent_id: str
) -> dict[str, Any]:
    """no_memory_named's block: each persona's user by name (``speaker_a`` in single, the
    persona's speaker in dual), as the events name them; nothing else of the dataset."""
    return {"names": {p.scope.persona_id: p.speaker or conv.speaker_a
                      for conv in convs for p in personas(conv, protocol, run_id, agent_id)}}


def turn_event(
    conv: Conversation, turn: Turn, scope: MemoryScope, speaker: str | None = None
) -> MemoryEvent:
    """One turn as one event in ``scope``; ``speaker`` is the scope's own person (dual)."""
    me = speaker if speaker is not None else conv.speaker_a
    role = "user" if turn.speaker == me else "assistant"
    base = f"locomo-{conv.sample_id}-{turn.dia_id.replace(':', '-')}"
    return MemoryEvent(
        event_id=base if speaker is None else f"{base}@{speaker_name(speaker)}",
        run_id=scope.run_id,
        user_id=scope.persona_id,
        agent_id=scope.agent_id or "nanobot",
        session_id=f"{conv.sample_id}-s{turn.session}",
        turn_id=turn.dia_id,
        timestamp=turn.timestamp,
        messages=[Message(role=role, content=turn.content, name=speaker_name(turn.speaker))],
        metadata={"dataset": "locomo", "dia_id": turn.dia_id, "speaker": turn.speaker},
    )


def describe(protocol: SpeakerProtocol) -> str:
    if protocol == "single":
        return ("single: one persona per conversation (<sample_id>); speaker_a -> user, "
                "speaker_b -> assistant (name = speaker)")
    return ("dual: one persona per speaker (<sample_id>-<speaker>); each session recorded "
            "for both, the persona's own turns as user; a question retrieves from both "
            "with the budget split equally, composed into one section")
