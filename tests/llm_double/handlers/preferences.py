"""Behavioural preference sessions: nanobot choosing an option, and the rubric judge.

- nanobot's agent turn whose user message lists options ("Pick the one option that suits
  me best"): the double picks the option whose words overlap most with the memory
  section(s) the request carries (system prompt or user message), ties to the earliest
  listed, and answers ``(x) <one sentence>``. With no memory, or no overlap, it picks (a):
  a fixed guess, so a provider with no memory scores at chance. A rule over the request,
  not an answer table.
- the rubric judge ("Grade an assistant's reply to a user."): CORRECT when the reply
  shares a word of four letters or more with the rubric's preference (in parentheses).
"""

from __future__ import annotations

import re

from tests.llm_double.server import ChatReply, ChatRequest

PRIORITY = 15  # before nanobot_agent (20): keyed on the option instruction
OPTION_MARKER = "Pick the one option that suits me best"
OPTION = re.compile(r"^\(([a-z])\) (.+)$", re.M)
SECTION = re.compile(r"<memory-context .*?</memory-context>", re.S)
LABEL = re.compile(r"\[[^\]]*\]")
WORD = re.compile(r"[a-z]{4,}")
_STOP = {"with", "that", "this", "have", "from", "your", "what", "when", "just", "they",
         "there", "their", "them", "then", "than", "into", "about", "user", "very", "some"}


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in WORD.findall(text.lower()) if w not in _STOP}


def choose_option(req: ChatRequest) -> ChatReply | None:
    if not req.tools or OPTION_MARKER not in req.last_user:
        return None
    memory = " ".join(LABEL.sub(" ", s) for s in SECTION.findall(req.system + "\n"
                                                                  + req.last_user))
    known = _words(memory)
    options = OPTION.findall(SECTION.sub("", req.last_user))
    if not options:
        return None
    scored = [(len(_words(text) & known), -i, letter, text)
              for i, (letter, text) in enumerate(options)]
    best = max(scored)
    letter, text = (best[2], best[3]) if best[0] > 0 else options[0]
    return ChatReply(content=f"({letter}) {text} — that fits what I know about you.",
                     handler="preferences.choose_option")


def rubric_judge(req: ChatRequest) -> ChatReply | None:
    if "Grade an assistant's reply to a user." not in req.user:
        return None
    reply = req.user.split("Assistant's reply:", 1)[-1].split("\nRubric:", 1)[0]
    rubric = req.user.split("Rubric:", 1)[-1]
    wanted = _words(" ".join(re.findall(r"\(([^)]*)\)", rubric)))
    verdict = "CORRECT" if wanted & _words(reply) else "WRONG"
    return ChatReply(content=verdict, handler="preferences.rubric_judge")


HANDLERS = [choose_option, rubric_judge]
