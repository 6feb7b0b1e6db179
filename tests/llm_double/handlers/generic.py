"""Fallbacks, tried after every caller-specific handler.

- json_object: ``{}`` (a caller that needed more must register its own handler).
- plain chat (nanobot and others): a deterministic reply that quotes the last user text,
  and, so tests can see what memory reached the model, the ids of any memory-context
  sections in the system prompt.
"""

from __future__ import annotations

import re

from tests.llm_double.server import ChatReply, ChatRequest, json_reply

SECTION = re.compile(r'<memory-context backend="([^"]*)" scope="([^"]*)">')
WHOLE_SECTION = re.compile(r"<memory-context .*?</memory-context>", re.S)


def json_object_fallback(req: ChatRequest) -> ChatReply | None:
    if req.response_format.get("type") == "json_object":
        return json_reply({}, "generic.json_object")
    return None


def plain_chat(req: ChatRequest) -> ChatReply | None:
    if req.response_format:
        return None
    # This request's memory: the system prompt's, or the one on the current user message
    # (runtime-context placement); sections on earlier user messages are history.
    sections = SECTION.findall(req.system + "\n" + req.last_user)
    seen = ", ".join(f"{b}:{s}" for b, s in sections) or "none"
    text = " ".join(WHOLE_SECTION.sub("", req.last_user).split())[:200]
    return ChatReply(content=f"[double] memory sections: {seen}. You said: {text}",
                     handler="generic.plain_chat")


HANDLERS = [json_object_fallback, plain_chat]
