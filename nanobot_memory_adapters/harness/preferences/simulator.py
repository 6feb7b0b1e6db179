"""The simulated user of a behavioural test session (seed §4.2: "simulator produces
user-side response and outcome").

After each reply the user answers as they would: **accepts** a reply that acts on their
current value; **corrects** one that acts on another value (or on both), naming the
current value; **answers** a question (a reply acting on nothing that asks) with the
current value — asked, so not volunteered; **nudges** a reply that acts on nothing and
asks nothing ("just pick something for me"), without naming anything. It never states a
preference unasked. The session ends on acceptance or after ``max_turns`` replies; the
outcome is whether the agent ended up acting on the current value and after how many
corrections.

``ScriptedUser`` (default) is deterministic, from the ground truth; ``LLMUser`` lets a
model write the same moves (told the move and the value, never the memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nanobot_memory_adapters.harness.preferences.format import Persona, TestSession
from nanobot_memory_adapters.harness.preferences.lexicon import act_of

ACCEPT = "Perfect, thanks. Go ahead with that."
NUDGE = "Can you just pick something specific for me?"
# The scripted user's turns that name nothing (the generator's leak check covers them).
NEUTRAL_TURNS: tuple[str, ...] = (ACCEPT, NUDGE)
LLM_USER_PROMPT = (
    "You play a user talking to an assistant. Your request was:\n{opening}\n\nThe "
    "assistant answered:\n{reply}\n\nYour move: {move}. Write only your next message, one "
    "or two sentences. {rule}"
)


def current_value(test: TestSession, persona: Persona) -> str:
    """The target's value as the user would say it (without the context label)."""
    value = persona.preference(test.target).value
    for prefix in ("work: ", "personal: "):
        value = value.removeprefix(prefix)
    return value


@dataclass(frozen=True)
class Move:
    kind: str  # accept | correct | answer | nudge
    text: str


def decide(test: TestSession, persona: Persona, reply: str) -> tuple[str, Move]:
    """What the reply acts on and the user's move (deterministic)."""
    act = act_of(reply, test.acts.current, test.acts.other) if test.acts else "none"
    value = current_value(test, persona)
    if act == "current":
        return act, Move("accept", ACCEPT)
    if act in ("other", "both"):
        return act, Move("correct", f"Hmm, not quite. For this I'd want: {value}.")
    if "?" in reply:
        return act, Move("answer", f"For this I'd want: {value}.")
    return act, Move("nudge", NUDGE)


class ScriptedUser:
    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted", "accept": ACCEPT, "nudge": NUDGE,
                "correct": "Hmm, not quite. For this I'd want: <current value>.",
                "answer": "For this I'd want: <current value>."}

    async def move(self, test: TestSession, persona: Persona, reply: str) -> tuple[str, Move]:
        return decide(test, persona, reply)


class LLMUser:
    """The scripted user's decision, worded by a model (the judge's endpoint)."""

    def __init__(self, client: Any, description: dict[str, Any]) -> None:
        self.client = client
        self.description = description

    def describe(self) -> dict[str, Any]:
        return {"kind": "llm", **self.description}

    async def move(self, test: TestSession, persona: Persona, reply: str) -> tuple[str, Move]:
        act, scripted = decide(test, persona, reply)
        value = current_value(test, persona)
        if scripted.kind == "accept":
            what, rule = "accept the answer and thank the assistant", "Name no preference."
        elif scripted.kind == "nudge":
            what, rule = "ask it to pick something specific", "Name no preference."
        else:
            what = ("correct it" if scripted.kind == "correct" else "answer its question")
            rule = f"Say that for this you want: {value}. Add no other preference."
        text = await self.client.chat([{"role": "user", "content": LLM_USER_PROMPT.format(
            opening=test.opening, reply=reply[:1500], move=what, rule=rule)}], max_tokens=80)
        return act, Move(scripted.kind, text.strip() or scripted.text)
