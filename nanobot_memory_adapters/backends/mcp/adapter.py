"""A memory server reached through MCP tools, behind the contract.

The server decides what is stored, what a search returns and its order; the adapter
only fills the configured argument templates, keeps a search's items to the request's
scope (the scope field), and formats them within the budget. It scores nothing; the one
ordering it makes is with ``split_terms``: the word searches' results are merged
round-robin (each word's first, then each word's second..., each item once), so the
order is the server's within a word and the adapter's across words. What the tools
cannot say (readiness, provenance beyond the stored fields, a native token budget) is
declared, not faked.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from nanobot_memory_adapters import sizing
from nanobot_memory_adapters.backends.mcp import templates
from nanobot_memory_adapters.backends.mcp.config import McpConfig, ToolCall
from nanobot_memory_adapters.backends.mcp.session import StdioServer, ToolError
from nanobot_memory_adapters.base import BaseAdapter, NativeHealth, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.tracing import TraceSink

BACKEND = "mcp"
#: Typical tokens of one stored turn (two chat lines): turns the budget into {limit}.
ITEM_TEXT_TOKENS = 60
# Words too common to narrow a substring search (split_terms): every turn has them.
_STOPWORDS_TEXT = """
a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each few for from
further had has have having he her here hers herself him himself his how i if in into is
it its itself just me more most my myself no nor not now of off on once only or other our
ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself
yourselves ever many much tell know remember think said say get got like
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_WORD = re.compile(r"[^\W_]+")


def info_for(config: McpConfig) -> ProviderInfo:
    mapped = [f for f in ("native_id", "native_type", "score", "created_at", "event_at")
              if getattr(config.results, f)]
    if config.results.source_event_id:
        mapped.append("source_event_ids")
    server = config.server_name or " ".join(config.command)[:80]
    return ProviderInfo(
        name=BACKEND,
        condition_kind="architecture",
        consistency_model=config.consistency_model,  # the server's; the presets': immediate
        stores_events=True,
        tag_mapping="metadata" if "context" in config.results.metadata else "none",
        memory_form=config.memory_form,
        item_fields=tuple(mapped),
        native_ingest_modes=(config.record.tool,),
        # declared: none of the optional capabilities (no generic tool for feedback, bulk
        # ingest, readiness, mutation, provenance or diagnostics; docs/mcp.md)
        capabilities=(),
        description=f"MCP memory server {server}: record via {config.record.tool}, "
        f"retrieve via {config.search.tool}, reset via {config.reset.delete.tool}; "
        "the server's own storage and ranking, reached through its tools.",
    )


def scope_tag(scope: MemoryScope) -> str:
    """An opaque per-scope tag: a server that matches queries against names and types
    must not find a scope's items because a question mentions its persona's name."""
    return "nma-scope-" + hashlib.sha256(scope.key.encode()).hexdigest()[:20]


def query_terms(query: str, limit: int, tag: str = "") -> list[str]:
    """The query's content words, each its own search. A word found inside the scope's
    ``tag`` (``nma``, ``scope``, a run of its hex digits) is dropped: a server that
    matches names and types would answer it with every item of the scope."""
    words: list[str] = []
    for word in _WORD.findall(query.lower()):
        if len(word) >= 3 and word not in STOPWORDS and word not in words \
                and word not in tag:
            words.append(word)
    return words[:limit]


def _as_time(value: Any) -> datetime | None:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value).astimezone()
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


