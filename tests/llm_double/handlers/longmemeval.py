"""The LongMemEval answerer and judge (``nanobot_memory_adapters.harness.lme_judge``).

- Answer (system prompt opens with ``ANSWER_MARKER``): the memory line sharing the most
  words of four or more letters with the question (its "(Current date: ...)" prefix
  ignored), without ``[...]`` labels; ``I do not know.`` when no line shares one.
- Grade (user prompt opens with ``FACT``/``PREFERENCE``/``ABSTAIN`` markers): derived from
  the prompt only --
  fact: ``yes`` when the correct answer appears in the reply; with the off-by-one rule
  (temporal prompts) a number one away from the answer's first number also counts;
  preference: ``yes`` when the reply shares three or more long words with the rubric;
  abstention: ``yes`` when the reply says it does not know.
"""

from __future__ import annotations

import re

from tests.llm_double.memory_lines import best_line, words
from tests.llm_double.server import ChatReply, ChatRequest

PRIORITY = 10
ANSWER_MARKER = "You are a chat assistant with a long-term memory of earlier conversations"
FACT = "Decide whether a model's reply answers a question correctly."
PREFERENCE = "Decide whether a model's reply suits the user, judged against a rubric."
ABSTAIN = "The question below cannot be answered from the conversation history"
FIELD = re.compile(r"^(Correct answer|Rubric \(what a personalised reply should do\)|Note|"
                   r"Model reply): (.*?)(?=\n[A-Z][^\n]*: |\n\n|\Z)", re.M | re.S)
NUMBER = re.compile(r"\d+")


def answer(req: ChatRequest) -> ChatReply | None:
    if req.response_format or req.tools or not req.system.startswith(ANSWER_MARKER):
        return None
    best = best_line(req.system, re.sub(r"^\(Current date: [^)]*\)", "", req.last_user))
    return ChatReply(content=best or "I do not know.", handler="longmemeval.answer")


def grade(req: ChatRequest) -> ChatReply | None:
    text = req.last_user
    if req.response_format or req.tools or not text.startswith((FACT, PREFERENCE, ABSTAIN)):
        return None
    fields = {k.split(" ")[0]: v.strip() for k, v in FIELD.findall(text)}
    reply = fields.get("Model", "").lower()
    if text.startswith(ABSTAIN):
        ok = "do not know" in reply
    elif text.startswith(PREFERENCE):
        ok = len(words(fields.get("Rubric", "")) & words(reply)) >= 3
    else:
        gold = fields.get("Correct", "").lower()
        ok = bool(gold) and gold in reply
        if not ok and "off-by-one" in text and (n := NUMBER.search(gold)):
            near = {str(int(n.group()) + d) for d in (-1, 0, 1)}
            ok = bool(near & set(NUMBER.findall(reply)))
    return ChatReply(content="yes" if ok else "no", handler="longmemeval.grade")


HANDLERS = [answer, grade]
