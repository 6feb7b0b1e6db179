"""A second nanobot process for the canary fuzzer: an ``AgentLoop`` with the memory plugin
on the fuzzer's home, taking one JSON request per line on stdin (a turn as a channel
delivers it) and answering one JSON line (the reply) on stdout. The fuzzer may SIGKILL it
at any point."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path


async def main(config: str) -> None:
    from nanobot.agent.loop import AgentLoop
    from nanobot.agent.tools.registry import ToolRegistry
    from nanobot.bus.events import InboundMessage
    from nanobot.config.loader import load_config

    from nanobot_memory_adapters.nanobot import plugin_for

    loop = AgentLoop.from_config(load_config(Path(config)), tool_registry=ToolRegistry())
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        request = json.loads(line)
        if request["kind"] == "close":
            break
        msg = InboundMessage(channel=request["channel"], sender_id=request["sender"],
                             chat_id=request["chat_id"], content=request["text"], media=[],
                             metadata=dict(request.get("meta") or {}))
        reply = await loop._process_message(msg, session_key=request["key"])
        print(json.dumps({"reply": reply.content if reply is not None else ""}), flush=True)
    plugin = plugin_for(loop)
    await loop.aclose()
    if plugin is not None:
        await plugin.aclose()
    print(json.dumps({"reply": "closed"}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
