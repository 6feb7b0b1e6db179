"""The timeline driver: LoCoMo conversations replayed into each provider, tested over time.

For each provider and conversation (a *unit*), in a fresh scope:

1. record the sessions in order, one event per turn (``record_events`` in one call per
   session where the provider declares ``SupportsBulkIngest``);
2. at each test point (default: after every session) wait for readiness (when declared),
   switch the provider read-only (``reason="test_session"``), ask every question whose
   evidence lies at or before that point — the question is the retrieve query and every
   provider gets the same ``ContextBudget`` — then switch back to read-write.

Memory is never reset between test points. While read-only, each question is also offered
to ``record_event`` as the user turn a live agent would record (a *gate probe*): anything
but ``skipped_read_only`` is counted as a gate violation.

Ids are deterministic (``locomo-<sample>-D3-7``), so replays are idempotent and runs
repeatable; turn timestamps come from the session date strings (one second apart).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    ACCEPTED_WRITE_STATUSES,
    AdapterError,
    AdapterMode,
    ContextBudget,
    MemoryAdapter,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
    RetrieveResult,
    SupportsBulkIngest,
    SupportsReadiness,
    Trace,
    WriteReceipt,
)
from nanobot_memory_adapters.formatting import compose_sections, split_budget
from nanobot_memory_adapters.harness import manifest as mf
from nanobot_memory_adapters.harness.checkpoint import open_checkpoint
from nanobot_memory_adapters.harness.datasets.locomo import (
    Conversation,
    EvidenceStats,
    Turn,
    file_sha256,
    load_locomo,
)
from nanobot_memory_adapters.harness.judge import (
    BehaviouralSession,
    JudgeSetup,
    SessionContext,
    verdict_summary,
)
from nanobot_memory_adapters.harness.locomo_mapping import (
    Persona,
    SpeakerProtocol,
    personas,
    turn_event,
)
from nanobot_memory_adapters.harness.locomo_mapping import (
    describe as describe_speakers,
)
from nanobot_memory_adapters.harness.metrics import (
    APPLICABILITY,
    answer_present,
    kendall_tau,
    metrics_sha256,
    normalize_answer,
    normalize_text,
    provenance_counts,
    provider_metrics,
    session_hits,
    turn_hits,
)
from nanobot_memory_adapters.tokens import count_tokens
from nanobot_memory_adapters.tracing import JsonlTraceWriter, new_trace_id

RESULTS_SCHEMA = "nanobot-memory-results/1"
OUTPUT_FILES = ("manifest.json", "traces.jsonl", "results.json", "report.html", "checkpoint.json")


# -- configuration -----------------------------------------------------------------------


@dataclass
class BenchConfig:
    dataset: Path
    out: Path
    providers: list[str]
    conversations: list[str] | None = None
    budget_tokens: int = 2000
    test_points: str = "every"
    run_id: str = "locomo"
    agent_id: str = "nanobot"
    seed: int = 0
    readiness_timeout_s: float = 120.0
    provider_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    gate_probe: bool = True
    fresh: bool = False
    deterministic_ids: bool = True
    judge: JudgeSetup | None = None
    sessions: list[BehaviouralSession] = field(default_factory=list)
    speakers: SpeakerProtocol = "single"
    max_sessions: int | None = None  # only each conversation's first N sessions

    @property
    def budget(self) -> ContextBudget:
        return ContextBudget(max_tokens=self.budget_tokens)


class Progress(Protocol):
    def start(self, provider: str, total: int) -> None: ...
    def advance(self, provider: str, steps: int, note: str) -> None: ...


def resolve_test_points(spec: str, sessions: Sequence[int]) -> list[int]:
    """``every`` | ``last`` | ``every:N`` | ``3,7,19`` (session numbers) -> sorted points."""
    numbers = sorted(sessions)
    if not numbers:
        return []
    spec = (spec or "every").strip().lower()
    if spec == "every":
        return numbers
    if spec == "last":
        return [numbers[-1]]
    if spec.startswith("every:"):
        step = int(spec.split(":", 1)[1])
        if step < 1:
            raise ValueError("test points every:N needs N >= 1")
        points = numbers[step - 1 :: step]
        return sorted({*points, numbers[-1]})
    try:
        wanted = {int(x) for x in spec.split(",") if x.strip()}
    except ValueError:
        raise ValueError(
            f"test points {spec!r}: use every, last, every:N or session numbers like 3,7,19"
        ) from None
    points = sorted(wanted & set(numbers))
    if not points:
        raise ValueError(f"test points {spec!r} name no session of {numbers}")
    return points


# -- repeatable ids -------------------------------------------------------------------------


class SeededIds:
    """Seeds ``uuid.uuid4`` while a bench runs, re-seeded per unit.

    Some backends name what they store with ``uuid4`` (mem0 does) and show that id in the
    formatted context, as DESIGN §6 asks. A uuid costs 20 to 33 tokens, so random ids
    change how much fits in the budget and the same command would not give the same
    metrics. Per-unit seeds keep a resumed run identical to an uninterrupted one. Ids stay
    unique within a run; turn it off (``deterministic_ids=False``) for a shared server
    that must never see an id twice.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._real: Any = None

    def reseed(self, key: str) -> None:
        self._rng.seed(f"{self.seed}:{key}")

    def _uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)

    def __enter__(self) -> SeededIds:
        self._real, uuid.uuid4 = uuid.uuid4, self._uuid4
        return self

    def __exit__(self, *exc: object) -> None:
        uuid.uuid4 = self._real


