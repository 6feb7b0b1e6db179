"""A nanobot process for the kill test: an AgentLoop with the memory plugin that takes
turns ``start..start+count`` from one Telegram-like user, printing each index once the
reply is back (the parent kills it with SIGKILL at a random point)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


async def main(config: str, start: int, count: int) -> None:
    from nanobot.agent.loop import AgentLoop
    from nanobot.agent.tools.registry import ToolRegistry
    from nanobot.config.loader import load_config

    from nanobot_memory_adapters.nanobot import plugin_for

    loop = AgentLoop.from_config(load_config(Path(config)), tool_registry=ToolRegistry())
    for i in range(start, start + count):
        await loop.process_direct(f"Fact {i}: my locker number {i} holds {i} marbles.",
                                  session_key="telegram:kim", channel="telegram",
                                  chat_id="kim", sender_id="kim")
        print(i, flush=True)
    plugin = plugin_for(loop)
    if plugin is not None:
        await plugin.flush(timeout_s=120)
    await loop.aclose()
    if plugin is not None:
        await plugin.aclose()
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
