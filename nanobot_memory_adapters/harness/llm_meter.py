"""What each memory costs in model calls, counted at the HTTP boundary.

A small reverse proxy in front of one OpenAI-compatible endpoint. Every caller gets a base
URL of its own, ``http://127.0.0.1:PORT/u/<label>``, which forwards
``/u/<label>/<path>`` to ``<upstream>/<path>`` unchanged (bodies, status, streaming), so
the in-process backends (mem0, Graphiti, nanobot's Dream) and the servers (a Honcho
deriver, MemOS) are metered alike, whatever SDK they use. Each call is appended as one
JSON line to the log (label, kind — ``chat``, ``embeddings`` or ``other`` —, status,
start and end time, and the tokens of the response's ``usage``, also from the last usage
chunk of a stream; ``usage_known`` is false when the endpoint sent none). The log is
append-only, so a resumed run keeps the counts of the calls made before (a unit replayed
after an interruption makes, and counts, its calls again).

``GET /meter/stats`` returns the totals per label; ``summarize`` reads them from the log
for a time window. Binds 127.0.0.1 only; request and response bodies are never logged, and
the upstream's credentials travel only in the callers' own headers.

    python -m nanobot_memory_adapters.harness.llm_meter --upstream URL [--port P] --log FILE \
        [--embed-upstream URL]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

PREFIX = "/u/"
STATS_PATH = "/meter/stats"
# hop-by-hop and length headers the proxy sets itself
_DROP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive",
         "accept-encoding", "content-encoding", "proxy-connection", "upgrade", "te"}


def kind_of(path: str) -> str:
    if path.endswith("/embeddings"):
        return "embeddings"
    if path.endswith("/chat/completions") or path.endswith("/completions"):
        return "chat"
    return "other"


def usage_of(body: bytes, streamed: bool) -> dict[str, int] | None:
    """The response's ``usage`` (a stream's last non-empty one), or None."""
    if not streamed:
        try:
            data = json.loads(body)
        except ValueError:
            return None
        usage = data.get("usage") if isinstance(data, dict) else None
        return _tokens(usage)
    found = None
    for line in body.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        try:
            chunk = json.loads(line[5:])
        except ValueError:
            continue
        if isinstance(chunk, dict) and (u := _tokens(chunk.get("usage"))) is not None:
            found = u
    return found


def _tokens(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    out = {k: int(usage[k]) for k in ("prompt_tokens", "completion_tokens", "total_tokens")
           if isinstance(usage.get(k), int | float)}
    return out or None


@dataclass
class LLMMeter:
    """The proxy: ``start()`` serves in a thread; ``url_for(label)`` is a caller's base
    URL. ``upstream`` is the endpoint's base URL as callers would use it (``…/v1``);
    ``embed_upstream`` another one for embeddings (a model server started for them), so
    one base URL serves a caller that takes one for both (Honcho)."""

    upstream: str
    log: Path
    port: int = 0
    embed_upstream: str | None = None  # ``/embeddings`` calls go here when set
    timeout_s: float = 3600.0
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _client: httpx.Client | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def url_for(self, label: str) -> str:
        if not label or "/" in label:
            raise ValueError(f"meter label {label!r}: one path segment, not empty")
        return f"http://127.0.0.1:{self.port}{PREFIX}{label}"

    def start(self) -> LLMMeter:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        meter = self
        client = httpx.Client(timeout=httpx.Timeout(self.timeout_s, connect=30.0))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one call per connection; streams end on close

            def log_message(self, format: str, *args: Any) -> None:
                return  # bodies and paths stay out of stderr

            def do_GET(self) -> None:
                if self.path == STATS_PATH:
                    self._json(200, summarize(read_log(meter.log)))
                    return
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def do_PUT(self) -> None:
                self._forward()

            def do_DELETE(self) -> None:
                self._forward()

            def _json(self, status: int, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self) -> None:
                if not self.path.startswith(PREFIX) or "/" not in self.path[len(PREFIX):]:
                    self._json(404, {"error": {"message": f"use {PREFIX}<label>/<path>"}})
                    return
                label, rest = self.path[len(PREFIX):].split("/", 1)
                base = (meter.embed_upstream if meter.embed_upstream
                        and kind_of("/" + rest.split("?", 1)[0]) == "embeddings"
                        else meter.upstream)
                target = base.rstrip("/") + "/" + rest
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _DROP}
                started = time.time()
                status, usage, streamed = 502, None, False
                try:
                    with client.stream(self.command, target, content=body,
                                       headers=headers) as resp:
                        status = resp.status_code
                        streamed = "text/event-stream" in resp.headers.get("content-type", "")
                        self.send_response(status)
                        for k, v in resp.headers.items():
                            if k.lower() not in _DROP:
                                self.send_header(k, v)
                        if streamed:
                            self.end_headers()
                            seen = bytearray()
                            for chunk in resp.iter_raw():
                                seen += chunk
                                self.wfile.write(chunk)
                                self.wfile.flush()
                            data = bytes(seen)
                        else:
                            data = resp.read()
                            self.send_header("Content-Length", str(len(data)))
                            self.end_headers()
                            self.wfile.write(data)
                        usage = usage_of(data, streamed)
                except httpx.HTTPError as exc:
                    if status == 502:
                        self._json(502, {"error": {"message": f"upstream: {type(exc).__name__}"}})
                finally:
                    meter._record(label, rest, status, started, usage, streamed)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, name="llm-meter",
                         daemon=True).start()
        self._client = client
        return self

    def _record(self, label: str, path: str, status: int, started: float,
                usage: dict[str, int] | None, streamed: bool) -> None:
        line = {"label": label, "kind": kind_of("/" + path.split("?", 1)[0]),
                "status": status, "started": round(started, 3),
                "ended": round(time.time(), 3), "streamed": streamed,
                "usage_known": usage is not None, **(usage or {})}
        with self._lock, self.log.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> LLMMeter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def read_log(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def summarize(calls: Iterable[dict[str, Any]],
              windows: list[tuple[float, float]] | None = None) -> dict[str, dict[str, Any]]:
    """Totals per label: calls and tokens of each kind, failed calls, calls without usage.
    ``windows``: only calls that started inside one of these (start, end) times."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "chat_calls": 0, "chat_prompt_tokens": 0, "chat_completion_tokens": 0,
        "embedding_calls": 0, "embedding_tokens": 0, "other_calls": 0,
        "failed_calls": 0, "calls_without_usage": 0})
    for c in calls:
        if windows is not None and not any(a <= c["started"] <= b for a, b in windows):
            continue
        t = out[c["label"]]
        if not 200 <= int(c["status"]) < 300:
            t["failed_calls"] += 1
        kind = c["kind"]
        if kind == "chat":
            t["chat_calls"] += 1
            t["chat_prompt_tokens"] += int(c.get("prompt_tokens", 0))
            t["chat_completion_tokens"] += int(c.get("completion_tokens", 0))
        elif kind == "embeddings":
            t["embedding_calls"] += 1
            t["embedding_tokens"] += int(c.get("prompt_tokens", c.get("total_tokens", 0)))
        else:
            t["other_calls"] += 1
        if kind != "other" and not c.get("usage_known"):
            t["calls_without_usage"] += 1
    return dict(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the endpoint's base URL (…/v1)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--embed-upstream", help="another base URL for /embeddings calls")
    args = parser.parse_args(argv)
    meter = LLMMeter(args.upstream, args.log, args.port, args.embed_upstream).start()
    print(f"http://127.0.0.1:{meter.port}{PREFIX}<label>", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        meter.stop()


if __name__ == "__main__":
    main()