# -- traces ------------------------------------------------------------------------------


class AnnotatingSink:
    """The providers' trace sink: adds the unit's labels, holds traces during a driver call
    so the driver can write the primary one (a receipt's or a result's) with annotations."""

    def __init__(self, writer: JsonlTraceWriter) -> None:
        self.writer = writer
        self.base: dict[str, Any] = {}
        self._held: list[Trace] | None = None

    def emit(self, trace: Trace, **extra: Any) -> None:
        if self._held is not None:
            self._held.append(trace)
            return
        self.writer.emit(trace, **{**self.base, **extra})

    @contextlib.contextmanager
    def capture(self) -> Iterator[list[Trace]]:
        held: list[Trace] = []
        self._held = held
        try:
            yield held
        finally:
            self._held = None

    def write(self, trace: Trace, **extra: Any) -> None:
        self.writer.emit(trace, **{**self.base, **extra})

    def flush(self, held: list[Trace], written: set[str]) -> None:
        for trace in held:
            if trace.trace_id not in written:
                self.writer.emit(trace, **self.base)


def _failure_trace(
    name: str,
    adapter: MemoryAdapter,
    operation: str,
    error: str,
    event_id: str | None = None,
    scope: str | None = None,
) -> Trace:
    return Trace(
        trace_id=new_trace_id(),
        backend_name=name,
        condition_kind=adapter.info.condition_kind,
        operation=operation,
        scope=scope,
        event_id=event_id,
        status="failed",
        warnings=[error[:1000]],
    )


def _error(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, AdapterError) else f"{type(exc).__name__}: {exc}"


# -- providers ---------------------------------------------------------------------------


@dataclass
class Prepared:
    name: str
    kind: str
    block: dict[str, Any]
    adapter: MemoryAdapter
    sink: AnnotatingSink


async def prepare_provider(
    name: str, cfg: BenchConfig, writer: JsonlTraceWriter, *, label: str | None = None,
    block: dict[str, Any] | None = None,
) -> tuple[Prepared | None, str | None]:
    """Build one provider, or say why it is skipped (needs an LLM, missing extra, down).

    ``label`` names a variant of the provider (an experiment group) with a store of its
    own; ``block`` overrides the provider's block from ``cfg.provider_configs``."""
    from nanobot_memory_adapters.registry import load_provider

    block = block if block is not None else cfg.provider_configs.get(name)
    source = mf.provider_source(name, block)
    sink = AnnotatingSink(writer)
    store = (label or name).replace("+", "_")
    try:
        _, kind, native_block = mf.native_config(source)
        adapter = load_provider(source, data_dir=cfg.out / "stores" / store, trace_sink=sink)
    except ConfigError as exc:
        return None, f"config: {exc}"
    except ImportError as exc:
        return None, f"not installed: {exc}"
    except Exception as exc:  # a provider that cannot even be built is skipped, not fatal
        return None, f"could not be built: {_error(exc)[:300]}"
    if adapter.info.requires_llm and not block:
        await adapter.aclose()
        return None, (
            "needs an LLM (ProviderInfo.requires_llm); configure one in its block "
            "via --provider-config to include it"
        )
    if adapter.info.name != name:
        await adapter.aclose()
        return None, (
            f"runs as '{adapter.info.name}' with this config (e.g. no LLM configured); "
            f"benchmark '{adapter.info.name}' under its own name or configure {name} fully"
        )
    try:
        health = await adapter.health()
    except Exception as exc:  # health must report, not raise; a third party may not
        await adapter.aclose()
        return None, f"health() raised: {_error(exc)[:300]}"
    if health.status == "unavailable":
        await adapter.aclose()
        return None, f"unavailable: {json.dumps(health.details, default=str)[:300]}"
    return Prepared(label or name, kind, native_block, adapter, sink), None


