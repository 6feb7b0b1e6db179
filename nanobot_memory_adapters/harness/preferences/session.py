"""One behavioural test session, whoever answers (nanobot's loop or the ideal reader).

1. **Behaviour** (the headline): the user's normal request, no options. The responder
   recalls with the request as the query (and the test's tags and time), answers; the
   simulated user accepts, corrects, answers a question or nudges, for up to
   ``max_turns`` replies. The first reply is scored judge-free by the test's value
   phrases (current / other / both / none); the outcome is whether the agent ended up
   acting on the current value and after how many corrections.
2. **Recognition** (secondary, when the test has options): a separate session whose
   recall uses the opening alone; the options are added to the prompt only after recall
   (``options=True``), never to the retrieval query.

Every retrieval's exact query, as sent to the provider (the request object the responder
passed, or nanobot's recall cache entry), is recorded with its request tags and whether
it leaks (``leak``): a cue of any value of the test's attribute in the query or a tag, or
an option's text in the query. A leak before any correction is a benchmark defect,
counted in results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from nanobot_memory_adapters.harness.preferences.format import Persona, TestSession
from nanobot_memory_adapters.harness.preferences.generator import attribute_cues
from nanobot_memory_adapters.harness.preferences.lexicon import FOLLOW_UP, has_any


@dataclass
class Said:
    reply: str
    context: str
    query: str | None  # the exact query the recall sent (None: no recall was made)
    recall_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)  # the request tags it sent


class Responder(Protocol):
    async def say(self, test: TestSession, session_key: str, text: str,
                  attributes: dict[str, str], *, options: bool,
                  user_turns: list[str]) -> Said: ...


def leaked(query: str | None, tags: dict[str, str], test: TestSession, cues: list[str]
           ) -> bool:
    """Whether a request sent to the provider carries the answer: a cue of any value of
    the attribute in the query or a tag (underscores read as spaces), or an option."""
    text = query or ""
    tag_text = " ".join(v.replace("_", " ") for v in tags.values())
    return (has_any(text, cues) or has_any(tag_text, cues)
            or any(o.text.lower() in text.lower() for o in test.options))


def retrieval(turn: int, query: str | None, tags: dict[str, str], test: TestSession,
              cues: list[str], after_correction: bool) -> dict[str, Any]:
    """One retrieval as the trace records it (``query`` and ``tags`` as sent)."""
    return {"turn": turn, "query": query, "tags": tags,
            "leak": query is not None and leaked(query, tags, test, cues),
            "after_correction": after_correction}


def _retrieval(turn: int, said: Said, test: TestSession, cues: list[str],
               after_correction: bool) -> dict[str, Any]:
    return retrieval(turn, said.query, said.tags, test, cues, after_correction)


async def run_session(responder: Responder, test: TestSession, persona: Persona, user: Any,
                      attributes: dict[str, str], *, max_turns: int = 3,
                      recognition: bool = True) -> dict[str, Any]:
    """The behaviour session and (with options) the recognition session of one test;
    ``recognition=False`` skips the latter where a behaviour session scores the test."""
    from nanobot_memory_adapters.harness.preferences.scoring import judge_choice, parse_choice

    cues = attribute_cues(test.attribute)
    key = f"bench:{test.test_id}"
    transcript: list[dict[str, str]] = []
    retrievals: list[dict[str, Any]] = []
    moves: list[str] = []
    text, user_turns = test.opening, []
    first: Said | None = None
    first_act = act = "none"
    corrections = 0
    resolved_after: int | None = None
    errors: list[str] = []
    # an option-only test (PersonaMem) has no behaviour to score: recognition alone
    behaviour_turns = max_turns if (test.acts is not None or not test.options) else 0
    for turn in range(behaviour_turns):
        said = await responder.say(test, key, text, attributes, options=False,
                                   user_turns=list(user_turns))
        transcript += [{"role": "user", "content": text},
                       {"role": "assistant", "content": said.reply}]
        retrievals.append(_retrieval(turn, said, test, cues, corrections > 0))
        if said.recall_error:
            errors.append(said.recall_error)
        if first is None:
            first = said
        if test.acts is None:
            break  # an open task (rubric only): one reply, for the judge
        act, move = await user.move(test, persona, said.reply)
        if turn == 0:
            first_act = act
        moves.append(move.kind)
        transcript.append({"role": "user", "content": move.text})
        if move.kind == "accept":
            resolved_after = corrections
            break
        if move.kind in ("correct", "answer"):
            corrections += 1
        text = move.text
        user_turns.append(move.text)
    record: dict[str, Any] = {
        "context": first.context if first else "", "reply": first.reply if first else "",
        "transcript": transcript, "retrievals": retrievals,
        "error": errors[0] if errors else None, "behaviour": None, "recognition": None,
    }
    if test.acts is not None:
        record["behaviour"] = {
            "first_act": first_act, "correct": first_act == "current", "final_act": act,
            "resolved": resolved_after is not None, "corrections": corrections,
            "resolved_after": resolved_after, "turns": len(retrievals), "moves": moves,
        }
    if test.options and (recognition or first is None):
        said = await responder.say(test, f"{key}:options", test.opening, attributes,
                                   options=True, user_turns=[])
        retrievals.append({**_retrieval(0, said, test, cues, False),
                           "session": "recognition"})
        options_transcript = [{"role": "user", "content": test.opening, "options": "after "
                               "recall"}, {"role": "assistant", "content": said.reply}]
        choice = parse_choice(said.reply, test)
        follow_ups = 0
        if choice is None:
            again = await responder.say(test, f"{key}:options", FOLLOW_UP, attributes,
                                        options=True, user_turns=[])
            retrievals.append({**_retrieval(1, again, test, cues, False),
                               "session": "recognition"})
            options_transcript += [{"role": "user", "content": FOLLOW_UP},
                                   {"role": "assistant", "content": again.reply}]
            choice = parse_choice(again.reply, test)
            follow_ups = 1
        record["recognition"] = {**judge_choice(choice, test, persona),
                                 "follow_ups": follow_ups, "transcript": options_transcript}
        if first is None:  # the recognition session is the test session
            record.update(context=said.context, reply=said.reply,
                          transcript=options_transcript)
            if said.recall_error:
                record["error"] = said.recall_error
    return record
