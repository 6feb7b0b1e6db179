"""nanobot's Dream: consolidate the journal into memory/MEMORY.md with nanobot's file tools.

Rule: every ``USER:`` line of the ``## Conversation History`` section becomes one bullet,
appended to the MEMORY.md text nanobot showed in the system prompt, written back with
``write_file``; once the tool result arrives, the run ends with a short final answer.
"""

from __future__ import annotations

import re

from tests.llm_double.server import ChatReply, ChatRequest

# Keyed on Dream's own opening line, so it may run before broader handlers.
PRIORITY = 10
MARKER = "You are running Dream."
USER_LINE = re.compile(r"\] USER: (.+)")
LONG_TERM = re.compile(r"## Long-term Memory\n(.*?)(?:\n\n---\n\n|\Z)", re.S)


def dream(req: ChatRequest) -> ChatReply | None:
    if MARKER not in req.user or not req.tools:
        return None
    if req.messages and req.messages[-1].get("role") == "tool":
        return ChatReply(content="Dream complete: memory consolidated.", handler="dream.done")
    history = req.user.split("## Conversation History", 1)[-1]
    facts = [m.strip() for m in USER_LINE.findall(history) if m.strip()]
    existing = LONG_TERM.search(req.system)
    lines = existing.group(1).strip().splitlines() if existing else []
    lines += [f"- {fact}" for fact in facts if f"- {fact}" not in lines]
    return ChatReply(
        tool_calls=[
            {"name": "write_file",
             "arguments": {"path": "memory/MEMORY.md", "content": "\n".join(lines) + "\n"}}
        ],
        handler="dream.write_memory",
    )


HANDLERS = [dream]
