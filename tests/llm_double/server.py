"""The server: /v1/chat/completions (plain, SSE, json_object, json_schema, tools) and
/v1/embeddings, dispatching chat requests to the first handler that claims them."""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import pkgutil
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

WORD = re.compile(r"[a-z0-9]+")
# A request whose messages contain this marker gets HTTP 400, as a provider rejecting it
# would answer (fault injection for one event among many; openai clients do not retry 400).
FAIL_MARKER = "[llm-double:fail]"
# A chat call whose last user message holds this is answered only after ``release_held()``
# (or HOLD_MAX_S): a model still answering, for tests that kill the caller meanwhile.
HOLD_MARKER = "[llm-double:hold]"
HOLD_MAX_S = 300.0


@dataclass
class ChatRequest:
    """A chat completion request, with the parts handlers dispatch on."""

    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    def text_of(self, role: str) -> str:
        parts = []
        for m in self.messages:
            if m.get("role") == role:
                content = m.get("content")
                if isinstance(content, list):
                    content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
                parts.append(content or "")
        return "\n".join(parts)

    @property
    def system(self) -> str:
        return self.text_of("system")

    @property
    def user(self) -> str:
        return self.text_of("user")

    @property
    def last_user(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                content = m.get("content")
                if isinstance(content, list):
                    return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
                return content or ""
        return ""

    @property
    def all_text(self) -> str:
        return self.system + "\n" + self.user

    @property
    def response_format(self) -> dict[str, Any]:
        return self.body.get("response_format") or {}

    @property
    def schema_name(self) -> str | None:
        rf = self.response_format
        if rf.get("type") == "json_schema":
            return (rf.get("json_schema") or {}).get("name")
        return None

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.body.get("tools") or []

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


@dataclass
class ChatReply:
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    logprobs: dict[str, Any] | None = None
    handler: str = ""
    finish: str | None = None  # "length" when cut at max_tokens


Handler = Callable[[ChatRequest], ChatReply | None]


def json_reply(data: Any, handler: str) -> ChatReply:
    return ChatReply(content=json.dumps(data, ensure_ascii=False), handler=handler)


def embed_text(text: str, dim: int) -> list[float]:
    """Hashed bag of words: texts that share words are close; deterministic, no model."""
    vec = [0.0] * dim
    words = WORD.findall(text.lower())
    for w in words:
        digest = hashlib.blake2b(w.encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vec[index] += sign
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def load_handlers() -> list[Handler]:
    """Every ``HANDLERS`` list in ``tests/llm_double/handlers/*``.

    Order: by the module's ``PRIORITY`` (default 50; lower first — for handlers keyed on a
    unique marker), then by module name; ``generic`` always last.
    """
    from tests.llm_double import handlers as pkg

    modules = []
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        rank = 10_000 if info.name == "generic" else getattr(module, "PRIORITY", 50)
        modules.append((rank, info.name, module))
    found: list[Handler] = []
    for _, _, module in sorted(modules, key=lambda m: (m[0], m[1])):
        found.extend(getattr(module, "HANDLERS", []))
    return found


@dataclass
class LLMDouble:
    """Run with ``with LLMDouble() as d: d.base_url``; ``d.requests`` logs every call."""

    host: str = "127.0.0.1"
    port: int = 0
    embedding_dim: int = 384
    handlers: list[Handler] = field(default_factory=load_handlers)
    requests: list[dict[str, Any]] = field(default_factory=list)
    delay_s: float = 0.0
    # ``GET /v1/models`` answers after this long: a busy one-slot local server, as a
    # backend's health probe meets it.
    models_delay_s: float = 0.0
    # Like a real server: an answer longer than the request's max_tokens is cut there and
    # finishes with "length" (a JSON answer then no longer parses).
    honour_max_tokens: bool = True

    def __post_init__(self) -> None:
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._released = False
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/chat/completions", self._chat, methods=["POST"]),
                Route("/embeddings", self._embeddings, methods=["POST"]),
            ]
        )

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def held(self) -> list[ChatRequest]:
        """Chat calls being held open (``HOLD_MARKER``), answered or not."""
        return [r for r in self.chat_requests() if HOLD_MARKER in r.last_user]

    def release_held(self) -> None:
        """Answer every held call now, and the ones that come later at once (until
        ``hold_calls``)."""
        self._released = True

    def hold_calls(self) -> None:
        """Hold ``HOLD_MARKER`` calls open again (the default)."""
        self._released = False

    def chat_requests(self) -> list[ChatRequest]:
        with self._lock:
            return [
                ChatRequest(r["body"]) for r in self.requests if r["path"].endswith("completions")
            ]

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> LLMDouble:
        if not self.port:
            with socket.socket() as s:
                s.bind((self.host, 0))
                self.port = s.getsockname()[1]
        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started:
            if time.time() > deadline:
                raise RuntimeError("LLM double did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server:
            self._server.should_exit = True
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> LLMDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- endpoints -------------------------------------------------------------------
    async def _models(self, request: Request) -> JSONResponse:
        if self.models_delay_s:
            import asyncio

            await asyncio.sleep(self.models_delay_s)
        return JSONResponse({"object": "list", "data": [{"id": "double", "object": "model"}]})

    async def _embeddings(self, request: Request) -> JSONResponse:
        body = await request.json()
        with self._lock:
            self.requests.append({"path": request.url.path, "body": body, "at": time.time()})
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        dim = int(body.get("dimensions") or self._dim_for(body.get("model", "")))
        data = [
            {"object": "embedding", "index": i, "embedding": embed_text(str(t), dim)}
            for i, t in enumerate(inputs or [])
        ]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "double"),
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        )

    def _dim_for(self, model: str) -> int:
        match = re.search(r"-(\d{2,5})$", model or "")
        return int(match.group(1)) if match else self.embedding_dim

    async def _chat(self, request: Request) -> JSONResponse | StreamingResponse:
        started = time.perf_counter()
        body = await request.json()
        record = {"path": request.url.path, "body": body, "at": time.time()}
        with self._lock:
            self.requests.append(record)
        if self.delay_s:  # a real endpoint's per-call latency (concurrent calls overlap)
            import asyncio

            await asyncio.sleep(self.delay_s)
        chat = ChatRequest(body)
        held_s = self.delay_s
        if HOLD_MARKER in chat.last_user:
            import asyncio

            held_at = time.monotonic()
            while not self._released and time.monotonic() - held_at < HOLD_MAX_S:
                await asyncio.sleep(0.05)
            held_s += time.monotonic() - held_at
        if FAIL_MARKER in json.dumps(body.get("messages", []), ensure_ascii=False):
            return JSONResponse(
                {"error": {"message": "rejected by the test double (fail marker)",
                           "type": "invalid_request_error"}},
                status_code=400,
            )
        reply = None
        for handler in self.handlers:
            reply = handler(chat)
            if reply is not None:
                break
        if reply is None:
            return JSONResponse({"error": {"message": "no handler for request"}}, status_code=400)
        with self._lock:
            record["handler"] = reply.handler
        reply = self._cut(body, reply)
        if chat.stream:
            response: JSONResponse | StreamingResponse = StreamingResponse(
                self._sse(body, reply), media_type="text/event-stream")
        else:
            response = JSONResponse(self._completion(body, reply))
        # The double's own time on the call (parse, dispatch, answer; not the delay or a
        # hold): a benchmark subtracts what a longer prompt costs the model's side.
        with self._lock:
            record["handled_s"] = time.perf_counter() - started - held_s
        return response

    def _cut(self, body: dict[str, Any], reply: ChatReply) -> ChatReply:
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        if not (self.honour_max_tokens and reply.content and isinstance(limit, int)):
            return reply
        from nanobot_memory_adapters.tokens import count_tokens, truncate_to_tokens

        if count_tokens(reply.content) <= limit:
            return reply
        return ChatReply(content=truncate_to_tokens(reply.content, limit, marker=""),
                         tool_calls=reply.tool_calls, logprobs=reply.logprobs,
                         handler=reply.handler, finish="length")

    def _message(self, reply: ChatReply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": tc.get("id") or f"call_{uuid.uuid4().hex[:8]}",
                    "type": "function",
                    "function": {
                        "name": tc["name"],
                        "arguments": json.dumps(tc.get("arguments", {})),
                    },
                }
                for tc in reply.tool_calls
            ]
        return message

    def _completion(self, body: dict[str, Any], reply: ChatReply) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": 0,
            "message": self._message(reply),
            "finish_reason": reply.finish or ("tool_calls" if reply.tool_calls else "stop"),
        }
        if reply.logprobs is not None:
            choice["logprobs"] = reply.logprobs
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "double"),
            "choices": [choice],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    async def _sse(self, body: dict[str, Any], reply: ChatReply):  # type: ignore[no-untyped-def]
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "double"),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            data = {
                **base,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            return f"data: {json.dumps(data)}\n\n"

        yield chunk({"role": "assistant", "content": ""})
        if reply.content:
            for start in range(0, len(reply.content), 64):
                yield chunk({"content": reply.content[start : start + 64]})
        if reply.tool_calls:
            for i, tc in enumerate(self._message(reply)["tool_calls"]):
                yield chunk({"tool_calls": [{"index": i, **tc}]})
        finish = reply.finish or ("tool_calls" if reply.tool_calls else "stop")
        yield chunk({}, finish)
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"
