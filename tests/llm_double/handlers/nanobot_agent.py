"""nanobot's main agent turn (streamed, tools listed, nanobot's own system prompt).

Answered exactly like ``generic.plain_chat`` (echo the user text and the ids of the
``<memory-context>`` sections the request carried), but keyed on nanobot's system prompt
so broader handlers (e.g. a summarizer matching the words "summary" and "conversation",
which nanobot's prompt contains) cannot claim the agent's turns. Dream runs (priority 10)
still go to ``nanobot_dream``.
"""

from __future__ import annotations

from tests.llm_double.handlers.generic import plain_chat
from tests.llm_double.server import ChatReply, ChatRequest

PRIORITY = 20
MARKER = "# Tool Usage Notes"  # nanobot's tool_contract.md, part of every agent prompt


def nanobot_agent(req: ChatRequest) -> ChatReply | None:
    if req.response_format or not req.tools or MARKER not in req.system:
        return None
    reply = plain_chat(req)
    if reply is not None:
        reply.handler = "nanobot_agent.chat"
    return reply


HANDLERS = [nanobot_agent]
