"""The ``memory.mcp`` block: which server to start and how the contract's three writes
and reads map onto its tools. ``preset`` fills the mapping for a known server."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nanobot_memory_adapters.backends.mcp import templates
from nanobot_memory_adapters.backends.mcp.presets import PRESETS, merged
from nanobot_memory_adapters.contract import ConsistencyModel, MemoryForm


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, description="The server's tool name.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Argument template with {placeholders}."
    )
    fail_pattern: str | None = Field(
        default=None, description="Regex: a text answer matching it is a failure (for "
        "servers that report errors as ordinary text, not as tool errors).",
    )
    already_stored_pattern: str | None = Field(
        default=None, description="Regex (record only): a tool error matching it means "
        "the server already holds the turn (a replay), so the write counts as stored.",
    )


class RecordCall(ToolCall):
    native_id: str | None = Field(
        default=None, description="Template of the id the server stores the turn under "
        "(when the arguments name it), reported in the write receipt.",
    )


class SearchCall(ToolCall):
    split_terms: bool = Field(
        default=False,
        description="Send each content word of the query as its own search (for servers "
        "that match the query as one substring, like the reference server); results "
        "keep the server's order, the first word's first, each item once.",
    )
    max_terms: int = Field(default=8, ge=1, le=32)


class ResetCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    list: ToolCall | None = Field(
        default=None,
        description="A call whose results (mapped by ``results``, kept to the scope) name "
        "what to delete; omit when ``delete`` alone clears the scope (a tag filter).",
    )
    delete: ToolCall = Field(
        description="Deletes: {ids} all listed names at once, {id} one per call; with "
        "neither, one call clears the scope (after ``list`` found something)."
    )


class ResultMapping(BaseModel):
    """Where a search's answer keeps its items and their fields (dotted paths)."""

    model_config = ConfigDict(extra="forbid")

    items: str = Field(default="", description="Path to the result list ('' = the result).")
    text_pattern: str | None = Field(
        default=None, description="For servers that answer in prose: a regex whose "
        "matches are the items, its named groups their fields (paths below name groups).",
    )
    list_groups: dict[str, str] = Field(
        default_factory=dict, description="Group -> separator regex: split into a list.",
    )
    empty_pattern: str | None = Field(
        default=None, description="Regex of a prose answer that means 'no results'; a "
        "prose answer matching neither pattern is an error, never an empty result.",
    )
    text: str = Field(description="Item text; a list of strings is joined by newlines.")
    native_id: str | None = None
    native_type: str | None = None
    score: str | None = None
    created_at: str | None = None
    event_at: str | None = None
    source_event_id: str | None = None
    source_event_pattern: str | None = Field(
        default=None, description="Regex applied to the ``source_event_id`` value; its "
        "group 'event_id' (or group 1) is the recorded event (e.g. out of a name).",
    )
    metadata: dict[str, str] = Field(
        default_factory=dict, description="Item metadata key -> path (e.g. context)."
    )
    scope_field: str = Field(
        description="Path of the field that says whose an item is; items whose value "
        "is not (or, for a list, does not contain) ``scope_value`` are dropped."
    )
    scope_value: str = Field(description="Template of the scope's value ({scope}, {scope_tag}).")


class McpConfig(BaseModel):
    """``memory.mcp`` block."""

    model_config = ConfigDict(extra="forbid")

    preset: Literal["server-memory", "mcp-memory-service"] | None = Field(
        default=None, description="Fill record/search/reset/results for a known server."
    )
    command: list[str] = Field(
        min_length=1, description="The server command, e.g. "
        "['npx', '-y', '@modelcontextprotocol/server-memory']. Started over stdio."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for the server; {data_dir} "
        "is this provider's directory."
    )
    cwd: str | None = None
    server_name: str = Field(default="", description="Shown in health and traces.")
    record: RecordCall
    search: SearchCall
    reset: ResetCall
    results: ResultMapping
    memory_form: MemoryForm = Field(
        default="verbatim", description="'derived' when the server rewrites what it stores."
    )
    consistency_model: ConsistencyModel = Field(
        default="immediate", description="When a recorded turn can be found: 'immediate' "
        "when the record tool answers once the turn is searchable (both presets); "
        "'eventual' or 'async_derived' for a server that indexes or extracts in the "
        "background (no tool says when it is done, so the harness is told, not a wait)."
    )
    connect_timeout_s: float = Field(default=60.0, gt=0)
    call_timeout_s: float = Field(default=60.0, gt=0)
    max_limit: int = Field(default=100, ge=1, description="Cap on {limit}.")

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset") in PRESETS:
            return merged(PRESETS[data["preset"]], data)
        return data

    @model_validator(mode="after")
    def _templates(self) -> McpConfig:
        templates.check(self.record.arguments, templates.RECORD_FIELDS, "mcp.record.arguments")
        templates.check(self.record.native_id or "", templates.RECORD_FIELDS,
                        "mcp.record.native_id")
        fields = templates.SEARCH_FIELDS
        templates.check(self.search.arguments, fields, "mcp.search.arguments")
        if self.reset.list is not None:
            templates.check(self.reset.list.arguments, templates.LIST_FIELDS,
                            "mcp.reset.list.arguments")
        templates.check(self.reset.delete.arguments, templates.DELETE_FIELDS,
                        "mcp.reset.delete.arguments")
        templates.check(self.results.scope_value, templates.LIST_FIELDS,
                        "mcp.results.scope_value")
        for pattern in (self.results.text_pattern, self.results.empty_pattern,
                        self.record.fail_pattern, self.record.already_stored_pattern,
                        self.reset.delete.fail_pattern, self.search.fail_pattern,
                        self.results.source_event_pattern,
                        *self.results.list_groups.values()):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"mcp: bad regex {pattern!r}: {exc}") from None
        if "query" not in templates.placeholders(self.search.arguments):
            raise ValueError("mcp.search.arguments must pass {query} to the server")
        if "scope" not in templates.placeholders(self.results.scope_value) and \
                "scope_tag" not in templates.placeholders(self.results.scope_value):
            raise ValueError("mcp.results.scope_value must name the scope ({scope} or "
                             "{scope_tag}), or scopes would share memory")
        return self
