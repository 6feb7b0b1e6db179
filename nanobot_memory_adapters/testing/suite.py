"""The contract checks (docs/design.md: items 1-13), runnable from pytest or the CLI.

Each check gets a fresh adapter from the target's ``make`` and its own run id, so items
never see each other's data. A check returns normally when the item passes and raises
``ItemFailed`` (with what it saw) when it does not.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from nanobot_memory_adapters.contract import (
    ACCEPTED_WRITE_STATUSES,
    STORED_WRITE_STATUSES,
    AdapterError,
    AdapterMode,
    ContextBudget,
    MemoryAdapter,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
    RetrieveResult,
    WriteReceipt,
    supports,
    undelivered_capabilities,
)
from nanobot_memory_adapters.formatting import SECTION_TAG
from nanobot_memory_adapters.provider import is_query_independent, no_native_backend
from nanobot_memory_adapters.redaction import redact_text
from nanobot_memory_adapters.tokens import count_tokens

AdapterMaker = Callable[[], Awaitable[MemoryAdapter]]


@dataclass
class SuiteTarget:
    """What a provider under test supplies.

    - ``make``: a fresh adapter on the provider's store (called once per item; it may
      share the underlying store with earlier adapters — items use distinct run ids).
    - ``make_failing``: an adapter whose native backend fails (unreachable server,
      unusable store) for item 7. Leave it None only with ``no_native_backend`` set,
      for providers that have no native layer to fail.
    - ``budget_visits``: how item 5 records its four visits. ``"turns"`` (default): one
      event each, so a provider that keeps whole turns must cut between them.
      ``"one_turn"``: one event with the same four sentences, for a provider that
      derives several items from one turn and extracts with a slow model (Graphiti on
      a CPU model runs its extraction prompts once, not four times). The checks are
      the same; a provider that keeps whole turns needs ``"turns"`` to be cut.
    """

    make: AdapterMaker
    make_failing: AdapterMaker | None = None
    no_native_backend: str | None = None
    readiness_timeout_s: float = 30.0
    run_prefix: str = "conformance"
    budget_visits: Literal["turns", "one_turn"] = "turns"

    @classmethod
    def for_class(cls, provider: type, make: AdapterMaker,
                  make_failing: AdapterMaker | None = None, **options: Any) -> SuiteTarget:
        """The target for a provider class, reading what the class declares (its
        ``no_native_backend`` reason) exactly as ``nanobot-memory conformance`` does, so
        pytest and the CLI give item 7 the same answer from one source."""
        return cls(make=make, make_failing=make_failing,
                   no_native_backend=no_native_backend(provider), **options)


class ItemFailed(AssertionError):
    pass


#: The items every provider must pass ("base"), then each capability's own, as LangGraph's
#: checkpoint conformance groups its specs. Item 11 calls every write path a provider
#: declares (bulk ingest, feedback, native mutations, session end) read-only.
GROUPS: dict[str, tuple[int, ...]] = {
    "base": tuple(range(1, 12)),
    "ingest_lookahead": (12,),
    "store_version": (13,),
}
Level = Literal["full", "base", "none"]


def group_of(item: int) -> str:
    return next(name for name, items in GROUPS.items() if item in items)


@dataclass
class ItemResult:
    item: int
    name: str
    title: str
    status: Literal["passed", "failed", "not_applicable"]
    detail: str = ""
    seconds: float = 0.0
    group: str = ""

    def __post_init__(self) -> None:
        self.detail = redact_text(self.detail)  # printed and written by the CLI
        self.group = self.group or group_of(self.item)


@dataclass
class SuiteReport:
    provider: str
    results: list[ItemResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.status != "failed" for r in self.results)

    @property
    def level(self) -> Level:
        """``full``: every item run passed or did not apply; ``base``: the items every
        provider must pass did, a declared capability's did not; ``none``: a base item
        failed. Over the items run (``--items`` runs fewer)."""
        if any(r.status == "failed" and r.group == "base" for r in self.results):
            return "none"
        return "full" if self.ok else "base"

    def groups(self) -> dict[str, str]:
        """Per group: "passed N", "failed N of M" or "not applicable" (items run only)."""
        out: dict[str, str] = {}
        for name in GROUPS:
            runs = [r for r in self.results if r.group == name]
            if not runs:
                continue
            failed = sum(r.status == "failed" for r in runs)
            passed = sum(r.status == "passed" for r in runs)
            out[name] = (f"failed {failed} of {len(runs)}" if failed
                         else f"passed {passed}" if passed else "not applicable")
        return out

    def summary(self) -> str:
        parts = "; ".join(f"{name} {state}" for name, state in self.groups().items())
        return f"conformance level: {self.level} ({parts})"


class NotApplicable(Exception):
    pass


# -- helpers ------------------------------------------------------------------------

_T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


class _Ctx:
    def __init__(self, target: SuiteTarget, adapter: MemoryAdapter) -> None:
        self.target = target
        self.adapter = adapter
        self.run_id = f"{target.run_prefix}-{uuid.uuid4().hex[:10]}"
        self._turn = 0

    @property
    def stores(self) -> bool:
        return self.adapter.info.stores_events

    def scope(self, persona: str = "alice", run_id: str | None = None) -> MemoryScope:
        return MemoryScope(run_id=run_id or self.run_id, persona_id=persona, agent_id="nanobot")

    def event(
        self,
        scope: MemoryScope,
        user: str,
        assistant: str = "Noted.",
        **tags: str,
    ) -> MemoryEvent:
        self._turn += 1
        return MemoryEvent(
            event_id=f"{scope.run_id}-{scope.persona_id}-{self._turn}",
            run_id=scope.run_id,
            user_id=scope.persona_id,
            agent_id=scope.agent_id or "nanobot",
            session_id=f"{scope.persona_id}-s1",
            turn_id=str(self._turn),
            timestamp=_T0 + timedelta(minutes=self._turn),
            messages=[
                Message(role="user", content=user),
                Message(role="assistant", content=assistant),
            ],
            metadata={"suite": "contract"},
            **tags,
        )

    async def record(self, event: MemoryEvent) -> WriteReceipt:
        return await self.adapter.record_event(event)

    async def ready(self, scope: MemoryScope) -> None:
        if supports(self.adapter, "readiness"):
            state = await self.adapter.wait_until_ready(scope, self.target.readiness_timeout_s)
            if state.status == "pending":
                raise ItemFailed(
                    f"still pending after {self.target.readiness_timeout_s}s: {state.detail}"
                )

    async def retrieve(
        self, scope: MemoryScope, query: str, max_tokens: int = 1500, **tags: str
    ) -> RetrieveResult:
        return await self.adapter.retrieve(
            RetrieveRequest.with_tags(
                tags,
                query=query,
                scope=scope,
                session_id=f"{scope.persona_id}-s1",
                budget=ContextBudget(max_tokens=max_tokens),
            )
        )


def _has(result: RetrieveResult, word: str) -> bool:
    return word.lower() in result.formatted_context.lower()


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ItemFailed(message)




# -- the items -----------------------------------------------------------------------

async def item_1_record_receipt(ctx: _Ctx) -> str:
    hollow = undelivered_capabilities(ctx.adapter)
    _expect(not hollow, f"declares {hollow} in info.capabilities without their methods")
    scope = ctx.scope()
    await ctx.adapter.setup_scope(scope)
    event = ctx.event(scope, "I live in Zanzibar and my pet axolotl is called Quetzal.")
    receipt = await ctx.record(event)
    allowed = STORED_WRITE_STATUSES if ctx.stores else ACCEPTED_WRITE_STATUSES
    _expect(receipt.status in allowed, f"status {receipt.status!r} not in {sorted(allowed)}")
    _expect(receipt.event_id == event.event_id, "receipt does not name the event")
    _expect(receipt.trace.backend_name == ctx.adapter.backend_name, "trace lacks backend name")
    _expect(receipt.trace.operation == "record_event", "trace operation is not record_event")
    return f"status={receipt.status} native_ids={receipt.native_ids[:3]}"


async def item_2_retrieve_after_readiness(ctx: _Ctx) -> str:
    scope = ctx.scope()
    await ctx.adapter.setup_scope(scope)
    await ctx.record(ctx.event(scope, "I live in Zanzibar and my pet axolotl is called Quetzal."))
    await ctx.ready(scope)
    result = await ctx.retrieve(scope, "Where do I live and what is my axolotl called?")
    found = _has(result, "zanzibar") or _has(result, "quetzal")
    if ctx.stores:
        _expect(found, f"recorded fact not retrieved; context was {result.formatted_context!r}")
        return f"{result.trace.retrieved_count} items, {result.trace.token_count} tokens"
    _expect(not found, "a provider that stores nothing returned the recorded text")
    return "provider stores nothing by design; recorded text correctly absent"


async def item_3_scope_isolation(ctx: _Ctx) -> str:
    a, b = ctx.scope("alice"), ctx.scope("bob")
    c = ctx.scope("alice", run_id=f"{ctx.run_id}-other")
    for s in (a, b, c):
        await ctx.adapter.setup_scope(s)
    await ctx.record(ctx.event(a, "I live in Reykjavik and I collect brass telescopes."))
    await ctx.record(ctx.event(b, "I live in Montevideo and I collect porcelain owls."))
    for s in (a, b):
        await ctx.ready(s)
    query = "Where do I live and what do I collect?"
    leaks = []
    if _has(await ctx.retrieve(b, query), "reykjavik"):
        leaks.append("bob (same run) saw alice's fact")
    if _has(await ctx.retrieve(c, query), "reykjavik"):
        leaks.append("alice in another run saw this run's fact")
    if _has(await ctx.retrieve(a, query), "montevideo"):
        leaks.append("alice saw bob's fact")
    # Request filters naming another scope's ids must be refused or have no effect.
    for hostile in (
        {"user_id": "alice"},
        {"AND": [{"user_id": "alice"}]},
        {"persona_id": "alice", "run_id": ctx.run_id},
    ):
        try:
            forged = await ctx.adapter.retrieve(
                RetrieveRequest(query=query, scope=b, budget=ContextBudget(max_tokens=1500),
                                filters=hostile)
            )
        except AdapterError:
            continue
        if _has(forged, "reykjavik"):
            leaks.append(f"bob's retrieve with filters={hostile} saw alice's fact")
    _expect(not leaks, "; ".join(leaks))
    if ctx.stores:
        _expect(_has(await ctx.retrieve(a, query), "reykjavik"), "alice lost her own fact")
    return "no cross-scope results (same run, other persona; same persona, other run)"


async def item_4_read_only_writes_nothing(ctx: _Ctx) -> str:
    scope = ctx.scope()
    await ctx.adapter.setup_scope(scope)
    await ctx.adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
    try:
        receipt = await ctx.record(ctx.event(scope, "I live in Timbuktu and I play the oboe."))
    finally:
        await ctx.adapter.set_mode(AdapterMode(read_only=False, reason="test_session_end"))
    _expect(receipt.status == "skipped_read_only", f"read-only write returned {receipt.status}")
    await ctx.ready(scope)
    result = await ctx.retrieve(scope, "Where do I live and what instrument do I play?")
    _expect(not _has(result, "timbuktu"), "a read-only write became retrievable")
    return "read-only write skipped and not retrievable"


# Room for the section's label and one whole turn (full_history never cuts a turn: ~45
# tokens with its heading), not for all four of item 5's turns.
SMALL_BUDGET = 120


async def item_5_budget(ctx: _Ctx) -> str:
    scope = ctx.scope()
    await ctx.adapter.setup_scope(scope)
    visits = [f"Last spring I visited {place} and loved the food markets there."
              for place in ("Lisbon", "Kyoto", "Nairobi", "Quito")]
    if ctx.target.budget_visits == "one_turn":
        visits = [" ".join(visits)]  # the same four sentences, one event
    for text in visits:
        await ctx.record(ctx.event(scope, text))
    await ctx.ready(scope)
    small = await ctx.retrieve(scope, "Which cities did I visit?", max_tokens=SMALL_BUDGET)
    tokens = count_tokens(small.formatted_context)
    _expect(tokens <= SMALL_BUDGET, f"formatted context has {tokens} tokens, budget "
            f"{SMALL_BUDGET}")
    _expect(small.trace.budget_max_tokens == SMALL_BUDGET, "trace does not record the budget")
    _expect(small.trace.token_count == tokens, "trace token_count differs from the context")
    big = await ctx.retrieve(scope, "Which cities did I visit?", max_tokens=1500)
    ctx_text = big.formatted_context
    if big.items:  # an empty section always fits a budget: it must hold something
        _expect(bool(small.items) and bool(small.formatted_context.strip()),
                f"{len(big.items)} items found with a large budget, none shown within "
                f"{SMALL_BUDGET} tokens")
    if ctx.stores or big.items:
        _expect(bool(ctx_text), "nothing retrieved with a large budget")
        head = f'<{SECTION_TAG} backend="{ctx.adapter.backend_name}"'
        _expect(ctx_text.startswith(head), f"context does not start with {head!r}")
        _expect(ctx_text.count(f"<{SECTION_TAG} ") == 1, "more than one section")
        for result in (small, big):
            if result.section_lines:  # optional; when given, the lines inside the frame
                body = "\n".join(result.formatted_context.split("\n")[1:-1])
                _expect(body == "\n".join(result.section_lines),
                        "section_lines are not the context's lines inside its frame")
    if ctx.adapter.info.condition_kind == "architecture":
        _expect(
            bool(big.trace.native_request),
            "architecture did not record how the budget went into its native retrieval",
        )
    return f"small={tokens} tokens; native budget args={big.trace.native_request}"


async def item_6_reset_scoped(ctx: _Ctx) -> str:
    a, b = ctx.scope("alice"), ctx.scope("bob")
    for s in (a, b):
        await ctx.adapter.setup_scope(s)
    await ctx.record(ctx.event(a, "I live in Valparaiso and I bake sourdough."))
    await ctx.record(ctx.event(b, "I live in Tromso and I knit sweaters."))
    for s in (a, b):
        await ctx.ready(s)
    receipt = await ctx.adapter.reset_scope(a)
    _expect(receipt.status == "reset", f"reset returned {receipt.status}")
    await ctx.ready(a)
    query = "Where do I live and what is my hobby?"
    _expect(not _has(await ctx.retrieve(a, query), "valparaiso"), "reset scope still has data")
    if ctx.stores:
        _expect(_has(await ctx.retrieve(b, query), "tromso"), "reset removed another scope's data")
    return f"reset detail: {receipt.detail}"


async def item_7_native_errors(ctx: _Ctx) -> str:
    target = ctx.target
    if target.make_failing is None:
        if target.no_native_backend:
            raise NotApplicable(target.no_native_backend)
        raise ItemFailed("no make_failing supplied: give a target whose backend fails")
    failing = await target.make_failing()
    try:
        scope = ctx.scope()
        errors: list[AdapterError] = []
        for call in (
            lambda: failing.setup_scope(scope),
            lambda: failing.record_event(ctx.event(scope, "I live in Oslo.")),
            lambda: failing.retrieve(
                RetrieveRequest(query="where", scope=scope, budget=ContextBudget(max_tokens=200))
            ),
        ):
            try:
                await call()
            except AdapterError as exc:
                errors.append(exc)
            except Exception as exc:
                raise ItemFailed(f"raised {type(exc).__name__} instead of AdapterError") from exc
        _expect(bool(errors), "no operation failed on the failing target")
        for exc in errors:
            _expect(bool(exc.raw), f"AdapterError from {exc.operation} has no raw diagnostics")
            _expect(exc.backend_name == failing.backend_name, "AdapterError lacks backend name")
        health = await failing.health()
        _expect(health.status != "ok", "health reports ok for a failing backend")
        return f"{len(errors)} AdapterErrors, e.g. {errors[0].raw.get('type')}"
    finally:
        await failing.aclose()


async def item_8_raw_provenance(ctx: _Ctx) -> str:
    scope = ctx.scope()
    await ctx.adapter.setup_scope(scope)
    await ctx.record(ctx.event(scope, "I live in Zanzibar and my pet axolotl is called Quetzal."))
    await ctx.ready(scope)
    result = await ctx.retrieve(scope, "Where do I live?")
    if not result.items:
        _expect(not ctx.stores, "no items to inspect")
        return "no items by design"
    required = ctx.adapter.info.item_fields
    for item in result.items:
        _expect(bool(item.native_id or item.raw), "an item has neither native id nor raw record")
        missing = [f for f in required if getattr(item, f) in (None, "", {})]
        _expect(not missing, f"declared item fields missing: {missing}")
    _expect(result.raw is not None, "raw native payload dropped")
    return f"items keep {', '.join(required) or 'native ids'}"


async def item_9_tags(ctx: _Ctx) -> str:
    mapping = ctx.adapter.info.tag_mapping
    scope = ctx.scope()
    await ctx.adapter.setup_scope(scope)
    await ctx.record(ctx.event(scope, "At work I use the Falcon dashboard.", context="work"))
    await ctx.record(ctx.event(scope, "At home I use the Heron dashboard.", context="personal"))
    await ctx.ready(scope)
    result = await ctx.retrieve(scope, "Which dashboard do I use?", context="work")
    if not ctx.stores:
        return f"mapping={mapping}; provider stores nothing"
    if mapping == "filter":
        _expect(_has(result, "falcon"), "work item missing under context=work filter")
        _expect(not _has(result, "heron"), "context=work filter returned the personal item")
    elif mapping == "semantic":
        _expect(_has(result, "falcon"), "work item missing under a semantic context hint")
    elif mapping == "metadata":
        contexts = {i.metadata.get("context") for i in result.items}
        _expect("work" in contexts, f"context not kept in item metadata (saw {contexts})")
    return f"mapping={mapping}"


async def item_10_no_reset_in_test_session(ctx: _Ctx) -> str:
    scope = ctx.scope()
    await ctx.adapter.setup_scope(scope)
    await ctx.record(ctx.event(scope, "I live in Zanzibar and my pet axolotl is called Quetzal."))
    await ctx.ready(scope)
    await ctx.adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
    try:
        receipt = await ctx.adapter.reset_scope(scope)
    finally:
        await ctx.adapter.set_mode(AdapterMode(read_only=False, reason="test_session_end"))
    _expect(receipt.status == "refused_read_only", f"reset in a test session: {receipt.status}")
    if ctx.stores:
        result = await ctx.retrieve(scope, "Where do I live?")
        _expect(_has(result, "zanzibar"), "memory lost after a refused reset")
    return "reset refused while read-only; memory intact"


async def item_11_gate_every_write(ctx: _Ctx) -> str:
    scope = ctx.scope()
    await ctx.adapter.setup_scope(scope)
    await ctx.record(ctx.event(scope, "I live in Zanzibar and my pet axolotl is called Quetzal."))
    await ctx.ready(scope)
    query = "Where do I live?"
    before = (await ctx.retrieve(scope, query)).formatted_context
    await ctx.adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
    checked = ["record_event"]
    try:
        receipts = [await ctx.record(ctx.event(scope, "Actually I moved to Ulaanbaatar."))]
        if supports(ctx.adapter, "bulk_ingest"):
            checked.append("record_events")
            receipts += await ctx.adapter.record_events(
                [ctx.event(scope, "I now live in Ulaanbaatar for good.")]
            )
        if supports(ctx.adapter, "feedback"):
            from nanobot_memory_adapters.contract import FeedbackRequest

            checked.append("apply_feedback")
            receipts.append(
                await ctx.adapter.apply_feedback(
                    FeedbackRequest(scope=scope, feedback="I moved to Ulaanbaatar.")
                )
            )
        if supports(ctx.adapter, "native_mutation"):
            reads = set(getattr(ctx.adapter, "read_mutations", ()))
            writes = sorted(set(getattr(ctx.adapter, "native_mutations", ())) - reads)
            for operation in writes or ["write"]:  # undeclared: any write must be refused
                checked.append(f"native_mutation.{operation}")
                answer = await ctx.adapter.native_mutation(
                    scope, operation, {"text": "I moved to Ulaanbaatar."})
                _expect(answer.get("status") == "skipped_read_only",
                        f"native_mutation {operation!r} during read-only returned {answer}")
        if supports(ctx.adapter, "session_end"):
            checked.append("end_session")
            ended = await ctx.adapter.end_session(scope, "s1")
            _expect(ended.get("status") == "skipped_read_only",
                    f"end_session during read-only returned {ended}")
    finally:
        await ctx.adapter.set_mode(AdapterMode(read_only=False, reason="test_session_end"))
    bad = [r.status for r in receipts if r.status != "skipped_read_only"]
    _expect(not bad, f"writes during read-only returned {bad}")
    await ctx.ready(scope)
    after = (await ctx.retrieve(scope, query)).formatted_context
    _expect(not _has_text(after, "ulaanbaatar"), "a gated write became retrievable")
    _expect(before == after, "context changed during read-only")
    return f"gated: {', '.join(checked)}"


def _has_text(text: str, word: str) -> bool:
    return word.lower() in text.lower()


async def item_12_ingest_lookahead(ctx: _Ctx) -> str:
    """Declared ``ingest_lookahead``: nothing of the announced events is retrievable before
    they are recorded, and what is retrieved after is what the same turns give without
    the lookahead."""
    adapter = ctx.adapter
    if not supports(adapter, "ingest_lookahead"):
        raise NotApplicable("ingest_lookahead not declared")
    ahead, plain = ctx.scope("alice"), ctx.scope("bob")
    turns = ["I live in Zanzibar and my pet axolotl is called Quetzal.",
             "My sister Ana keeps bees in Porto."]
    query = "Where do I live and what is my axolotl called?"
    for scope in (ahead, plain):
        await adapter.setup_scope(scope)
    events = [ctx.event(ahead, t) for t in turns]
    async with adapter.ingest_lookahead(events):
        await ctx.ready(ahead)  # an eventual provider storing ahead has had its time
        early = await ctx.retrieve(ahead, query)
        _expect(not _has(early, "zanzibar"), "an announced event was retrievable before "
                "it was recorded")
        if supports(adapter, "bulk_ingest"):  # the path a bench takes
            await adapter.record_events(events)
        else:
            for event in events:
                await ctx.record(event)
    for t in turns:
        await ctx.record(ctx.event(plain, t))
    for scope in (ahead, plain):
        await ctx.ready(scope)
    got = [[i.text for i in (await ctx.retrieve(s, query)).items] for s in (ahead, plain)]
    _expect(any("Zanzibar" in t for t in got[0]), "not retrievable after the lookahead")
    _expect(got[0] == got[1], f"with the lookahead {got[0]}, without {got[1]}")
    return f"{len(got[0])} item(s), the same with and without the lookahead"


async def item_13_prepared_recall(ctx: _Ctx) -> str:
    """Declared ``query_independent``: two queries get the same section. Declared
    ``store_version``: it holds while nothing is written (a retrieve is no write), and
    changes on a write to the scope, on a write through another adapter on the same
    store that this one can see, and on a reset: a recall prepared under it is never
    staler than a retrieve."""
    adapter = ctx.adapter
    independent = is_query_independent(adapter)
    versioned = supports(adapter, "store_version")
    if not independent and not versioned:
        raise NotApplicable("neither query_independent nor store_version declared")
    scope = ctx.scope("alice")
    await adapter.setup_scope(scope)
    checked: list[str] = []
    empty: str | None = None
    if supports(adapter, "store_version"):
        empty = await adapter.store_version(scope)
        _expect(await adapter.store_version(scope) == empty, "the version changed with no write")
    for text in ("I live in Zanzibar and my pet axolotl is called Quetzal.",
                 "My sister Ana keeps bees in Porto."):
        await ctx.record(ctx.event(scope, text))
    await ctx.ready(scope)
    if independent:
        one = await ctx.retrieve(scope, "Where do I live?")
        two = await ctx.retrieve(scope, "zzz unrelated words about volcano geology")
        _expect(one.formatted_context == two.formatted_context,
                "a provider declaring query_independent gave two queries different sections")
        checked.append("query ignored")
    if not versioned:
        return ", ".join(checked)
    assert supports(adapter, "store_version")
    held = await adapter.store_version(scope)
    if ctx.stores:
        _expect(held != empty, "two writes to the scope left the version unchanged")
    await ctx.retrieve(scope, "Where do I live?")
    _expect(await adapter.store_version(scope) == held, "a retrieve changed the version")
    other = await ctx.target.make()
    try:
        before = (await ctx.retrieve(scope, "Where does my cousin work?")).formatted_context
        await other.setup_scope(scope)
        await other.record_event(ctx.event(scope, "My cousin Oskar works in Reykjavik."))
        await ctx.ready(scope)
        after = (await ctx.retrieve(scope, "Where does my cousin work?")).formatted_context
        if after != before:
            _expect(await adapter.store_version(scope) != held,
                    "another adapter's write changed this one's section but not its version")
            checked.append("another writer seen")
    finally:
        await other.aclose()
    held = await adapter.store_version(scope)
    await adapter.reset_scope(scope)
    if ctx.stores:
        _expect(await adapter.store_version(scope) != held, "a reset left the version unchanged")
    checked.append("version follows writes and resets")
    return ", ".join(checked)


ITEMS: list[tuple[int, str, str, Callable[[_Ctx], Awaitable[str]]]] = [
    (1, "record_receipt", "record_event accepts a turn and returns a receipt",
     item_1_record_receipt),
    (2, "retrieve_after_readiness", "retrieve finds it after the readiness wait",
     item_2_retrieve_after_readiness),
    (3, "scope_isolation", "scope A data never appears in scope B", item_3_scope_isolation),
    (4, "read_only", "read-only sessions write nothing retrievable",
     item_4_read_only_writes_nothing),
    (5, "budget", "budget goes into native retrieval; context carries the backend label",
     item_5_budget),
    (6, "reset_scoped", "reset clears only the configured scope", item_6_reset_scoped),
    (7, "native_errors", "native errors become AdapterError with raw diagnostics",
     item_7_native_errors),
    (8, "raw_provenance", "raw results keep ids/scores/timestamps/type/provenance",
     item_8_raw_provenance),
    (9, "tags", "scenario/context/attribute follow the declared mapping", item_9_tags),
    (10, "no_reset_in_test_session", "test sessions never reset memory",
     item_10_no_reset_in_test_session),
    (11, "gate_every_write", "every write path obeys the read-only gate",
     item_11_gate_every_write),
    (12, "ingest_lookahead", "a declared lookahead stores nothing ahead and changes no result",
     item_12_ingest_lookahead),
    (13, "prepared_recall", "a query-independent section and a store version that follows "
     "every write", item_13_prepared_recall),
]


async def run_item(number: int, target: SuiteTarget) -> ItemResult:
    _, name, title, check = ITEMS[number - 1]
    started = time.perf_counter()
    adapter = await target.make()
    try:
        detail = await check(_Ctx(target, adapter))
        status: Literal["passed", "failed", "not_applicable"] = "passed"
    except NotApplicable as exc:
        status, detail = "not_applicable", str(exc)
    except ItemFailed as exc:
        status, detail = "failed", str(exc)
    except AdapterError as exc:
        status, detail = "failed", f"unexpected {exc} raw={exc.raw}"
    except Exception as exc:  # a contract method leaked a non-AdapterError
        status, detail = "failed", f"{type(exc).__name__} escaped a contract method: {exc}"
    finally:
        await adapter.aclose()
    return ItemResult(number, name, title, status, detail, time.perf_counter() - started)


async def run_contract_suite(
    target: SuiteTarget, items: list[int] | None = None,
    on_result: Callable[[ItemResult], None] | None = None,
) -> SuiteReport:
    probe = await target.make()
    name = probe.backend_name
    await probe.aclose()
    report = SuiteReport(provider=name)
    for number, *_ in ITEMS:
        if items and number not in items:
            continue
        result = await run_item(number, target)
        report.results.append(result)
        if on_result:
            on_result(result)
    return report
