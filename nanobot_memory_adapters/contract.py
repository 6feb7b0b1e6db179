"""The adapter contract: the one thing nanobot, the harness and every backend agree on.

Everything here is backend-neutral. Native payloads travel inside ``raw`` fields untouched;
fields a backend cannot supply stay ``None`` and are never invented.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Protocol, overload, runtime_checkable

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, model_validator
from typing_extensions import TypeIs

from nanobot_memory_adapters.events import TAG_FIELDS, MemoryEvent, Message, set_tags
from nanobot_memory_adapters.redaction import redact, redact_text
from nanobot_memory_adapters.scope import MemoryScope, ScopeId

__all__ = [
    "ACCEPTED_WRITE_STATUSES",
    "CAPABILITIES",
    "MAX_BUDGET_ITEMS",
    "MAX_BUDGET_TOKENS",
    "STORED_WRITE_STATUSES",
    "AdapterError",
    "AdapterMode",
    "BackendHealth",
    "Capability",
    "ConditionKind",
    "ConsistencyModel",
    "ContextBudget",
    "FeedbackRequest",
    "MemoryAdapter",
    "MemoryEvent",
    "MemoryForm",
    "MemoryScope",
    "Message",
    "ModeReceipt",
    "ProviderInfo",
    "Readiness",
    "ResetReceipt",
    "RetrieveRequest",
    "RetrieveResult",
    "RetrievedItem",
    "SupportsBulkIngest",
    "SupportsFeedback",
    "SupportsIngestLookahead",
    "SupportsNativeMutation",
    "SupportsNativeQuery",
    "SupportsProvenance",
    "SupportsReadiness",
    "SupportsSessionEnd",
    "SupportsStoreVersion",
    "TagMapping",
    "Trace",
    "WriteReceipt",
    "WriteStatus",
    "capabilities_of",
    "supports",
    "undelivered_capabilities",
    "utcnow",
]

ConsistencyModel = Literal["immediate", "eventual", "async_derived"]
ConditionKind = Literal["architecture", "control"]
# How scenario/context/attribute reach the backend: a hard filter, semantic query text,
# stored metadata only (returned, not used to select), or not at all.
TagMapping = Literal["filter", "semantic", "metadata", "none"]
# What an item shows of what was recorded: the turn's own text (``verbatim``), something
# the backend derived from it (``derived``: extracted facts, summaries), both
# (``mixed``), or nothing recorded at all (``none``: fixed or empty providers).
MemoryForm = Literal["verbatim", "derived", "mixed", "none"]
# The optional capabilities beyond ``MemoryAdapter`` (each has a ``Supports*`` Protocol
# below for its method signatures). A provider declares which it offers in
# ``ProviderInfo.capabilities``; what it offers may depend on its config.
Capability = Literal[
    "feedback", "bulk_ingest", "readiness", "native_mutation", "provenance", "native_query",
    "session_end", "ingest_lookahead", "store_version",
]
CAPABILITIES: tuple[Capability, ...] = (
    "feedback", "bulk_ingest", "readiness", "native_mutation", "provenance", "native_query",
    "session_end", "ingest_lookahead", "store_version",
)

# -- write statuses: one place ---------------------------------------------------------
WriteStatus = Literal["committed", "queued", "pending", "skipped_read_only", "ignored", "failed"]
# The backend holds the write (now or once its queue runs).
STORED_WRITE_STATUSES: frozenset[str] = frozenset({"committed", "queued", "pending"})
# The write needs no retry: stored, or the provider stores nothing by design (``ignored``).
# ``skipped_read_only`` and ``failed`` are not accepted: an outbox keeps such an event.
ACCEPTED_WRITE_STATUSES: frozenset[str] = STORED_WRITE_STATUSES | {"ignored"}


# Free text a backend or its diagnostics can fill (warnings, details, errors) leaves the
# package through these models: it is scrubbed of credentials on the way in.
RedactedText = Annotated[str, AfterValidator(redact_text)]
RedactedData = Annotated[dict[str, Any], AfterValidator(redact)]


def utcnow() -> datetime:
    return datetime.now(UTC)


# Bounds of a budget: whole numbers (``true`` or ``"100"`` are mistakes, not 1 and 100),
# at most a million tokens (beyond any model's context) and ten thousand items.
MAX_BUDGET_TOKENS = 1_000_000
MAX_BUDGET_ITEMS = 10_000


def budget_problem(max_tokens: int, min_tokens: int | None) -> str | None:
    """Why a budget's bounds contradict each other, or None (the one rule, for the
    contract's ``ContextBudget`` and the config's ``budget`` block alike)."""
    if min_tokens is not None and min_tokens > max_tokens:
        return (f"min_tokens ({min_tokens}) is above max_tokens ({max_tokens}); "
                "lower min_tokens or raise max_tokens")
    return None


class ContextBudget(BaseModel):
    """The same budget for every provider in a comparison."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: StrictInt = Field(
        gt=0, le=MAX_BUDGET_TOKENS, description="Hard cap on the formatted context's tokens."
    )
    min_tokens: StrictInt | None = Field(default=None, ge=0, le=MAX_BUDGET_TOKENS)
    max_items: StrictInt | None = Field(default=None, gt=0, le=MAX_BUDGET_ITEMS)

    @model_validator(mode="after")
    def _min_below_max(self) -> ContextBudget:
        problem = budget_problem(self.max_tokens, self.min_tokens)
        if problem:
            raise ValueError(problem)
        return self


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    scope: MemoryScope
    session_id: ScopeId | None = None
    budget: ContextBudget
    scenario: str | None = None
    context: str | None = None
    attribute: str | None = None
    filters: dict[str, Any] = Field(default_factory=dict)
    as_of: datetime | None = Field(
        default=None,
        description="When the request is made on the user's timeline (None: now). A "
        "replayed benchmark asks at the test point's time; providers that keep validity "
        "(oracle_ipas) answer as of it.",
    )

    def tags(self) -> dict[str, str]:
        return set_tags(self)

    @classmethod
    def with_tags(cls, tags: Mapping[str, str], **fields: Any) -> RetrieveRequest:
        """A request whose scenario/context/attribute come from a tag mapping (what
        ``tags()`` returns); a key that is not a tag is an error, not a silent drop."""
        unknown = sorted(set(tags) - set(TAG_FIELDS))
        if unknown:
            raise ValueError(f"not request tags: {unknown}; tags are {', '.join(TAG_FIELDS)}")
        chosen: dict[str, Any] = {name: tags[name] for name in TAG_FIELDS if name in tags}
        return cls(**fields, **chosen)