# -- one unit: provider x conversation ------------------------------------------------------


def unit_scope(cfg: BenchConfig, conv: Conversation) -> MemoryScope:
    """The first (in single mode the only) scope a conversation is recorded into."""
    return personas(conv, cfg.speakers, cfg.run_id, cfg.agent_id)[0].scope


@dataclass
class Asked:
    """What one question got from a provider: the (composed) context and its sources."""

    context: str
    shown_sources: list[list[str] | None]
    results: list[RetrieveResult]
    error: str | None
    latency_ms: float
    held: list[Trace]


class UnitRunner:
    def __init__(
        self,
        p: Prepared,
        conv: Conversation,
        points: list[int],
        cfg: BenchConfig,
        progress: Progress | None,
    ) -> None:
        self.p = p
        self.adapter = p.adapter
        self.sink = p.sink
        self.conv = conv
        self.points = points
        self.cfg = cfg
        self.progress = progress
        self.personas: list[Persona] = personas(conv, cfg.speakers, cfg.run_id, cfg.agent_id)
        self.scope = self.personas[0].scope
        self.seen_contexts: set[str] = set()
        self.distinctive: dict[int, list[str]] = {
            s.number: [t.text for t in s.turns if t.distinctive] for s in conv.sessions
        }
        self.dia_of_event: dict[str, str] = {}
        self.unit: dict[str, Any] = {
            "provider": p.name,
            "conversation": conv.sample_id,
            "events": 0,
            "ingest_mode": "bulk" if isinstance(self.adapter, SupportsBulkIngest) else "single",
            "record_failures": 0,
            "record_latency_ms": [],
            "record_latency_per_event_ms": [],
            "ingest_s": 0.0,
            "readiness": [],
            "mode_failures": 0,
            "gate_violations": 0,
            "gate_probes": 0,
            "asks": [],
            "judged": [],
            "behavioural": [],
            "reset_status": None,
        }

    async def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        self.sink.base = {
            "provider": self.p.name,
            "unit": f"{self.p.name}/{self.conv.sample_id}",
            "conversation": self.conv.sample_id,
        }
        await self._set_mode(False, "bench_unit_start")
        statuses = []
        for persona in self.personas:
            await self.adapter.setup_scope(persona.scope)
            try:  # a fresh scope: nothing from an earlier or interrupted run survives
                statuses.append((await self.adapter.reset_scope(persona.scope)).status)
            except Exception as exc:
                statuses.append("failed")
                self.sink.write(
                    _failure_trace(self.p.name, self.adapter, "reset_scope", _error(exc),
                                   scope=persona.scope.key),
                    kind="reset",
                )
        self.unit["reset_status"] = "failed" if "failed" in statuses else statuses[0]
        final = self.points[-1] if self.points else None
        for session in self.conv.sessions:
            for copy, persona in enumerate(self.personas):
                await self._record_session(session.turns, persona, copy)
            if session.number in self.points:
                await self._test_point(
                    session.number,
                    session.number == final,
                    session.turns[-1].timestamp if session.turns else None,
                )
            if self.progress:
                self.progress.advance(self.p.name, 1, f"{self.conv.sample_id} s{session.number}")
        self.unit["wall_s"] = time.perf_counter() - started
        return self.unit

    async def _set_mode(self, read_only: bool, reason: str) -> bool:
        try:
            with self.sink.capture() as held:
                receipt = await self.adapter.set_mode(
                    AdapterMode(read_only=read_only, reason=reason)
                )
            written = set()
            if receipt.trace is not None:
                self.sink.write(receipt.trace, kind="mode", reason=reason)
                written.add(receipt.trace.trace_id)
            self.sink.flush(held, written)
            return True
        except Exception as exc:
            self.unit["mode_failures"] += 1
            self.sink.write(
                _failure_trace(self.p.name, self.adapter, "set_mode", _error(exc)),
                kind="mode",
                reason=reason,
            )
            return False

    # -- ingest ------------------------------------------------------------------------
    def _record_line(
        self, trace: Trace, turn: Turn, event: MemoryEvent, status: str, copy: int
    ) -> None:
        self.dia_of_event[event.event_id] = turn.dia_id
        self.sink.write(
            trace,
            kind="record",
            phase="ingest",
            session=turn.session,
            dia_id=turn.dia_id,
            event_id=event.event_id,
            persona=event.user_id,
            speaker_copy=copy,
            text=turn.text,
            distinctive=turn.distinctive,
            status=status,
        )

    async def _record_session(self, turns: Sequence[Turn], persona: Persona, copy: int) -> None:
        if not turns:
            return
        events = [turn_event(self.conv, t, persona.scope, persona.speaker) for t in turns]
        started = time.perf_counter()
        if isinstance(self.adapter, SupportsBulkIngest):
            receipts: list[WriteReceipt | BaseException] = []
            t0 = time.perf_counter()
            with self.sink.capture() as held:
                try:
                    receipts = list(await self.adapter.record_events(events))
                except Exception as exc:
                    receipts = [exc] * len(events)
            ms = (time.perf_counter() - t0) * 1000
            if len(receipts) != len(events):
                receipts = [
                    RuntimeError(
                        f"record_events returned {len(receipts)} receipts for {len(events)} events"
                    )
                ] * len(events)
            self.unit["record_latency_ms"].append(ms)
            self.unit["record_latency_per_event_ms"].append(ms / len(events))
            written = self._receipt_lines(turns, events, receipts, copy)
            self.sink.flush(held, written)
        else:
            for turn, ev in zip(turns, events, strict=True):
                t0 = time.perf_counter()
                with self.sink.capture() as held:
                    try:
                        receipt: WriteReceipt | BaseException = await self.adapter.record_event(ev)
                    except Exception as exc:
                        receipt = exc
                ms = (time.perf_counter() - t0) * 1000
                self.unit["record_latency_ms"].append(ms)
                self.unit["record_latency_per_event_ms"].append(ms)
                written = self._receipt_lines([turn], [ev], [receipt], copy)
                self.sink.flush(held, written)
        self.unit["events"] += len(events)
        self.unit["ingest_s"] += time.perf_counter() - started

    def _receipt_lines(
        self,
        turns: Sequence[Turn],
        events: Sequence[MemoryEvent],
        receipts: Sequence[WriteReceipt | BaseException],
        copy: int,
    ) -> set[str]:
        written: set[str] = set()
        for turn, ev, receipt in zip(turns, events, receipts, strict=True):
            if isinstance(receipt, BaseException):
                self.unit["record_failures"] += 1
                trace = _failure_trace(
                    self.p.name,
                    self.adapter,
                    "record_event",
                    _error(receipt),
                    ev.event_id,
                    ev.scope().key,
                )
                self._record_line(trace, turn, ev, "failed", copy)
                continue
            if receipt.status not in ACCEPTED_WRITE_STATUSES:
                self.unit["record_failures"] += 1
            self._record_line(receipt.trace, turn, ev, receipt.status, copy)
            written.add(receipt.trace.trace_id)
        return written

    # -- test points ---------------------------------------------------------------------
    async def _test_point(self, point: int, is_final: bool, last_ts: Any) -> None:
        if isinstance(self.adapter, SupportsReadiness):
            t0 = time.perf_counter()
            status = "ready"
            for persona in self.personas:
                try:
                    state = await self.adapter.wait_until_ready(
                        persona.scope, self.cfg.readiness_timeout_s
                    )
                    if state.status != "ready":
                        status = state.status
                except Exception as exc:
                    status = "pending"
                    self.sink.write(
                        _failure_trace(
                            self.p.name,
                            self.adapter,
                            "wait_until_ready",
                            _error(exc),
                            scope=persona.scope.key,
                        ),
                        kind="readiness",
                    )
            self.unit["readiness"].append(
                {"point": point, "status": status, "waited_s": time.perf_counter() - t0}
            )
        questions = [q for q in self.conv.questions if q.ready_after <= point]
        gated = await self._set_mode(True, "test_session")
        try:
            for q in questions:
                await self._ask(q, point, is_final, gated, last_ts)
            for session in self.cfg.sessions:
                await self._behavioural(session, point, last_ts)
        finally:
            await self._set_mode(False, "test_session_end")

    async def _retrieve_one(
        self, query: str, session_id: str, scope: MemoryScope, budget: ContextBudget
    ) -> tuple[RetrieveResult | None, str | None, list[Trace]]:
        request = RetrieveRequest(
            query=query, scope=scope, session_id=session_id, budget=budget
        )
        with self.sink.capture() as held:
            try:
                result = await self.adapter.retrieve(request)
                error = None
            except Exception as exc:
                result, error = None, _error(exc)
        return result, error, held

    async def _retrieve(self, query: str, session_id: str) -> Asked:
        """The question asked of every persona of the unit; one (composed) context."""
        t0 = time.perf_counter()
        if len(self.personas) == 1:
            result, error, held = await self._retrieve_one(
                query, session_id, self.scope, self.cfg.budget
            )
            results = [result] if result is not None else []
            context = result.formatted_context if result is not None else ""
        else:
            budgets = split_budget(
                self.cfg.budget, self.p.name, self._composed_scope,
                [(p.label, p.scope.key) for p in self.personas],
            )
            results, held, errors, parts = [], [], [], []
            for persona, budget in zip(self.personas, budgets, strict=True):
                one, err, got = await self._retrieve_one(query, session_id, persona.scope, budget)
                held += got
                if one is None:
                    errors.append(err or "retrieve failed")
                    continue
                results.append(one)
                parts.append((persona.label, one.formatted_context))
            error = "; ".join(errors) if errors else None
            context, complete = compose_sections(
                self.p.name, self._composed_scope, parts, self.cfg.budget_tokens
            )
            if errors:
                context, results = "", []
            elif not complete:  # never expected (split_budget's shares fit): be strict
                results = []
                error = "composed context overflowed the budget"
        ms = (time.perf_counter() - t0) * 1000
        sources = [r.items[i].source_event_ids for r in results for i in r.shown]
        return Asked(context, sources, results, error, ms, held)

    @property
    def _composed_scope(self) -> str:
        return MemoryScope(run_id=self.cfg.run_id, persona_id=self.conv.sample_id).key

    async def _ask(self, q: Any, point: int, is_final: bool, gated: bool, last_ts: Any) -> None:
        conv = self.conv
        evidence_text = {d: conv.turn(d).text for d in q.evidence}
        session_id = f"{conv.sample_id}-test-{point}"
        if gated:
            asked = await self._retrieve(q.question, session_id)
        else:  # the read-only gate could not be set: do not test without it
            asked = Asked("", [], [], "set_mode(read_only) failed", 0.0, [])
        context = asked.context
        sha = hashlib.sha256(context.encode("utf-8")).hexdigest()
        tokens = count_tokens(context)
        norm = normalize_text(context)
        th = turn_hits(evidence_text, norm)
        sh = session_hits(q.evidence_sessions, evidence_text, self.distinctive, norm)
        answer_applicable = 1 <= int(q.category) <= 4 and q.answer is not None
        answer_hit = (
            answer_present(q.answer, normalize_answer(context)) if answer_applicable else None
        )
        prov = provenance_counts(list(q.evidence), asked.shown_sources, self.dia_of_event)
        first = asked.results[0] if asked.results else None
        trace = (
            first.trace
            if first is not None
            else _failure_trace(
                self.p.name, self.adapter, "retrieve", asked.error or "", scope=self.scope.key
            )
        )
        extra: dict[str, Any] = {
            "kind": "ask",
            "phase": "test",
            "point": point,
            "question_id": q.qid,
            "category": q.category,
            "question": q.question,
            "evidence": list(q.evidence),
            "evidence_text": evidence_text,
            "gold": q.answer,
            "answer_applicable": answer_applicable,
            "shown_sources": asked.shown_sources,
            "context_sha256": sha,
            "context_tokens": tokens,
        }
        if len(asked.results) > 1:
            extra["composed_of"] = [r.trace.trace_id for r in asked.results]
        if sha not in self.seen_contexts:
            extra["context"] = context
            self.seen_contexts.add(sha)
        if asked.error:
            extra["error"] = asked.error
        self.sink.write(trace, **extra)
        self.sink.flush(asked.held, {trace.trace_id})
        self.unit["asks"].append(
            {
                "qid": q.qid,
                "point": point,
                "is_final": is_final,
                "category": q.category,
                "n_evidence": len(q.evidence),
                "turn_hits": th,
                "n_sessions": len(q.evidence_sessions),
                "session_hits": sh,
                "turn_recall": th / len(q.evidence),
                "session_recall": sh / len(q.evidence_sessions),
                "answer_hit": answer_hit,
                **prov,
                "tokens": tokens,
                "budget_violation": tokens > self.cfg.budget_tokens,
                "retrieved_count": sum(r.trace.retrieved_count or 0 for r in asked.results)
                if asked.results else None,
                "latency_ms": asked.latency_ms if asked.results else None,
                "failed": asked.error,
            }
        )
        if gated and self.cfg.gate_probe:
            for persona in self.personas:
                await self._gate_probe(
                    f"{conv.sample_id}-p{point}-q{q.index}",
                    session_id,
                    [Message(role="user", content=q.question)],
                    last_ts,
                    q.qid,
                    scope=persona.scope,
                )
        if is_final and self.cfg.judge is not None:
            await self._judge(q, context)

    async def _gate_probe(
        self,
        event_id: str,
        session_id: str,
        messages: Sequence[Message],
        last_ts: Any,
        label: str,
        counter: str = "gate_probes",
        scope: MemoryScope | None = None,
    ) -> WriteReceipt | None:
        """Offer a test-session turn to record_event; only ``skipped_read_only`` is right."""
        scope = scope or self.scope
        event = MemoryEvent(
            event_id=f"locomo-probe-{event_id}"
            + (f"@{scope.persona_id}" if scope != self.scope else ""),
            run_id=scope.run_id,
            user_id=scope.persona_id,
            agent_id=scope.agent_id or "nanobot",
            session_id=session_id,
            turn_id=event_id,
            timestamp=(last_ts + timedelta(hours=1)) if last_ts else _epoch(),
            messages=list(messages),
            metadata={"harness": "gate_probe", "about": label},
        )
        self.unit[counter] = self.unit.get(counter, 0) + 1
        with self.sink.capture() as held:
            try:
                receipt: WriteReceipt | None = await self.adapter.record_event(event)
                status = receipt.status if receipt else "none"
            except Exception as exc:
                receipt, status = None, f"failed: {_error(exc)}"
        if status != "skipped_read_only":
            self.unit["gate_violations"] += 1
        if receipt is not None:
            self.sink.write(receipt.trace, kind="gate_probe", about=label, status=status)
            self.sink.flush(held, {receipt.trace.trace_id})
        else:
            self.sink.flush(held, set())
        return receipt

    async def _judge(self, q: Any, context: str) -> None:
        judge = self.cfg.judge
        assert judge is not None
        try:
            answer = await judge.answerer.answer(q.question, context)
            verdict = (
                await judge.judge.judge(q.question, q.gold, answer, category=q.category)
            ).to_dict()
        except Exception as exc:
            answer, verdict = "", {"label": "error", "score": None, "raw": _error(exc)}
        record = {"qid": q.qid, "category": q.category, "answer": answer, "verdict": verdict}
        self.unit["judged"].append(record)
        self.sink.writer.emit(
            _note_trace(self.p.name, self.adapter, "judge"),
            **self.sink.base,
            kind="judge",
            question_id=q.qid,
            gold=q.gold,
            **record,
        )

    async def _behavioural(self, session: BehaviouralSession, point: int, last_ts: Any) -> None:
        turn_no = 0

        async def retrieve(query: str) -> RetrieveResult:
            result, error, held = await self._retrieve_one(
                query, f"{self.conv.sample_id}-{session.name}-{point}", self.scope,
                self.cfg.budget,
            )
            if result is None:
                raise RuntimeError(error)
            self.sink.write(
                result.trace, kind="behavioural_retrieve", session=session.name, point=point
            )
            self.sink.flush(held, {result.trace.trace_id})
            return result

        async def record(messages: Sequence[Message]) -> WriteReceipt:
            nonlocal turn_no
            turn_no += 1
            receipt = await self._gate_probe(
                f"{self.conv.sample_id}-p{point}-{session.name}-{turn_no}",
                f"{self.conv.sample_id}-{session.name}-{point}",
                messages,
                last_ts,
                session.name,
                counter="behavioural_writes",
            )
            if receipt is None:
                raise RuntimeError("record_event failed during a behavioural session")
            return receipt

        ctx = SessionContext(
            self.p.name, self.conv.sample_id, point, self.cfg.budget, retrieve, record
        )
        try:
            outcome = await session.run(ctx)
        except Exception as exc:
            outcome = {"error": _error(exc)}
        self.unit["behavioural"].append({"session": session.name, "point": point, **outcome})


