"""The ``nanobot.tools`` entry point: the only plugin hook nanobot 0.3.x discovers.

nanobot instantiates this class while building every ``AgentLoop`` (CLI ``agent``,
``gateway``, ``Nanobot.from_config``). ``create()`` attaches the memory plugin to that
loop; the tool itself is then removed from the LLM-visible tool list (it carries no
model-facing function). If nanobot's shape is not the one this plugin knows,
``enabled()`` says no and nanobot runs untouched.
"""

from __future__ import annotations

import os
from typing import Any

from nanobot.agent.tools.base import Tool

from nanobot_memory_adapters.hosting import (  # noqa: F401 - re-exported for callers
    ProvidedMemory,
    plugin_disabled,
    plugin_suppressed,
    provided,
    provided_memory,
)
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import seams

TOOL_NAME = "memory_adapters"
ENV_SWITCH = "NANOBOT_MEMORY_PLUGIN"  # "0" / "off": never attach (nanobot runs untouched)


class MemoryPluginTool(Tool):
    _scopes = {"core"}  # noqa: RUF012 - nanobot's own class attribute shape

    def __init__(self, plugin: Any = None) -> None:
        self.plugin = plugin

    @classmethod
    def enabled(cls, ctx: Any) -> bool:
        if plugin_suppressed() or os.environ.get(ENV_SWITCH, "").strip().lower() in (
            "0", "off", "false", "no"
        ):
            return False
        ok, _reason = seams.check_compatibility()
        if not ok:
            return False
        if seams.agent_loop_of(ctx) is None:
            logger.error("{}: plugin disabled — cannot reach the AgentLoop from the tool "
                         "context (nanobot changed shape)", seams.LOG_PREFIX)
            return False
        return True

    @classmethod
    def create(cls, ctx: Any) -> MemoryPluginTool:
        from pathlib import Path

        from nanobot_memory_adapters.nanobot.commands import HELP_SPECS, make_installer
        from nanobot_memory_adapters.nanobot.runtime import MemoryPlugin

        loop = seams.agent_loop_of(ctx)
        if loop is None:  # enabled() said no already; nanobot creates only enabled tools
            raise RuntimeError("memory plugin: no AgentLoop behind the tool context")
        plugin = MemoryPlugin(loop, sessions=ctx.sessions or loop.sessions,
                              workspace=Path(ctx.workspace),
                              provided=provided())
        plugin.attach()
        seams.register_commands(loop, make_installer(plugin, TOOL_NAME))
        seams.add_help_specs(HELP_SPECS)
        return cls(plugin)

    @property
    def name(self) -> str:
        return TOOL_NAME

    @property
    def description(self) -> str:
        return "Long-term memory plugin status (internal; not offered to the model)."

    @property
    def parameters(self) -> dict[str, Any]:
        return {"type": "object", "properties": {}}

    @property
    def read_only(self) -> bool:
        return True

    async def execute(self, **kwargs: Any) -> Any:
        return str(self.plugin.status_dict() if self.plugin else "memory plugin not attached")
