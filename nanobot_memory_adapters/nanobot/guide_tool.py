"""``memory_guide``: a read-only tool that returns the memory guide (how to read a memory
section's lines, ``memory_search``, the commands the user can type), for the model to
call when the user asks about their memory or its settings.

The same text as the memory-context skill, offered as a tool because nanobot 0.3.5 pays
for a listed skill on every turn and for a tool only when it is called
(``skill.py``). It takes no arguments and reads nothing of the user's.
"""

from __future__ import annotations

from typing import Any

from nanobot.agent.tools.base import Tool

from nanobot_memory_adapters.nanobot.skill import GUIDE_TOOL_NAME, guide_text


class MemoryGuideTool(Tool):
    _plugin_discoverable = False  # registered by the plugin, not by nanobot's loader
    _scopes = {"core"}  # noqa: RUF012 - nanobot's own class attribute shape

    @property
    def name(self) -> str:
        return GUIDE_TOOL_NAME

    @property
    def description(self) -> str:
        # names no other tool: memory_search may be switched off (``search_tool``)
        return ("How your long-term memory works: how to read a <memory-context> section "
                "and the /memory-mode, /memory-health and /memory-forget commands the user "
                "can type. Call it when the user asks about their memory or its settings.")

    @property
    def parameters(self) -> dict[str, Any]:
        return {"type": "object", "properties": {}}

    @property
    def read_only(self) -> bool:
        return True

    async def execute(self, **kwargs: Any) -> Any:
        return guide_text()
