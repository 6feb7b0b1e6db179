"""Honcho's LLM calls (the real server's deriver/summarizer/dialectic, and the Honcho double).

- Deriver: ``response_format`` json_schema named ``PromptRepresentation``; the prompt names
  the observed peer under ``Target peer:`` and lists the turns inside ``<messages>`` as
  ``YYYY-MM-DD HH:MM:SS peer: text``. Answer: ``{"explicit": [{"content": ...}]}`` with
  one observation per message of the target peer, ``"<peer> said: <text>"`` (derived from
  the request only; the real server prefixes each with the message's timestamp itself).
- Summarizer: the server's summary prompt ("You are a system that summarizes parts of a
  conversation", text in ``<conversation>``) or the double's: a deterministic digest
  that quotes the first words of every line it was given.
- Dialectic (``peer.chat``) of the Honcho double (a ``<representation>`` block): quote
  its observations back. The real server's dialectic (tools, no such block) falls through
  to the generic plain-chat handler.
"""

from __future__ import annotations

import re

from tests.llm_double.server import ChatReply, ChatRequest, json_reply

_TARGET = re.compile(r"Target peer:\s*\n\s*(\S+)")
_MESSAGES = re.compile(r"<messages>\n(.*?)\n?</messages>", re.S)
# The real server's summary prompts and the Honcho double's: nothing else says these.
_SUMMARY_MARKERS = (
    "You are a system that summarizes parts of a conversation",
    "Summarize the following conversation concisely.",
)
_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (\S+?): (.*)$")


def deriver(req: ChatRequest) -> ChatReply | None:
    text = req.all_text
    if req.schema_name != "PromptRepresentation" and not (
        req.response_format and "Target peer:" in text and "<messages>" in text
    ):
        return None
    target = _TARGET.search(text)
    block = _MESSAGES.search(text)
    peer = target.group(1) if target else ""
    facts = []
    if block:
        for line in block.group(1).splitlines():
            m = _LINE.match(line.strip())
            if m and m.group(1) == peer and m.group(2).strip():
                facts.append({"content": f"{peer} said: {m.group(2).strip()}"})
    return json_reply({"explicit": facts}, "honcho.deriver")


def summarizer(req: ChatRequest) -> ChatReply | None:
    text = req.all_text
    if req.response_format or "<conversation>" not in text:
        return None
    if not any(marker in text for marker in _SUMMARY_MARKERS):
        return None
    inner = re.search(r"<conversation>\n(.*?)\n?</conversation>", text, re.S)
    lines = (inner.group(1) if inner else text).splitlines()
    gist = "; ".join(" ".join(line.split()[:8]) for line in lines if line.strip())[:600]
    return ChatReply(content=f"Summary: {gist}", handler="honcho.summarizer")


def dialectic(req: ChatRequest) -> ChatReply | None:
    text = req.all_text
    if req.response_format or "<representation>" not in text:
        return None
    rep = re.search(r"<representation>\n(.*?)\n?</representation>", text, re.S)
    facts = [ln.strip() for ln in (rep.group(1) if rep else "").splitlines()
             if ln.strip().startswith("[")]
    answer = " ".join(facts) if facts else "I do not know anything about that yet."
    return ChatReply(content=answer, handler="honcho.dialectic")


HANDLERS = [deriver, summarizer, dialectic]
