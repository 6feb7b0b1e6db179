"""The BEAM answerer and judge (``nanobot_memory_adapters.harness.beam_judge``), derived
from the prompt only.

- Answer (system prompt opens with ``ANSWER_MARKER``): every memory line sharing a word
  of four or more letters with the question, one per line, in context order;
  ``I do not know.`` when none does.
- Nugget (``NUGGET``): the criterion's text after ``should state:``/``should mention:``
  (etc.), if present; ``1.0`` when the reply contains it, ``0.5`` when it holds at least
  half of its long words, else ``0.0``; the reply is the JSON the judge asks for.
- Same event (``SAME``): ``YES`` when at least half of the first snippet's long words are
  in the second.
"""

from __future__ import annotations

import json
import re

from tests.llm_double.memory_lines import sharing_lines, words
from tests.llm_double.server import ChatReply, ChatRequest

PRIORITY = 10
ANSWER_MARKER = "You answer the user's question using only the memory of earlier"
NUGGET = "Judge one criterion of a model's reply."
SAME = "Do these two snippets describe the same event or fact?"


def answer(req: ChatRequest) -> ChatReply | None:
    if req.response_format or req.tools or not req.system.startswith(ANSWER_MARKER):
        return None
    lines = [line for _, line in sharing_lines(req.system, req.last_user)]
    return ChatReply(content="\n".join(lines) or "I do not know.", handler="beam.answer")


def _field(text: str, name: str) -> str:
    m = re.search(rf"^{name}: (.*)$", text, re.M)
    return m.group(1).strip() if m else ""


def grade(req: ChatRequest) -> ChatReply | None:
    text = req.last_user
    if req.response_format or req.tools or not text.startswith((NUGGET, SAME)):
        return None
    if text.startswith(SAME):
        first, second = _field(text, "First snippet"), _field(text, "Second snippet")
        need = words(first)
        same = bool(need) and len(need & words(second)) * 2 >= len(need)
        return ChatReply(content="YES" if same else "NO", handler="beam.same")
    item = _field(text, "Criterion")
    item = re.sub(r"^LLM response should [a-z]+: ", "", item).lower()
    reply = text.split("\nReply: ", 1)[1].rsplit("\n\nScore 1.0", 1)[0].lower()
    need = words(item)
    score = 1.0 if item and item in reply else (
        0.5 if need and len(need & words(reply)) * 2 >= len(need) else 0.0)
    return ChatReply(content=json.dumps({"score": score}), handler="beam.nugget")


HANDLERS = [answer, grade]