def _note_trace(name: str, adapter: MemoryAdapter, operation: str) -> Trace:
    return Trace(
        trace_id=new_trace_id(),
        backend_name=name,
        condition_kind=adapter.info.condition_kind,
        operation=operation,
    )


def _epoch() -> Any:
    from datetime import UTC, datetime

    return datetime(2000, 1, 1, tzinfo=UTC)


# -- the run -----------------------------------------------------------------------------


@dataclass
class BenchOutcome:
    out: Path
    manifest: dict[str, Any]
    results: dict[str, Any]
    skipped: list[dict[str, str]]
    resumed_units: int = 0
    wall_s: float = 0.0

    @property
    def paths(self) -> dict[str, Path]:
        return {name: self.out / name for name in OUTPUT_FILES}


def clear_outputs(out: Path) -> None:
    """Remove what a bench run writes into ``out`` (and nothing else)."""
    for name in OUTPUT_FILES:
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "stores", ignore_errors=True)


def build_manifest(
    cfg: BenchConfig,
    convs: list[Conversation],
    points: dict[str, list[int]],
    prepared: list[Prepared],
    skipped: list[dict[str, str]],
    evidence: EvidenceStats,
) -> dict[str, Any]:
    example = (
        unit_scope(cfg, convs[0]) if convs else MemoryScope(run_id=cfg.run_id, persona_id="none")
    )
    return {
        "kind": "bench",
        "dataset": {
            "format": "locomo",
            "file": cfg.dataset.name,
            "sha256": file_sha256(cfg.dataset),
            "conversations": [c.sample_id for c in convs],
            "sessions": {c.sample_id: len(c.sessions) for c in convs},
            "turns": sum(len(c.turns) for c in convs),
            "questions_placed": sum(len(c.questions) for c in convs),
            "evidence_parsing": evidence.to_dict(),
        },
        "settings": {
            "budget": cfg.budget.model_dump(),
            "test_points": cfg.test_points,
            "test_points_resolved": points,
            "ask_rule": "at each test point, every question whose evidence lies at or before it",
            "run_id": cfg.run_id,
            "agent_id": cfg.agent_id,
            "persona_id": "<sample_id>",
            "speakers": cfg.speakers,
            "max_sessions": cfg.max_sessions,
            "turn_event": "one event per turn; " + describe_speakers(cfg.speakers)
            + "; image turns append '[shares a photo: caption]'",
            "gate_probe": cfg.gate_probe,
            "deterministic_ids": cfg.deterministic_ids,
            "readiness_timeout_s": cfg.readiness_timeout_s,
        },
        "seed": cfg.seed,
        "providers": [
            mf.provider_entry(p.name, p.kind, p.block, p.adapter, example) for p in prepared
        ],
        "skipped": skipped,
        "judge": cfg.judge.description if cfg.judge else None,
        "behavioural_sessions": [s.describe() for s in cfg.sessions],
        "paths": {"out": str(cfg.out), "dataset": str(cfg.dataset)},
    }


