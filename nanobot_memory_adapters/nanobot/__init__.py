"""The nanobot plugin: the memory slot inside a real nanobot ``AgentLoop``.

Entry point (``pyproject.toml``)::

    [project.entry-points."nanobot.tools"]
    memory_adapters = "nanobot_memory_adapters.nanobot.tool:MemoryPluginTool"

See ``docs/nanobot-plugin.md``. Private nanobot seams are confined to ``seams.py``.
"""

from __future__ import annotations

from nanobot_memory_adapters.nanobot.runtime import MemoryPlugin, plugin_for
from nanobot_memory_adapters.nanobot.tool import plugin_disabled

__all__ = ["MemoryPlugin", "plugin_disabled", "plugin_for"]
