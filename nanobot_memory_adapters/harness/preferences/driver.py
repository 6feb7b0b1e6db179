"""The behavioural preference benchmark: the design's test-session flow.

For each provider and persona (a *unit*), in a fresh scope:

1. the persona's accumulation sessions are recorded in order (one event per exchange,
   the session's context as its tag; bulk where the provider declares it);
2. at each test point (after session N): wait for readiness, switch the provider
   read-only (``reason="test_session"``), run that point's test sessions, switch back.
   A test session is one conversation with a real nanobot ``AgentLoop`` whose memory
   plugin is active on this provider (``agent.NanobotAgent``); nanobot retrieves with the
   user's message as the query and the test's tags and timeline time, chooses, and the
   choice is scored against the persona's current preference. Each test's turns are then
   offered to ``record_event`` as a gate probe (only ``skipped_read_only`` is right);
3. in the ``+feedback`` experiment group only (a provider named ``memos+feedback``), the
   user's reaction to each option choice goes to the provider's native ``apply_feedback``
   after the test point, read-write. Never part of the accumulation-only default.

Without an agent model (``agent=None``) the test sessions are retrieval-only: the
harness sends the request the plugin would send and scores exposure only.

Outputs (``out``): ``scenarios.json`` (the exact set used), ``manifest.json``,
``traces.jsonl``, ``results.json``, ``report.html``, ``checkpoint.json``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from nanobot_memory_adapters.contract import (
    ACCEPTED_WRITE_STATUSES,
    AdapterMode,
    FeedbackRequest,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
    SupportsBulkIngest,
    SupportsFeedback,
    SupportsReadiness,
    Trace,
    WriteReceipt,
)
from nanobot_memory_adapters.harness import manifest as mf
from nanobot_memory_adapters.harness.checkpoint import open_checkpoint
from nanobot_memory_adapters.harness.judge import OpenAICompatibleClient, Verdict, _verdict
from nanobot_memory_adapters.harness.preferences.agent import (
    AgentLLM,
    NanobotAgent,
    ScriptedSimulator,
    opening_message,
)
from nanobot_memory_adapters.harness.preferences.format import (
    Persona,
    ScenarioSet,
    TestSession,
    dump_scenarios,
    scenario_sha256,
)
from nanobot_memory_adapters.harness.preferences.scoring import (
    exposure,
    exposure_sha256,
    judge_choice,
    parse_choice,
    provider_scores,
)
from nanobot_memory_adapters.harness.prepared import Prepared, prepare_provider
from nanobot_memory_adapters.harness.seeded_ids import SeededIds
from nanobot_memory_adapters.harness.trace_sink import AnnotatingSink, error_text, failure_trace
from nanobot_memory_adapters.tokens import count_tokens
from nanobot_memory_adapters.tracing import JsonlTraceWriter

RESULTS_SCHEMA = "nanobot-memory-preference-results/1"
OUTPUT_FILES = ("scenarios.json", "manifest.json", "traces.jsonl", "results.json",
                "report.html", "checkpoint.json")
TestTags = Literal["context", "all", "none"]
FEEDBACK_SUFFIX = "+feedback"
RUBRIC_PROMPT = (
    "Grade an assistant's reply to a user.\nUser's request: {opening}\nAssistant's reply: "
    "{reply}\nRubric: {rubric}\nDoes the reply satisfy the rubric? Reply with one word: "
    "CORRECT or WRONG."
)


class RubricJudge:
    """Open tasks: an LLM grades the reply against the test's rubric."""

    def __init__(self, client: OpenAICompatibleClient, description: dict[str, Any]) -> None:
        self.client = client
        self.description = description

    async def judge(self, test: TestSession, reply: str) -> Verdict:
        prompt = RUBRIC_PROMPT.format(opening=test.opening, reply=reply[:3000],
                                      rubric=test.rubric or "")
        return _verdict(await self.client.chat([{"role": "user", "content": prompt}],
                                               max_tokens=8))


@dataclass
class PreferenceBenchConfig:
    out: Path
    providers: list[str]
    scenario: ScenarioSet
    budget_tokens: int = 800
    run_id: str = "prefs"
    agent: AgentLLM | None = None
    simulator: Any = None  # ScriptedSimulator (default) or LLMSimulator
    judge: RubricJudge | None = None
    test_tags: TestTags = "context"
    placement: str = "system_prompt"
    provider_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    readiness_timeout_s: float = 120.0
    seed: int = 0
    fresh: bool = False
    gate_probe: bool = True
    closers: list[Any] = field(default_factory=list)


