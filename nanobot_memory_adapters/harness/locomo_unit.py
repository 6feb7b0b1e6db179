"""One LoCoMo unit (provider x conversation): record the sessions in order, and at each
test point ask the placed questions read-only, with gate probes and the optional judge."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
    RetrieveResult,
    Trace,
    WriteReceipt,
    supports,
)
from nanobot_memory_adapters.formatting import compose_sections, split_budget
from nanobot_memory_adapters.harness.datasets.locomo import Conversation
from nanobot_memory_adapters.harness.judge import BehaviouralSession, SessionContext
from nanobot_memory_adapters.harness.lme_metrics import lme_fields
from nanobot_memory_adapters.harness.locomo_ingest import LocomoIngest
from nanobot_memory_adapters.harness.locomo_mapping import Persona, personas
from nanobot_memory_adapters.harness.locomo_state import UnitState
from nanobot_memory_adapters.harness.metrics import (
    answer_present,
    context_answer_text,
    normalize_text,
    provenance_counts,
    session_hits,
    turn_hits,
)
from nanobot_memory_adapters.harness.prepared import Prepared
from nanobot_memory_adapters.harness.seeded_ids import SeededIds
from nanobot_memory_adapters.harness.trace_sink import (
    error_text,
    failure_trace,
    note_trace,
    probe_read_only_gate,
    switch_mode,
)
from nanobot_memory_adapters.harness.unit_progress import UnitProgress
from nanobot_memory_adapters.tokens import count_tokens_by_line

if TYPE_CHECKING:
    from nanobot_memory_adapters.harness.bench_config import BenchConfig, Progress

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
        resume: UnitProgress | None = None,
        on_session: Callable[[UnitProgress], None] | None = None,
        ids: SeededIds | None = None,
    ) -> None:
        """``resume``: go on after that session (the store holds what it recorded);
        ``on_session``: told the unit's progress after each finished session (and on
        resuming); ``ids``: the run's seeded ids, re-seeded when the unit resumes."""
        self.p = p
        self.resume = resume
        self.resumes = 0
        self._saved: UnitProgress | None = None
        self.on_session = on_session
        self.ids = ids
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
        self.unit = UnitState(
            provider=p.name,
            conversation=conv.sample_id,
            ingest_mode="bulk" if supports(self.adapter, "bulk_ingest") else "single",
            stored_nothing=0,
        )

    async def run(self) -> dict[str, Any]:
        """The unit's result, as the checkpoint stores it (``UnitState.to_dict``)."""
        started, cpu_started = time.perf_counter(), time.process_time()
        self.sink.base = {
            "provider": self.p.name,
            "unit": f"{self.p.name}/{self.conv.sample_id}",
            "conversation": self.conv.sample_id,
        }
        resume = self.resume
        if resume is not None:
            self._restore(resume)
        self.ingest = LocomoIngest(self.p, self.conv, self.personas, self.unit,
                                   self.dia_of_event)
        await self._set_mode(False, "bench_unit_start")
        if resume is None:
            await self._fresh_scopes()
            done_s = 0.0
        else:
            for persona in self.personas:  # the scopes keep what was recorded: no reset
                await self.adapter.setup_scope(persona.scope)
            done_s = resume.elapsed_s
            self._save(resume.session, done_s, next_started=resume.next_started)
            if self.progress:
                done = sum(1 for s in self.conv.sessions if s.number <= resume.session)
                self.progress.advance(self.p.name, done,
                                      f"{self.conv.sample_id} resumed after s{resume.session}")
        final = self.points[-1] if self.points else None
        try:
            await self._sessions(resume, final, done_s, started)
        finally:
            await self.ingest.end_lookahead()
        self.unit.wall_s = done_s + time.perf_counter() - started
        if resume is None:  # a resumed unit's earlier CPU is not known
            self.unit.cpu_s = round(time.process_time() - cpu_started, 3)
        return self.unit.to_dict()

    async def _sessions(self, resume: UnitProgress | None, final: int | None, done_s: float,
                        started: float) -> None:
        """Each session not recorded yet: its turns, then its test point if it has one."""
        for session in self.conv.sessions:
            if resume is not None and session.number <= resume.session:
                continue
            self._reseed(session.number)
            await self.ingest.look_ahead(session)  # stores nothing: not yet "started"
            if self._saved is not None:  # from here on the store may hold this session
                self._save(self._saved.session, self._saved.elapsed_s, next_started=True)
            for copy, persona in enumerate(self.personas):
                await self.ingest.record_session(session.turns, persona, copy)
            if session.number in self.points:
                await self._test_point(
                    session.number,
                    session.number == final,
                    session.turns[-1].timestamp if session.turns else None,
                )
            self.sink.writer.flush()  # a session's and its test point's lines are on file
            elapsed = done_s + time.perf_counter() - started
            self._save(session.number, elapsed, next_started=False)
            if self.progress:
                self.progress.advance(self.p.name, 1, f"{self.conv.sample_id} s{session.number}")

    def _reseed(self, session: int) -> None:
        """Ids per session (``provider/conversation/sN``), so a resumed unit draws, from
        the session after the one it replays on, the ids an uninterrupted run would. The
        session a crash cut short is replayed under a key of its own (``/replay-N``):
        the cut attempt may have stored turns under ids of ``sN``'s stream."""
        if self.ids is None:
            return
        key = f"{self.p.name}/{self.conv.sample_id}/s{session}"
        if session == self._cut_session():
            key += f"/replay-{self.resumes}"
        self.ids.reseed(key)

    def _cut_session(self) -> int | None:
        """The session a crash cut short (it had begun writing), replayed on resume."""
        resume = self.resume
        if resume is None or not resume.next_started:
            return None
        return min((s.number for s in self.conv.sessions if s.number > resume.session),
                   default=None)

    def _restore(self, resume: UnitProgress) -> None:
        """The measurements of the sessions the unit finished before it was cut; ids
        drawn while resuming (mode switch, scope set-up) come from a stream of this
        resumption's own (``/resume-N``)."""
        done = resume.unit
        self.unit = replace(
            done, resumed_after_sessions=[*(done.resumed_after_sessions or []), resume.session]
        )
        if (cut := self._cut_session()) is not None:  # other ids: contexts may differ
            self.unit.replayed_cut_sessions = [*(done.replayed_cut_sessions or []), cut]
        self.seen_contexts = set(resume.seen_contexts)
        self.dia_of_event = dict(resume.dia_of_event)
        self.resumes = resume.resumes + 1
        if self.ids is not None:
            self.ids.reseed(f"{self.p.name}/{self.conv.sample_id}/resume-{self.resumes}")

    def _save(self, session: int, elapsed_s: float, next_started: bool) -> None:
        """Tell ``on_session`` where the unit stands (after ``session``)."""
        if self.on_session is None:
            return
        self._saved = UnitProgress(
            manifest_sha256="",  # the progress file's owner fills in the run's
            session=session,
            unit=self.unit,
            seen_contexts=sorted(self.seen_contexts),
            dia_of_event=self.dia_of_event,
            trace_bytes=0,  # the trace file's owner fills it in
            elapsed_s=elapsed_s,
            resumes=self.resumes,
            next_started=next_started,
        )
        self.on_session(self._saved)

    async def _fresh_scopes(self) -> None:
        statuses = []
        for persona in self.personas:
            await self.adapter.setup_scope(persona.scope)
            try:  # a fresh scope: nothing from an earlier or interrupted run survives
                statuses.append((await self.adapter.reset_scope(persona.scope)).status)
            except Exception as exc:
                statuses.append("failed")
                self.sink.write(
                    failure_trace(self.p.name, self.adapter, "reset_scope", error_text(exc),
                                   scope=persona.scope.key),
                    kind="reset",
                )
        self.unit.reset_status = "failed" if "failed" in statuses else statuses[0]

    async def _set_mode(self, read_only: bool, reason: str) -> bool:
        ok = await switch_mode(self.adapter, self.sink, self.p.name, read_only, reason)
        if not ok:
            self.unit.mode_failures += 1
        return ok

    # -- test points ---------------------------------------------------------------------
    async def _test_point(self, point: int, is_final: bool, last_ts: Any) -> None:
        if supports(self.adapter, "readiness"):
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
                        failure_trace(
                            self.p.name,
                            self.adapter,
                            "wait_until_ready",
                            error_text(exc),
                            scope=persona.scope.key,
                        ),
                        kind="readiness",
                    )
            self.unit.readiness.append(
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
            query=query, scope=scope, session_id=session_id, budget=budget,
            as_of=getattr(self.conv, "asked_at", None),  # LongMemEval: question_date
        )
        with self.sink.capture() as held:
            try:
                result = await self.adapter.retrieve(request)
                error = None
            except Exception as exc:
                result, error = None, error_text(exc)
        return result, error, held

    async def _retrieve(self, query: str, session_id: str, budget_tokens: int) -> Asked:
        """The question asked of every persona of the unit; one (composed) context."""
        t0 = time.perf_counter()
        whole = ContextBudget(max_tokens=budget_tokens)
        if len(self.personas) == 1:
            result, error, held = await self._retrieve_one(query, session_id, self.scope, whole)
            results = [result] if result is not None else []
            context = result.formatted_context if result is not None else ""
        else:
            budgets = split_budget(
                whole, self.p.name, self._composed_scope,
                [(p.label, p.scope.key) for p in self.personas],
            )
            results, held, errors, parts = [], [], [], []
            for persona, budget in zip(self.personas, budgets, strict=True):
                one, err, got = await self._retrieve_one(query, session_id, persona.scope, budget)
                held += got
                if one is None:
                    errors.append(err or "retrieve failed")
                    continue
                if one.formatted_context and not one.section_lines:
                    errors.append("the provider's retrieve result has no section_lines; a "
                                  "question asked of two people composes their sections "
                                  "from them (RetrieveResult.section_lines)")
                    continue
                results.append(one)
                parts.append((persona.label, one.section_lines))
            error = "; ".join(dict.fromkeys(errors)) if errors else None  # each once
            context, complete = compose_sections(
                self.p.name, self._composed_scope, parts, budget_tokens
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
        """The question at every budget of the run (a fresh native retrieve each; the
        headline budget first), then the gate probe and, at the final point, the judge
        on the headline budget's context."""
        conv = self.conv
        session_id = f"{conv.sample_id}-test-{point}"
        headline = ""
        for budget_tokens in self.cfg.all_budgets:
            context = await self._ask_at(q, point, is_final, gated, session_id, budget_tokens)
            if budget_tokens == self.cfg.budget_tokens:
                headline = context
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
            await self._judge(q, headline)

    async def _ask_at(
        self, q: Any, point: int, is_final: bool, gated: bool, session_id: str,
        budget_tokens: int,
    ) -> str:
        conv = self.conv
        evidence_text = {d: conv.turn(d).text for d in q.evidence}
        if gated:
            asked = await self._retrieve(q.question, session_id, budget_tokens)
        else:  # the read-only gate could not be set: do not test without it
            asked = Asked("", [], [], "set_mode(read_only) failed", 0.0, [])
        context = asked.context
        sha = hashlib.sha256(context.encode("utf-8")).hexdigest()
        tokens = count_tokens_by_line(context)
        norm = normalize_text(context)
        th = turn_hits(evidence_text, norm)
        sh = session_hits(q.evidence_sessions, evidence_text, self.distinctive, norm)
        answer_applicable = q.answer_recall_applicable  # LoCoMo: categories 1-4
        answer_hit = (
            answer_present(q.answer, context_answer_text(context)) if answer_applicable
            else None
        )
        prov = provenance_counts(list(q.evidence), asked.shown_sources, self.dia_of_event)
        first = asked.results[0] if asked.results else None
        trace = (
            first.trace
            if first is not None
            else failure_trace(
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
            "ranked_sources": [it.source_event_ids for r in asked.results for it in r.items],
            **getattr(q, "trace_fields", {}),  # a LongMemEval question's evidence
        }
        if self.cfg.budgets:  # a sweep: which budget this ask was given
            extra["budget_tokens"] = budget_tokens
        if len(asked.results) > 1:
            extra["composed_of"] = [r.trace.trace_id for r in asked.results]
        if sha not in self.seen_contexts:
            extra["context"] = context
            self.seen_contexts.add(sha)
        if asked.error:
            extra["error"] = asked.error
        self.sink.write(trace, **extra)
        self.sink.flush(asked.held, {trace.trace_id})
        self.unit.asks.append(
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
                "budget_violation": tokens > budget_tokens,
                "retrieved_count": sum(r.trace.retrieved_count or 0 for r in asked.results)
                if asked.results else None,
                "latency_ms": asked.latency_ms if asked.results else None,
                "failed": asked.error,
                **({"budget": budget_tokens} if self.cfg.budgets else {}),
                **lme_fields(q, extra, self.dia_of_event),
            }
        )
        return context

    async def _gate_probe(
        self,
        event_id: str,
        session_id: str,
        messages: Sequence[Message],
        last_ts: Any,
        label: str,
        behavioural: bool = False,
        scope: MemoryScope | None = None,
    ) -> WriteReceipt | None:
        """Offer a test-session turn to record_event; only ``skipped_read_only`` is right.
        Counted under ``gate_probes`` (a behavioural session's: ``behavioural_writes``)."""
        scope = scope or self.scope
        event = MemoryEvent(
            event_id=f"locomo-probe-{event_id}"
            + (f"@{scope.persona_id}" if scope != self.scope else ""),
            run_id=scope.run_id,
            user_id=scope.persona_id,
            agent_id=scope.agent_id or "nanobot",
            session_id=session_id,
            turn_id=event_id,
            timestamp=(last_ts + timedelta(hours=1)) if last_ts else epoch(),
            messages=list(messages),
            metadata={"harness": "gate_probe", "about": label},
        )
        if behavioural:
            self.unit.behavioural_writes = (self.unit.behavioural_writes or 0) + 1
        else:
            self.unit.gate_probes += 1
        receipt, gate_held = await probe_read_only_gate(self.adapter, self.sink, event, label)
        if not gate_held:
            self.unit.gate_violations += 1
        return receipt

    async def _judge(self, q: Any, context: str) -> None:
        judge = self.cfg.judge
        assert judge is not None
        try:
            answer = await judge.answerer.answer(getattr(q, "answer_prompt", q.question),
                                                 context)
            gold = getattr(q, "judge_gold", q.gold)  # BEAM: the rubric
            verdict = (await judge.judge.judge(q.question, gold, answer, category=q.category)
                       ).to_dict()
        except Exception as exc:
            answer, verdict = "", {"label": "error", "score": None, "raw": error_text(exc)}
        record = {"qid": q.qid, "category": q.category, "answer": answer, "verdict": verdict}
        self.unit.judged.append(record)
        self.sink.writer.emit(
            note_trace(self.p.name, self.adapter, "judge"),
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
                behavioural=True,
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
            outcome = {"error": error_text(exc)}
        self.unit.behavioural.append({"session": session.name, "point": point, **outcome})


def epoch() -> Any:
    from datetime import UTC, datetime

    return datetime(2000, 1, 1, tzinfo=UTC)


