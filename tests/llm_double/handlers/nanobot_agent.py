"""nanobot's main agent turn (streamed, tools listed, nanobot's own system prompt).

Answered exactly like ``generic.plain_chat`` (echo the user text and the ids of the
``<memory-context>`` sections the request carried), but keyed on nanobot's system prompt
so broader handlers (e.g. a summarizer matching the words "summary" and "conversation",
which nanobot's prompt contains) cannot claim the agent's turns. Dream runs (priority 10)
still go to ``nanobot_dream``.
"""

from __future__ import annotations

import re

from tests.llm_double.handlers.generic import WHOLE_SECTION, plain_chat
from tests.llm_double.server import ChatReply, ChatRequest

PRIORITY = 20
MARKER = "# Tool Usage Notes"  # nanobot's tool_contract.md, part of every agent prompt
# "[llm-double:tool NAME {json arguments}]" in the user's message: call that tool once,
# then answer with what it returned ("tool NAME returned: ..."). Text inside a recalled
# <memory-context> section never asks (an old request, remembered, is not a new one).
TOOL_ASK = re.compile(r"\[llm-double:tool (?P<name>[a-z_]+) (?P<args>\{.*?\})\]")
# "[llm-double:echo]" in the user's message: a model that repeats whatever memory it was
# shown (every <memory-context> section of the request, history included) in its answer,
# as a small model does; the privacy tests use it to see what a reply could leak.
ECHO = "[llm-double:echo]"


def _tool_names(req: ChatRequest) -> set[str]:
    return {(t.get("function") or t).get("name", "") for t in req.tools or []}


def nanobot_agent(req: ChatRequest) -> ChatReply | None:
    if req.response_format or not req.tools or MARKER not in req.system:
        return None
    # only the user's own words ask: a recalled <memory-context> is data, not a request
    ask = TOOL_ASK.search(req.last_user.split("<memory-context", 1)[0])
    if ask:
        last = req.messages[-1] if req.messages else {}
        if last.get("role") == "tool":
            return ChatReply(content=f"tool {ask['name']} returned: {last.get('content')}",
                             handler="nanobot_agent.tool_result")
        if ask["name"] in _tool_names(req):
            import json

            return ChatReply(tool_calls=[{"name": ask["name"],
                                          "arguments": json.loads(ask["args"])}],
                             handler="nanobot_agent.tool_call")
        return ChatReply(content=f"no tool named {ask['name']} is offered",
                         handler="nanobot_agent.no_tool")
    reply = plain_chat(req)
    if reply is not None:
        reply.handler = "nanobot_agent.chat"
        if ECHO in req.last_user.split("<memory-context", 1)[0]:
            shown = WHOLE_SECTION.findall(req.all_text)
            reply.content = (reply.content or "") + " Memory I was shown: " + (
                " | ".join(" ".join(s.split()) for s in shown) or "none")
            reply.handler = "nanobot_agent.echo"
    return reply


HANDLERS = [nanobot_agent]
