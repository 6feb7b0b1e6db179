"""Any memory server that speaks MCP, behind the contract: ``config.py`` the block and
tool mapping, ``presets.py`` mappings for known servers, ``session.py`` the stdio
process, ``adapter.py`` the adapter. See docs/mcp.md."""

from __future__ import annotations

from nanobot_memory_adapters.backends.mcp.adapter import McpAdapter, info_for, scope_tag
from nanobot_memory_adapters.backends.mcp.config import McpConfig

__all__ = ["McpAdapter", "McpConfig", "info_for", "scope_tag"]
