"""Tool mappings for known memory servers (``memory.mcp.preset``); any key of the block
overrides the preset's, and a nested block (``results``) is merged key by key.

- ``server-memory``: the official reference server (``@modelcontextprotocol/server-memory``,
  a knowledge graph in one JSONL file). A turn becomes one entity whose type is the
  scope's tag and whose one observation is the dated transcript; ``search_nodes``
  matches its query as one case-insensitive substring, so the query goes word by word.
- ``mcp-memory-service``: ``mcp-memory-service`` (PyPI; SQLite + vectors). A turn is one
  memory tagged with the scope; ``memory_search`` is filtered by that tag.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "server-memory": {
        "server_name": "@modelcontextprotocol/server-memory",
        "env": {"MEMORY_FILE_PATH": "{data_dir}/server-memory.jsonl"},
        "record": {
            "tool": "create_entities",
            "arguments": {"entities": [{
                "name": "{scope_tag}/{event_id}",
                "entityType": "{scope_tag}",
                "observations": ["[{when}] {transcript}"],
            }]},
            "native_id": "{scope_tag}/{event_id}",
        },
        "search": {
            "tool": "search_nodes", "arguments": {"query": "{query}"}, "split_terms": True,
        },
        "reset": {
            "list": {"tool": "search_nodes", "arguments": {"query": "{scope_tag}"}},
            "delete": {"tool": "delete_entities", "arguments": {"entityNames": "{ids}"}},
        },
        "results": {
            "items": "entities", "text": "observations", "native_id": "name",
            # the entity's name carries the recorded event's id: provenance the server keeps
            "source_event_id": "name", "source_event_pattern": r"^nma-scope-[0-9a-f]+/(.+)$",
            "scope_field": "entityType", "scope_value": "{scope_tag}",
        },
    },
    "mcp-memory-service": {
        "server_name": "mcp-memory-service",
        "env": {
            "MCP_MEMORY_STORAGE_BACKEND": "sqlite_vec",
            "MCP_MEMORY_SQLITE_PATH": "{data_dir}/mcp-memory-service.db",
            "MCP_MEMORY_BASE_DIR": "{data_dir}/mcp-memory-service",
            # no model downloads at run time (GUIDE): a model must already be installed
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        },
        "record": {
            "tool": "memory_store",
            "arguments": {
                "content": "[{when}] {transcript}",
                # one conversation per scope: the server then skips its semantic
                # de-duplication (distinct turns of a chat are often alike)
                "conversation_id": "{scope_tag}",
                # a turn replayed after a reset is stored again, not refused
                "restore_deleted": True,
                "metadata": {"tags": ["{scope_tag}"], "type": "note"},
            },
            "fail_pattern": r"^(Error|Failed|Not stored)",
            "already_stored_pattern": r"Duplicate content detected \(exact match\)",
        },
        "search": {
            "tool": "memory_search",
            "arguments": {"query": "{query}", "tags": ["{scope_tag}"], "limit": "{limit}"},
            "fail_pattern": r"^Error",
        },
        "reset": {
            # memory_delete answers "Error: Unknown error" when no memory has the tag, so
            # whether the scope holds anything is asked first (memory_list answers JSON)
            "list": {"tool": "memory_list", "arguments": {"tags": ["{scope_tag}"],
                                                          "page_size": 1}},
            "delete": {"tool": "memory_delete",
                       "arguments": {"tags": ["{scope_tag}"], "dry_run": False},
                       "fail_pattern": r"^(Error|Failed)"},
        },
        "results": {
            # The stdio server answers in prose (12.4.0's format): one match per memory.
            "text_pattern": (r"^\d+\. (?P<content>.*?)\n   Hash: (?P<content_hash>[0-9a-f]+)\n"
                             r"   Created: (?P<created_at>\S*)(?: \[(?P<tags>[^\]\n]*)\])?"),
            "list_groups": {"tags": r",\s*"},
            "empty_pattern": r"^No memories found",
            "items": "memories",  # memory_list's JSON answer
            "text": "content", "native_id": "content_hash", "created_at": "created_at",
            "scope_field": "tags", "scope_value": "{scope_tag}",
        },
    },
}


def merged(preset: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """The block over the preset; nested mappings merged key by key."""
    out = dict(preset)
    for key, value in block.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        elif value is not None:
            out[key] = value
    return out