class Trace(BaseModel):
    """What happened in one native operation. Unknown fields are null, never guessed."""

    model_config = ConfigDict(extra="forbid")

    trace_id: str
    at: datetime = Field(default_factory=utcnow)
    backend_name: str
    condition_kind: ConditionKind
    operation: str
    native_operation: str | None = None
    scope: str | None = None
    event_id: str | None = None
    native_ids: list[str] = Field(default_factory=list)
    native_request: RedactedData = Field(
        default_factory=dict,
        description="Non-secret native arguments that matter for fairness (top_k, tokens...).",
    )
    latency_ms: float | None = None
    consistency: ConsistencyModel | None = None
    token_count: int | None = None
    budget_max_tokens: int | None = None
    budget_shortfall_tokens: int | None = None
    retrieved_count: int | None = None
    context_item_count: int | None = Field(
        default=None, description="How many retrieved items fit into the formatted context."
    )
    top_score: float | None = None
    oldest_retrieved_at: datetime | None = None
    newest_retrieved_at: datetime | None = None
    representation_version: str | None = None
    last_derived_at: datetime | None = None
    status: str | None = None
    warnings: list[RedactedText] = Field(default_factory=list)


class RetrievedItem(BaseModel):
    """One native result, with its provenance kept as the backend gave it."""

    model_config = ConfigDict(extra="forbid")

    native_id: str | None = None
    text: str
    native_type: str | None = None
    group: str | None = Field(default=None, description="Native result group (MemOS text_mem...)")
    score: float | None = None
    event_at: datetime | None = Field(
        default=None,
        description="When the remembered turn happened (the event timestamp stored with it); "
        "created_at is when the backend stored it.",
    )
    created_at: datetime | None = None
    updated_at: datetime | None = None
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    expired_at: datetime | None = None
    source: str | None = Field(default=None, description="Provenance: episode, session, message")
    source_event_ids: list[str] | None = Field(
        default=None,
        description="The recorded events (MemoryEvent.event_id) this item derives from, by "
        "the backend's own provenance (metadata it stored with the write, a fact's source "
        "episodes, a message's metadata). None when the backend cannot say; never guessed.",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    raw: dict[str, Any] = Field(default_factory=dict, description="The native record, untouched.")


class RetrieveResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[RetrievedItem] = Field(default_factory=list)
    raw: Any = None
    formatted_context: str = ""
    shown: list[int] = Field(
        default_factory=list,
        description="Indices of ``items`` that appear whole in ``formatted_context`` (an "
        "item cut by the budget is not listed).",
    )
    section_lines: list[str] = Field(
        default_factory=list,
        description="``formatted_context`` inside its ``<memory-context>`` frame, as the "
        "rendered lines (an item's line keeps its own line breaks), for a caller that "
        "composes one section from several (a question asked of two people's memories); "
        "empty when the context is empty or the provider does not give them.",
    )
    trace: Trace


class WriteReceipt(BaseModel):
    """The outcome of one event's write.

    ``committed``: the backend took the turn and processed it; ``native_ids`` lists what it
    keeps from it. ``stored_nothing`` says the backend kept nothing new from it (mem0's
    extraction found no new fact; a turn of system messages only): accepted, no retry, and
    counted by the harness, so a run whose turns mostly stored nothing does not read like
    a healthy one. Empty ``native_ids`` alone do not say so (an MCP server that returns no
    id). ``queued``: accepted,
    processed later (``readiness`` says when). ``ignored``: the provider stores nothing by
    design (no_memory, static_profile, oracle). ``failed``: only in a bulk write's
    per-event receipts (``record_event`` raises ``AdapterError`` instead); ``error`` holds
    the AdapterError's ``to_dict()`` and says whether a retry could succeed.
    """

    model_config = ConfigDict(extra="forbid")

    status: WriteStatus
    event_id: str | None = None
    native_ids: list[str] = Field(default_factory=list)
    latency_ms: float | None = None
    error: RedactedData | None = None
    stored_nothing: bool = False
    trace: Trace

    @property
    def accepted(self) -> bool:
        """The event needs no retry (stored, or stored-nothing by design)."""
        return self.status in ACCEPTED_WRITE_STATUSES

    @property
    def retryable(self) -> bool:
        return self.status == "failed" and bool((self.error or {}).get("retryable"))


class AdapterMode(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    read_only: bool
    reason: str = Field(min_length=1)


class ModeReceipt(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: AdapterMode
    previous: AdapterMode | None = None
    trace: Trace | None = None


class ResetReceipt(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["reset", "refused_read_only", "nothing_to_reset"]
    scope: str
    detail: RedactedText | None = Field(
        default=None, description="What the backend keeps after reset."
    )
    trace: Trace


class Readiness(BaseModel):
    """Whether what was written can be read yet. ``pending`` on timeout, never a false green."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ready", "pending", "unknown"]
    pending_count: int | None = None
    waited_ms: float | None = None
    detail: RedactedText | None = None


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: MemoryScope
    session_id: ScopeId | None = None
    feedback: str = Field(min_length=1)
    native_ids: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ProviderInfo(BaseModel):
    """Static facts about a provider that callers and the contract suite rely on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    condition_kind: ConditionKind
    consistency_model: ConsistencyModel
    stores_events: bool = Field(
        description="True when recorded events can come back from retrieve (False for "
        "no_memory, static_profile, oracle_ipas)."
    )
    tag_mapping: TagMapping = "none"
    memory_form: MemoryForm = Field(
        default="verbatim",
        description="What items show of recorded turns; decides which recall metric can see "
        "the provider (turn-text recall needs verbatim text).",
    )
    item_fields: tuple[str, ...] = Field(
        default=(),
        description="RetrievedItem fields this provider always fills (e.g. score, created_at).",
    )
    native_memory_types: tuple[str, ...] = ()
    native_ingest_modes: tuple[str, ...] = ()
    requires_llm: bool = False
    capabilities: tuple[Capability, ...] | None = Field(
        default=None,
        description="The optional capabilities this provider offers, declared (they may "
        "depend on its config: a method that is present but not declared is not offered). "
        "None: not declared; the capabilities are then read from the methods present "
        "(providers written before declarations).",
    )
    description: str = ""


class BackendHealth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "degraded", "unavailable"]
    backend_name: str
    condition_kind: ConditionKind
    latency_ms: float | None = None
    consistency_model: ConsistencyModel
    native_memory_types: list[str] | None = None
    native_ingest_modes: list[str] | None = None
    capabilities: list[str] = Field(default_factory=list)
    read_only: bool = False
    details: RedactedData = Field(default_factory=dict)
    warnings: list[RedactedText] = Field(default_factory=list)


class AdapterError(Exception):
    """The one error type adapters raise; ``raw`` keeps the backend's own diagnostics.

    ``retryable`` is True when the backend was unreachable or overloaded, so a caller
    (the outbox) should keep the write and try again later.
    """

    def __init__(
        self,
        message: str,
        *,
        backend_name: str,
        operation: str,
        raw: dict[str, Any] | None = None,
        retryable: bool = False,
    ) -> None:
        # Diagnostics travel to logs, the outbox and traces: scrub credentials here, once.
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.backend_name = backend_name
        self.operation = operation
        self.raw = redact(raw or {})
        self.retryable = retryable

    def __str__(self) -> str:
        return f"[{self.backend_name}.{self.operation}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "backend_name": self.backend_name,
            "operation": self.operation,
            "retryable": self.retryable,
            "raw": self.raw,
        }


@runtime_checkable
class MemoryAdapter(Protocol):
    """The minimal contract every backend and condition implements."""

    backend_name: str
    info: ProviderInfo

    async def setup_scope(self, scope: MemoryScope) -> None: ...
    async def set_mode(self, mode: AdapterMode) -> ModeReceipt: ...
    async def record_event(self, event: MemoryEvent) -> WriteReceipt: ...
    async def retrieve(self, request: RetrieveRequest) -> RetrieveResult: ...
    async def reset_scope(self, scope: MemoryScope) -> ResetReceipt: ...
    async def health(self) -> BackendHealth: ...
    async def aclose(self) -> None: ...


@runtime_checkable
class SupportsFeedback(Protocol):

    async def apply_feedback(self, request: FeedbackRequest) -> WriteReceipt: ...


@runtime_checkable
class SupportsBulkIngest(Protocol):

    async def record_events(self, events: Sequence[MemoryEvent]) -> list[WriteReceipt]: ...


@runtime_checkable
class SupportsReadiness(Protocol):

    async def readiness(self, scope: MemoryScope) -> Readiness: ...
    async def wait_until_ready(self, scope: MemoryScope, timeout_s: float) -> Readiness: ...


@runtime_checkable
class SupportsNativeMutation(Protocol):

    async def native_mutation(
        self, scope: MemoryScope, operation: str, payload: dict[str, Any]
    ) -> dict[str, Any]: ...


@runtime_checkable
class SupportsProvenance(Protocol):

    async def provenance(
        self, scope: MemoryScope, native_id: str | None = None, **query: Any
    ) -> dict[str, Any]: ...


@runtime_checkable
class SupportsNativeQuery(Protocol):
    """Diagnostics only (an extra LLM call or raw query); never used in the agent loop."""


    async def native_query(
        self, scope: MemoryScope, query: str, **options: Any
    ) -> dict[str, Any]: ...


@runtime_checkable
class SupportsSessionEnd(Protocol):
    """A backend feature that works on a whole chat session once it ends (e.g. Honcho's
    dream): the plugin calls it when nanobot archives or compacts a session (``/new``,
    ``/compact``, idle compaction), after the session's turns reached the backend, never
    on the reply path. Read-only mode skips it; the result is the native answer."""

    async def end_session(self, scope: MemoryScope, session_id: str) -> dict[str, Any]: ...


@runtime_checkable
class SupportsIngestLookahead(Protocol):
    """Work done ahead for events the provider is about to be given: ``simple_rag`` embeds
    their texts in one batch of its own embedder (a whole conversation sorts and batches
    better than one session at a time). Inside the context the events arrive as usual
    (``record_event``/``record_events``) and what they store and retrieve is what it
    would be without it (up to a batch's float noise in a vector; contract item 12, and
    the bench's metrics hashes); nothing is stored or retrievable before they are
    recorded, and leaving the context drops what was prepared. The bench leaves it
    without exception info, however the unit ends. A hint only: a failure to open or
    leave it is logged, and the events are recorded as they would be."""

    def ingest_lookahead(
        self, events: Sequence[MemoryEvent]
    ) -> AbstractAsyncContextManager[None]: ...


@runtime_checkable
class SupportsStoreVersion(Protocol):
    """A cheap token (no scan of the store) that changes whenever what ``retrieve`` can
    return for the scope may have changed, by this process or any other sharing the
    store (or with time, for a provider whose results age: a request without ``as_of``
    means now), and stays equal otherwise. With ``query_independent`` (``provider.py``) it
    lets the nanobot plugin prepare a turn's recall after the previous turn's writes land
    and serve it while the token holds (off the reply path; contract item 13)."""

    async def store_version(self, scope: MemoryScope) -> str: ...


_PROTOCOLS: dict[Capability, type] = {
    "feedback": SupportsFeedback,
    "bulk_ingest": SupportsBulkIngest,
    "readiness": SupportsReadiness,
    "native_mutation": SupportsNativeMutation,
    "provenance": SupportsProvenance,
    "native_query": SupportsNativeQuery,
    "session_end": SupportsSessionEnd,
    "ingest_lookahead": SupportsIngestLookahead,
    "store_version": SupportsStoreVersion,
}


def declared_capabilities(adapter: object) -> tuple[Capability, ...] | None:
    """What the provider declares in ``info.capabilities`` (None: it declares nothing)."""
    info = getattr(adapter, "info", None)
    return info.capabilities if isinstance(info, ProviderInfo) else None


def has_methods(adapter: object, capability: Capability) -> bool:
    """Whether the capability's methods are there (its Protocol's structural check). A
    wrapper's method that gates a native hook (marked ``gates = "<hook>"``, as
    ``BaseAdapter``'s write capabilities are) counts only when the hook is implemented
    (not marked ``not_offered``). A wrapper whose methods are always there but offered
    per instance (``store.StoreProvider``) answers ``offers_capability(name)``."""
    proto = _PROTOCOLS[capability]
    if not isinstance(adapter, proto):
        return False
    offers = getattr(adapter, "offers_capability", None)
    if callable(offers) and not offers(capability):
        return False
    for name in (n for n, v in vars(proto).items() if callable(v) and not n.startswith("_")):
        hook = getattr(getattr(adapter, name, None), "gates", None)
        if hook and getattr(getattr(adapter, hook, None), "not_offered", False):
            return False
    return True


def undelivered_capabilities(adapter: object) -> list[Capability]:
    """Capabilities the provider declares without having their methods (a defect the
    contract suite reports)."""
    return [c for c in declared_capabilities(adapter) or () if not has_methods(adapter, c)]


@overload
def supports(adapter: object, capability: Literal["feedback"]) -> TypeIs[SupportsFeedback]:
    ...
@overload
def supports(adapter: object, capability: Literal["bulk_ingest"]
             ) -> TypeIs[SupportsBulkIngest]: ...
@overload
def supports(adapter: object, capability: Literal["readiness"]
             ) -> TypeIs[SupportsReadiness]: ...
@overload
def supports(adapter: object, capability: Literal["native_mutation"]
             ) -> TypeIs[SupportsNativeMutation]: ...
@overload
def supports(adapter: object, capability: Literal["provenance"]
             ) -> TypeIs[SupportsProvenance]: ...
@overload
def supports(adapter: object, capability: Literal["native_query"]
             ) -> TypeIs[SupportsNativeQuery]: ...
@overload
def supports(adapter: object, capability: Literal["session_end"]
             ) -> TypeIs[SupportsSessionEnd]: ...
@overload
def supports(adapter: object, capability: Literal["ingest_lookahead"]
             ) -> TypeIs[SupportsIngestLookahead]: ...
@overload
def supports(adapter: object, capability: Literal["store_version"]
             ) -> TypeIs[SupportsStoreVersion]: ...
@overload
def supports(adapter: object, capability: Capability) -> bool: ...
def supports(adapter: object, capability: Capability) -> bool:
    """Whether ``adapter`` offers ``capability``: declared (the one spelling: data in
    ``info.capabilities``) and its methods there. A provider that declares nothing (one
    written before declarations, not a ``BaseAdapter``) offers what its methods show."""
    declared = declared_capabilities(adapter)
    if declared is not None and capability not in declared:
        return False
    return has_methods(adapter, capability)


def capabilities_of(adapter: object) -> list[str]:
    """The optional capabilities an adapter offers, in ``CAPABILITIES`` order."""
    return [name for name in CAPABILITIES if supports(adapter, name)]