def split_group(name: str) -> tuple[str, str]:
    """``memos+feedback`` -> (``memos``, ``feedback``); plain names are ``accumulation``."""
    if name.endswith(FEEDBACK_SUFFIX):
        return name[: -len(FEEDBACK_SUFFIX)], "feedback"
    return name, "accumulation"


def oracle_block(scenario: ScenarioSet) -> dict[str, Any]:
    """oracle_ipas is the dataset's own ground truth (with validity, answered as of the
    test's time); a user-given block wins."""
    return {"preferences": {
        p.persona_id: [
            {"attribute": f.attribute, "value": f.value, "context": f.context,
             "scenario": f.scenario, "valid_from": f.valid_from.isoformat(),
             "valid_until": f.valid_until.isoformat() if f.valid_until else None}
            for f in p.preferences
        ]
        for p in scenario.personas
    }}


def _request_tags(test: TestSession, mode: TestTags) -> dict[str, str]:
    tags = test.tags()
    if mode == "all":
        return tags
    if mode == "context":
        return {k: v for k, v in tags.items() if k == "context"}
    return {}


def feedback_text(test: TestSession, outcome: dict[str, Any]) -> str | None:
    """What the user says after an option choice (the feedback group's native input)."""
    if test.kind != "option" or outcome.get("choice") is None:
        return None
    if outcome["correct"]:
        chosen = next(o for o in test.options if o.id == outcome["choice"])
        return f"Yes, {chosen.text.lower()} was exactly right for me."
    good = next(o for o in test.options if test.target in o.satisfies)
    return f"Not quite. For that I'd have wanted: {good.text}."


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
        self.unit: dict[str, Any] = {
            "provider": p.name, "conversation": persona.persona_id, "group": group,
            "events": 0, "record_failures": 0, "retrieve_failures": 0, "agent_failures": 0,
            "mode_failures": 0, "gate_violations": 0, "gate_probes": 0, "reset_status": None,
            "readiness": [], "feedback": {"sent": 0, "failed": 0}, "tests": [],
            "record_latency_per_event_ms": [], "retrieve_latency_ms": [], "ingest_s": 0.0,
        }

    async def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        pid = self.persona.persona_id
        self.sink.base = {"provider": self.p.name, "unit": f"{self.p.name}/{pid}",
                          "conversation": pid}
        await self._mode(False, "bench_unit_start")
        await self.adapter.setup_scope(self.scope)
        try:
            self.unit["reset_status"] = (await self.adapter.reset_scope(self.scope)).status
        except Exception as exc:
            self.unit["reset_status"] = "failed"
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
            if agent is not None:
                await agent.aclose()
        self.unit["wall_s"] = time.perf_counter() - started
        return self.unit

    async def _agent(self) -> NanobotAgent | None:
        assert self.cfg.agent is not None
        home = self.cfg.out / "agents" / self.p.name.replace("+", "_") / self.persona.persona_id
        kind = "condition" if self.p.kind == "condition" else "backend"
        return await NanobotAgent(
            self.cfg.agent, self.adapter, self.adapter.info.name, kind, self.p.block,
            self.scope, self.cfg.budget_tokens, home, placement=self.cfg.placement,
        ).start()

    async def _mode(self, read_only: bool, reason: str) -> bool:
        try:
            with self.sink.capture() as held:
                receipt = await self.adapter.set_mode(AdapterMode(read_only=read_only,
                                                                  reason=reason))
            written = set()
            if receipt.trace is not None:
                self.sink.write(receipt.trace, kind="mode", reason=reason)
                written.add(receipt.trace.trace_id)
            self.sink.flush(held, written)
            return True
        except Exception as exc:
            self.unit["mode_failures"] += 1
            self.sink.write(failure_trace(self.p.name, self.adapter, "set_mode", error_text(exc)),
                            kind="mode", reason=reason)
            return False

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
                metadata={"dataset": "preferences", "turns": [t.turn_id for t in turns[i:i + 2]]},
            ))
        return events

    async def _record(self, session: Any) -> None:
        events = self._events(session)
        started = time.perf_counter()
        with self.sink.capture() as held:
            receipts: list[WriteReceipt | BaseException]
            if isinstance(self.adapter, SupportsBulkIngest):
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
        self.unit["record_latency_per_event_ms"].append(ms / max(1, len(events)))
        written: set[str] = set()
        for event, receipt in zip(events, receipts, strict=True):
            if isinstance(receipt, BaseException):
                self.unit["record_failures"] += 1
                trace = failure_trace(self.p.name, self.adapter, "record_event",
                                       error_text(receipt), event.event_id, self.scope.key)
                status = "failed"
            else:
                trace, status = receipt.trace, receipt.status
                written.add(trace.trace_id)
                if status not in ACCEPTED_WRITE_STATUSES:
                    self.unit["record_failures"] += 1
            self.sink.write(trace, kind="record", phase="ingest", session=session.index,
                            event_id=event.event_id, turn_ids=event.metadata["turns"],
                            context=session.context, status=status)
        self.sink.flush(held, written)
        self.unit["events"] += len(events)
        self.unit["ingest_s"] += time.perf_counter() - started

    # -- test points -------------------------------------------------------------------
    async def _test_point(self, point: int, agent: NanobotAgent | None) -> None:
        if isinstance(self.adapter, SupportsReadiness):
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
            self.unit["readiness"].append({"point": point, "status": status,
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

    async def _test(self, test: TestSession, point: int, agent: NanobotAgent | None,
                    gated: bool) -> dict[str, Any]:
        session_key = f"bench:{test.test_id}"
        record: dict[str, Any] = {
            "test_id": test.test_id, "persona": self.persona.persona_id, "point": point,
            "dimension": test.dimension, "kind": test.kind, "target": test.target,
            "context": test.context, "outcome": None, "verdict": None, "error": None,
        }
        context, reply, transcript, follow_ups = "", "", [], 0
        t0 = time.perf_counter()
        with self.sink.capture() as held:
            if not gated:
                record["error"] = "set_mode(read_only) failed"
            elif agent is not None:
                try:
                    turn = await agent.turn(test, session_key, self.cfg.simulator,
                                            _request_tags(test, self.cfg.test_tags))
                    context, reply = turn.context, turn.reply
                    transcript, follow_ups = turn.transcript, turn.follow_ups
                    if turn.recall_error:
                        record["error"] = turn.recall_error
                        self.unit["retrieve_failures"] += 1
                except Exception as exc:
                    record["error"] = f"agent: {error_text(exc)}"
                    self.unit["agent_failures"] += 1
            else:
                try:
                    result = await self.adapter.retrieve(RetrieveRequest(
                        query=opening_message(test), scope=self.scope, session_id=session_key,
                        budget=_budget(self.cfg.budget_tokens), as_of=test.at,
                        **_request_tags(test, self.cfg.test_tags),
                    ))
                    context = result.formatted_context
                except Exception as exc:
                    record["error"] = f"retrieve: {error_text(exc)}"
                    self.unit["retrieve_failures"] += 1
        self.unit["retrieve_latency_ms"].append((time.perf_counter() - t0) * 1000)
        retrieves = [t for t in held if t.operation == "retrieve"]
        record["exposure"] = exposure(context, test, self.persona)
        record["context_tokens"] = count_tokens(context)
        if agent is not None and not record["error"]:
            if test.kind == "option":
                record["outcome"] = judge_choice(parse_choice(reply, test), test, self.persona)
            elif self.cfg.judge is not None:
                try:
                    record["verdict"] = (await self.cfg.judge.judge(test, reply)).to_dict()
                except Exception as exc:
                    record["verdict"] = {"label": "error", "score": None, "raw": error_text(exc)}
        record["follow_ups"] = follow_ups
        sha = hashlib.sha256(context.encode("utf-8")).hexdigest()
        line: dict[str, Any] = {
            "kind": "preference_test", "phase": "test", "point": point, "test_id": test.test_id,
            "dimension": test.dimension, "target": test.target, "tags": test.tags(),
            "context_sha256": sha, "context_tokens": record["context_tokens"],
            "exposure": record["exposure"], "outcome": record["outcome"],
            "verdict": record["verdict"], "reply": reply, "transcript": transcript,
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
                {"role": "user", "content": opening_message(test)}])
        self.unit["tests"].append(record)
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
        self.unit["gate_probes"] += 1
        with self.sink.capture() as held:
            try:
                receipt: WriteReceipt | None = await self.adapter.record_event(event)
                status = receipt.status if receipt else "none"
            except Exception as exc:
                receipt, status = None, f"failed: {error_text(exc)}"
        if status != "skipped_read_only":
            self.unit["gate_violations"] += 1
        if receipt is not None:
            self.sink.write(receipt.trace, kind="gate_probe", about=test.test_id, status=status)
            self.sink.flush(held, {receipt.trace.trace_id})
        else:
            self.sink.flush(held, set())

    async def _feedback(self, done: list[tuple[TestSession, dict[str, Any]]]) -> None:
        assert isinstance(self.adapter, SupportsFeedback)
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
            self.unit["feedback"]["sent" if ok else "failed"] += 1
            self.sink.write(trace, kind="feedback", test_id=test.test_id, feedback=text)
            self.sink.flush(held, {trace.trace_id})


def _budget(tokens: int) -> Any:
    from nanobot_memory_adapters.contract import ContextBudget

    return ContextBudget(max_tokens=tokens)


@dataclass
class PreferenceOutcome:
    out: Path
    manifest: dict[str, Any]
    results: dict[str, Any]
    skipped: list[dict[str, str]]
    resumed_units: int = 0
    wall_s: float = 0.0


def clear_outputs(out: Path) -> None:
    import shutil

    for name in OUTPUT_FILES:
        (out / name).unlink(missing_ok=True)
    for sub in ("stores", "agents"):
        shutil.rmtree(out / sub, ignore_errors=True)


async def run_preferences(cfg: PreferenceBenchConfig, progress: Any = None
                          ) -> PreferenceOutcome:
    ids = SeededIds(cfg.seed)
    with ids:
        try:
            return await _run(cfg, progress, ids)
        finally:
            for close in cfg.closers:
                with contextlib.suppress(Exception):
                    await close()


async def _run(cfg: PreferenceBenchConfig, progress: Any, ids: SeededIds) -> PreferenceOutcome:
    random.seed(cfg.seed)
    cfg.out.mkdir(parents=True, exist_ok=True)
    if cfg.fresh:
        clear_outputs(cfg.out)
    (cfg.out / "scenarios.json").write_text(dump_scenarios(cfg.scenario), encoding="utf-8")
    traces_path = cfg.out / "traces.jsonl"
    writer = JsonlTraceWriter(traces_path)
    prepared: list[tuple[Prepared, str]] = []
    skipped: list[dict[str, str]] = []
    from nanobot_memory_adapters.harness.timeline import BenchConfig

    try:
        shim = BenchConfig(dataset=cfg.out, out=cfg.out, providers=list(cfg.providers),
                           provider_configs=cfg.provider_configs)
        for name in cfg.providers:
            base, group = split_group(name)
            block = cfg.provider_configs.get(name, cfg.provider_configs.get(base))
            if base == "oracle_ipas" and block is None:
                block = oracle_block(cfg.scenario)
            p, reason = await prepare_provider(base, shim, writer, label=name, block=block)
            if p is None:
                skipped.append({"name": name, "reason": reason or "unknown"})
                continue
            if group == "feedback" and not isinstance(p.adapter, SupportsFeedback):
                await p.adapter.aclose()
                skipped.append({"name": name, "reason": f"{base} has no native feedback "
                                "(SupportsFeedback); the feedback group needs it"})
                continue
            prepared.append((p, group))
        manifest = mf.finalize(_manifest(cfg, prepared, skipped))
        cp = open_checkpoint(cfg.out, manifest["manifest_sha256"], traces_path)
        mf.write_manifest(manifest, cfg.out / "manifest.json")
        resumed = 0
        for p, group in prepared:
            if progress:
                progress.start(p.name, len(cfg.scenario.personas))
            for persona in cfg.scenario.personas:
                if cp.done(p.name, persona.persona_id) is not None:
                    resumed += 1
                    if progress:
                        progress.advance(p.name, 1, f"{persona.persona_id} (checkpoint)")
                    continue
                ids.reseed(f"{p.name}/{persona.persona_id}")
                unit = await PreferenceUnit(p, group, persona, cfg).run()
                cp.save_unit(unit, traces_path.stat().st_size if traces_path.exists() else 0)
                if progress:
                    progress.advance(p.name, 1, persona.persona_id)
        results = build_results(cfg, manifest, prepared, skipped, cp.units)
        (cfg.out / "results.json").write_text(
            json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        from nanobot_memory_adapters.harness.preferences.report import write_report

        write_report(cfg.out / "report.html", manifest, results)
        cp.complete = True
        cp.save()
        return PreferenceOutcome(cfg.out, manifest, results, skipped, resumed)
    finally:
        for p, _ in prepared:
            with contextlib.suppress(Exception):
                await p.adapter.aclose()


def _manifest(cfg: PreferenceBenchConfig, prepared: list[tuple[Prepared, str]],
              skipped: list[dict[str, str]]) -> dict[str, Any]:
    example = MemoryScope(run_id=cfg.run_id, persona_id=cfg.scenario.personas[0].persona_id,
                          agent_id="nanobot")
    providers = []
    for p, group in prepared:
        entry = mf.provider_entry(p.name, p.kind, p.block, p.adapter, example)
        entry["experiment_group"] = group
        providers.append(entry)
    return {
        "kind": "preferences",
        "dataset": {
            "format": cfg.scenario.format, "name": cfg.scenario.name,
            "source": cfg.scenario.source, "sha256": scenario_sha256(cfg.scenario),
            "personas": [p.persona_id for p in cfg.scenario.personas],
            "tests": sum(len(p.tests) for p in cfg.scenario.personas),
            "option_tasks": sum(1 for p in cfg.scenario.personas for t in p.tests
                                if t.kind == "option"),
        },
        "settings": {
            "budget": {"max_tokens": cfg.budget_tokens},
            "run_id": cfg.run_id,
            "test_tags": cfg.test_tags,
            "test_tags_meaning": {
                "context": "the test's context tag reaches RetrieveRequest (what a live "
                "nanobot knows from its channel); scenario and attribute are the "
                "benchmark's labels, not something an agent knows",
                "all": "scenario, context and attribute reach RetrieveRequest",
                "none": "no tags"}[cfg.test_tags],
            "agent": cfg.agent.describe() if cfg.agent else None,
            "agent_mode": "nanobot AgentLoop + memory plugin (read-only, provided adapter)"
            if cfg.agent else "retrieval only (no model): exposure metrics only",
            "context_placement": cfg.placement,
            "choice": "parsed from the reply: (x), x), option x, or one option's text",
            "simulator": (cfg.simulator or ScriptedSimulator()).describe(),
            "open_task_judge": cfg.judge.description if cfg.judge else None,
            "gate_probe": cfg.gate_probe,
            "readiness_timeout_s": cfg.readiness_timeout_s,
            "event": "one event per exchange (user + assistant), the session's context as tag",
        },
        "seed": cfg.seed,
        "providers": providers,
        "skipped": skipped,
        "paths": {"out": str(cfg.out)},
    }


def build_results(cfg: PreferenceBenchConfig, manifest: dict[str, Any],
                  prepared: list[tuple[Prepared, str]], skipped: list[dict[str, str]],
                  units: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from nanobot_memory_adapters.harness.metrics import TIMING_KEY, _dist

    providers: dict[str, Any] = {}
    order = {p.persona_id: i for i, p in enumerate(cfg.scenario.personas)}
    for p, group in prepared:
        mine = sorted((u for u in units.values() if u["provider"] == p.name),
                      key=lambda u: order.get(u["conversation"], 0))
        records = [r for u in mine for r in u["tests"]]
        providers[p.name] = {
            "kind": p.kind,
            "condition_kind": p.adapter.info.condition_kind,
            "memory_form": p.adapter.info.memory_form,
            "tag_mapping": p.adapter.info.tag_mapping,
            "experiment_group": group,
            "personas": [u["conversation"] for u in mine],
            "events_recorded": sum(u["events"] for u in mine),
            "scores": provider_scores(records),
            "failures": {
                "record": sum(u["record_failures"] for u in mine),
                "retrieve": sum(u["retrieve_failures"] for u in mine),
                "agent": sum(u["agent_failures"] for u in mine),
                "set_mode": sum(u["mode_failures"] for u in mine),
                "gate_violations": sum(u["gate_violations"] for u in mine),
                "readiness_pending": sum(1 for u in mine for w in u["readiness"]
                                         if w["status"] == "pending"),
                "reset": sum(1 for u in mine if u.get("reset_status") == "failed"),
                "feedback": sum(u["feedback"]["failed"] for u in mine),
            },
            "gate_probes": sum(u["gate_probes"] for u in mine),
            "feedback_sent": sum(u["feedback"]["sent"] for u in mine),
            TIMING_KEY: {
                "record_latency_per_event_ms": _dist(
                    [x for u in mine for x in u["record_latency_per_event_ms"]]),
                "test_session_ms": _dist([x for u in mine for x in u["retrieve_latency_ms"]]),
                "ingest_s": round(sum(u["ingest_s"] for u in mine), 6),
                "unit_wall_s": round(sum(u.get("wall_s", 0.0) for u in mine), 6),
            },
        }
    scores = {n: m["scores"] for n, m in providers.items()}
    return {
        "schema": RESULTS_SCHEMA,
        "manifest_sha256": manifest["manifest_sha256"],
        "budget_tokens": cfg.budget_tokens,
        "providers": providers,
        "skipped": skipped,
        "metrics_sha256": exposure_sha256(scores),
        "notes": {
            "metrics_sha256": "covers the judge-free, model-free exposure metrics only",
            "accuracy": "option tasks, scored exactly against the current preference; "
            "depends on the agent model",
            "open_tasks": "LLM judge against each test's rubric; reported apart",
            "IQI": "this project's definition: acting on a preference the user never "
            "stated, only implied by details (docs/harness.md)",
        },
    }
