"""MemOS (PyPI ``MemoryOS`` 2.0.33) over its product HTTP API, with httpx, as a native
store (``nanobot_memory_adapters.store``: the provider wrapper owns the read-only gate,
traces, error wrapping and rendering).

MemOS needs ``openai<2`` and nanobot ``openai>=2.8``, so MemOS runs as its own server
(``nanobot-memory memos-server start`` provisions one: see ``server.py``) and this
adapter speaks the server's native product API — the same request models MemOS's own
clients use (``APIADDRequest``, ``APISearchRequest``, ``APIFeedbackRequest``,
``DeleteMemoryRequest``) plus ``/product/scheduler/*``. The adapter maps ids, builds
those requests, formats results and manages the HTTP client; extraction, retrieval,
ranking and scheduling are MemOS's own.

Scope mapping (ids are made safe for MemOS's scheduler stream keys, which use ``:``;
an id containing ``__`` or starting/ending with ``_`` gets a hash suffix, so the ``__``
separators below never merge two scopes):

- ``user_id``  = ``user_id_template`` (default ``{run_id}__{persona_id}``)
- cube         = ``cube_id_template`` (default ``{namespace}__{run_id}__{persona_id}``):
  the only ``writable_cube_ids``/``readable_cube_ids`` entry of every call, so one
  persona of one run is one MemCube (the postgres graph store keys rows by cube).
- session      -> ``session_id`` (MemOS uses it for weighting, not as a filter)
- assistant    -> ``info.agent_id``; turn time -> each message's ``chat_time`` and
  ``info.timestamp``; event ids -> ``info.event_id``/``turn_id``/``run_id`` and the add's
  ``task_id`` (= event_id, so its scheduler task can be looked up).
- scenario/context/attribute -> ``custom_tags`` (MemOS hands them to its extraction LLM
  as tag *suggestions* on sync fine adds; async adds drop them before extraction in
  2.0.33) AND ``info.scenario``/``info.context``/``info.attribute``, which MemOS keeps on
  every derived memory. A request's tags become the native search ``filter``
  ``{"and": [{"info.context": "work"}, ...]}`` (``tag_mapping="filter"``, a hard filter).
  MemOS 2.0.33's postgres graph backend accepts ``filter`` but does not apply it in
  vector search; the launcher's bootstrap makes it apply it (state file ``patches``).
  Against a MemOS without that, set ``tag_mapping: "metadata"`` to stay honest.

Writes are ``async_mode="async"`` by default (MemOS stores a raw "fast" memory at once
and its scheduler replaces it by the LLM-extracted memories later): receipts say
``queued`` and readiness comes from ``/product/scheduler/status`` (Redis-backed task
status). Without Redis MemOS cannot report task status: readiness is ``unknown``.
If extraction yields nothing, MemOS deletes the raw memory and the turn leaves no trace.

Results keep MemOS's groups (``text_mem``, ``pref_mem``, ``tool_mem``, ``skill_mem``) and
native labels (``metadata.memory_type``: LongTermMemory, UserMemory, WorkingMemory,
PreferenceMemory, ToolSchemaMemory, ToolTrajectoryMemory, SkillMemory...), relativity
scores, timestamps and sources, in raw results and in the formatted context.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx
from pydantic import BaseModel

from nanobot_memory_adapters import sizing
from nanobot_memory_adapters.backends.memos.config import (
    ISOLATION,
    MEMOS_GROUPS,
    SCOPE_KEYS,
    TAG_KEYS,
    MemOSConfig,
    id_part,
    provider_info,
    safe_id,
)
from nanobot_memory_adapters.backends.memos.feedback import changed_ids, feedback_body
from nanobot_memory_adapters.backends.memos.inventory import MemOSInventory
from nanobot_memory_adapters.backends.memos.readiness import MemOSReadiness
from nanobot_memory_adapters.base import (
    NativeHealth,
    NativeRetrieval,
    NativeWrite,
)
from nanobot_memory_adapters.contract import (
    AdapterError,
    FeedbackRequest,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.scope import check_scope_id
from nanobot_memory_adapters.timeparse import parse_time


class MemOSStore:
    """MemOS's product API as a native store (see the module docstring)."""

    config_model: ClassVar[type[BaseModel]] = MemOSConfig
    info: ProviderInfo
    readiness_timeout_s = 120.0  # scheduler extraction with a real LLM can take a while

    def __init__(
        self,
        config: MemOSConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config or MemOSConfig()
        self.info = provider_info(self.config)
        self.backend_name = self.info.name
        self.base_url = self.config.resolved_url()
        headers = {"content-type": "application/json"}
        if self.config.api_key:
            headers["authorization"] = f"Bearer {self.config.api_key}"
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(self.config.timeout_s, connect=5.0),
            headers=headers,
            transport=transport,
        )
        # collaborator: the scheduler's task status (readiness, polled by the wrapper)
        self.scheduler = MemOSReadiness(self.config, native_ids=self.native_ids,
                                        request=self._request)
        # collaborator: diagnostics (native_query), never used in a prompt
        self.inventory = MemOSInventory(backend_name=self.backend_name,
                                        native_ids=self.native_ids, request=self._request)
        # capabilities (store.STORE_CAPABILITIES)
        self.readiness = self.scheduler.readiness
        self.readiness_interval_s = self.config.readiness_poll_s
        self.native_query = self.inventory.native_query
        self.feedback = self._feedback if self.config.feedback else None

    @classmethod
    def from_config(cls, config: MemOSConfig, env: ProviderEnv) -> MemOSStore:
        return cls(config)

    @classmethod
    def failing_variant(cls, block: MemOSConfig) -> MemOSStore:
        """For ``nanobot-memory conformance`` item 7: a URL where nothing listens."""
        return cls(block.model_copy(update={"base_url": "http://127.0.0.1:9"}))

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- feedback (declared with ``feedback: true``) ------------------------------------
    def feedback_request(self, request: FeedbackRequest) -> dict[str, Any]:
        ids = self.native_ids(request.scope, "apply_feedback")
        return feedback_body(request, ids, self.config.feedback_async_mode)

    async def _feedback(self, request: FeedbackRequest) -> NativeWrite:
        """POST /product/feedback (MemOS judges the feedback with its LLM and adds or
        updates memories itself). ``metadata.history``: the chat turns it refers to."""
        body = self.feedback_request(request)
        result = await self._request("apply_feedback", "POST", "/product/feedback", json=body)
        native_ids = changed_ids(result)
        sync = body["async_mode"] == "sync"
        return NativeWrite(
            status="committed" if sync else "queued", native_ids=native_ids,
            native_operation="POST /product/feedback",
            native_request={k: v for k, v in body.items() if k not in ("history", "info")},
            warnings=[] if native_ids or not sync else ["MemOS derived no memory change"],
            stored_nothing=sync and not native_ids)

    # -- ids -------------------------------------------------------------------------
    def native_ids(self, scope: MemoryScope, operation: str = "scope") -> dict[str, str]:
        """MemOS ``user_id`` and cube id of a scope."""
        values = {
            "run_id": scope.run_id,
            "persona_id": scope.persona_id,
            # one namespace per adapter config, so events (which carry no namespace) and
            # requests always meet in the same cube
            "namespace": self.config.namespace,
            "agent_id": scope.agent_id or "",
        }
        try:
            for key in ("run_id", "persona_id", "namespace"):
                check_scope_id(values[key], field=key)
            parts = {k: id_part(v) if v else v for k, v in values.items()}
            user = self.config.user_id_template.format(**parts)
            cube = self.config.cube_id_template.format(**parts)
        except (KeyError, ValueError) as exc:
            raise AdapterError(
                f"refused scope before calling MemOS: {exc}",
                backend_name=self.backend_name,
                operation=operation,
                raw={"scope": scope.model_dump(), "reason": str(exc)},
            ) from None
        return {"user_id": safe_id(user), "cube_id": safe_id(cube)}

    def native_scope(self, scope: MemoryScope) -> dict[str, Any]:
        """The scope's MemOS ids and its isolation mode (run manifests record both)."""
        return {**self.native_ids(scope, "native_scope"),
                "use_multi_db": self.config.use_multi_db, "isolation": ISOLATION}

    def _event_scope(self, event: MemoryEvent) -> MemoryScope:
        return event.scope()

    # -- HTTP ------------------------------------------------------------------------
    async def _request(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        ok_codes: tuple[int, ...] = (200,),
    ) -> dict[str, Any]:
        """One native call; transport failures and non-200 codes become AdapterErrors."""
        try:
            response = await self._client.request(method, path, json=json, params=params)
        except httpx.TransportError as exc:
            raise AdapterError(
                f"MemOS server at {self.base_url} unreachable ({type(exc).__name__}: {exc}); "
                "start it with `nanobot-memory memos-server start` or set memos.base_url / "
                "MEMOS_URL",
                backend_name=self.backend_name,
                operation=operation,
                raw={"type": type(exc).__name__, "message": str(exc), "url": self.base_url + path},
                retryable=True,
            ) from exc
        try:
            body = response.json()
        except ValueError:
            body = {"text": response.text[:4000]}
        code = body.get("code", response.status_code) if isinstance(body, dict) else None
        status_ok = response.status_code < 400 or response.status_code in ok_codes
        if not status_ok or code not in ok_codes:
            message = body.get("message") or body.get("detail") if isinstance(body, dict) else None
            raise AdapterError(
                f"MemOS {method} {path} -> HTTP {response.status_code}, code {code}: "
                f"{str(message)[:500]}",
                backend_name=self.backend_name,
                operation=operation,
                raw={
                    "status_code": response.status_code,
                    "body": body,
                    "url": self.base_url + path,
                },
                retryable=response.status_code >= 500 or response.status_code == 429,
            )
        return body

    # -- write -----------------------------------------------------------------------
    def add_request(self, event: MemoryEvent) -> dict[str, Any]:
        """The exact ``/product/add`` body for an event (``APIADDRequest``)."""
        ids = self.native_ids(self._event_scope(event), "record_event")
        chat_time = event.timestamp.isoformat()
        messages = []
        for m in event.messages:
            msg: dict[str, Any] = {"role": m.role, "content": m.content, "chat_time": chat_time}
            if m.name:
                msg["name"] = m.name
            if m.tool_call_id:
                msg["tool_call_id"] = m.tool_call_id
            messages.append(msg)
        tags = event.tags()
        info: dict[str, Any] = {
            "event_id": event.event_id,
            "run_id": event.run_id,
            "persona_id": event.user_id,
            "agent_id": event.agent_id,
            "turn_id": event.turn_id,
            "timestamp": chat_time,
            **tags,
        }
        if event.metadata:
            info["event_metadata"] = event.metadata
        body: dict[str, Any] = {
            "user_id": ids["user_id"],
            "session_id": event.session_id,
            "task_id": event.event_id,
            "writable_cube_ids": [ids["cube_id"]],
            "messages": messages,
            "custom_tags": [tags[k] for k in TAG_KEYS if k in tags] or None,
            "info": info,
            "async_mode": self.config.async_mode,
        }
        if self.config.async_mode == "sync" and self.config.add_mode:
            body["mode"] = self.config.add_mode
        return body

    async def record(self, event: MemoryEvent) -> NativeWrite:
        body = self.add_request(event)
        result = await self._request("record_event", "POST", "/product/add", json=body)
        data = result.get("data") or []
        native_ids = [
            str(d["memory_id"]) for d in data if isinstance(d, dict) and d.get("memory_id")
        ]
        warnings = []
        asynchronous = self.config.async_mode == "async"
        if asynchronous and body["custom_tags"]:
            warnings.append(
                "MemOS 2.0.33 async adds do not pass custom_tags to its extractor; the tags "
                "stay filterable as info.scenario/context/attribute"
            )
        if asynchronous:
            warnings.append(
                "native ids are MemOS's raw 'fast' memories; the scheduler "
                "replaces them with extracted memories"
            )
        return NativeWrite(
            status="queued" if asynchronous else "committed",
            native_ids=native_ids,
            native_operation=f"POST /product/add (async_mode={self.config.async_mode})",
            native_request=self._describe_add(body),
            warnings=warnings,
            # a synchronous add answers with every memory it stored
            stored_nothing=not asynchronous and not native_ids,
        )

    @staticmethod
    def _describe_add(body: dict[str, Any]) -> dict[str, Any]:
        described = {k: v for k, v in body.items() if k not in ("messages", "info")}
        described["messages"] = len(body["messages"])
        described["info_keys"] = sorted(body["info"])
        return described

    # -- read ------------------------------------------------------------------------
    def search_filter(self, request: RetrieveRequest) -> dict[str, Any] | None:
        """MemOS filter syntax for the request's tags and extra filters."""
        conditions: list[dict[str, Any]] = []
        if self.config.tag_mapping == "filter":
            conditions += [{f"info.{k}": v} for k, v in request.tags().items()]
        for key, value in request.filters.items():
            if key in ("and", "or") or key in SCOPE_KEYS:
                raise AdapterError(
                    f"filter key {key!r} is not allowed: the scope (cube) comes from "
                    "request.scope only; give plain field conditions",
                    backend_name=self.backend_name,
                    operation="retrieve",
                    raw={"filters": request.filters},
                )
            conditions.append({key: value})
        return {"and": conditions} if conditions else None

    def search_request(self, request: RetrieveRequest) -> dict[str, Any]:
        """The exact ``/product/search`` body for a request (``APISearchRequest``)."""
        ids = self.native_ids(request.scope, "retrieve")
        cfg = self.config
        top_k = sizing.top_k(request.budget, cfg.item_text_tokens, cfg.top_k_ceiling)
        body: dict[str, Any] = {
            "query": request.query,
            "user_id": ids["user_id"],
            "readable_cube_ids": [ids["cube_id"]],
            "session_id": request.session_id,
            "mode": cfg.search_mode,
            "top_k": top_k,
            "relativity": cfg.relativity,
            "dedup": cfg.dedup,
            "rerank": cfg.rerank,
            "include_preference": cfg.include_preference,
            "pref_top_k": min(cfg.pref_top_k, top_k),
            "search_tool_memory": cfg.search_tool_memory,
            "tool_mem_top_k": min(cfg.tool_mem_top_k, top_k),
            "include_skill_memory": cfg.include_skill_memory,
            "skill_mem_top_k": min(cfg.skill_mem_top_k, top_k),
            "filter": self.search_filter(request),
        }
        return body

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        body = self.search_request(request)
        operation = f"POST /product/search (mode={body['mode']})"
        described = {k: v for k, v in body.items() if k != "query"}
        if not request.query.strip():
            return NativeRetrieval(
                items=[],
                raw={},
                native_operation=operation,
                native_request=described,
                warnings=["empty query: MemOS search was not called"],
            )
        result = await self._request("retrieve", "POST", "/product/search", json=body)
        data = result.get("data") or {}
        cube = body["readable_cube_ids"][0]
        items: list[RetrievedItem] = []
        warnings: list[str] = []
        groups = [g for g in MEMOS_GROUPS if g in data] + [
            g for g in data if g not in MEMOS_GROUPS and isinstance(data[g], list)
        ]
        for group in groups:
            for bucket in data.get(group) or []:
                if not isinstance(bucket, dict):
                    continue
                if bucket.get("cube_id") not in (None, cube):
                    # Never expected: we only ask for our cube. Keep isolation anyway.
                    warnings.append(f"dropped {group} results of foreign cube {bucket['cube_id']}")
                    continue
                for memory in bucket.get("memories") or []:
                    if isinstance(memory, dict):
                        items.append(self._item(group, cube, memory))
        return NativeRetrieval(
            items=items,
            raw=data,
            native_operation=operation,
            native_request=described,
            warnings=warnings,
        )

    @staticmethod
    def _item(group: str, cube: str, memory: dict[str, Any]) -> RetrievedItem:
        meta = memory.get("metadata") or {}
        score = meta.get("relativity")
        if score is None:
            score = memory.get("relativity")
        keep = (
            "memory_type",
            "key",
            "tags",
            "info",
            "session_id",
            "user_id",
            "status",
            "confidence",
            "type",
            "background",
            "sources",
            "ref_id",
            "version",
        )
        metadata = {k: meta[k] for k in keep if k in meta}
        metadata["cube_id"] = cube
        info = meta.get("info") or {}
        event: str | None = None
        if isinstance(info, dict):
            for key in TAG_KEYS:
                if key in info:
                    metadata[key] = info[key]
            event = str(info["event_id"]) if info.get("event_id") else None
        return RetrievedItem(
            native_id=str(memory.get("id") or meta.get("id") or "") or None,
            text=str(memory.get("memory") or meta.get("memory") or ""),
            native_type=meta.get("memory_type"),
            group=group,
            score=float(score) if isinstance(score, int | float) else None,
            created_at=parse_time(meta.get("created_at")),
            updated_at=parse_time(meta.get("updated_at")),
            # MemOS copies the add's ``info`` onto every memory it derives from it.
            source_event_ids=[event] if event else None,
            metadata=metadata,
            raw=memory,
        )

    # -- reset -----------------------------------------------------------------------
    async def _count(self, ids: dict[str, str], operation: str) -> int:
        body = {
            "mem_cube_id": ids["cube_id"],
            "user_id": ids["user_id"],
            "include_preference": False,
            "include_tool_memory": False,
            "include_skill_memory": False,
            "page": 1,
            "page_size": 1,
        }
        result = await self._request(operation, "POST", "/product/get_memory", json=body)
        total = 0
        for bucket in (result.get("data") or {}).get("text_mem") or []:
            if isinstance(bucket, dict) and bucket.get("cube_id") in (None, ids["cube_id"]):
                total += int(bucket.get("total_nodes") or len(bucket.get("memories") or []))
        return total

    async def reset(self, scope: MemoryScope) -> str | None:
        ids = self.native_ids(scope, "reset_scope")
        body = {"writable_cube_ids": [ids["cube_id"]], "user_id": ids["user_id"]}
        result = await self._request("reset_scope", "POST", "/product/delete_memory", json=body)
        status = (result.get("data") or {}).get("status")
        remaining = await self._count(ids, "reset_scope")
        if remaining:
            raise AdapterError(
                f"MemOS delete left {remaining} memories in cube {ids['cube_id']}",
                backend_name=self.backend_name,
                operation="reset_scope",
                raw={"delete_response": result, "remaining": remaining},
            )
        note = (
            ""
            if status == "success"
            else f" (MemOS answered {result.get('message')!r}: in 2.0.33 delete-by-filter "
            "removes the text memories, then fails on the unconfigured preference store; "
            "the cube was verified empty)"
        )
        return (
            f"MemOS delete_memory(writable_cube_ids=[{ids['cube_id']}], "
            f"user_id={ids['user_id']}) removed the cube's memories{note}; MemOS keeps its "
            "scheduler task records (Redis), its user/cube registry and its server logs, "
            "which contain the prompts with the deleted text"
        )

    # -- lifecycle and health --------------------------------------------------------
    async def setup(self, scope: MemoryScope) -> None:
        self.native_ids(scope, "setup_scope")
        await self._request("setup_scope", "GET", "/health", ok_codes=(200,))

    async def health(self) -> NativeHealth:
        details: dict[str, Any] = {
            "url": self.base_url,
            "async_mode": self.config.async_mode,
            "search_mode": self.config.search_mode,
            "tag_mapping": self.config.tag_mapping,
            "use_multi_db": self.config.use_multi_db,
        }
        try:
            body = await self._client.get("/health")
        except httpx.TransportError as exc:
            details["error"] = {
                "type": type(exc).__name__,
                "message": f"MemOS server at {self.base_url} unreachable "
                f"({type(exc).__name__}: {exc})",
            }
            return NativeHealth(
                status="unavailable",
                details=details,
                warnings=[f"MemOS server at {self.base_url} unreachable"],
            )
        if body.status_code != 200:
            details["error"] = {
                "message": f"MemOS server at {self.base_url}: /health -> {body.status_code}",
                "status_code": body.status_code,
                "body": body.text[:1000],
            }
            return NativeHealth(status="unavailable", details=details)
        details["server"] = body.json()
        warnings: list[str] = []
        status = "ok"
        try:
            redis = await self.scheduler.queue_available()
            details["scheduler_queue"] = "redis" if redis else "none"
        except AdapterError as exc:
            details["scheduler_queue"] = {"error": exc.raw}
        if details["scheduler_queue"] != "redis" and self.config.async_mode == "async":
            status = "degraded"
            warnings.append("no scheduler task status (Redis): readiness is 'unknown'")
        return NativeHealth(status=status, details=details, warnings=warnings)


