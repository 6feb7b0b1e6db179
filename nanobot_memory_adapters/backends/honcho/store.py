"""Honcho v3 (honcho-ai 2.7.0 SDK, async through ``.aio``) as a native store
(``nanobot_memory_adapters.store``: the provider wrapper owns the read-only gate, traces,
error wrapping and rendering; this store says what Honcho's own errors mean).

The store only maps ids, builds native requests, formats results and manages
lifecycle; extraction, retrieval and reasoning are Honcho's (its deriver, its
``session.context``). Measured server behaviour it relies on is in docs/honcho.md.

Mapping (names must match ``^[a-zA-Z0-9_-]+$``, so ids are escaped, see ``native_name``):

    run                        -> workspace
    persona                    -> user peer       ``user__<persona>``
    agent                      -> assistant peer  ``agent__<agent>`` (distinct, observe_me
                                                  configurable, default False)
    session                    -> session         ``s__<persona>__<session>[__r<epoch>]``
    turn time                  -> message created_at
    ids / scenario / context / attribute -> message metadata (returned, not a filter)

Reset deletes the persona's sessions (the server then removes their messages and the
conclusions derived from them, asynchronously) and bumps a reset epoch stored in the
user peer's metadata, because the server keeps answering 404 for a deleted session
name for minutes (its in-process cache); later events go to fresh session names.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, ClassVar

import httpx
from pydantic import BaseModel

from nanobot_memory_adapters.base import (
    NativeHealth,
    NativeRetrieval,
    NativeWrite,
)
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    AdapterError,
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.formatting import RenderedContext
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.timeparse import parse_time

try:  # the optional extra
    from honcho import Honcho
    from honcho.api_types import PeerConfig, SessionPeerConfig
    from honcho.http.exceptions import HonchoError
    from honcho.peer import Peer
    from honcho.session import Session
except ImportError as exc:  # pragma: no cover - exercised by the registry's error path
    raise ImportError(
        "the Honcho backend needs honcho-ai: pip install 'nanobot-memory-adapters[honcho]'",
        name=exc.name,
    ) from exc

from nanobot_memory_adapters.backends.honcho.config import (
    EPOCH_KEY,
    PET_WARNING,
    HonchoConfig,
    ScopeState,
    native_name,
    provider_info,
    reset_epoch,
)
from nanobot_memory_adapters.backends.honcho.context import (
    max_conclusions,
    observation_items,
)
from nanobot_memory_adapters.backends.honcho.context import render as render_honcho_context
from nanobot_memory_adapters.backends.honcho.readiness import HonchoReadiness
from nanobot_memory_adapters.backends.honcho.records import (
    message_json,
    summary_json,
)
from nanobot_memory_adapters.backends.honcho.writes import HonchoWrites


class HonchoStore:
    """Honcho behind the contract as a native store (see the module docstring)."""

    config_model: ClassVar[type[BaseModel]] = HonchoConfig
    info: ProviderInfo
    # messages are filtered by their event_id metadata before adding
    # (provider.replays_checked_writes)
    replay_checked_writes = True
    # Used by `nanobot-memory conformance`: a real server's idle deriver backs off its
    # polling up to 30 s (x1.5 jitter), so derivation can take that long to start.
    readiness_timeout_s = 90.0

    def __init__(self, config: HonchoConfig, *, base_url: str,
                 api_key: str | None = None) -> None:
        self.info = provider_info(config)
        self.backend_name = self.info.name
        self.config = config
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self._clients: dict[str, Honcho] = {}
        self._scopes: dict[str, ScopeState] = {}
        # collaborator: the deriver's queue and what it cannot show yet
        self.deriver = HonchoReadiness(config, scope_state=self._scope_state,
                                       client=self._client, state_key=self.state_key)
        # collaborators: the writes (one event, or a run of them through bulk ingest)
        self.writes = HonchoWrites(scope_state=self._scope_state,
                                   ensure_session=self._ensure_session,
                                   state_key=self.state_key, mark_dirty=self.deriver.mark_dirty)
        # capabilities (store.STORE_CAPABILITIES): bulk ingest is one ``add_messages`` per
        # 100 messages of a run of events that share scope and session
        self.record_batch = self.writes.record_batch
        self.readiness = self.deriver.readiness
        self.readiness_interval_s = config.readiness_poll_s
        self.end_session = self._end_session if config.dream_on_session_end else None

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_config(cls, config: HonchoConfig, env: ProviderEnv) -> HonchoStore:
        base_url = config.base_url or os.environ.get("HONCHO_URL")
        if not base_url:
            raise ConfigError(
                "memory.honcho.base_url",
                "no Honcho server URL (the SDK would default to the production cloud)",
                'set "base_url" (e.g. "http://127.0.0.1:8080") or the HONCHO_URL variable',
            )
        if not re.match(r"^https?://", base_url):
            raise ConfigError("memory.honcho.base_url", f"{base_url!r} is not an http(s) URL",
                              'use e.g. "http://127.0.0.1:8080"')
        api_key = config.api_key or os.environ.get("HONCHO_API_KEY")
        return cls(config, base_url=base_url, api_key=api_key)

    @classmethod
    def failing_variant(cls, block: HonchoConfig | dict[str, Any] | None = None) -> HonchoStore:
        """The same adapter pointed at a port where nothing listens (contract item 7)."""
        config = HonchoConfig.model_validate(
            block.model_dump() if isinstance(block, HonchoConfig) else (block or {})
        ).model_copy(update={"max_retries": 0, "timeout_s": 5.0})
        return cls(config, base_url="http://127.0.0.1:9")

    # -- ids ----------------------------------------------------------------------------------
    @staticmethod
    def workspace_name(scope: MemoryScope) -> str:
        return native_name(scope.run_id)

    @staticmethod
    def user_peer_name(scope: MemoryScope) -> str:
        return f"user__{native_name(scope.persona_id)}"

    @staticmethod
    def assistant_peer_name(scope: MemoryScope) -> str:
        return f"agent__{native_name(scope.agent_id or 'nanobot')}"

    @classmethod
    def state_key(cls, scope: MemoryScope) -> str:
        """The adapter's cache key of a scope: its native workspace and user peer. (Not
        ``scope.key``, which joins raw ids with '/' and so is not injective.)"""
        return f"{cls.workspace_name(scope)}/{cls.user_peer_name(scope)}"

    @staticmethod
    def session_name(scope: MemoryScope, session_id: str, epoch: int) -> str:
        name = f"s__{native_name(scope.persona_id)}__{native_name(session_id)}"
        return f"{name}__r{epoch}" if epoch else name

    # -- native plumbing ------------------------------------------------------------------------
    def _client(self, workspace: str) -> Honcho:
        client = self._clients.get(workspace)
        if client is None:
            client = Honcho(
                base_url=self.base_url,
                api_key=self.api_key,
                workspace_id=workspace,
                timeout=self.config.timeout_s,
                max_retries=self.config.max_retries,
            )
            self._clients[workspace] = client
        return client

    def native_error(self, exc: Exception, operation: str) -> AdapterError | None:
        """Honcho's failures said as which server answered what, with its body; whether a
        retry can help (unreachable, 5xx, 429). Others: the wrapper's generic wrapping."""
        if isinstance(exc, HonchoError):
            status = getattr(exc, "status", 0) or None
            raw = {
                "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
                "message": exc.message,
                "status_code": status,
                "code": exc.code,
                "body": exc.body,
                "base_url": self.base_url,
            }
            found = exc.code in ("connection_error", "timeout") or bool(
                status and (status >= 500 or status == 429)
            )
            where = (
                f"Honcho at {self.base_url} is unreachable"
                if exc.code in ("connection_error", "timeout")
                else f"Honcho at {self.base_url} answered {status}"
            )
            return AdapterError(
                f"{where}: {exc.message}", backend_name=self.backend_name,
                operation=operation, raw=raw, retryable=found,
            )
        if isinstance(exc, httpx.TransportError | OSError):
            return AdapterError(
                f"Honcho at {self.base_url} is unreachable: {exc}",
                backend_name=self.backend_name, operation=operation,
                raw={"type": type(exc).__qualname__, "message": str(exc),
                     "base_url": self.base_url}, retryable=True,
            )
        return None

    async def _scope_state(self, scope: MemoryScope) -> ScopeState:
        state = self._scopes.get(self.state_key(scope))
        if state is not None:
            return state
        workspace = self.workspace_name(scope)
        aio = self._client(workspace).aio
        user = await aio.peer(self.user_peer_name(scope))  # get-or-create (201/200)
        await aio.peer(
            self.assistant_peer_name(scope),
            configuration=PeerConfig(observe_me=self.config.observe_assistant),
        )
        epoch = reset_epoch(user.metadata)
        state = ScopeState(workspace, user.id, self.assistant_peer_name(scope), epoch)
        self._scopes[self.state_key(scope)] = state
        return state

    async def _ensure_session(self, scope: MemoryScope, state: ScopeState,
                              session_id: str) -> Session:
        name = self.session_name(scope, session_id, state.epoch)
        client = self._client(state.workspace)
        if name in state.sessions:
            return Session(name, client)
        session = await client.aio.session(
            name,
            metadata={"nma": {"run_id": scope.run_id, "persona_id": scope.persona_id,
                              "session_id": session_id, "reset_epoch": state.epoch}},
            peers=[
                # the SDK's fields default through a positional Field(None), which
                # pyright does not read as a default
                (state.user_peer, SessionPeerConfig()),  # pyright: ignore[reportCallIssue]
                (state.assistant_peer,
                 SessionPeerConfig(observe_others=False)),  # pyright: ignore[reportCallIssue]
            ],
        )
        state.sessions.add(name)
        return session

    # -- contract: setup / write ----------------------------------------------------------------
    async def setup(self, scope: MemoryScope) -> None:
        await self._scope_state(scope)

    async def record(self, event: MemoryEvent) -> NativeWrite:
        return await self.writes.record(event)

    # -- contract: read --------------------------------------------------------------------------
    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        scope = request.scope
        state = await self._scope_state(scope)
        client = self._client(state.workspace)
        query = request.query.strip() or None
        conclusions = max_conclusions(request.budget, in_session=request.session_id is not None)
        # every conclusion slot filled by semantic search when there is a query (unless
        # the config pins search_top_k: then Honcho blends in the most recent ones)
        top_k = self.config.search_top_k or conclusions
        items: list[RetrievedItem] = []
        warnings = [PET_WARNING]
        if request.session_id is None:
            # No session: the peer's own context (representation + card), same budget rules.
            peer = Peer(state.user_peer, client)
            ctx = await peer.aio.context(search_query=query, search_top_k=top_k if query else None,
                                         max_conclusions=conclusions)
            raw: dict[str, Any] = ctx.model_dump(mode="json")
            items += self._representation_items(state, ctx.representation, ctx.peer_card)
            native_op = "peer.context"
            native_request = {"peer": state.user_peer, "search_top_k": top_k,
                              "search_query": bool(query), "max_conclusions": conclusions,
                              "budget_enforced_by": "formatter (peer.context has no tokens)"}
        else:
            name = self.session_name(scope, request.session_id, state.epoch)
            session = Session(name, client)  # no get-or-create: context on a missing session is 200
            ctx = await session.aio.context(
                summary=self.config.include_summary,
                tokens=request.budget.max_tokens,
                peer_target=state.user_peer,
                search_query=query,
                search_top_k=top_k if query else None,
                max_conclusions=conclusions,
            )
            raw = {
                "session_id": ctx.session_id,
                "summary": summary_json(ctx.summary),
                "peer_representation": ctx.peer_representation,
                "peer_card": ctx.peer_card,
                "messages": [message_json(m) for m in ctx.messages],
            }
            items += self._representation_items(state, ctx.peer_representation, ctx.peer_card)
            if ctx.summary is not None:
                items.append(RetrievedItem(
                    native_id=ctx.summary.message_id, text=ctx.summary.content,
                    native_type=f"session_summary.{ctx.summary.summary_type}",
                    group="summary", created_at=parse_time(ctx.summary.created_at),
                    metadata={"token_count": ctx.summary.token_count},
                    raw=raw["summary"] or {},
                ))
            for m in ctx.messages:
                meta = dict(m.metadata or {})
                role = meta.get("role") or ("user" if m.peer_id == state.user_peer else "assistant")
                items.append(RetrievedItem(
                    native_id=m.id, text=f"{role}: {m.content}", native_type="message",
                    # the adapter writes each message with its turn's time as created_at
                    group="messages", created_at=m.created_at, event_at=m.created_at,
                    source=m.peer_id,  # who said it: the peer Honcho stored
                    source_event_ids=[str(meta["event_id"])] if meta.get("event_id") else None,
                    metadata=meta, raw=message_json(m),
                ))
            native_op = "session.context"
            native_request = {"session": name, "tokens": request.budget.max_tokens,
                              "summary": self.config.include_summary,
                              "peer_target": state.user_peer, "search_query": bool(query),
                              "search_top_k": top_k if query else None,
                              "max_conclusions": conclusions}
        return NativeRetrieval(items=items, raw=raw, native_operation=native_op,
                               native_request=native_request, warnings=warnings)

    @staticmethod
    def _representation_items(state: ScopeState, representation: str | None,
                              card: list[str] | None) -> list[RetrievedItem]:
        items = observation_items(representation, observer=state.user_peer,
                                  observed=state.user_peer)
        if card:
            items.append(RetrievedItem(
                text="\n".join(card), native_type="peer_card", group="peer_card",
                raw={"peer_card": card},
            ))
        return items

    def render(self, scope: MemoryScope | str, items: list[RetrievedItem],
               budget: ContextBudget) -> RenderedContext:
        """Observations, card and summary first, then the newest messages that still fit
        (``backends/honcho/context.py``); every item whole or not at all."""
        key = scope.key if isinstance(scope, MemoryScope) else scope
        return render_honcho_context(self.backend_name, key, items, budget)

    # -- reset / health / diagnostics ----------------------------------------------------------
    async def reset(self, scope: MemoryScope) -> str | None:
        state = await self._scope_state(scope)
        client = self._client(state.workspace)
        sessions = await self.deriver.peer_sessions(state)
        deleted: set[str] = set()
        for name, active in sessions.items():
            if not name.startswith(f"s__{native_name(scope.persona_id)}__"):
                continue  # a session of this peer that this adapter did not create
            if active:
                try:
                    await Session(name, client).aio.delete()  # 202, removal is async
                except HonchoError as exc:
                    if getattr(exc, "status", None) != 404:
                        raise
            deleted.add(name)
        user = Peer(state.user_peer, client)
        metadata = dict(await user.aio.get_metadata() or {})
        state.epoch = reset_epoch(metadata) + 1
        metadata[EPOCH_KEY] = state.epoch
        await user.aio.set_metadata(metadata)
        state.sessions.clear()
        self.deriver.mark_deleted(self.state_key(scope), deleted)
        return (
            f"deleted {len(deleted)} session(s) of {state.user_peer} in workspace "
            f"{state.workspace}; Honcho removes their messages and the conclusions derived "
            "from them asynchronously (wait_until_ready waits for it). Kept: the workspace "
            "(shared by the run's other personas), the user and assistant peers with their "
            "metadata (reset epoch now "
            f"{state.epoch}), any peer card, and conclusions not tied to a deleted session "
            "(e.g. from dreams)."
        )

    async def health(self) -> NativeHealth:
        async with httpx.AsyncClient(timeout=min(5.0, self.config.timeout_s)) as http:
            try:
                r = await http.get(f"{self.base_url}/health")
            except httpx.TransportError as exc:
                message = f"Honcho at {self.base_url} is unreachable ({type(exc).__name__}: {exc})"
                return NativeHealth(
                    status="unavailable",
                    details={"base_url": self.base_url,
                             "error": {"message": message, "type": type(exc).__qualname__}},
                    warnings=[message],
                )
        details = {"base_url": self.base_url, "health_status": r.status_code,
                   "search_top_k": self.config.search_top_k,
                   "include_summary": self.config.include_summary,
                   "observe_assistant": self.config.observe_assistant}
        if r.status_code != 200:
            return NativeHealth(status="degraded", details=details,
                                warnings=[f"/health answered {r.status_code}"])
        return NativeHealth(status="ok", details=details, warnings=[PET_WARNING])

    async def native_query(self, scope: MemoryScope, query: str, **options: Any
                           ) -> dict[str, Any]:
        """Diagnostics only (traced, never put in a prompt): Honcho's dialectic
        (``peer.chat``, an extra LLM call) about the scope's user peer."""
        state = await self._scope_state(scope)
        peer = Peer(state.user_peer, self._client(state.workspace))
        session = options.get("session_id")
        name = self.session_name(scope, session, state.epoch) if session else None
        request = {"workspace": state.workspace, "peer": state.user_peer, "session": name,
                   "reasoning_level": options.get("reasoning_level")}
        answer = await peer.aio.chat(
            query, session=name, reasoning_level=options.get("reasoning_level"),
        )
        return {"native_operation": "peer.chat", "peer": state.user_peer,
                "native_request": request,
                "answer": answer if isinstance(answer, str | None) else str(answer)}

    async def _end_session(self, scope: MemoryScope, session_id: str) -> dict[str, Any]:
        """``session_end`` (offered with ``dream_on_session_end``): schedule Honcho's dream
        for the scope's user peer, scoped to the session's native Honcho session. The dream
        runs in Honcho's queue like derivation, so readiness waits for it."""
        state = await self._scope_state(scope)
        name = self.session_name(scope, session_id, state.epoch)
        request = {"workspace": state.workspace, "observer": state.user_peer,
                   "observed": state.user_peer, "session": name}
        await self._client(state.workspace).aio.schedule_dream(
            state.user_peer, session=name, observed=state.user_peer)
        self.deriver.mark_dirty(self.state_key(scope))
        # "queued" as in WriteStatus: Honcho holds the dream and runs it from its queue
        return {"status": "queued", "native_operation": "schedule_dream",
                "native_request": request, **request}

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            built = getattr(client, "_async_http_built", None)
            if built is not None:
                with contextlib.suppress(Exception):
                    await built[1].close()
            sync = getattr(client, "_http", None)
            inner = getattr(sync, "_client", None)
            if inner is not None:
                inner.close()


