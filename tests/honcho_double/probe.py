"""Wire probe: one scripted request sequence for a Honcho v3 server.

Runs the same requests against any base URL and prints one normalized JSON line per
step (status code + body with ids/timestamps replaced), so the output of the real
server and of the test double can be diffed line by line:

    python -m tests.honcho_double.probe http://127.0.0.1:8000 > real.jsonl
    python -m tests.honcho_double.probe http://127.0.0.1:PORT > double.jsonl
    diff real.jsonl double.jsonl

It only sends HTTP requests to the URL it is given; it neither builds nor starts a
server. Timing-dependent facts (is the queue empty right after the add? how long
until derivation completes?) are reported in coarse buckets on separate `timing:`
steps, which are compared by eye, not by diff.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from typing import Any

import httpx

NANOID = re.compile(r"^[A-Za-z0-9_-]{21}$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$")
FIXED_DATE_PREFIX = "2026-01-0"  # timestamps the probe itself sends are kept verbatim


def _norm(value: Any, ws: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = "<id>" if NANOID.match(k) else k
            out[key] = _norm(v, ws)
        return out
    if isinstance(value, list):
        return [_norm(v, ws) for v in value]
    if isinstance(value, str):
        if ws in value:
            return value.replace(ws, "<ws>")
        if NANOID.match(value):
            return "<id>"
        if ISO.match(value) and not value.startswith(FIXED_DATE_PREFIX):
            return "<ts>"
        return value
    return value


def _norm_validation(body: Any) -> Any:
    """FastAPI 422 bodies: keep type/loc/msg, drop url/input/ctx (library-version noise)."""
    if isinstance(body, dict) and isinstance(body.get("detail"), list):
        return {
            "detail": [
                {k: d.get(k) for k in ("type", "loc", "msg")} if isinstance(d, dict) else d
                for d in body["detail"]
            ]
        }
    return body


class Probe:
    def __init__(self, base_url: str, *, reuse_wait_s: float = 30.0) -> None:
        self.reuse_wait_s = reuse_wait_s
        self.client = httpx.Client(base_url=base_url.rstrip("/"), timeout=60.0)
        self.ws = "probe-" + uuid.uuid4().hex[:10]
        self.lines: list[str] = []

    def emit(self, step: str, **fields: Any) -> None:
        line = json.dumps({"step": step, **fields}, sort_keys=True)
        self.lines.append(line)
        print(line, flush=True)

    def call(self, step: str, method: str, path: str, *, body: Any = None,
             params: Any = None, emit: bool = True) -> httpx.Response:
        path = path.replace("{W}", self.ws)
        try:
            r = self.client.request(method, path, json=body, params=params)
        except httpx.TransportError as exc:
            if emit:
                self.emit(step, status="transport_error", body=type(exc).__name__)
            return httpx.Response(599, json={"transport_error": type(exc).__name__})
        try:
            payload: Any = r.json()
        except ValueError:
            payload = r.text
        if r.status_code == 422:
            payload = _norm_validation(payload)
        if emit:
            self.emit(step, status=r.status_code, body=_norm(payload, self.ws))
        return r

    def queue(self, session: str | None = None, **extra: str) -> dict[str, Any]:
        params = {"session_id": session} if session else {}
        params.update(extra)
        r = self.client.get(f"/v3/workspaces/{self.ws}/queue/status", params=params)
        return r.json()

    def wait_queue_done(self, session: str, timeout: float = 60.0) -> tuple[str, dict]:
        start = time.monotonic()
        seen_work = False
        q: dict[str, Any] = {}
        while time.monotonic() - start < timeout:
            q = self.queue(session)
            if q.get("total_work_units", 0) > 0:
                seen_work = True
            if seen_work and q["pending_work_units"] == 0 and q["in_progress_work_units"] == 0:
                return _bucket(time.monotonic() - start), q
            time.sleep(0.25)
        return "timeout", q

    def run(self) -> int:
        W = "/v3/workspaces/{W}"
        # --- get-or-create -----------------------------------------------------------
        self.call("ws.create", "POST", "/v3/workspaces", body={"id": self.ws})
        self.call("ws.create.again", "POST", "/v3/workspaces", body={"id": self.ws})
        self.call("ws.create.invalid_id", "POST", "/v3/workspaces", body={"id": "bad id!"})
        self.call("peer.create", "POST", f"{W}/peers", body={"id": "user-1"})
        self.call("peer.create.again", "POST", f"{W}/peers", body={"id": "user-1"})
        self.call("peer.create.assistant", "POST", f"{W}/peers",
                  body={"id": "assistant-1", "configuration": {"observe_me": False}})
        self.call("peer.create.invalid_id", "POST", f"{W}/peers", body={"id": "a/b"})
        self.call("peer.create.missing_ws", "POST", "/v3/workspaces/nows-" + self.ws + "/peers",
                  body={"id": "x"})
        self.call("session.create", "POST", f"{W}/sessions",
                  body={"id": "s1", "peers": {"user-1": {}, "assistant-1": {}}})
        self.call("session.create.again", "POST", f"{W}/sessions", body={"id": "s1"})
        self.call("session.add_peers", "POST", f"{W}/sessions/s1/peers",
                  body={"user-1": {}, "assistant-1": {"observe_others": False}})
        # --- add_messages limits -----------------------------------------------------
        self.call("messages.empty", "POST", f"{W}/sessions/s1/messages", body={"messages": []})
        too_many = [{"peer_id": "user-1", "content": f"m{i}"} for i in range(101)]
        self.call("messages.101", "POST", f"{W}/sessions/s1/messages", body={"messages": too_many})
        self.call("messages.no_peer_id", "POST", f"{W}/sessions/s1/messages",
                  body={"messages": [{"content": "x"}]})
        self.call("messages.bad_created_at", "POST", f"{W}/sessions/s1/messages",
                  body={"messages": [{"peer_id": "user-1", "content": "x",
                                      "created_at": "not-a-date"}]})
        self.call("messages.missing_body", "POST", f"{W}/sessions/s1/messages")
        msgs = [
            {"peer_id": "user-1", "content": "I love hiking in the Alps with my dog Rover.",
             "metadata": {"scenario": "travel", "turn_id": "t1"},
             "created_at": "2026-01-02T03:04:05Z"},
            {"peer_id": "assistant-1", "content": "Noted: the Alps, and Rover.",
             "metadata": {"turn_id": "t1"}, "created_at": "2026-01-02T03:04:06+00:00"},
        ]
        r = self.call("messages.add", "POST", f"{W}/sessions/s1/messages", body={"messages": msgs})
        q0 = self.queue("s1")
        self.emit("timing:queue_right_after_add", total=q0.get("total_work_units"))
        bucket, q = self.wait_queue_done("s1")
        self.emit("timing:derivation_done", bucket=bucket)
        self.emit("queue.after_done", body=_norm(q, self.ws))
        self.call("queue.observer_filter", "GET", f"{W}/queue/status",
                  params={"session_id": "s1", "observer_id": "user-1"})
        self.call("queue.sender_user", "GET", f"{W}/queue/status",
                  params={"session_id": "s1", "sender_id": "user-1"})
        self.call("queue.sender_assistant", "GET", f"{W}/queue/status",
                  params={"session_id": "s1", "sender_id": "assistant-1"})
        self.call("queue.missing_session", "GET", f"{W}/queue/status",
                  params={"session_id": "nosuch"})
        # --- session.context -----------------------------------------------------------
        self.call("context.plain", "GET", f"{W}/sessions/s1/context",
                  params={"summary": "true", "limit_to_session": "false"})
        self.call("context.full", "GET", f"{W}/sessions/s1/context",
                  params={"summary": "true", "limit_to_session": "false", "tokens": 500,
                          "peer_target": "user-1", "search_query": "dog hiking",
                          "search_top_k": 3})
        self.call("context.tiny_budget", "GET", f"{W}/sessions/s1/context",
                  params={"summary": "true", "tokens": 12})
        self.call("context.budget_eaten_by_repr", "GET", f"{W}/sessions/s1/context",
                  params={"summary": "true", "tokens": 30, "peer_target": "user-1"})
        self.call("context.tokens_zero", "GET", f"{W}/sessions/s1/context",
                  params={"tokens": 0})
        self.call("context.tokens_too_big", "GET", f"{W}/sessions/s1/context",
                  params={"tokens": 100001})
        self.call("context.top_k_zero", "GET", f"{W}/sessions/s1/context",
                  params={"peer_target": "user-1", "search_query": "x", "search_top_k": 0})
        self.call("context.top_k_101", "GET", f"{W}/sessions/s1/context",
                  params={"peer_target": "user-1", "search_query": "x", "search_top_k": 101})
        self.call("context.search_without_target", "GET", f"{W}/sessions/s1/context",
                  params={"search_query": "dog"})
        self.call("context.assistant_target", "GET", f"{W}/sessions/s1/context",
                  params={"peer_target": "assistant-1", "tokens": 500})
        self.call("context.unknown_target", "GET", f"{W}/sessions/s1/context",
                  params={"peer_target": "nobody", "tokens": 500})
        self.call("context.missing_session", "GET", f"{W}/sessions/nosuch/context",
                  params={"summary": "true", "tokens": 50})
        self.call("context.missing_session_target", "GET", f"{W}/sessions/nosuch/context",
                  params={"summary": "true", "tokens": 500, "peer_target": "user-1"})
        self.call("context.missing_workspace", "GET",
                  "/v3/workspaces/nows-" + self.ws + "/sessions/s1/context", params={"tokens": 50})
        # --- peer representation / context / chat ----------------------------------------
        self.call("peer.representation", "POST", f"{W}/peers/user-1/representation", body={})
        self.call("peer.representation.search", "POST", f"{W}/peers/user-1/representation",
                  body={"search_query": "dog", "search_top_k": 2})
        self.call("peer.representation.session", "POST", f"{W}/peers/user-1/representation",
                  body={"session_id": "s1"})
        self.call("peer.representation.missing_peer", "POST",
                  f"{W}/peers/nobody/representation", body={})
        self.call("peer.context", "GET", f"{W}/peers/user-1/context")
        self.call("peer.context.target", "GET", f"{W}/peers/assistant-1/context",
                  params={"target": "user-1"})
        self.call("peer.context.missing_peer", "GET", f"{W}/peers/nobody/context")
        r = self.call("peer.chat", "POST", f"{W}/peers/user-1/chat",
                      body={"query": "What does the user like?", "stream": False}, emit=False)
        # The answer text is LLM output: record only its shape.
        self.emit("peer.chat", status=r.status_code,
                  body=_shape(r.json()) if r.status_code == 200 else r.json())
        self.call("peer.chat.empty_query", "POST", f"{W}/peers/user-1/chat",
                  body={"query": "", "stream": False})
        # --- listing / pagination --------------------------------------------------------
        self.call("messages.list.page1", "POST", f"{W}/sessions/s1/messages/list",
                  params={"page": 1, "size": 1})
        self.call("messages.list.page2", "POST", f"{W}/sessions/s1/messages/list",
                  params={"page": 2, "size": 1})
        self.call("messages.list.size_0", "POST", f"{W}/sessions/s1/messages/list",
                  params={"page": 1, "size": 0})
        self.call("peer.sessions", "POST", f"{W}/peers/user-1/sessions")
        self.call("peer.sessions.missing_peer", "POST", f"{W}/peers/nobody/sessions")
        self.call("sessions.list", "POST", f"{W}/sessions/list", params={"page": 1, "size": 50})
        self.call("peers.list", "POST", f"{W}/peers/list", params={"page": 1, "size": 50})
        # --- no-work configurations ------------------------------------------------------
        self.call("session.create.reasoning_off", "POST", f"{W}/sessions",
                  body={"id": "s2", "peers": {"user-1": {}},
                        "configuration": {"reasoning": {"enabled": False}}})
        self.call("messages.add.reasoning_off", "POST", f"{W}/sessions/s2/messages",
                  body={"messages": [{"peer_id": "user-1", "content": "I am allergic to nuts."}]})
        self.call("peer.create.quiet", "POST", f"{W}/peers",
                  body={"id": "quiet-1", "configuration": {"observe_me": False}})
        self.call("messages.add.observe_me_false", "POST", f"{W}/sessions/s3/messages",
                  body={"messages": [{"peer_id": "quiet-1", "content": "I never get observed."}]})
        time.sleep(2.0)
        self.call("queue.reasoning_off", "GET", f"{W}/queue/status", params={"session_id": "s2"})
        self.call("queue.observe_me_false", "GET", f"{W}/queue/status",
                  params={"session_id": "s3"})
        # --- deletion --------------------------------------------------------------------
        self.call("ws.delete.active_sessions", "DELETE", W)
        self.call("session.delete", "DELETE", f"{W}/sessions/s1")
        self.call("session.delete.again_immediately", "DELETE", f"{W}/sessions/s1", emit=False)
        self.call("session.delete.missing", "DELETE", f"{W}/sessions/nosuch")
        self.call("session.get_or_create.deleted", "POST", f"{W}/sessions", body={"id": "s1"})
        self.call("messages.add.deleted_session", "POST", f"{W}/sessions/s1/messages",
                  body={"messages": [{"peer_id": "user-1", "content": "after delete"}]})
        self.call("context.deleted_session", "GET", f"{W}/sessions/s1/context",
                  params={"tokens": 50})
        self.call("session.delete.s2", "DELETE", f"{W}/sessions/s2")
        self.call("session.delete.s3", "DELETE", f"{W}/sessions/s3")
        # Representation outlives the deleted sessions? (session deletion is async)
        start = time.monotonic()
        while time.monotonic() - start < self.reuse_wait_s:
            r = self.client.post(f"/v3/workspaces/{self.ws}/sessions", json={"id": "s1"})
            if r.status_code != 404:
                break
            time.sleep(0.5)
        self.emit("timing:deleted_session_name_reusable", bucket=_bucket(time.monotonic() - start)
                  if r.status_code != 404 else "timeout", status=r.status_code)
        if r.status_code in (200, 201):
            self.call("session.recreated.messages", "POST", f"{W}/sessions/s1/messages/list")
            self.call("peer.representation.after_session_delete", "POST",
                      f"{W}/peers/user-1/representation", body={})
            self.call("session.delete.recreated", "DELETE", f"{W}/sessions/s1")
        self.call("ws.delete", "DELETE", W)
        self.call("ws.delete.missing", "DELETE", "/v3/workspaces/never-" + self.ws)
        start = time.monotonic()
        while time.monotonic() - start < 30:
            r = self.client.post(f"/v3/workspaces/{self.ws}/peers/list")
            if r.status_code == 404 or not r.json().get("items"):
                break
            time.sleep(0.5)
        self.emit("timing:workspace_gone", bucket=_bucket(time.monotonic() - start))
        self.call("ws.after_delete.peers_list", "POST", f"{W}/peers/list")
        self.call("ws.after_delete.create", "POST", "/v3/workspaces", body={"id": self.ws})
        self.call("ws.after_delete.add_messages", "POST", f"{W}/sessions/s9/messages",
                  body={"messages": [{"peer_id": "user-1", "content": "fresh start"}]})
        self.call("ws.after_delete.representation", "POST", f"{W}/peers/user-1/representation",
                  body={})
        self.call("ws.after_delete.cleanup.session", "DELETE", f"{W}/sessions/s9", emit=False)
        self.call("ws.after_delete.cleanup", "DELETE", W, emit=False)
        self.call("route.unknown", "GET", "/v3/nothing-here")
        self.call("health", "GET", "/health")
        return 0


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return type(value).__name__


def _bucket(seconds: float) -> str:
    for limit in (1, 5, 15, 30, 60):
        if seconds < limit:
            return f"<{limit}s"
    return ">=60s"


if __name__ == "__main__":
    sys.exit(Probe(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000").run())
