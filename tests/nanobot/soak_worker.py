"""A nanobot process for the multi-user soak: an AgentLoop with the memory plugin that
takes turns ``start..`` from a JSON file of ``[channel, sender_id, chat_id, text]`` rows,
printing each index once its reply is back (the parent may SIGKILL it at any point)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path


async def main(config: str, turns_file: str, start: int, count: int) -> None:
    from nanobot.agent.loop import AgentLoop
    from nanobot.agent.tools.registry import ToolRegistry
    from nanobot.config.loader import load_config

    from nanobot_memory_adapters.nanobot import plugin_for

    turns = json.loads(Path(turns_file).read_text(encoding="utf-8"))
    loop = AgentLoop.from_config(load_config(Path(config)), tool_registry=ToolRegistry())
    for i in range(start, min(start + count, len(turns))):
        channel, sender, chat_id, text = turns[i]
        reply = await loop.process_direct(text, session_key=f"{channel}:{chat_id}",
                                          channel=channel, chat_id=chat_id, sender_id=sender)
        content = reply.content if reply is not None else ""
        print(json.dumps({"i": i, "reply": content}), flush=True)
    plugin = plugin_for(loop)
    if plugin is not None:
        await plugin.flush(timeout_s=300)
    await loop.aclose()
    if plugin is not None:
        await plugin.aclose()
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
