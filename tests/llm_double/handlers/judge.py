"""The harness's optional LLM answerer and judge (``nanobot_memory_adapters.harness.judge``).

- Answer (system prompt opens with ``ANSWER_MARKER``): the memory-context line sharing the
  most words of four or more letters with the question (the first on a tie), without its
  ``[...]`` labels; ``Not mentioned in the conversation`` when no line shares one.
- Grade (user prompt opens with ``JUDGE_MARKER``): ``CORRECT`` when the gold answer appears
  in the given answer (case-insensitive), else ``WRONG``.
"""

from __future__ import annotations

import re

from tests.llm_double.memory_lines import best_line
from tests.llm_double.server import ChatReply, ChatRequest

# Keyed on the harness's own prompt openings, so it may run before broader handlers.
PRIORITY = 10
ANSWER_MARKER = "You answer questions about a long conversation using only the memory context"
JUDGE_MARKER = "Grade an answer to a question about a conversation."
GRADED = re.compile(
    r"^Gold answer: ([^\n]*)\nGiven answer: (.*?)\nThe given answer is CORRECT", re.S | re.M
)


def answer(req: ChatRequest) -> ChatReply | None:
    if req.response_format or req.tools or not req.system.startswith(ANSWER_MARKER):
        return None
    best = best_line(req.system, req.last_user)
    return ChatReply(content=best or "Not mentioned in the conversation", handler="judge.answer")


def grade(req: ChatRequest) -> ChatReply | None:
    if req.response_format or req.tools or not req.last_user.startswith(JUDGE_MARKER):
        return None
    match = GRADED.search(req.last_user)
    if match is None:
        return None
    gold, given = match.group(1).strip().lower(), match.group(2).strip().lower()
    verdict = "CORRECT" if gold and gold in given else "WRONG"
    return ChatReply(content=verdict, handler="judge.grade")


HANDLERS = [answer, grade]
