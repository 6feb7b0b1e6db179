"""A recording proxy in front of an OpenAI-compatible server (tests and benchmarks).

It forwards ``/v1/*`` unchanged, keeps every chat request body, and keeps llama.cpp's
``timings`` of every answer (``cache_n``: prompt tokens reused from the server's cache,
``prompt_n``: prompt tokens read), streamed or not.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from typing import Any


class RecordingProxy:
    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.requests: list[dict[str, Any]] = []
        self.timings: list[dict[str, Any]] = []
        self.port = 0
        self._server: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _app(self) -> Any:
        import httpx
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route

        client = httpx.AsyncClient(timeout=1800)

        async def forward(request: Request) -> Response:
            url = f"{self.target}/{request.path_params['path']}"
            if request.method == "GET":
                got = await client.get(url)
                return Response(got.content, got.status_code,
                                media_type=got.headers.get("content-type"))
            body = await request.body()
            data = json.loads(body or b"{}")
            if isinstance(data, dict) and "messages" in data:
                self.requests.append(data)
            headers = {"content-type": "application/json"}
            if not (isinstance(data, dict) and data.get("stream")):
                got = await client.post(url, content=body, headers=headers)
                answer = got.json()
                if isinstance(answer, dict) and "timings" in answer:
                    self.timings.append(answer["timings"])
                return JSONResponse(answer, got.status_code)

            async def stream() -> Any:
                async with client.stream("POST", url, content=body, headers=headers) as got:
                    async for line in got.aiter_lines():
                        if line.startswith("data: ") and '"timings"' in line:
                            with contextlib.suppress(ValueError, KeyError):
                                self.timings.append(json.loads(line[6:])["timings"])
                        yield line + "\n"

            return StreamingResponse(stream(), media_type="text/event-stream")

        return Starlette(routes=[Route("/v1/{path:path}", forward, methods=["GET", "POST"])])

    def start(self) -> RecordingProxy:
        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(
            self._app(), host="127.0.0.1", port=self.port, log_level="warning"))
        threading.Thread(target=self._server.run, daemon=True).start()
        deadline = time.time() + 10
        while not self._server.started:
            if time.time() > deadline:
                raise RuntimeError("recording proxy did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
