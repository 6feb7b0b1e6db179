"""A nanobot process for the crash test (a real ``AgentLoop`` with the memory plugin).

``ask <config> <text>``: one turn from a Telegram-like user; the parent kills the process
with SIGKILL while the model (the LLM double, holding the answer open) is answering.
``restart <config> <text>``: a fresh process that takes no turn until the outbox has
delivered what the killed one left (printing the wait, at most 60 s), then one normal
turn, then exits cleanly."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path


async def main(mode: str, config: str, text: str) -> None:
    from nanobot.agent.loop import AgentLoop
    from nanobot.agent.tools.registry import ToolRegistry
    from nanobot.config.loader import load_config

    from nanobot_memory_adapters.nanobot import plugin_for

    loop = AgentLoop.from_config(load_config(Path(config)), tool_registry=ToolRegistry())
    plugin = plugin_for(loop)
    assert plugin is not None
    if mode == "ask":
        print("asking", flush=True)
        await loop.process_direct(text, session_key="telegram:kim", channel="telegram",
                                  chat_id="kim", sender_id="kim")
        print("answered", flush=True)  # never reached: killed while the model answers
        return
    started = time.monotonic()
    while time.monotonic() - started < 60:  # no turn, no command: the plugin's start alone
        stats = plugin.outbox.stats(plugin.provider)
        if stats.delivered and not stats.pending and not getattr(stats, "open", 0):
            break
        await asyncio.sleep(0.2)
    print(json.dumps({"waited_s": round(time.monotonic() - started, 1),
                      "delivered": stats.delivered, "pending": stats.pending}), flush=True)
    await loop.process_direct(text, session_key="telegram:kim", channel="telegram",
                              chat_id="kim", sender_id="kim")
    await loop.aclose()
    await plugin.aclose()
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
