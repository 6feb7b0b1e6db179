"""One preference unit (provider x persona): accumulate the persona's sessions, run each
test point's test sessions read-only (through nanobot, or retrieval-only), score them."""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import (
    ACCEPTED_WRITE_STATUSES,
    FeedbackRequest,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
    Trace,
    WriteReceipt,
    supports,
)
from nanobot_memory_adapters.harness.preferences.agent import AgentLLM, NanobotAgent
from nanobot_memory_adapters.harness.preferences.format import (
    Persona,
    TestSession,
)
from nanobot_memory_adapters.harness.preferences.generator import attribute_cues
from nanobot_memory_adapters.harness.preferences.reader import ReaderResponder
from nanobot_memory_adapters.harness.preferences.scoring import exposure
from nanobot_memory_adapters.harness.preferences.session import retrieval, run_session
from nanobot_memory_adapters.harness.preferences.state import PreferenceUnitState
from nanobot_memory_adapters.harness.prepared import Prepared
from nanobot_memory_adapters.harness.safe_paths import remove_tree, safe_name
from nanobot_memory_adapters.harness.trace_sink import (
    AnnotatingSink,
    error_text,
    failure_trace,
    probe_read_only_gate,
    switch_mode,
)
from nanobot_memory_adapters.tokens import count_tokens_by_line

if TYPE_CHECKING:
    from nanobot_memory_adapters.harness.preferences.config import PreferenceBenchConfig, TestTags

def _request_tags(test: TestSession, mode: TestTags) -> dict[str, str]:
    tags = test.tags()
    if mode == "all":
        return tags
    if mode == "context":
        return {k: v for k, v in tags.items() if k == "context"}
    return {}


def feedback_text(test: TestSession, outcome: dict[str, Any]) -> str | None:
    """What the user says after an option choice (the feedback group's native input)."""
    if not test.options or outcome.get("choice") is None:
        return None
    if outcome["correct"]:
        chosen = next(o for o in test.options if o.id == outcome["choice"])
        return f"Yes, {chosen.text.lower()} was exactly right for me."
    good = next(o for o in test.options if test.target in o.satisfies)
    return f"Not quite. For that I'd have wanted: {good.text}."


def _budget(tokens: int) -> Any:
    from nanobot_memory_adapters.contract import ContextBudget

    return ContextBudget(max_tokens=tokens)



