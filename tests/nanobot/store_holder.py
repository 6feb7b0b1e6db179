"""A nanobot process that holds its provider's embedded store open (as a running gateway
does): one turn from a Telegram-like user, delivered, then ``held`` and a wait until it
is killed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


async def main(config: str) -> None:
    from nanobot.agent.loop import AgentLoop
    from nanobot.agent.tools.registry import ToolRegistry
    from nanobot.config.loader import load_config

    from nanobot_memory_adapters.nanobot import plugin_for

    loop = AgentLoop.from_config(load_config(Path(config)), tool_registry=ToolRegistry())
    await loop.process_direct("I grow tomatoes on my balcony.", session_key="telegram:gw",
                              channel="telegram", chat_id="gw", sender_id="gw")
    plugin = plugin_for(loop)
    assert plugin is not None and await plugin.flush(timeout_s=120) == 0
    print("held", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[-1]))  # words before it stand for a command line's arguments
