"""A wire-faithful Honcho v3 server double for tests (127.0.0.1 only, never in the package).

It implements exactly the endpoints the Honcho adapter and ``probe.py`` use, with the
status codes, error bodies and semantics measured on the real server (plastic-labs/honcho
3.0.12; see docs/honcho.md):

- get-or-create: workspace/peer/session POST answer 201 when created, 200 when found;
  adding messages or session peers creates missing sessions, peers and workspaces.
- add_messages: 1..100 messages (else FastAPI-style 422), ``created_at`` kept,
  ``token_count`` per message, ``metadata`` round-tripped.
- asynchronous derivation: queue items appear shortly AFTER the add response (the real
  server enqueues in a background task), then a worker claims them and calls the LLM
  double over HTTP with the deriver's prompt shape and ``response_format`` json_schema
  ``PromptRepresentation``; observations are embedded through the LLM double's
  ``/embeddings``. Peers with ``observe_me`` false and sessions with reasoning disabled
  produce no work. ``work_unit_min_tokens`` reproduces the real server's default
  accumulation gate (512 tokens) when a test wants "pending until timeout".
- session.context: token-bounded (40/60 summary rule, newest messages that fit after
  the representation's tokens), representation as Honcho's markdown, ``peer_card`` null.
- deletion: session DELETE 202 + inactive at once, data removed by the worker later;
  workspace DELETE 409 while sessions are active, 202 otherwise. Like the real server's
  default in-process cache, a deleted session name answers 404 to get-or-create, and a
  deleted workspace name answers 200 to get-or-create but 409 to session creation, for
  ``stale_cache_ttl_s`` after deletion.

Known simplifications (labelled, not hidden): token counts use cl100k_base (the server
uses o200k_base; short English texts usually count the same); the dialectic
(``peer.chat``) is one plain LLM call with the representation instead of the server's
tool loop; summaries are the short kind only; ``schedule_dream`` answers as the server does (204,
or 400 when dreams are off) and queues a dream that completes without consolidating
anything (its status codes are read from the server's source, not yet recorded by
``probe.py``); no auth, scopes, peer cards, conclusions API or webhooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import uvicorn
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nanobot_memory_adapters.tokens import count_tokens

NAME_PATTERN = r"^[a-zA-Z0-9_-]+$"
MAX_CONTEXT_TOKENS = 100_000
SUMMARY_EVERY = 20


def _nanoid() -> str:
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-"
    return "".join(secrets.choice(alphabet) for _ in range(21))


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(dt: datetime) -> str:
    text = dt.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


def _stamp(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


# --------------------------------------------------------------------------- request models
class _Body(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class WorkspaceCreate(_Body):
    name: str = Field(alias="id", min_length=1, max_length=512, pattern=NAME_PATTERN)
    metadata: dict[str, Any] = {}
    configuration: dict[str, Any] = {}


class PeerCreate(_Body):
    name: str = Field(alias="id", min_length=1, max_length=512, pattern=NAME_PATTERN)
    metadata: dict[str, Any] | None = None
    configuration: dict[str, Any] | None = None


class PeerUpdate(_Body):
    metadata: dict[str, Any] | None = None
    configuration: dict[str, Any] | None = None


class SessionPeerConfig(_Body):
    observe_me: bool | None = None
    observe_others: bool | None = None


class SessionCreate(_Body):
    name: str = Field(alias="id", min_length=1, max_length=512, pattern=NAME_PATTERN)
    metadata: dict[str, Any] | None = None
    peer_names: dict[str, SessionPeerConfig] | None = Field(default=None, alias="peers")
    configuration: dict[str, Any] | None = None


class MessageCreate(_Body):
    content: str = Field(min_length=0, max_length=25_000)
    peer_name: str = Field(alias="peer_id")
    metadata: dict[str, Any] | None = None
    configuration: dict[str, Any] | None = None
    created_at: datetime | None = None


class MessageBatchCreate(_Body):
    messages: list[MessageCreate] = Field(..., min_length=1, max_length=100)


class RepresentationGet(_Body):
    session_id: str | None = None
    target: str | None = None
    search_query: str | None = None
    search_top_k: int | None = Field(None, ge=1, le=100)
    search_max_distance: float | None = Field(None, ge=0.0, le=1.0)
    include_most_frequent: bool | None = None
    max_conclusions: int | None = Field(25, ge=1, le=100)


class ChatBody(_Body):
    query: str = Field(min_length=1, max_length=10_000)
    stream: bool = False
    target: str | None = None
    session_id: str | None = None
    reasoning_level: str | None = None


class ContextQuery(_Body):
    tokens: int | None = Field(None, le=MAX_CONTEXT_TOKENS)
    search_query: str | None = None
    summary: bool = True
    peer_target: str | None = None
    peer_perspective: str | None = None
    limit_to_session: bool = False
    search_top_k: int | None = Field(None, ge=1, le=100)
    search_max_distance: float | None = Field(None, ge=0.0, le=1.0)
    include_most_frequent: bool = False
    max_conclusions: int | None = Field(None, ge=1, le=100)


class PeerContextQuery(_Body):
    target: str | None = None
    search_query: str | None = None
    search_top_k: int | None = Field(None, ge=1, le=100)
    search_max_distance: float | None = Field(None, ge=0.0, le=1.0)
    include_most_frequent: bool = False
    max_conclusions: int | None = Field(None, ge=1, le=100)


class PageQuery(_Body):
    page: int = Field(1, ge=1)
    size: int = Field(50, ge=1, le=100)
    reverse: bool = False


class MessageListBody(_Body):
    filters: dict[str, Any] | None = None


def _contains(document: Any, wanted: Any) -> bool:
    """Postgres JSONB ``@>`` for objects and scalars (the real server's metadata filter)."""
    if isinstance(wanted, dict):
        return isinstance(document, dict) and all(
            k in document and _contains(document[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(document, list) and all(
            any(_contains(d, w) for d in document) for w in wanted)
    return document == wanted


def _message_filter(filters: dict[str, Any] | None) -> Any:
    """The part of Honcho's filter DSL the double speaks: ``metadata`` (containment) and
    ``peer_id`` (equality). Anything else is refused, never silently ignored."""
    filters = filters or {}
    unknown = set(filters) - {"metadata", "peer_id"}
    if unknown:
        raise ApiError(422, f"the Honcho double does not support filter keys {sorted(unknown)}")
    metadata, peer = filters.get("metadata"), filters.get("peer_id")
    if metadata is not None and not isinstance(metadata, dict):
        raise ApiError(422, "Invalid filter for column 'h_metadata': a JSONB column takes an "
                            "object, optionally under 'contains'")
    return lambda m: ((metadata is None or _contains(m.metadata, metadata))
                      and (peer is None or m.peer == peer))


class QueueQuery(_Body):
    observer_id: str | None = None
    sender_id: str | None = None
    session_id: str | None = None


# --------------------------------------------------------------------------- errors
class ApiError(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


def _validation_detail(exc: ValidationError, where: str) -> list[dict[str, Any]]:
    out = []
    for err in exc.errors(include_url=False):
        item = {"type": err["type"], "loc": [where, *err["loc"]], "msg": err["msg"],
                "input": err.get("input")}
        if err.get("ctx"):
            item["ctx"] = {k: (v if isinstance(v, int | float | str | bool) else str(v))
                           for k, v in err["ctx"].items()}
        out.append(item)
    return out


def _parse(model: type[BaseModel], data: Any, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(422, _validation_detail(exc, where)) from None


async def _json_body(request: Request, required: bool = True) -> Any:
    raw = await request.body()
    if not raw:
        if required:
            raise ApiError(422, [{"type": "missing", "loc": ["body"], "msg": "Field required",
                                  "input": None}])
        return None
    try:
        import json

        return json.loads(raw)
    except ValueError:
        raise ApiError(422, [{"type": "json_invalid", "loc": ["body", 0],
                              "msg": "JSON decode error", "input": {}}]) from None


# --------------------------------------------------------------------------- state
@dataclass
class Message:
    public_id: str
    seq: int
    content: str
    peer: str
    session: str
    workspace: str
    metadata: dict[str, Any]
    created_at: datetime
    token_count: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.public_id, "content": self.content, "peer_id": self.peer,
            "session_id": self.session, "metadata": self.metadata,
            "created_at": _iso(self.created_at), "workspace_id": self.workspace,
            "token_count": self.token_count,
        }


@dataclass
class Session:
    name: str
    uid: str
    workspace: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    configuration: dict[str, Any] = field(default_factory=dict)
    is_active: bool = True
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> session config
    messages: list[Message] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.name, "is_active": self.is_active, "workspace_id": self.workspace,
            "metadata": self.metadata, "configuration": self.configuration,
            "created_at": _iso(self.created_at),
        }


@dataclass
class Peer:
    name: str
    workspace: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    configuration: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.name, "workspace_id": self.workspace, "created_at": _iso(self.created_at),
            "metadata": self.metadata, "configuration": self.configuration,
        }


@dataclass
class Observation:
    id: str
    observer: str
    observed: str
    session: str
    content: str
    created_at: datetime
    embedding: list[float] | None = None


@dataclass
class QueueItem:
    id: int
    task_type: str
    workspace: str
    session_uid: str | None
    session: str | None
    observed: str | None
    observers: list[str]
    message_ids: list[str]
    tokens: int
    enqueued_at: float
    processed: bool = False
    in_progress: bool = False


@dataclass
class Workspace:
    name: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    configuration: dict[str, Any] = field(default_factory=dict)
    peers: dict[str, Peer] = field(default_factory=dict)
    sessions: dict[str, Session] = field(default_factory=dict)
    observations: list[Observation] = field(default_factory=list)
    session_tombstones: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.name, "metadata": self.metadata, "configuration": self.configuration,
                "created_at": _iso(self.created_at)}


# --------------------------------------------------------------------------- the app
class HonchoDoubleApp:
    def __init__(
        self,
        *,
        llm_base_url: str | None,
        enqueue_delay_s: float = 0.05,
        poll_interval_s: float = 0.1,
        deletion_delay_s: float = 1.0,
        stale_cache_ttl_s: float = 300.0,
        work_unit_min_tokens: int = 0,
        embedding_model: str = "text-embedding-3-small",
        embedding_dim: int = 1536,
        dreams_enabled: bool = True,
    ) -> None:
        self.llm_base_url = llm_base_url.rstrip("/") if llm_base_url else None
        self.enqueue_delay_s = enqueue_delay_s
        self.poll_interval_s = poll_interval_s
        self.deletion_delay_s = deletion_delay_s
        self.stale_cache_ttl_s = stale_cache_ttl_s
        self.work_unit_min_tokens = work_unit_min_tokens
        self.embedding_model = embedding_model
        self.embedding_dim = embedding_dim
        self.dreams_enabled = dreams_enabled
        self.dreams: list[dict[str, Any]] = []  # every accepted schedule_dream body
        self.workspaces: dict[str, Workspace] = {}
        self.ws_tombstones: dict[str, tuple[float, dict[str, Any]]] = {}
        self.queue: list[QueueItem] = []
        self.deletions: list[tuple[float, str, str, str]] = []  # (due, kind, ws, name)
        self.llm_calls: list[dict[str, Any]] = []
        self._ids = 0
        self._worker: asyncio.Task | None = None
        self._http: httpx.AsyncClient | None = None
        self.app = Starlette(
            routes=self._routes(),
            exception_handlers={ApiError: self._api_error,
                                StarletteHTTPException: self._http_error},
            lifespan=self._lifespan,
        )

    # -- lifecycle ------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette):  # type: ignore[no-untyped-def]
        await self._startup()
        try:
            yield
        finally:
            await self._shutdown()

    async def _startup(self) -> None:
        self._http = httpx.AsyncClient(timeout=30.0)
        self._worker = asyncio.create_task(self._work_loop())

    async def _shutdown(self) -> None:
        if self._worker:
            self._worker.cancel()
        if self._http:
            await self._http.aclose()

    async def _api_error(self, request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    async def _http_error(self, request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    def _routes(self) -> list[Route]:
        W = "/v3/workspaces/{w}"
        return [
            Route("/health", self.health, methods=["GET"]),
            Route("/v3/workspaces", self.ws_create, methods=["POST"]),
            Route(W, self.ws_delete, methods=["DELETE"]),
            Route(W + "/queue/status", self.queue_status, methods=["GET"]),
            Route(W + "/schedule_dream", self.schedule_dream, methods=["POST"]),
            Route(W + "/peers", self.peer_create, methods=["POST"]),
            Route(W + "/peers/list", self.peers_list, methods=["POST"]),
            Route(W + "/peers/{p}", self.peer_update, methods=["PUT"]),
            Route(W + "/peers/{p}/sessions", self.peer_sessions, methods=["POST"]),
            Route(W + "/peers/{p}/representation", self.peer_representation, methods=["POST"]),
            Route(W + "/peers/{p}/context", self.peer_context, methods=["GET"]),
            Route(W + "/peers/{p}/chat", self.peer_chat, methods=["POST"]),
            Route(W + "/sessions", self.session_create, methods=["POST"]),
            Route(W + "/sessions/list", self.sessions_list, methods=["POST"]),
            Route(W + "/sessions/{s}", self.session_delete, methods=["DELETE"]),
            Route(W + "/sessions/{s}/peers", self.session_add_peers, methods=["POST"]),
            Route(W + "/sessions/{s}/context", self.session_context, methods=["GET"]),
            Route(W + "/sessions/{s}/messages", self.messages_add, methods=["POST"]),
            Route(W + "/sessions/{s}/messages/", self.messages_add, methods=["POST"]),
            Route(W + "/sessions/{s}/messages/list", self.messages_list, methods=["POST"]),
        ]

    # -- helpers --------------------------------------------------------------------------
    def _fresh(self, tombstones: dict[str, float], name: str) -> bool:
        at = tombstones.get(name)
        return at is not None and time.monotonic() - at < self.stale_cache_ttl_s

    def _get_or_create_ws(self, name: str, body: WorkspaceCreate | None = None
                          ) -> tuple[Workspace, bool]:
        ws = self.workspaces.get(name)
        if ws is not None:
            return ws, False
        ws = Workspace(name=name, created_at=_now(),
                       metadata=dict(body.metadata) if body else {},
                       configuration=dict(body.configuration) if body else {})
        self.workspaces[name] = ws
        return ws, True

    def _ws_for_write(self, name: str) -> Workspace:
        stale = self.ws_tombstones.get(name)
        if name not in self.workspaces and stale and (
            time.monotonic() - stale[0] < self.stale_cache_ttl_s
        ):
            raise ApiError(409, "__stale_workspace__")
        return self._get_or_create_ws(name)[0]

    def _get_or_create_peer(self, ws: Workspace, name: str, body: PeerCreate | None = None
                            ) -> tuple[Peer, bool]:
        peer = ws.peers.get(name)
        if peer is not None:
            if body is not None and body.metadata is not None:
                peer.metadata = dict(body.metadata)
            if body is not None and body.configuration is not None:
                peer.configuration = dict(body.configuration)
            return peer, False
        peer = Peer(name=name, workspace=ws.name, created_at=_now(),
                    metadata=dict(body.metadata or {}) if body else {},
                    configuration=dict(body.configuration or {}) if body else {})
        ws.peers[name] = peer
        return peer, True

    def _get_or_create_session(
        self, ws_name: str, name: str, *, peers: dict[str, SessionPeerConfig] | None = None,
        metadata: dict[str, Any] | None = None, configuration: dict[str, Any] | None = None,
    ) -> tuple[Session, bool]:
        try:
            ws = self._ws_for_write(ws_name)
        except ApiError:
            raise ApiError(409, f"Unable to create or get session: {name}") from None
        session = ws.sessions.get(name)
        if session is not None and not session.is_active:
            raise ApiError(404, f"Session {name} not found in workspace {ws_name}")
        if session is None and self._fresh(ws.session_tombstones, name):
            raise ApiError(404, f"Session {name} not found in workspace {ws_name}")
        created = False
        if session is None:
            session = Session(name=name, uid=_nanoid(), workspace=ws_name, created_at=_now(),
                              metadata=dict(metadata or {}),
                              configuration=dict(configuration or {}))
            ws.sessions[name] = session
            created = True
        else:
            if metadata is not None:
                session.metadata = dict(metadata)
            if configuration is not None:
                session.configuration = dict(configuration)
        for peer_name, conf in (peers or {}).items():
            self._get_or_create_peer(ws, peer_name)
            values = conf.model_dump(exclude_none=True)
            if peer_name in session.peers:
                session.peers[peer_name].update(values)
            else:
                session.peers[peer_name] = values
        return session, created

    def _ws_or_none(self, name: str) -> Workspace | None:
        return self.workspaces.get(name)

    def _page(self, items: list[dict[str, Any]], q: PageQuery) -> dict[str, Any]:
        if q.reverse:
            items = list(reversed(items))
        total = len(items)
        start = (q.page - 1) * q.size
        return {"items": items[start:start + q.size], "total": total, "page": q.page,
                "size": q.size, "pages": math.ceil(total / q.size) if total else 0}

    def _query(self, request: Request, model: type[BaseModel]) -> Any:
        data = {k: v for k, v in request.query_params.items()}
        return _parse(model, data, "query")

    # -- routes: workspaces ------------------------------------------------------------------
    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def ws_create(self, request: Request) -> JSONResponse:
        body = _parse(WorkspaceCreate, await _json_body(request), "body")
        stale = self.ws_tombstones.get(body.name)
        if body.name not in self.workspaces and stale and (
            time.monotonic() - stale[0] < self.stale_cache_ttl_s
        ):
            return JSONResponse(stale[1], status_code=200)
        ws, created = self._get_or_create_ws(body.name, body)
        return JSONResponse(ws.to_json(), status_code=201 if created else 200)

    async def ws_delete(self, request: Request) -> JSONResponse:
        name = request.path_params["w"]
        ws = self._ws_or_none(name)
        if ws is None:
            raise ApiError(404, f"Workspace {name} not found")
        if any(s.is_active for s in ws.sessions.values()):
            raise ApiError(
                409,
                f"Cannot delete workspace '{name}': active session(s) remain. "
                "Delete all sessions first.",
            )
        self.deletions.append((time.monotonic() + self.deletion_delay_s, "workspace", name, name))
        return JSONResponse({"message": "Workspace deletion accepted"}, status_code=202)

    async def schedule_dream(self, request: Request) -> Response:
        """204 and a ``dream`` queue item (observed defaults to the observer); 400 with the
        server's detail when dreams are off. The item completes without consolidating
        anything: the double does not model dreams (labelled in the module docstring)."""
        w = request.path_params["w"]
        body = await _json_body(request)
        if not self.dreams_enabled:
            raise ApiError(400, "Dreams are not enabled in the system configuration")
        if not isinstance(body, dict) or not isinstance(body.get("observer"), str):
            raise ApiError(422, [{"type": "missing", "loc": ["body", "observer"],
                                  "msg": "Field required", "input": body}])
        observed = body.get("observed") or body["observer"]
        self.dreams.append({"workspace": w, **body})
        self.queue.append(QueueItem(self._next_id(), "dream", w, None, body.get("session_id"),
                                    observed, [body["observer"]], [], 0, time.monotonic()))
        return Response(status_code=204)

    async def queue_status(self, request: Request) -> JSONResponse:
        w = request.path_params["w"]
        q = self._query(request, QueueQuery)
        items = [i for i in self.queue if i.workspace == w
                 and i.task_type in ("representation", "summary", "dream")]
        if q.session_id:
            items = [i for i in items if i.session == q.session_id]
        if q.observer_id or q.sender_id:
            # The real server matches payload["observer"] (absent from representation
            # payloads, which carry an "observers" list) OR payload["observed"].
            items = [i for i in items if q.sender_id and i.observed == q.sender_id]

        def counts(rows: list[QueueItem]) -> dict[str, int]:
            done = sum(1 for i in rows if i.processed)
            running = sum(1 for i in rows if not i.processed and i.in_progress)
            return {"total_work_units": len(rows), "completed_work_units": done,
                    "in_progress_work_units": running,
                    "pending_work_units": len(rows) - done - running}

        body: dict[str, Any] = counts(items)
        if q.session_id:
            body["sessions"] = None
        else:
            per: dict[str, list[QueueItem]] = {}
            for i in items:
                if i.session_uid:
                    per.setdefault(i.session_uid, []).append(i)
            body["sessions"] = {uid: {"session_id": uid, **counts(rows)}
                                for uid, rows in per.items()} or None
        return JSONResponse(body)

    # -- routes: peers -------------------------------------------------------------------------
    async def peer_create(self, request: Request) -> JSONResponse:
        w = request.path_params["w"]
        body = _parse(PeerCreate, await _json_body(request), "body")
        ws = self._get_or_create_ws(w)[0]
        peer, created = self._get_or_create_peer(ws, body.name, body)
        return JSONResponse(peer.to_json(), status_code=201 if created else 200)

    async def peer_update(self, request: Request) -> JSONResponse:
        w, p = request.path_params["w"], request.path_params["p"]
        body = _parse(PeerUpdate, await _json_body(request), "body")
        ws = self._ws_or_none(w)
        if ws is None or p not in ws.peers:
            raise ApiError(404, f"Peer {p} not found in workspace {w}")
        peer = ws.peers[p]
        if body.metadata is not None:
            peer.metadata = dict(body.metadata)
        if body.configuration is not None:
            peer.configuration = dict(body.configuration)
        return JSONResponse(peer.to_json())

    async def peers_list(self, request: Request) -> JSONResponse:
        q = self._query(request, PageQuery)
        ws = self._ws_or_none(request.path_params["w"])
        items = [p.to_json() for p in ws.peers.values()] if ws else []
        return JSONResponse(self._page(items, q))

    async def peer_sessions(self, request: Request) -> JSONResponse:
        q = self._query(request, PageQuery)
        ws = self._ws_or_none(request.path_params["w"])
        p = request.path_params["p"]
        items = [s.to_json() for s in ws.sessions.values() if p in s.peers] if ws else []
        return JSONResponse(self._page(items, q))

    async def peer_representation(self, request: Request) -> JSONResponse:
        w, p = request.path_params["w"], request.path_params["p"]
        body = _parse(RepresentationGet, await _json_body(request) or {}, "body")
        ws = self._ws_or_none(w)
        if ws is None:
            return JSONResponse({"representation": ""})
        observed = body.target or p
        text = await self._representation(
            ws, observer=p, observed=observed,
            sessions=[body.session_id] if body.session_id else None,
            query=body.search_query, top_k=body.search_top_k,
            max_distance=body.search_max_distance,
            max_obs=body.max_conclusions if body.search_query else None)
        return JSONResponse({"representation": text})

    async def peer_context(self, request: Request) -> JSONResponse:
        w, p = request.path_params["w"], request.path_params["p"]
        q = self._query(request, PeerContextQuery)
        ws = self._ws_or_none(w)
        if ws is None or p not in ws.peers:
            raise ApiError(404, f"Peer {p} not found in workspace {w}")
        target = q.target or p
        text = await self._representation(
            ws, observer=p, observed=target, sessions=None, query=q.search_query,
            top_k=q.search_top_k, max_distance=q.search_max_distance,
            max_obs=q.max_conclusions)
        return JSONResponse({"peer_id": p, "target_id": target, "representation": text,
                             "peer_card": None})

    async def peer_chat(self, request: Request) -> JSONResponse:
        w, p = request.path_params["w"], request.path_params["p"]
        body = _parse(ChatBody, await _json_body(request), "body")
        ws = self._ws_or_none(w)
        rep = ""
        if ws is not None:
            rep = await self._representation(ws, observer=p, observed=body.target or p,
                                             sessions=None, query=body.query, top_k=None,
                                             max_distance=None, max_obs=None)
        prompt = (f"You are answering a question about peer {body.target or p}.\n"
                  f"<representation>\n{rep}\n</representation>\nQuestion: {body.query}")
        answer = await self._llm_chat(prompt, purpose="dialectic")
        return JSONResponse({"content": answer})

    # -- routes: sessions ----------------------------------------------------------------------
    async def session_create(self, request: Request) -> JSONResponse:
        w = request.path_params["w"]
        body = _parse(SessionCreate, await _json_body(request), "body")
        session, created = self._get_or_create_session(
            w, body.name, peers=body.peer_names, metadata=body.metadata,
            configuration=body.configuration)
        return JSONResponse(session.to_json(), status_code=201 if created else 200)

    async def sessions_list(self, request: Request) -> JSONResponse:
        q = self._query(request, PageQuery)
        ws = self._ws_or_none(request.path_params["w"])
        items = [s.to_json() for s in ws.sessions.values()] if ws else []
        return JSONResponse(self._page(items, q))

    async def session_delete(self, request: Request) -> JSONResponse:
        w, s = request.path_params["w"], request.path_params["s"]
        ws = self._ws_or_none(w)
        session = ws.sessions.get(s) if ws else None
        if session is None:
            raise ApiError(404, f"Session {s} not found in workspace {w}")
        session.is_active = False
        self.deletions.append((time.monotonic() + self.deletion_delay_s, "session", w, s))
        return JSONResponse({"message": "Session deleted successfully"}, status_code=202)

    async def session_add_peers(self, request: Request) -> JSONResponse:
        w, s = request.path_params["w"], request.path_params["s"]
        raw = await _json_body(request)
        if not isinstance(raw, dict):
            raise ApiError(422, [{"type": "dict_type", "loc": ["body"],
                                  "msg": "Input should be a valid dictionary", "input": raw}])
        peers = {k: _parse(SessionPeerConfig, v, "body") for k, v in raw.items()}
        session, _ = self._get_or_create_session(w, s, peers=peers)
        return JSONResponse(session.to_json())

    async def session_context(self, request: Request) -> JSONResponse:
        w, s = request.path_params["w"], request.path_params["s"]
        q = self._query(request, ContextQuery)
        if q.peer_perspective and not q.peer_target:
            raise ApiError(422, "peer_target must be provided if peer_perspective is provided")
        limit = q.tokens if q.tokens is not None else MAX_CONTEXT_TOKENS
        ws = self._ws_or_none(w)
        session = ws.sessions.get(s) if ws else None
        messages = session.messages if session else []
        summary = session.summaries[-1] if session and session.summaries else None
        body: dict[str, Any] = {"id": s, "messages": [], "summary": None,
                                "peer_representation": None, "peer_card": None}
        if not q.peer_target:
            chosen, start, budget = self._pick_summary(summary, limit, q.summary)
            body["summary"] = chosen
            body["messages"] = [m.to_json() for m in self._fit(messages, start, budget)]
            return JSONResponse(body)
        if ws is None or q.peer_target not in ws.peers:
            raise ApiError(404, f"Peer {q.peer_target} not found in workspace {w}")
        observer = q.peer_perspective or q.peer_target
        rep = await self._representation(
            ws, observer=observer, observed=q.peer_target,
            sessions=[s] if q.limit_to_session else None, query=q.search_query,
            top_k=q.search_top_k, max_distance=q.search_max_distance,
            max_obs=q.max_conclusions)
        adjusted = limit - count_tokens(rep)
        chosen, start, budget = self._pick_summary(summary, adjusted, q.summary)
        body["summary"] = chosen
        body["messages"] = [m.to_json() for m in self._fit(messages, start, budget)]
        body["peer_representation"] = rep
        return JSONResponse(body)

    def _pick_summary(self, summary: dict[str, Any] | None, limit: int, include: bool
                      ) -> tuple[dict[str, Any] | None, int, int]:
        if not include or limit <= 0 or summary is None:
            return None, 0, max(limit, 0)
        if 0 < summary["token_count"] <= int(limit * 0.4):
            public = {k: v for k, v in summary.items() if k != "_seq"}
            return public, summary["_seq"], limit - summary["token_count"]
        return None, 0, limit

    @staticmethod
    def _fit(messages: list[Message], start_seq: int, budget: int) -> list[Message]:
        if budget <= 0:
            return []
        picked: list[Message] = []
        used = 0
        for m in reversed([m for m in messages if m.seq >= start_seq]):
            if used + m.token_count > budget:
                break
            used += m.token_count
            picked.append(m)
        return list(reversed(picked))

    async def messages_list(self, request: Request) -> JSONResponse:
        q = self._query(request, PageQuery)
        ws = self._ws_or_none(request.path_params["w"])
        session = ws.sessions.get(request.path_params["s"]) if ws else None
        body = _parse(MessageListBody, await _json_body(request, required=False) or {}, "body")
        keep = _message_filter(body.filters)
        items = [m.to_json() for m in session.messages if keep(m)] if session else []
        return JSONResponse(self._page(items, q))

    async def messages_add(self, request: Request) -> JSONResponse:
        w, s = request.path_params["w"], request.path_params["s"]
        batch = _parse(MessageBatchCreate, await _json_body(request), "body")
        peers = {m.peer_name: SessionPeerConfig() for m in batch.messages}
        session, _ = self._get_or_create_session(w, s)
        for name in peers:  # joining peers keep an existing session config
            if name not in session.peers:
                session.peers[name] = {}
            self._get_or_create_peer(self.workspaces[w], name)
        created: list[Message] = []
        for m in batch.messages:
            msg = Message(
                public_id=_nanoid(), seq=len(session.messages) + 1, content=m.content,
                peer=m.peer_name, session=s, workspace=w, metadata=dict(m.metadata or {}),
                created_at=m.created_at or _now(), token_count=count_tokens(m.content))
            session.messages.append(msg)
            created.append(msg)
        # The real server enqueues in a background task that runs after the response.
        asyncio.get_running_loop().call_later(
            self.enqueue_delay_s, self._enqueue, w, s, [c.public_id for c in created],
            [b.configuration for b in batch.messages])
        return JSONResponse([c.to_json() for c in created], status_code=201)

    # -- derivation -----------------------------------------------------------------------------
    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _reasoning_enabled(self, ws: Workspace, session: Session,
                           message_conf: dict[str, Any] | None) -> bool:
        for conf in (message_conf or {}, session.configuration, ws.configuration):
            reasoning = conf.get("reasoning") if isinstance(conf, dict) else None
            if isinstance(reasoning, dict) and reasoning.get("enabled") is not None:
                return bool(reasoning["enabled"])
        return True

    def _observe_me(self, ws: Workspace, session: Session, peer: str) -> bool:
        sconf = session.peers.get(peer, {})
        if sconf.get("observe_me") is not None:
            return bool(sconf["observe_me"])
        pconf = ws.peers[peer].configuration if peer in ws.peers else {}
        value = pconf.get("observe_me")
        return True if value is None else bool(value)

    def _enqueue(self, w: str, s: str, ids: list[str], confs: list[Any]) -> None:
        ws = self.workspaces.get(w)
        session = ws.sessions.get(s) if ws else None
        if ws is None or session is None:
            return
        by_id = {m.public_id: m for m in session.messages}
        for public_id, conf in zip(ids, confs, strict=True):
            msg = by_id.get(public_id)
            if msg is None:
                continue
            if msg.seq % SUMMARY_EVERY == 0:
                self.queue.append(QueueItem(self._next_id(), "summary", w, session.uid, s, None,
                                            [], [public_id], msg.token_count, time.monotonic()))
            if not self._reasoning_enabled(ws, session, conf):
                continue
            if not self._observe_me(ws, session, msg.peer):
                continue
            observers = [msg.peer] + [
                name for name, pc in session.peers.items()
                if name != msg.peer and pc.get("observe_others")
            ]
            self.queue.append(QueueItem(self._next_id(), "representation", w, session.uid, s,
                                        msg.peer, observers, [public_id], msg.token_count,
                                        time.monotonic()))

    async def _work_loop(self) -> None:
        while True:
            try:
                await self._work_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep the worker alive, like the real deriver
                self.llm_calls.append({"error": repr(exc)})
            await asyncio.sleep(self.poll_interval_s)

    async def _work_once(self) -> None:
        now = time.monotonic()
        due = [d for d in self.deletions if d[0] <= now]
        self.deletions = [d for d in self.deletions if d[0] > now]
        for _, kind, w, name in due:
            self._delete(kind, w, name)
        pending = [i for i in self.queue if not i.processed and not i.in_progress]
        units: dict[tuple, list[QueueItem]] = {}
        for item in pending:
            units.setdefault((item.task_type, item.workspace, item.session, item.observed), []
                             ).append(item)
        for key, items in units.items():
            if key[0] == "representation" and sum(i.tokens for i in items) < (
                self.work_unit_min_tokens
            ):
                continue
            for i in items:
                i.in_progress = True
            try:
                if key[0] == "representation":
                    await self._derive(items)
                elif key[0] == "summary":
                    await self._summarize(items)
                # "dream": accepted and completed, nothing consolidated (not modelled)
            finally:
                for i in items:
                    i.in_progress = False
                    i.processed = True

    def _delete(self, kind: str, w: str, name: str) -> None:
        ws = self.workspaces.get(w)
        if ws is None:
            return
        if kind == "session":
            ws.sessions.pop(name, None)
            ws.observations = [o for o in ws.observations if o.session != name]
            ws.session_tombstones[name] = time.monotonic()
            self.queue = [i for i in self.queue if not (i.workspace == w and i.session == name)]
        else:
            self.ws_tombstones[w] = (time.monotonic(), ws.to_json())
            del self.workspaces[w]
            self.queue = [i for i in self.queue if i.workspace != w]

    async def _derive(self, items: list[QueueItem]) -> None:
        first = items[0]
        ws = self.workspaces.get(first.workspace)
        session = ws.sessions.get(first.session or "") if ws else None
        if ws is None or session is None:
            return
        wanted = {mid for i in items for mid in i.message_ids}
        seqs = [m.seq for m in session.messages if m.public_id in wanted]
        if not seqs:
            return
        window = [m for m in session.messages if min(seqs) <= m.seq <= max(seqs)]
        latest = max((m for m in window if m.public_id in wanted), key=lambda m: m.seq)
        lines = "\n".join(f"{_stamp(m.created_at)} {m.peer}: {m.content}" for m in window)
        prompt = (
            "Analyze messages to extract **explicit atomic facts** about the target peer.\n\n"
            f"Target peer:\n{first.observed}\n\nMessages to analyze:\n<messages>\n{lines}\n"
            "</messages>"
        )
        data = await self._llm_json(prompt, "PromptRepresentation")
        facts = [e.get("content", "").strip() for e in (data.get("explicit") or [])
                 if isinstance(e, dict)]
        facts = [f for f in facts if f]
        if not facts:
            return
        vectors = await self._embed(facts)
        observers = sorted({o for i in items for o in i.observers})
        for observer in observers:
            existing = {(o.observer, o.observed, o.content) for o in ws.observations}
            for fact, vec in zip(facts, vectors, strict=True):
                if (observer, first.observed, fact) in existing:
                    continue
                ws.observations.append(Observation(
                    id=_nanoid(), observer=observer, observed=first.observed or "",
                    session=session.name, content=fact, created_at=latest.created_at,
                    embedding=vec))

    async def _summarize(self, items: list[QueueItem]) -> None:
        item = items[-1]
        ws = self.workspaces.get(item.workspace)
        session = ws.sessions.get(item.session or "") if ws else None
        if session is None:
            return
        upto = next((m for m in session.messages if m.public_id == item.message_ids[-1]), None)
        if upto is None:
            return
        text = "\n".join(f"{m.peer}: {m.content}" for m in session.messages if m.seq <= upto.seq)
        content = await self._llm_chat(
            "Summarize the following conversation concisely.\n<conversation>\n"
            f"{text}\n</conversation>", purpose="summary")
        session.summaries.append({
            "content": content, "message_id": upto.public_id, "summary_type": "short",
            "created_at": _iso(_now()), "token_count": count_tokens(content), "_seq": upto.seq,
        })

    async def _representation(self, ws: Workspace, *, observer: str, observed: str,
                              sessions: list[str] | None, query: str | None,
                              top_k: int | None, max_distance: float | None,
                              max_obs: int | None) -> str:
        docs = [o for o in ws.observations if o.observer == observer and o.observed == observed
                and (sessions is None or o.session in sessions)]
        total = max_obs or 100
        chosen: dict[str, Observation] = {}
        semantic = min(max(1, top_k if top_k is not None else total // 3), total) if query else 0
        if query and docs:
            [qvec] = await self._embed([query])
            scored = []
            for o in docs:
                dist = 1.0 - _cos(qvec, o.embedding or [])
                if max_distance is None or dist <= max_distance:
                    scored.append((dist, o))
            scored.sort(key=lambda t: t[0])
            for _, o in scored[:semantic]:
                chosen[o.id] = o
        recent = sorted(docs, key=lambda o: o.created_at, reverse=True)[: total - semantic]
        for o in recent:
            chosen[o.id] = o
        unique: dict[tuple, Observation] = {}
        for o in chosen.values():
            unique.setdefault((o.content, o.created_at, o.session), o)
        ordered = sorted(unique.values(), key=lambda o: o.created_at)
        if not ordered:
            return ""
        parts = ["## Explicit Observations\n"]
        parts += [f"[{_stamp(o.created_at)}] {o.content}" for o in ordered]
        parts.append("")
        return "\n".join(parts)

    # -- LLM double over HTTP --------------------------------------------------------------------
    async def _llm_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if not self.llm_base_url or self._http is None:
            raise RuntimeError("the Honcho double needs llm_base_url (the LLM double)")
        r = await self._http.post(self.llm_base_url + path, json=body,
                                  headers={"Authorization": "Bearer double"})
        r.raise_for_status()
        return r.json()

    async def _llm_json(self, prompt: str, name: str) -> dict[str, Any]:
        import json

        body = {
            "model": "gpt-5.4-mini",
            "messages": [{"role": "user", "content": prompt}],
            "max_completion_tokens": 4096,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": name, "strict": True, "schema": {
                    "type": "object", "additionalProperties": False, "required": ["explicit"],
                    "properties": {"explicit": {"type": "array", "items": {
                        "type": "object", "additionalProperties": False,
                        "required": ["content"],
                        "properties": {"content": {"type": "string"}}}}}}}},
        }
        data = await self._llm_post("/chat/completions", body)
        self.llm_calls.append({"purpose": "deriver", "schema": name})
        try:
            return json.loads(data["choices"][0]["message"]["content"] or "{}")
        except (ValueError, KeyError, IndexError, TypeError):
            return {}

    async def _llm_chat(self, prompt: str, purpose: str) -> str:
        data = await self._llm_post("/chat/completions", {
            "model": "gpt-5.4-mini", "messages": [{"role": "user", "content": prompt}]})
        self.llm_calls.append({"purpose": purpose})
        return data["choices"][0]["message"].get("content") or ""

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        data = await self._llm_post("/embeddings", {
            "model": self.embedding_model, "input": texts, "encoding_format": "float",
            "dimensions": self.embedding_dim})
        return [d["embedding"] for d in sorted(data["data"], key=lambda d: d["index"])]


def _cos(a: list[float], b: list[float]) -> float:
    if not a or not b or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


class HonchoDouble:
    """Runs the double on 127.0.0.1 in a background thread.

    >>> with HonchoDouble(llm_base_url=llm.base_url) as honcho:
    ...     honcho.base_url        # "http://127.0.0.1:PORT"
    """

    def __init__(self, *, llm_base_url: str | None, port: int = 0, **options: Any) -> None:
        self.state = HonchoDoubleApp(llm_base_url=llm_base_url, **options)
        self.port = port or _free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HonchoDouble:
        config = uvicorn.Config(self.state.app, host="127.0.0.1", port=self.port,
                                log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("Honcho double did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> HonchoDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