class PreferenceUnit:
    """One provider x persona: accumulate, test at each point, score."""

    def __init__(self, p: Prepared, group: str, persona: Persona,
                 cfg: PreferenceBenchConfig) -> None:
        self.p = p
        self.group = group
        self.persona = persona
        self.cfg = cfg
        self.adapter = p.adapter
        self.sink: AnnotatingSink = p.sink
        self.scope = MemoryScope(run_id=cfg.run_id, persona_id=persona.persona_id,
                                 agent_id="nanobot")
        self.seen: set[str] = set()
        self.unit = PreferenceUnitState(
            provider=p.name, conversation=persona.persona_id, group=group, stored_nothing=0)

    async def run(self) -> dict[str, Any]:
        """The unit's result, as the checkpoint stores it (``PreferenceUnitState.to_dict``)."""
        started = time.perf_counter()
        pid = self.persona.persona_id
        self.sink.base = {"provider": self.p.name, "unit": f"{self.p.name}/{pid}",
                          "conversation": pid}
        await self._mode(False, "bench_unit_start")
        await self.adapter.setup_scope(self.scope)
        try:
            self.unit.reset_status = (await self.adapter.reset_scope(self.scope)).status
        except Exception as exc:
            self.unit.reset_status = "failed"
            self.sink.write(failure_trace(self.p.name, self.adapter, "reset_scope", error_text(exc),
                                           scope=self.scope.key), kind="reset")
        points = sorted({t.after_session for t in self.persona.tests})
        agent = await self._agent() if self.cfg.agent is not None else None
        try:
            for session in self.persona.sessions:
                await self._record(session)
                if session.index in points:
                    await self._test_point(session.index, agent)
        finally:
            if isinstance(agent, NanobotAgent):
                await agent.aclose()
        self.unit.wall_s = time.perf_counter() - started
        return self.unit.to_dict()

    async def _agent(self) -> Any:
        if not isinstance(self.cfg.agent, AgentLLM):
            return ReaderResponder(self.adapter, self.scope, self.cfg.budget_tokens)
        home = self.cfg.out / "agents" / safe_name(self.p.name) / safe_name(self.persona.persona_id)
        # a unit always starts over (a stopped one is discarded on resume, its store reset):
        # so must nanobot's sessions, or recovery answers an interrupted test's placeholder
        remove_tree(self.cfg.out, home)
        kind = "condition" if self.p.kind == "condition" else "backend"
        return await NanobotAgent(
            self.cfg.agent, self.adapter, self.adapter.info.name, kind, self.p.block,
            self.scope, self.cfg.budget_tokens, home, placement=self.cfg.placement,
            tools=self.cfg.agent_tools,
        ).start()

    async def _mode(self, read_only: bool, reason: str) -> bool:
        ok = await switch_mode(self.adapter, self.sink, self.p.name, read_only, reason)
        if not ok:
            self.unit.mode_failures += 1
        return ok

    # -- accumulation ------------------------------------------------------------------
    def _events(self, session: Any) -> list[MemoryEvent]:
        events = []
        turns = session.turns
        for i in range(0, len(turns), 2):
            user, reply = turns[i], turns[i + 1] if i + 1 < len(turns) else None
            messages = [Message(role="user", content=user.content)]
            if reply is not None:
                messages.append(Message(role="assistant", content=reply.content))
            events.append(MemoryEvent(
                event_id=f"pref-{user.turn_id}", run_id=self.scope.run_id,
                user_id=self.scope.persona_id, agent_id="nanobot",
                session_id=session.session_id, turn_id=user.turn_id, timestamp=user.at,
                messages=messages, context=session.context,
                metadata={"dataset": "preferences", "turns": [t.turn_id for t in turns[i:i + 2]],
                          **({"channel": session.channel} if session.channel else {}),
                          **({"chat_id": session.chat_id} if session.chat_id else {})},
            ))
        return events

    async def _record(self, session: Any) -> None:
        events = self._events(session)
        started = time.perf_counter()
        with self.sink.capture() as held:
            receipts: list[WriteReceipt | BaseException]
            if supports(self.adapter, "bulk_ingest"):
                try:
                    receipts = list(await self.adapter.record_events(events))
                except Exception as exc:
                    receipts = [exc] * len(events)
            else:
                receipts = []
                for event in events:
                    try:
                        receipts.append(await self.adapter.record_event(event))
                    except Exception as exc:
                        receipts.append(exc)
        ms = (time.perf_counter() - started) * 1000
        self.unit.record_latency_per_event_ms.append(ms / max(1, len(events)))
        written: set[str] = set()
        for event, receipt in zip(events, receipts, strict=True):
            if isinstance(receipt, BaseException):
                self.unit.record_failures += 1
                trace = failure_trace(self.p.name, self.adapter, "record_event",
                                       error_text(receipt), event.event_id, self.scope.key)
                status = "failed"
            else:
                trace, status = receipt.trace, receipt.status
                written.add(trace.trace_id)
                if status not in ACCEPTED_WRITE_STATUSES:
                    self.unit.record_failures += 1
                elif receipt.stored_nothing and self.unit.stored_nothing is not None:
                    self.unit.stored_nothing += 1
            self.sink.write(trace, kind="record", phase="ingest", session=session.index,
                            event_id=event.event_id, turn_ids=event.metadata["turns"],
                            context=session.context, channel=session.channel,
                            chat_id=session.chat_id, status=status)
        self.sink.flush(held, written)
        self.unit.events += len(events)
        self.unit.ingest_s += time.perf_counter() - started

    # -- test points -------------------------------------------------------------------
    async def _test_point(self, point: int, agent: Any) -> None:
        if supports(self.adapter, "readiness"):
            t0 = time.perf_counter()
            try:
                state = await self.adapter.wait_until_ready(self.scope,
                                                            self.cfg.readiness_timeout_s)
                status = state.status
            except Exception as exc:
                status = "pending"
                self.sink.write(failure_trace(self.p.name, self.adapter, "wait_until_ready",
                                               error_text(exc), scope=self.scope.key),
                                kind="readiness")
            self.unit.readiness.append({"point": point, "status": status,
                                           "waited_s": time.perf_counter() - t0})
        tests = [t for t in self.persona.tests if t.after_session == point]
        gated = await self._mode(True, "test_session")
        done: list[tuple[TestSession, dict[str, Any]]] = []
        try:
            for test in tests:
                record = await self._test(test, point, agent, gated)
                done.append((test, record))
        finally:
            await self._mode(False, "test_session_end")
        if self.group == "feedback":
            await self._feedback(done)

    async def _test(self, test: TestSession, point: int, agent: Any,
                    gated: bool) -> dict[str, Any]:
        session_key = f"bench:{test.test_id}"
        tags = _request_tags(test, self.cfg.test_tags)
        record: dict[str, Any] = {
            "test_id": test.test_id, "persona": self.persona.persona_id, "point": point,
            "dimension": test.dimension, "kind": test.kind, "target": test.target,
            "attribute": test.attribute or self.persona.preference(test.target).attribute,
            "context": test.context, "channel": test.channel, "outcome": None,
            "behaviour": None, "verdict": None, "error": None,
        }
        context, reply, transcript = "", "", []
        retrievals: list[dict[str, Any]] = []
        session: dict[str, Any] = {}
        t0 = time.perf_counter()
        with self.sink.capture() as held:
            if not gated:
                record["error"] = "set_mode(read_only) failed"
            elif agent is not None:
                try:
                    session = await run_session(agent, test, self.persona, self.cfg.simulator,
                                                tags, max_turns=self.cfg.max_turns,
                                                recognition=self.cfg.recognition)
                    context, reply = session["context"], session["reply"]
                    transcript, retrievals = session["transcript"], session["retrievals"]
                    if session["error"]:
                        record["error"] = session["error"]
                        self.unit.retrieve_failures += 1
                except Exception as exc:
                    record["error"] = f"agent: {error_text(exc)}"
                    self.unit.agent_failures += 1
            else:
                request = RetrieveRequest.with_tags(
                    tags, query=test.opening, scope=self.scope, session_id=session_key,
                    budget=_budget(self.cfg.budget_tokens), as_of=test.at)
                # what the provider got (the request object), with its leak check
                retrievals = [retrieval(0, request.query, request.tags(), test,
                                        attribute_cues(test.attribute), False)]
                try:
                    result = await self.adapter.retrieve(request)
                    context = result.formatted_context
                except Exception as exc:
                    record["error"] = f"retrieve: {error_text(exc)}"
                    self.unit.retrieve_failures += 1
        self.unit.retrieve_latency_ms.append((time.perf_counter() - t0) * 1000)
        retrieves = [t for t in held if t.operation == "retrieve"]
        record["exposure"] = exposure(context, test, self.persona)
        record["context_tokens"] = count_tokens_by_line(context)
        record["query"] = retrievals[0]["query"] if retrievals else None
        record["query_leak"] = any(r.get("leak") and not r.get("after_correction")
                                   for r in retrievals)
        if agent is not None and not record["error"]:
            record["behaviour"] = session.get("behaviour")
            recognition = session.get("recognition")
            if recognition is not None:
                record["outcome"] = {k: recognition[k] for k in ("choice", "correct", "error")}
            if self.cfg.judge is not None and (test.rubric and test.kind != "option"):
                try:
                    record["verdict"] = (await self.cfg.judge.judge(test, reply)).to_dict()
                except Exception as exc:
                    record["verdict"] = {"label": "error", "score": None, "raw": error_text(exc)}
        sha = hashlib.sha256(context.encode("utf-8")).hexdigest()
        line: dict[str, Any] = {
            "kind": "preference_test", "phase": "test", "point": point, "test_id": test.test_id,
            "dimension": test.dimension, "target": test.target, "tags": test.tags(),
            "channel": test.channel, "chat_id": test.chat_id, "request_tags": tags,
            "retrieval_query": record["query"], "retrievals": retrievals,
            "context_sha256": sha, "context_tokens": record["context_tokens"],
            "exposure": record["exposure"], "behaviour": record["behaviour"],
            "outcome": record["outcome"], "verdict": record["verdict"], "reply": reply,
            "transcript": transcript,
            "recognition_transcript": (session.get("recognition") or {}).get("transcript"),
        }
        if sha not in self.seen:
            line["memory_context"] = context
            self.seen.add(sha)
        if record["error"]:
            line["error"] = record["error"]
        anchor = retrieves[0] if retrieves else failure_trace(
            self.p.name, self.adapter, "test_session", record["error"] or "",
            scope=self.scope.key)
        self.sink.write(anchor, **line)
        self.sink.flush(held, {anchor.trace_id})
        if gated and self.cfg.gate_probe:
            await self._gate_probe(test, transcript or [
                {"role": "user", "content": test.opening}])
        self.unit.tests.append(record)
        return record

    async def _gate_probe(self, test: TestSession, transcript: list[dict[str, str]]) -> None:
        """The test session's turns, offered to record_event: only skipped_read_only is
        right (nothing of a test session may become memory)."""
        event = MemoryEvent(
            event_id=f"pref-probe-{test.test_id}", run_id=self.scope.run_id,
            user_id=self.scope.persona_id, agent_id="nanobot", session_id=f"bench:{test.test_id}",
            turn_id=test.test_id, timestamp=test.at + timedelta(minutes=1),
            messages=[Message(role=m["role"], content=m["content"])  # type: ignore[arg-type]
                      for m in transcript if m.get("content")],
            metadata={"harness": "gate_probe", "about": test.test_id},
        )
        self.unit.gate_probes += 1
        _, gate_held = await probe_read_only_gate(self.adapter, self.sink, event, test.test_id)
        if not gate_held:
            self.unit.gate_violations += 1

    async def _feedback(self, done: list[tuple[TestSession, dict[str, Any]]]) -> None:
        assert supports(self.adapter, "feedback")
        for test, record in done:
            text = feedback_text(test, record.get("outcome") or {})
            if text is None:
                continue
            with self.sink.capture() as held:
                try:
                    receipt = await self.adapter.apply_feedback(FeedbackRequest(
                        scope=self.scope, session_id=f"bench:{test.test_id}", feedback=text,
                        metadata={"test_id": test.test_id}))
                    ok = receipt.status in ACCEPTED_WRITE_STATUSES
                    trace: Trace = receipt.trace
                except Exception as exc:
                    ok = False
                    trace = failure_trace(self.p.name, self.adapter, "apply_feedback",
                                           error_text(exc), scope=self.scope.key)
            self.unit.feedback["sent" if ok else "failed"] += 1
            self.sink.write(trace, kind="feedback", test_id=test.test_id, feedback=text)
            self.sink.flush(held, {trace.trace_id})