class McpAdapter(BaseAdapter):
    config_model = McpConfig
    # one server process per adapter on one store: the reference server rewrites its whole
    # file per write, so two harness units on one store would lose each other's writes
    max_concurrent_units = 1

    def __init__(self, config: McpConfig, *, data_dir: str | Path,
                 trace_sink: TraceSink | None = None) -> None:
        super().__init__(info=info_for(config), trace_sink=trace_sink)
        self.config = config
        self.data_dir = Path(data_dir)
        fill = {"data_dir": str(self.data_dir)}
        params = StdioServerParameters(
            command=config.command[0].replace("{data_dir}", fill["data_dir"]),
            args=[a.replace("{data_dir}", fill["data_dir"]) for a in config.command[1:]],
            env={k: v.replace("{data_dir}", fill["data_dir"]) for k, v in config.env.items()},
            cwd=config.cwd.replace("{data_dir}", fill["data_dir"]) if config.cwd else None,
        )
        self.server = StdioServer(
            params, stderr_log=self.data_dir / "server.stderr.log",
            connect_timeout_s=config.connect_timeout_s, call_timeout_s=config.call_timeout_s,
        )

    @classmethod
    def from_config(cls, config: McpConfig, env: ProviderEnv) -> McpAdapter:
        return cls(config, data_dir=env.data_dir / "mcp", trace_sink=env.trace_sink)

    @classmethod
    def failing_variant(cls, block: McpConfig) -> McpAdapter:
        broken = block.model_copy(update={"command": ["/nonexistent/mcp-memory-server"]})
        return cls(broken, data_dir=Path("/nonexistent/nma-mcp"))

    def native_scope(self, scope: MemoryScope) -> dict[str, Any]:
        return {"scope_tag": scope_tag(scope),
                "scope_value": self._values(scope)["scope_value"]}

    # -- helpers -------------------------------------------------------------------
    def _values(self, scope: MemoryScope) -> dict[str, Any]:
        base = {"scope": scope.key, "scope_tag": scope_tag(scope)}
        base["scope_value"] = templates.render(self.config.results.scope_value, base)
        return base

    async def _tool(self, call: ToolCall, values: dict[str, Any], operation: str) -> Any:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        answer = await self.server.call(call.tool, templates.render(call.arguments, values))
        if isinstance(answer, str) and call.fail_pattern and \
                re.search(call.fail_pattern, answer, re.I | re.M):
            # the server reported a failure as ordinary text, not as a tool error
            raise AdapterError(
                f"{call.tool} failed: {answer[:300]}", backend_name=BACKEND,
                operation=operation, raw={"answer": answer[:2000], "tool": call.tool},
            )
        return answer

    async def _check_tools(self) -> None:
        await self.server.session()
        c = self.config
        wanted = [c.record.tool, c.search.tool, c.reset.delete.tool]
        if c.reset.list:
            wanted.append(c.reset.list.tool)
        missing = sorted({t for t in wanted if t not in self.server.tools})
        if missing:
            raise AdapterError(
                f"the MCP server has no tool(s) {', '.join(missing)} (it offers "
                f"{', '.join(sorted(self.server.tools))}); fix memory.mcp's tool names",
                backend_name=BACKEND, operation="setup_scope",
                raw={"missing_tools": missing, "server_tools": sorted(self.server.tools)},
            )

    def _items(self, data: Any, scope: MemoryScope, operation: str
               ) -> tuple[list[dict[str, Any]], int]:
        """The result's items that belong to ``scope`` (and how many others were dropped)."""
        r = self.config.results
        found = self._prose_items(data) if isinstance(data, str) and r.text_pattern \
            else templates.pick(data, r.items)
        if not isinstance(found, list):
            shown = data if isinstance(data, str) else repr(data)
            raise AdapterError(
                f"{self.config.search.tool} answered no list at {r.items or '(result)'!r}: "
                f"{shown[:300]}",
                backend_name=BACKEND, operation=operation,
                raw={"answer": shown[:2000], "items_path": r.items},
            )
        want = self._values(scope)["scope_value"]
        mine = []
        for item in found:
            if not isinstance(item, dict):
                continue
            owner = templates.pick(item, r.scope_field)
            if owner == want or (isinstance(owner, list) and want in owner):
                mine.append(item)
        return mine, len(found) - len(mine)

    def _prose_items(self, text: str) -> list[dict[str, Any]] | None:
        """Items read out of a prose answer by ``text_pattern``; None when the answer is
        neither items nor the server's 'no results' (a changed format fails loudly)."""
        r = self.config.results
        assert r.text_pattern is not None
        items: list[dict[str, Any]] = []
        for match in re.finditer(r.text_pattern, text, re.M | re.S):
            item: dict[str, Any] = dict(match.groupdict())
            for group, separator in r.list_groups.items():
                if isinstance(item.get(group), str):
                    item[group] = [p for p in re.split(separator, item[group]) if p]
            items.append(item)
        if items or (r.empty_pattern and re.search(r.empty_pattern, text, re.M)):
            return items
        return None

    def _item(self, native: dict[str, Any]) -> RetrievedItem:
        r = self.config.results
        text = templates.pick(native, r.text)
        if isinstance(text, list):
            text = "\n".join(str(t) for t in text)
        score = templates.pick(native, r.score) if r.score else None
        source = templates.pick(native, r.source_event_id) if r.source_event_id else None
        if source is not None and r.source_event_pattern:
            found = re.search(r.source_event_pattern, str(source))
            groups = found.groupdict() if found else {}
            source = groups.get("event_id") or (found.group(1) if found and found.re.groups
                                                else None)
        kind = templates.pick(native, r.native_type) if r.native_type else None
        native_id = templates.pick(native, r.native_id) if r.native_id else None
        return RetrievedItem(
            native_id=str(native_id) if native_id is not None else None,
            text=str(text or ""),
            native_type=str(kind) if kind is not None else None,
            score=float(score) if isinstance(score, int | float) else None,
            created_at=_as_time(templates.pick(native, r.created_at)) if r.created_at else None,
            event_at=_as_time(templates.pick(native, r.event_at)) if r.event_at else None,
            source_event_ids=[str(source)] if source else None,
            metadata={k: templates.pick(native, p) for k, p in r.metadata.items()},
            raw=native,
        )

    # -- native parts --------------------------------------------------------------
    async def _setup(self, scope: MemoryScope) -> None:
        await self._check_tools()

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        scope = event.scope()
        user = [m.content for m in event.messages if m.role == "user"]
        values = {
            **self._values(scope),
            "event_id": event.event_id, "session_id": event.session_id,
            "turn_id": event.turn_id, "timestamp": event.timestamp.isoformat(),
            "when": event.timestamp.strftime("%Y-%m-%d %H:%M"),
            "transcript": event.transcript(), "user_text": "\n".join(user),
            "agent_id": event.agent_id, "scenario": event.scenario or "",
            "context": event.context or "", "attribute": event.attribute or "",
        }
        record = self.config.record
        warnings: list[str] = []
        try:
            await self._tool(record, values, "record_event")
        except ToolError as exc:
            if not (record.already_stored_pattern
                    and re.search(record.already_stored_pattern, str(exc), re.I)):
                raise
            warnings.append(f"the server already holds this turn (a replay): {str(exc)[:200]}")
        native_ids = [templates.render(record.native_id, values)] if record.native_id else []
        return NativeWrite(
            status="committed", native_ids=native_ids, native_operation=record.tool,
            native_request={"tool": record.tool}, warnings=warnings,
        )

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        search = self.config.search
        limit = min(self.config.max_limit, sizing.top_k(request.budget, ITEM_TEXT_TOKENS))
        values = {**self._values(request.scope), "limit": limit}
        terms = query_terms(request.query, search.max_terms, values["scope_tag"]) \
            if search.split_terms else []
        queries = terms or [request.query]
        lists: list[list[dict[str, Any]]] = []
        dropped = 0
        for query in queries:
            answer = await self._tool(search, {**values, "query": query}, "retrieve")
            mine, others = self._items(answer, request.scope, "retrieve")
            lists.append(mine)
            dropped += others
        # Interleave the word searches in the server's order; each item once.
        seen: set[str] = set()
        natives: list[dict[str, Any]] = []
        for rank in range(max((len(x) for x in lists), default=0)):
            for found in lists:
                if rank < len(found):
                    key = repr(sorted(found[rank].items()))
                    if key not in seen:
                        seen.add(key)
                        natives.append(found[rank])
        kept = natives[:limit]
        warnings = []
        if len(natives) > limit:
            warnings.append(f"server returned {len(natives)} items; the first {limit} "
                            "(the budget's item count) were kept in the server's order")
        return NativeRetrieval(
            items=[self._item(n) for n in kept],
            raw={"items": kept, "returned": len(natives), "other_scopes_dropped": dropped},
            native_operation=search.tool,
            native_request={"tool": search.tool, "limit": limit, "queries": queries,
                            "native_budget": None},
            warnings=warnings,
        )

    async def _reset(self, scope: MemoryScope) -> str | None:
        reset = self.config.reset
        values: dict[str, Any] = self._values(scope)
        if reset.list is None:
            answer = await self._tool(reset.delete, values, "reset_scope")
            return f"{reset.delete.tool}: {str(answer)[:300]}"
        answer = await self._tool(reset.list, values, "reset_scope")
        mine, _ = self._items(answer, scope, "reset_scope")
        if not mine:
            return "the server held nothing of this scope"
        used = templates.placeholders(reset.delete.arguments)
        if not used & {"id", "ids"}:  # one call clears the scope (a tag filter)
            answer = await self._tool(reset.delete, values, "reset_scope")
            return f"{reset.delete.tool}: {str(answer)[:300]}"
        ids = [str(i) for n in mine
               if (i := templates.pick(n, self.config.results.native_id or "")) is not None]
        if "id" in used:
            for one in ids:
                await self._tool(reset.delete, {**values, "id": one, "ids": [one]},
                                 "reset_scope")
        else:
            await self._tool(reset.delete, {**values, "ids": ids}, "reset_scope")
        return f"{len(ids)} item(s) deleted with {reset.delete.tool}"

    async def _health(self) -> NativeHealth:
        details: dict[str, Any] = {
            "server": self.config.server_name or self.config.command[0],
            "command": self.config.command[0],
            "stderr_log": str(self.server.stderr_log),
            "native_budget": False, "readiness": "none (tool calls answer synchronously)",
        }
        try:
            await self._check_tools()
        except AdapterError as exc:
            details["error"] = exc.message
            return NativeHealth(status="unavailable", details=details)
        details["server_info"] = self.server.server_info
        details["tools"] = sorted(self.server.tools)
        return NativeHealth(status="ok", details=details)

    async def aclose(self) -> None:
        await self.server.close()