async def run_bench(cfg: BenchConfig, progress: Progress | None = None) -> BenchOutcome:
    """Run (or resume) a bench; see the module docstring."""
    ids = SeededIds(cfg.seed) if cfg.deterministic_ids else None
    with ids or contextlib.nullcontext():
        return await _run_bench(cfg, progress, ids)


async def _run_bench(
    cfg: BenchConfig, progress: Progress | None, ids: SeededIds | None
) -> BenchOutcome:
    random.seed(cfg.seed)
    cfg.out.mkdir(parents=True, exist_ok=True)
    if cfg.fresh:
        clear_outputs(cfg.out)
    convs = load_locomo(cfg.dataset, cfg.conversations)
    if not convs:
        raise ValueError(f"{cfg.dataset} holds no conversations")
    if cfg.max_sessions is not None:
        convs = [c.first_sessions(cfg.max_sessions) for c in convs]
    points = {
        c.sample_id: resolve_test_points(cfg.test_points, [s.number for s in c.sessions])
        for c in convs
    }
    evidence = EvidenceStats()
    for c in convs:
        evidence.add(c.evidence_stats)

    traces_path = cfg.out / "traces.jsonl"
    writer = JsonlTraceWriter(traces_path)
    prepared: list[Prepared] = []
    skipped: list[dict[str, str]] = []
    try:
        for name in cfg.providers:
            p, reason = await prepare_provider(name, cfg, writer)
            if p is None:
                skipped.append({"name": name, "reason": reason or "unknown"})
            else:
                prepared.append(p)
        manifest = mf.finalize(build_manifest(cfg, convs, points, prepared, skipped, evidence))
        cp = open_checkpoint(cfg.out, manifest["manifest_sha256"], traces_path)
        mf.write_manifest(manifest, cfg.out / "manifest.json")

        resumed = 0
        for p in prepared:
            if progress:
                progress.start(p.name, sum(len(c.sessions) for c in convs))
            for conv in convs:
                if cp.done(p.name, conv.sample_id) is not None:
                    resumed += 1
                    if progress:
                        progress.advance(
                            p.name, len(conv.sessions), f"{conv.sample_id} (checkpoint)"
                        )
                    continue
                if ids is not None:
                    ids.reseed(f"{p.name}/{conv.sample_id}")
                unit = await UnitRunner(p, conv, points[conv.sample_id], cfg, progress).run()
                cp.save_unit(unit, traces_path.stat().st_size if traces_path.exists() else 0)

        results = build_results(cfg, manifest, prepared, skipped, evidence, cp.units)
        (cfg.out / "results.json").write_text(
            json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        from nanobot_memory_adapters.harness.report import write_report

        names = {p.name for p in prepared}
        write_report(
            cfg.out / "report.html",
            manifest,
            results,
            [u for u in cp.units.values() if u["provider"] in names],
        )
        cp.complete = True
        cp.save()
        return BenchOutcome(cfg.out, manifest, results, skipped, resumed)
    finally:
        for p in prepared:
            with contextlib.suppress(Exception):
                await p.adapter.aclose()
        if cfg.judge is not None:
            with contextlib.suppress(Exception):
                await cfg.judge.aclose()


def judge_agreement(
    providers: dict[str, Any], judged: dict[str, Any], units: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """How each judge-free metric ranks the providers against the judge's accuracy
    (Kendall's tau-b over providers, final point, categories 1-4), and per question how
    often "the metric saw some evidence" agrees with "the judge said correct"."""
    names = [n for n in providers if (judged.get(n) or {}).get("overall", {}).get("accuracy")
             is not None]
    out: dict[str, Any] = {"providers": names, "rank_tau": {}, "per_question": {}}
    accuracy = [judged[n]["overall"]["accuracy"] for n in names]
    for metric in ("turn", "session", "provenance", "answer"):
        values = [providers[n]["final_point"]["categories_1_4"].get(metric) for n in names]
        pairs = [(v, a) for v, a in zip(values, accuracy, strict=True) if v is not None]
        out["rank_tau"][metric] = kendall_tau([v for v, _ in pairs], [a for _, a in pairs]) \
            if len(pairs) >= 2 else None
    field_of = {"turn": "turn_hits", "session": "session_hits", "provenance": "prov_hits",
                "answer": "answer_hit"}
    for metric, key in field_of.items():
        agree = total = 0
        for unit in units.values():
            if unit["provider"] not in names:
                continue
            final = {a["qid"]: a for a in unit["asks"] if a.get("is_final")}
            for j in unit["judged"]:
                ask = final.get(j["qid"])
                score = j["verdict"].get("score")
                if ask is None or score is None or not 1 <= int(j["category"]) <= 4:
                    continue
                seen = ask.get(key)
                if seen is None:
                    continue
                total += 1
                agree += (bool(seen) == (score >= 1.0))
        out["per_question"][metric] = {"agree": round(agree / total, 6) if total else None,
                                       "n": total}
    return out


def build_results(
    cfg: BenchConfig,
    manifest: dict[str, Any],
    prepared: list[Prepared],
    skipped: list[dict[str, str]],
    evidence: EvidenceStats,
    units: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    providers: dict[str, Any] = {}
    judged: dict[str, Any] = {}
    behavioural: dict[str, Any] = {}
    for p in prepared:
        mine = [u for u in units.values() if u["provider"] == p.name]
        order = {c: i for i, c in enumerate(manifest["dataset"]["conversations"])}
        mine.sort(key=lambda u: order.get(u["conversation"], 0))
        m = provider_metrics(p.name, mine, cfg.budget_tokens)
        m["kind"] = p.kind
        m["condition_kind"] = p.adapter.info.condition_kind
        m["memory_form"] = p.adapter.info.memory_form
        m["metrics_apply"] = APPLICABILITY[p.adapter.info.memory_form]
        providers[p.name] = m
        verdicts = [j for u in mine for j in u["judged"]]
        if verdicts:
            by_cat: dict[str, list[dict[str, Any]]] = {}
            for j in verdicts:
                by_cat.setdefault(str(j["category"]), []).append(j["verdict"])
            judged[p.name] = {
                "overall": verdict_summary([j["verdict"] for j in verdicts]),
                "by_category": {c: verdict_summary(v) for c, v in sorted(by_cat.items())},
            }
        sessions = [b for u in mine for b in u["behavioural"]]
        if sessions:
            behavioural[p.name] = sessions
    results: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        "manifest_sha256": manifest["manifest_sha256"],
        "budget_tokens": cfg.budget_tokens,
        "providers": providers,
        "skipped": skipped,
        "evidence_parsing": evidence.to_dict(),
        "metrics_sha256": metrics_sha256(providers),
        "notes": {
            "recall": "mean over asks (question x test point); final_point = last test point",
            "timing": "everything under 'timing' is excluded from metrics_sha256",
        },
    }
    if cfg.judge is not None:
        results["judged"] = {
            "note": "LLM answer + LLM judge at each conversation's final test point; "
            "separate from the judge-free metrics and not in metrics_sha256",
            "judge": cfg.judge.description,
            "providers": judged,
            "agreement": judge_agreement(providers, judged, units),
        }
    if cfg.sessions:
        results["behavioural"] = behavioural
    return results
