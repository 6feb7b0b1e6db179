"""The ``nanobot.tools`` entry point: the only plugin hook nanobot 0.3.x discovers.

nanobot instantiates this class while building every ``AgentLoop`` (CLI ``agent``,
``gateway``, ``Nanobot.from_config``). ``create()`` attaches the memory plugin to that
loop; the tool itself is then removed from the LLM-visible tool list (it carries no
model-facing function). If nanobot's shape is not the one this plugin knows,
``enabled()`` says no and nanobot runs untouched.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from loguru import logger
from nanobot.agent.tools.base import Tool

from nanobot_memory_adapters.nanobot import seams

TOOL_NAME = "memory_adapters"
ENV_SWITCH = "NANOBOT_MEMORY_PLUGIN"  # "0" / "off": never attach (nanobot runs untouched)
_suppressed: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nanobot_memory_plugin_suppressed", default=False
)


@dataclass(frozen=True)
class ProvidedMemory:
    """A provider the embedding program already holds, with the memory.json content that
    describes it (``{"memory": {...}, "nanobot": {...}}``). The plugin uses the adapter as
    it is, instead of building one from memory.json, and never closes it."""

    adapter: Any
    settings: dict[str, Any]


_provided: contextvars.ContextVar[ProvidedMemory | None] = contextvars.ContextVar(
    "nanobot_memory_plugin_provided", default=None
)


@contextlib.contextmanager
def provided_memory(adapter: Any, settings: dict[str, Any]) -> Iterator[None]:
    """AgentLoops built inside this block get the memory plugin on ``adapter`` (the
    benchmark harness runs its test sessions through a real nanobot this way, on the very
    provider instance it accumulated memory into)."""
    token = _provided.set(ProvidedMemory(adapter, settings))
    try:
        yield
    finally:
        _provided.reset(token)


@contextlib.contextmanager
def plugin_disabled() -> Iterator[None]:
    """AgentLoops built inside this block get no memory plugin.

    For programs that embed nanobot for their own purposes (e.g. the rolling_summary
    condition's private Dream loop), so a user's ``memory.json`` does not reach them.
    """
    token = _suppressed.set(True)
    try:
        yield
    finally:
        _suppressed.reset(token)


class MemoryPluginTool(Tool):
    _scopes = {"core"}  # noqa: RUF012 - nanobot's own class attribute shape

    def __init__(self, plugin: Any = None) -> None:
        self.plugin = plugin

    @classmethod
    def enabled(cls, ctx: Any) -> bool:
        if _suppressed.get() or os.environ.get(ENV_SWITCH, "").strip().lower() in (
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
        plugin = MemoryPlugin(loop, sessions=ctx.sessions or loop.sessions,
                              bus=ctx.bus or loop.bus, workspace=Path(ctx.workspace),
                              provided=_provided.get())
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
