"""The native-store protocol and the one provider wrapper over it (as httpx splits
``Client`` from its transport).

A backend implements a :class:`NativeStore`: write one event, search, reset a scope
(and, if it has them, ``setup``, ``health`` and ``aclose``). Optional capabilities are
attributes holding an object or ``None``, as Graphiti's drivers declare theirs
(``record_batch`` for bulk ingest, ``mutations`` for native operations, ``readiness``
for a derivation queue, ...; every capability of the contract has one,
``STORE_CAPABILITIES``). :class:`StoreProvider`
wraps any store into a whole provider and owns, once, what every provider shares: the
read-only gate on every write path, traces, error wrapping and budget rendering. The
capabilities are the store's declared ones (each must have its attribute filled, or the
wrap is refused); a store that declares none (``capabilities=None``) offers what its
attributes hold. The registry wraps
a registered store class itself, so a newcomer's backend is one class::

    class MyStore:
        config_model = MyConfig
        info = ProviderInfo(name="mine", ...)
        record_batch = None          # no bulk ingest (or an async callable)

        @classmethod
        def from_config(cls, config, env): return cls(config)
        async def record(self, event) -> NativeWrite: ...
        async def retrieve(self, request) -> NativeRetrieval: ...
        async def reset(self, scope) -> str | None: ...
        # optional: async setup(scope), async health() -> NativeHealth, async aclose()

Optional hooks (see :class:`NativeStore`): ``render``, ``consolidate``, ``native_error``;
for bulk ingest ``split_batches`` or ``batch_key``; plain attributes the wrapper takes on
(``_PROVIDER_ATTRIBUTES``: ``readiness_timeout_s``, ``replay_checked_writes``,
``native_scope``, ...). ``nanobot-memory conformance --provider-class my_module:MyStore``
and ``ContractSuite`` (with ``StoreProvider(MyStore())``) check it.
``testing/reference.py`` is the worked example; every built-in backend
(``backends/*/store.py``) is a store too.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, final, runtime_checkable

from nanobot_memory_adapters.base import (
    BaseAdapter,
    BatchWrite,
    BulkIngest,
    NativeHealth,
    NativeRetrieval,
    NativeWrite,
    poll_readiness,
)
from nanobot_memory_adapters.contract import (
    AdapterError,
    Capability,
    ContextBudget,
    FeedbackRequest,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    Readiness,
    RetrievedItem,
    RetrieveRequest,
    WriteReceipt,
)
from nanobot_memory_adapters.formatting import RenderedContext
from nanobot_memory_adapters.tracing import TraceSink

__all__ = [
    "STORE_CAPABILITIES",
    "NativeMutations",
    "NativeStore",
    "StoreProvider",
    "as_provider",
    "is_store",
]


@runtime_checkable
class NativeStore(Protocol):
    """What a backend implements: the native calls, nothing the wrapper owns. Optional
    lifecycle methods, called when the store has them: ``async setup(scope)`` (once per
    scope), ``async health() -> NativeHealth`` (default ``ok``), ``async aclose()``,
    ``render(scope, items, budget)`` (its own packing), ``async consolidate(scope,
    timeout_s)`` for memory derived on request (the wrapper's ``wait_until_ready`` runs it,
    never while read-only), and ``native_error(exc, operation) -> AdapterError | None``
    (its SDK's errors said in its own words, e.g. which server answered what, and whether
    a retry can help; ``None``: the wrapper's generic wrapping)."""

    info: ProviderInfo

    async def record(self, event: MemoryEvent) -> NativeWrite: ...
    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval: ...
    async def reset(self, scope: MemoryScope) -> str | None: ...


class NativeMutations(Protocol):
    """A store's native operations (``mutations``): their names, those that only read
    (served while read-only), and the call. The wrapper gates the rest, and traces each
    answer by its ``status``, ``native_operation`` and ``native_ids`` keys."""

    operations: frozenset[str]
    read_operations: frozenset[str]

    async def run(self, scope: MemoryScope, operation: str,
                  payload: dict[str, Any]) -> dict[str, Any]: ...


ReadinessProbe = Callable[[MemoryScope], Awaitable[Readiness]]
SessionEnd = Callable[[MemoryScope, str], Awaitable[dict[str, Any]]]
Feedback = Callable[[FeedbackRequest], Awaitable[NativeWrite]]

#: capability -> the store attribute that offers it (an object, or None: not offered).
STORE_CAPABILITIES: dict[Capability, str] = {
    "bulk_ingest": "record_batch",
    "readiness": "readiness",
    "native_mutation": "mutations",
    "session_end": "end_session",
    "feedback": "feedback",
    "store_version": "store_version",  # async (scope) -> str
    "ingest_lookahead": "ingest_lookahead",  # (events) -> async context manager
    "provenance": "provenance",  # async (scope, native_id=None, **query) -> dict
    "native_query": "native_query",  # async (scope, query, **options) -> dict (diagnostics)
}

#: Plain provider attributes (provider.py's accessors read them) a store may set.
_PROVIDER_ATTRIBUTES = ("query_independent", "max_concurrent_units",
                        "replay_checked_writes", "readiness_timeout_s",
                        "write_failures_retryable",
                        "native_scope")  # (scope) -> its native names, for run manifests


def is_store(obj: object) -> bool:
    """A native store, not already a provider (a provider has ``record_event``)."""
    return isinstance(obj, NativeStore) and not hasattr(obj, "record_event")


def _offered(store: object, attribute: str) -> Any:
    return getattr(store, attribute, None)


@final
class StoreProvider(BaseAdapter):
    """The provider for any :class:`NativeStore`. Nothing here is backend logic: each
    call goes to the store, through the gate, timing, traces and rendering that
    ``BaseAdapter`` holds once."""

    def __init__(self, store: NativeStore, *, trace_sink: TraceSink | None = None) -> None:
        offered = tuple(c for c, attr in STORE_CAPABILITIES.items()
                        if _offered(store, attr) is not None)
        declared = store.info.capabilities
        if declared is not None:
            lacking: list[Capability] = [
                c for c in declared if c in STORE_CAPABILITIES and c not in offered]
            other: list[Capability] = [c for c in declared if c not in STORE_CAPABILITIES]
            if lacking or other:
                raise TypeError(
                    f"{type(store).__name__} declares {', '.join(lacking + other)} but "
                    + ("does not set " + ", ".join(STORE_CAPABILITIES[c] for c in lacking)
                       if lacking else "a store cannot offer " + ", ".join(other))
                    + "; declare what the store's attributes offer (or leave "
                    "capabilities None to read them off)")
        # declared data is the one spelling; a store that declares nothing is read off
        super().__init__(info=store.info.model_copy(
            update={"capabilities": offered if declared is None else declared}),
            trace_sink=trace_sink)
        self.store = store
        for name in _PROVIDER_ATTRIBUTES:
            if hasattr(store, name):
                setattr(self, name, getattr(store, name))
        mutations: NativeMutations | None = _offered(store, "mutations")
        if mutations is not None:
            self.native_mutations = frozenset(mutations.operations)
            self.read_mutations = frozenset(mutations.read_operations)
        batch: BatchWrite | None = _offered(store, "record_batch")
        # ``split_batches`` (events -> runs of events, one native call each) or
        # ``batch_key`` (runs of consecutive events with one key): the store's own
        # grouping; default runs of one scope and session
        self._bulk = None if batch is None else BulkIngest(
            self, batch, batch_key=_offered(store, "batch_key"),
            batches=_offered(store, "split_batches"))

    def offers_capability(self, capability: Capability) -> bool:
        """Whether the store fills the capability's attribute (``contract.has_methods``
        asks: this wrapper has every capability's methods, the store decides)."""
        attribute = STORE_CAPABILITIES.get(capability)
        return attribute is not None and _offered(self.store, attribute) is not None

    def _as_error(self, exc: Exception, operation: str,
                  retryable: bool | None = None) -> AdapterError:
        """Every native failure, once: the store's ``native_error`` says what its SDK's
        failure means; anything it does not claim gets the generic wrapping."""
        translate = getattr(self.store, "native_error", None)
        said: AdapterError | None = (
            None if translate is None or isinstance(exc, AdapterError)
            else translate(exc, operation))
        if said is None:
            return super()._as_error(exc, operation, retryable)
        if retryable is not None:
            said.retryable = retryable
        return said

    # -- the native calls: the store's ----------------------------------------------
    async def _setup(self, scope: MemoryScope) -> None:
        setup = getattr(self.store, "setup", None)
        if setup is not None:
            await setup(scope)

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        return await self.store.record(event)

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        return await self.store.retrieve(request)

    async def _reset(self, scope: MemoryScope) -> str | None:
        return await self.store.reset(scope)

    def render(self, scope: MemoryScope | str, items: list[RetrievedItem],
               budget: ContextBudget) -> RenderedContext:
        """The store's own ``render`` (its packing order, e.g. newest first) when it has
        one, else the one section format."""
        render = getattr(self.store, "render", None)
        return super().render(scope, items, budget) if render is None else render(
            scope, items, budget)

    async def _health(self) -> NativeHealth:
        health = getattr(self.store, "health", None)
        return NativeHealth(status="ok") if health is None else await health()

    async def aclose(self) -> None:
        aclose = getattr(self.store, "aclose", None)
        if aclose is not None:
            await aclose()

    # -- optional capabilities (declared only when the store's attribute is set) --------
    def _offering(self, attribute: str, operation: str) -> Any:
        """The store's object for an optional capability, or the one "does not offer"
        error every capability method raises without it."""
        found = _offered(self.store, attribute)
        if found is None:
            raise self._not_offered(operation)
        return found

    async def record_events(self, events: list[MemoryEvent]) -> list[WriteReceipt]:
        """Bulk ingest through the store's ``record_batch``; a store with
        ``ingest_lookahead`` prepares the whole call's events in it first (e.g. one
        batched embedding) unless the gate will skip them anyway."""
        if self._bulk is None:
            raise self._not_offered("record_events")
        lookahead = _offered(self.store, "ingest_lookahead")
        if lookahead is None or self.mode.read_only or not events:
            return await self._bulk.record_events(events)
        async with lookahead(events):
            return await self._bulk.record_events(events)

    async def readiness(self, scope: MemoryScope) -> Readiness:
        probe: ReadinessProbe = self._offering("readiness", "readiness")
        return await self._call("readiness", lambda: probe(scope))

    async def wait_until_ready(self, scope: MemoryScope, timeout_s: float) -> Readiness:
        """Poll the store's readiness; a store that derives memory on request (nanobot's
        Dream) has ``consolidate(scope, timeout_s)``, which runs here and never while
        read-only (a test session must not trigger consolidation writes)."""
        consolidate: Callable[[MemoryScope, float], Awaitable[None]] | None = _offered(
            self.store, "consolidate")
        if consolidate is None:
            return await poll_readiness(lambda: self.readiness(scope), timeout_s=timeout_s,
                                        interval_s=getattr(self.store,
                                                           "readiness_interval_s", 0.5))
        started = time.perf_counter()
        if not self.mode.read_only:
            await self._call("wait_until_ready", lambda: consolidate(scope, timeout_s))
        state = await self.readiness(scope)
        state.waited_ms = (time.perf_counter() - started) * 1000
        return state

    async def provenance(self, scope: MemoryScope, native_id: str | None = None,
                         **query: Any) -> dict[str, Any]:
        trace = self._offering("provenance", "provenance")
        return await self._call("provenance", lambda: trace(scope, native_id, **query))

    async def native_query(self, scope: MemoryScope, query: str,
                           **options: Any) -> dict[str, Any]:
        ask = self._offering("native_query", "native_query")
        return await self._traced("native_query", scope, lambda: ask(scope, query, **options))

    async def store_version(self, scope: MemoryScope) -> str:
        version = self._offering("store_version", "store_version")
        return await self._call("store_version", lambda: version(scope))

    def ingest_lookahead(self, events: Sequence[MemoryEvent]
                         ) -> AbstractAsyncContextManager[None]:
        return self._offering("ingest_lookahead", "ingest_lookahead")(events)

    async def _native_mutation(
        self, scope: MemoryScope, operation: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        mutations: NativeMutations = self._offering("mutations", "native_mutation")
        if operation not in mutations.operations:
            raise AdapterError(f"{self.backend_name} has no native operation {operation!r}",
                               backend_name=self.backend_name, operation="native_mutation",
                               retryable=False)
        return await self._traced("native_mutation", scope,
                                  lambda: mutations.run(scope, operation, payload))

    async def _traced(self, operation: str, scope: MemoryScope,
                      call: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The store's call, wrapped, timed and traced once when it answers, from what its
        result names (``native_operation``, ``native_ids``, ``native_request``,
        ``retrieved_count``, ``status``; default ``ok``)."""
        started = time.perf_counter()
        result = await self._call(operation, call)
        request = result.get("native_request")
        self._emit(self._trace(
            operation, scope=scope.key, status=str(result.get("status", "ok")),
            latency_ms=(time.perf_counter() - started) * 1000,
            native_operation=result.get("native_operation"),
            native_ids=[str(i) for i in result.get("native_ids") or ()],
            retrieved_count=result.get("retrieved_count"),
            **({"native_request": request} if isinstance(request, dict) else {})))
        return result

    async def _end_session(self, scope: MemoryScope, session_id: str) -> dict[str, Any]:
        end: SessionEnd = self._offering("end_session", "end_session")
        return await self._traced("end_session", scope, lambda: end(scope, session_id))

    async def _apply_feedback(self, request: FeedbackRequest) -> WriteReceipt:
        """The store's ``feedback`` writes; its receipt and trace are built here, as a
        recorded event's are (status, native ids and request, warnings, latency)."""
        feedback: Feedback = self._offering("feedback", "apply_feedback")
        started = time.perf_counter()
        native = await self._call("apply_feedback", lambda: feedback(request))
        latency = (time.perf_counter() - started) * 1000
        trace = self._trace(
            "apply_feedback", native_operation=native.native_operation,
            native_request=native.native_request, scope=request.scope.key,
            native_ids=native.native_ids, latency_ms=latency, status=native.status,
            warnings=native.warnings)
        self._emit(trace)
        return WriteReceipt(status=native.status, native_ids=native.native_ids,
                            latency_ms=latency, stored_nothing=native.stored_nothing,
                            trace=trace)


def as_provider(obj: Any, *, trace_sink: TraceSink | None = None) -> Any:
    """A store wrapped into its provider; a provider as it is."""
    return StoreProvider(obj, trace_sink=trace_sink) if is_store(obj) else obj
