"""What every adapter shares: the read-only gate, timing, traces and error wrapping.

Subclasses implement only the native parts (``_record``, ``_retrieve``, ``_reset``,
``_health``); everything that must behave the same for every provider lives here once.
Third-party adapters may use it, but the contract is the Protocol in ``contract.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from nanobot_memory_adapters.contract import (
    CAPABILITIES,
    AdapterError,
    AdapterMode,
    BackendHealth,
    ContextBudget,
    FeedbackRequest,
    MemoryEvent,
    MemoryScope,
    ModeReceipt,
    ProviderInfo,
    Readiness,
    ResetReceipt,
    RetrievedItem,
    RetrieveRequest,
    RetrieveResult,
    Trace,
    WriteReceipt,
    WriteStatus,
    capabilities_of,
    has_methods,
)
from nanobot_memory_adapters.diagnostics import native_diagnostics
from nanobot_memory_adapters.formatting import RenderedContext, render_context
from nanobot_memory_adapters.redaction import redact_text
from nanobot_memory_adapters.tracing import TraceSink, new_trace_id, redact

T = TypeVar("T")


@dataclass
class NativeRetrieval:
    """What a backend returned, before formatting."""

    items: list[RetrievedItem]
    raw: Any
    native_operation: str
    native_request: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    representation_version: str | None = None
    last_derived_at: datetime | None = None


@dataclass
class NativeWrite:
    status: WriteStatus
    native_ids: list[str]
    native_operation: str
    native_request: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # A bulk hook that wrote this event in a call of its own sets that call's latency.
    latency_ms: float | None = None
    # the backend processed the event and kept nothing new from it (``WriteReceipt``)
    stored_nothing: bool = False


@dataclass
class NativeHealth:
    status: Literal["ok", "degraded", "unavailable"]
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


async def poll_readiness(
    check: Callable[[], Awaitable[Readiness]], *, timeout_s: float, interval_s: float
) -> Readiness:
    """``wait_until_ready`` for backends with a readiness probe: call ``check`` every
    ``interval_s`` until it stops answering ``pending`` (``ready`` and ``unknown`` are
    final) or ``timeout_s`` has passed. On timeout the last answer is returned as it is,
    ``pending`` with "timed out after ..." in its detail, never a false green.
    ``waited_ms`` is the whole wait. A backend whose queue can look empty right after a
    write must say ``pending`` in ``check`` itself (Honcho's settle window), so that a
    single ``readiness`` call is never a false green either."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        state = await check()
        now = time.monotonic()
        if state.status != "pending" or now >= deadline:
            update: dict[str, Any] = {"waited_ms": (now - started) * 1000}
            if state.status == "pending":
                update["detail"] = f"timed out after {timeout_s}s" + (
                    f": {state.detail}" if state.detail else ""
                )
            return state.model_copy(update=update)
        await asyncio.sleep(min(interval_s, deadline - now))


class BaseAdapter:
    """Implements the contract's shared behaviour; subclasses supply the native calls."""

    info: ProviderInfo

    def __init__(self, *, info: ProviderInfo, trace_sink: TraceSink | None = None) -> None:
        if info.capabilities is None:  # one spelling: declared data (read off the methods)
            info = info.model_copy(update={"capabilities": tuple(
                c for c in CAPABILITIES if has_methods(self, c))})
        self.info = info
        self.backend_name = info.name
        self.trace_sink = trace_sink
        self._mode = AdapterMode(read_only=False, reason="default")
        # Failed writes since start: health shows them (degraded while the latest failed).
        self.failed_write_count = 0
        self.last_failed_write: tuple[float, str] | None = None
        self.last_write_failed = False

    def _note_write(self, error: AdapterError | None) -> None:
        if error is None:
            self.last_write_failed = False
            return
        self.failed_write_count += 1
        self.last_failed_write = (time.time(), error.message[:1000])
        self.last_write_failed = True

    # -- mode ------------------------------------------------------------------------
    @property
    def mode(self) -> AdapterMode:
        return self._mode

    async def set_mode(self, mode: AdapterMode) -> ModeReceipt:
        previous, self._mode = self._mode, mode
        trace = self._trace("set_mode", status="read_only" if mode.read_only else "read_write")
        self._emit(trace)
        return ModeReceipt(mode=mode, previous=previous, trace=trace)

    # -- tracing ---------------------------------------------------------------------
    def _trace(self, operation: str, **fields: Any) -> Trace:
        fields.setdefault("consistency", self.info.consistency_model)
        if "native_request" in fields:
            fields["native_request"] = redact(fields["native_request"])
        return Trace(
            trace_id=new_trace_id(),
            backend_name=self.backend_name,
            condition_kind=self.info.condition_kind,
            operation=operation,
            **fields,
        )

    def _emit(self, trace: Trace) -> None:
        if self.trace_sink is not None:
            self.trace_sink.emit(trace)

    async def _call(
        self, operation: str, fn: Callable[[], Awaitable[T]], *, retryable: bool | None = None
    ) -> T:
        """Run a native call; any failure becomes an AdapterError with raw diagnostics.

        ``retryable`` overrides the classification from the error itself (a backend whose
        every write failure is an extraction failure says ``True``)."""
        try:
            return await fn()
        except AdapterError:
            raise
        except Exception as exc:
            raise self._as_error(exc, operation, retryable) from exc

    def _as_error(self, exc: Exception, operation: str,
                  retryable: bool | None = None) -> AdapterError:
        """A native failure as an AdapterError with raw diagnostics (the one wrapping:
        ``_call`` and a bulk hook's per-event failures use it)."""
        if isinstance(exc, AdapterError):
            return exc
        raw, found = native_diagnostics(exc)
        return AdapterError(
            # redacted before it is cut: a key cut short no longer looks like one
            f"{type(exc).__name__}: {redact_text(str(exc))[:500]}",
            backend_name=self.backend_name,
            operation=operation,
            raw=raw,
            retryable=found if retryable is None else retryable,
        )

    # -- contract --------------------------------------------------------------------
    async def setup_scope(self, scope: MemoryScope) -> None:
        await self._call("setup_scope", lambda: self._setup(scope))

    def _skipped_receipts(
        self, events: Sequence[MemoryEvent], *, operation: str
    ) -> list[WriteReceipt]:
        """The read-only gate's answer: one traced ``skipped_read_only`` receipt per event,
        nothing sent to the backend. ``record_event`` and every ``record_events`` return
        this while ``mode.read_only``; ``operation`` names the traces like the provider's
        committed writes (bulk ingest may trace as ``record_event`` or ``record_events``)."""
        receipts = []
        for event in events:
            trace = self._trace(
                operation,
                scope=event.scope().key,
                event_id=event.event_id,
                status="skipped_read_only",
                latency_ms=0.0,
            )
            self._emit(trace)
            receipts.append(
                WriteReceipt(status="skipped_read_only", event_id=event.event_id, trace=trace)
            )
        return receipts

    async def record_event(self, event: MemoryEvent) -> WriteReceipt:
        if self._mode.read_only:
            return self._skipped_receipts([event], operation="record_event")[0]
        started = time.perf_counter()
        try:
            native = await self._call(
                "record_event", lambda: self._record(event),
                retryable=self.write_failures_retryable,
            )
        except AdapterError as exc:
            self._note_write(exc)
            raise
        self._note_write(None)
        latency = (time.perf_counter() - started) * 1000
        return self._write_receipt(event, native, latency, "record_event")

    # Writes that run the backend's LLM extraction fail mostly because of the model (a
    # timeout, an answer cut at max_tokens): such adapters set this True so every failed
    # write is kept for a retry. None: classify each error by its type.
    write_failures_retryable: bool | None = None

    def _write_receipt(
        self, event: MemoryEvent, native: NativeWrite, latency: float, operation: str
    ) -> WriteReceipt:
        trace = self._trace(
            operation,
            native_operation=native.native_operation,
            native_request=native.native_request,
            scope=event.scope().key,
            event_id=event.event_id,
            native_ids=native.native_ids,
            latency_ms=latency,
            status=native.status,
            warnings=native.warnings,
        )
        self._emit(trace)
        return WriteReceipt(
            status=native.status,
            event_id=event.event_id,
            native_ids=native.native_ids,
            latency_ms=latency,
            stored_nothing=native.stored_nothing,
            trace=trace,
        )

    def _failed_receipt(
        self, event: MemoryEvent, error: AdapterError, latency: float, operation: str
    ) -> WriteReceipt:
        """A bulk write's answer for one event that was not stored."""
        trace = self._trace(
            operation,
            scope=event.scope().key,
            event_id=event.event_id,
            latency_ms=latency,
            status="failed",
            warnings=[error.message[:1000]],
        )
        self._emit(trace)
        return WriteReceipt(
            status="failed", event_id=event.event_id, latency_ms=latency,
            error=error.to_dict(), trace=trace,
        )

    async def retrieve(self, request: RetrieveRequest) -> RetrieveResult:
        started = time.perf_counter()
        native = await self._call("retrieve", lambda: self._retrieve(request))
        latency = (time.perf_counter() - started) * 1000
        rendered = self.render(request.scope, native.items, request.budget)
        position = {id(item): i for i, item in enumerate(native.items)}
        shown = [position[id(i)] for i in rendered.shown if id(i) in position]
        # Only offset-aware times can be ordered together (a backend may return naive ones).
        times = [
            t for i in native.items for t in (i.event_at or i.created_at or i.valid_at,)
            if t is not None and t.tzinfo is not None
        ]
        scores = [i.score for i in native.items if i.score is not None]
        warnings = list(native.warnings)
        if rendered.shortfall_tokens:
            warnings.append(f"context is {rendered.shortfall_tokens} tokens short of min_tokens")
        trace = self._trace(
            "retrieve",
            native_operation=native.native_operation,
            native_request=native.native_request,
            scope=request.scope.key,
            native_ids=[i.native_id for i in native.items if i.native_id],
            latency_ms=latency,
            token_count=rendered.token_count,
            budget_max_tokens=request.budget.max_tokens,
            budget_shortfall_tokens=rendered.shortfall_tokens,
            retrieved_count=len(native.items),
            context_item_count=rendered.included,
            top_score=max(scores) if scores else None,
            oldest_retrieved_at=min(times) if times else None,
            newest_retrieved_at=max(times) if times else None,
            representation_version=native.representation_version,
            last_derived_at=native.last_derived_at,
            warnings=warnings,
        )
        self._emit(trace)
        return RetrieveResult(
            items=native.items, raw=native.raw, formatted_context=rendered.text, shown=shown,
            section_lines=list(rendered.lines), trace=trace,
        )

    def render(
        self, scope: MemoryScope | str, items: list[RetrievedItem], budget: ContextBudget
    ) -> RenderedContext:
        """Format items with this provider's label; subclasses may pass their own line style."""
        key = scope.key if isinstance(scope, MemoryScope) else scope
        return render_context(backend=self.backend_name, scope=key, items=items, budget=budget)

    async def reset_scope(self, scope: MemoryScope) -> ResetReceipt:
        if self._mode.read_only:
            # Test sessions never reset memory: refuse rather than obey a stray call.
            trace = self._trace("reset_scope", scope=scope.key, status="refused_read_only")
            self._emit(trace)
            return ResetReceipt(status="refused_read_only", scope=scope.key, trace=trace)
        started = time.perf_counter()
        detail = await self._call("reset_scope", lambda: self._reset(scope))
        trace = self._trace(
            "reset_scope",
            scope=scope.key,
            latency_ms=(time.perf_counter() - started) * 1000,
            status="reset",
        )
        self._emit(trace)
        return ResetReceipt(status="reset", scope=scope.key, detail=detail, trace=trace)

    async def health(self) -> BackendHealth:
        started = time.perf_counter()
        try:
            native = await self._health()
        except Exception as exc:  # health never raises: it reports
            raw, _ = native_diagnostics(exc)
            native = NativeHealth(status="unavailable", details={"error": raw})
        status, warnings = native.status, list(native.warnings)
        details = dict(native.details)
        if self.failed_write_count and self.last_failed_write is not None:
            when, last = self.last_failed_write
            details["failed_writes"] = {"count": self.failed_write_count, "last": last,
                                        "last_at": when, "latest_failed": self.last_write_failed}
            warnings.append(
                f"{self.failed_write_count} write(s) failed since start (not stored; an "
                f"outbox keeps them for a retry); last: {last[:200]}"
            )
            if self.last_write_failed and status == "ok":
                status = "degraded"  # the latest write failed: writes are failing now
        return BackendHealth(
            status=status,
            backend_name=self.backend_name,
            condition_kind=self.info.condition_kind,
            latency_ms=(time.perf_counter() - started) * 1000,
            consistency_model=self.info.consistency_model,
            native_memory_types=list(self.info.native_memory_types) or None,
            native_ingest_modes=list(self.info.native_ingest_modes) or None,
            capabilities=capabilities_of(self),
            read_only=self._mode.read_only,
            details=redact(details),
            warnings=warnings,
        )

    async def aclose(self) -> None:
        """Release native clients and locks. Safe to call twice."""

    # -- write capabilities: the read-only gate, here once ---------------------------------
    # A backend offers these by declaring the capability and implementing the hook
    # (``_native_mutation``, ``_end_session``, ``_apply_feedback``); the public methods
    # below gate every call, so no backend gates a write path by hand.

    #: ``native_mutation``'s operations, and those of them that only read (served while
    #: read-only too); the contract suite's item 11 calls every other one read-only.
    native_mutations: frozenset[str] = frozenset()
    read_mutations: frozenset[str] = frozenset()

    def _skipped_write(self, operation: str, scope: MemoryScope, **fields: Any) -> Trace:
        trace = self._trace(operation, scope=scope.key, status="skipped_read_only",
                            latency_ms=0.0, **fields)
        self._emit(trace)
        return trace

    async def native_mutation(
        self, scope: MemoryScope, operation: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        if self._mode.read_only and operation not in self.read_mutations:
            self._skipped_write("native_mutation", scope, native_operation=operation)
            return {"status": "skipped_read_only", "operation": operation}
        return await self._native_mutation(scope, operation, payload)

    async def end_session(self, scope: MemoryScope, session_id: str) -> dict[str, Any]:
        if self._mode.read_only:
            self._skipped_write("end_session", scope)
            return {"status": "skipped_read_only"}
        return await self._end_session(scope, session_id)

    async def apply_feedback(self, request: FeedbackRequest) -> WriteReceipt:
        if self._mode.read_only:
            trace = self._skipped_write("apply_feedback", request.scope)
            return WriteReceipt(status="skipped_read_only", trace=trace)
        return await self._apply_feedback(request)

    # -- native parts (override) ------------------------------------------------------
    async def _setup(self, scope: MemoryScope) -> None:
        return None

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        raise NotImplementedError

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        raise NotImplementedError

    async def _reset(self, scope: MemoryScope) -> str | None:
        raise NotImplementedError

    async def _health(self) -> NativeHealth:
        return NativeHealth(status="ok")

    # optional write capabilities (declare the capability too); called past the gate
    async def _native_mutation(
        self, scope: MemoryScope, operation: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        raise self._not_offered("native_mutation")

    async def _end_session(self, scope: MemoryScope, session_id: str) -> dict[str, Any]:
        raise self._not_offered("end_session")

    async def _apply_feedback(self, request: FeedbackRequest) -> WriteReceipt:
        raise self._not_offered("apply_feedback")

    def _not_offered(self, operation: str) -> AdapterError:
        return AdapterError(f"{self.backend_name} does not offer {operation}",
                            backend_name=self.backend_name, operation=operation,
                            retryable=False)


# capability -> (the gated public method, the hook a BaseAdapter overrides to offer it)
_GATED_HOOKS = {"native_mutation": ("native_mutation", "_native_mutation"),
                "session_end": ("end_session", "_end_session"),
                "feedback": ("apply_feedback", "_apply_feedback")}


def _mark_gates() -> None:
    """The gated methods name their hooks, and the default hooks say they offer nothing
    (``contract.has_methods`` reads both: a gate over a missing hook is no capability)."""
    for public, hook in _GATED_HOOKS.values():
        getattr(BaseAdapter, public).gates = hook
        getattr(BaseAdapter, hook).not_offered = True


_mark_gates()


# One native bulk write: one result per event of the batch, in order (an exception
# in an event's place when that event alone was not stored).
BatchWrite = Callable[[list[MemoryEvent]], Awaitable[Sequence[NativeWrite | Exception]]]


class BulkIngest:
    """``SupportsBulkIngest`` for a ``BaseAdapter``, as a collaborator the adapter builds
    and delegates ``record_events`` to: the read-only gate, batching, timing, per-event
    receipts and failures live here once; the adapter hands it ``record_batch`` (one
    native bulk call) and, if its grouping rule differs, ``batch_key`` or ``batches``::

        self.bulk = BulkIngest(self, self._record_batch)

        async def record_events(self, events):
            return await self.bulk.record_events(events)

    A failed batch never takes another batch down, and its events get ``failed``
    receipts carrying the error (retryable or not) instead of a raised exception, so a
    caller learns which events to keep. A hook may also answer per event, returning an
    exception (wrapped as every native failure is) in an event's place (a backend whose
    native bulk call is all-or-nothing falls back to per-event writes and reports each).
    """

    def __init__(
        self,
        adapter: BaseAdapter,
        record_batch: BatchWrite,
        *,
        batch_key: Callable[[MemoryEvent], Hashable] | None = None,
        batches: Callable[[list[MemoryEvent]], list[list[MemoryEvent]]] | None = None,
        operation: str = "record_events",
    ) -> None:
        self.adapter = adapter
        self.record_batch = record_batch
        self.batch_key = batch_key or _scope_and_session
        self._batches = batches
        self.operation = operation

    def batches(self, events: list[MemoryEvent]) -> list[list[MemoryEvent]]:
        """The adapter's grouping if it gave one, else runs of consecutive events with the
        same ``batch_key`` (order is kept)."""
        if self._batches is not None:
            return self._batches(events)
        runs: list[list[MemoryEvent]] = []
        for event in events:
            if runs and self.batch_key(runs[-1][0]) == self.batch_key(event):
                runs[-1].append(event)
            else:
                runs.append([event])
        return runs

    async def record_events(self, events: Sequence[MemoryEvent]) -> list[WriteReceipt]:
        adapter, operation = self.adapter, self.operation
        events = list(events)
        if not events:
            return []
        if adapter.mode.read_only:
            return adapter._skipped_receipts(events, operation=operation)
        receipts: list[WriteReceipt] = []
        for batch in self.batches(events):
            started = time.perf_counter()
            try:
                natives = list(await adapter._call(
                    operation, lambda b=batch: self.record_batch(b),
                    retryable=adapter.write_failures_retryable,
                ))
                if len(natives) != len(batch):
                    raise AdapterError(
                        f"bulk hook returned {len(natives)} results for {len(batch)} events",
                        backend_name=adapter.backend_name, operation=operation,
                    )
            except AdapterError as exc:
                natives = [exc] * len(batch)
            latency = (time.perf_counter() - started) * 1000
            # a hook may put an event's own failure in its place, as any exception
            natives = [adapter._as_error(n, operation, adapter.write_failures_retryable)
                       if isinstance(n, Exception) else n for n in natives]
            for event, native in zip(batch, natives, strict=True):
                adapter._note_write(native if isinstance(native, AdapterError) else None)
                if isinstance(native, AdapterError):
                    receipts.append(adapter._failed_receipt(event, native, latency, operation))
                else:
                    own = native.latency_ms if native.latency_ms is not None else latency
                    receipts.append(adapter._write_receipt(event, native, own, operation))
        return receipts


def _scope_and_session(event: MemoryEvent) -> Hashable:
    """Default bulk grouping: events of the same scope and session may share a call."""
    return (event.scope().key, event.session_id)
