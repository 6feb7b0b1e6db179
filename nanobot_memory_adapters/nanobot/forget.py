"""``/memory-forget``: the user asks the agent to forget them, and it does.

``/memory-forget`` shows what would go (this chat's scope); ``/memory-forget confirm``
removes the scope's turns from the shared outbox (so none is delivered afterwards),
deletes the scope through each provider's own deletion (``reset_scope``) — the active
one and every other provider the outbox shows holding a turn of it (built from
memory.json's blocks) — then asks each again with the forgotten turns' own words and says
whether anything of the scope still comes back, and what the backend keeps by its design
and what nanobot itself keeps (its session files). The forget is remembered in the
outbox, so a later backfill does not bring the turns back (``backfill.plan_backfill``).
A scope nothing is stored for is said to be so, not "forgotten".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.contract import (
    AdapterError,
    ContextBudget,
    MemoryAdapter,
    MemoryScope,
    RetrieveRequest,
)
from nanobot_memory_adapters.diagnostics import mentions_lock_contention
from nanobot_memory_adapters.events import MemoryEvent
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot.audience import Piece
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.plugin_state import EnsureAdapter, PluginState
from nanobot_memory_adapters.nanobot.seams import LOG_PREFIX as LOG
from nanobot_memory_adapters.nanobot.store_lock import holder_text
from nanobot_memory_adapters.nanobot.turns import command_scope

PROBE_QUERIES = 3
GENERIC_PROBE = "what do you remember about me"
# Builds another provider by name (from memory.json's block for it); closed by the caller.
Builder = Callable[[str], Awaitable[MemoryAdapter]]


class Forget:
    """``/memory-forget`` in a chat: this chat's scope, deleted everywhere it is held."""

    def __init__(self, state: PluginState, *, ensure_adapter: EnsureAdapter) -> None:
        self.state = state
        self._ensure_adapter = ensure_adapter

    def _target(self, ctx: Any) -> MemoryScope | str:
        """This chat's scope, or why there is nothing to forget here."""
        if self.state.status != "active":
            return (f"nothing to forget here: {self.state.reason or 'no memory provider is active'}"
                    " (nanobot's own MEMORY.md is edited by asking the agent or by hand)")
        if self.state.read_only:
            return ("memory is read-only (/memory-mode read-only on): forgetting is a write, "
                    "so it is refused; turn read-only off first")
        assert self.state.settings.memory is not None
        try:
            return command_scope(self.state.settings.memory, ctx)[0]
        except ValueError as exc:
            return f"this chat's memory scope cannot be built ({exc})"

    def forget_preview(self, ctx: Any) -> list[Piece]:
        scope = self._target(ctx)
        if isinstance(scope, str):
            return [Piece.plain(scope)]
        return [Piece.memory("\n".join([
            f"/memory-forget confirm would delete everything provider '{self.state.provider}' "
            f"holds for this chat's scope (run={scope.run_id} user={scope.persona_id} "
            f"agent={scope.agent_id}), through the provider's own deletion (and in every "
            "other provider the outbox shows holding it),",
            "and this scope's turns still waiting in the outbox. Other users' memory is "
            "not touched. nanobot's own session files are not deleted.",
        ]), scope.key, withheld=(
            "/memory-forget confirm deletes everything the memory holds for you (not for "
            "the others here), through each provider's own deletion. The details are shown "
            "only in a chat known to be yours alone."))]

    async def forget(self, ctx: Any) -> list[Piece]:
        scope = self._target(ctx)
        if isinstance(scope, str):
            return [Piece.plain(scope)]
        if not await self._ensure_adapter():
            last = self.state.health.last_error
            if last is not None and last.store_locked:
                return [Piece.operator(
                    held_reply(self.state.provider, self.state.data_dir, scope),
                    withheld="cannot forget here: another process holds the memory store; "
                    "nothing was deleted (the gateway's operator can run the forget)")]
            return [Piece.plain(
                f"cannot forget now: provider '{self.state.provider}' is not reachable")]
        adapter = self.state.adapter
        assert adapter is not None
        build = provider_builder(self.state.settings.raw, self.state.settings.path,
                                 self._nanobot_config(), exclude=self.state.provider)
        # no write and no delivery of this process in between: a turn still being written
        # would otherwise land after the forget (writes lock first, as the drain takes it)
        async with self.state.queues.writing(), self.state.queues.draining():
            self.state.queues.unqueued.drop_scope(scope.key)
            outcome = await forget_scope(adapter, self.state.queues.outbox, scope,
                                         provider=self.state.provider, build=build)
        self.state.cache.clear()
        active = outcome.active
        if active is not None and active.store_locked:
            return [Piece.operator(
                held_reply(self.state.provider, self.state.data_dir, scope),
                withheld="cannot forget here: another process holds the memory store; "
                "nothing was deleted (the gateway's operator can run the forget)")]
        report = outcome.report(self.state.provider, errors=False)
        pieces = [Piece.memory(report, scope.key, withheld=outcome.headline()
                               + " (the details are shown only in a chat known to be yours "
                               "alone)")]
        if errors := outcome.errors():  # a backend's text can quote a stored turn
            logger.warning("{}: /memory-forget: {}", LOG, errors)
            pieces.append(Piece.operator(errors, withheld="(the backend's error is in the "
                                                          "gateway's log)"))
        return pieces

    def _nanobot_config(self) -> Path | None:
        from nanobot_memory_adapters.nanobot import seams

        return seams.nanobot_config_path(self.state.sessions)


def held_reply(provider: str, data_dir: Path | None, scope: MemoryScope, *,
               in_chat: bool = True) -> str:
    """Forget when another process holds the embedded store: what to stop, not "again"."""
    who = holder_text(data_dir)
    there = "Send /memory-forget confirm in a chat of that process, or stop" if in_chat \
        else "Stop"
    return (f"cannot forget here: '{provider}' keeps an embedded store that {who} holds open, "
            f"and only one process can open it. Nothing was deleted. {there} it and run "
            f"`nanobot-memory forget --persona {scope.persona_id} --run {scope.run_id} --yes`")


@dataclass
class ProviderForget:
    """One provider's part of a forget."""

    name: str
    status: str  # reset | stores_nothing | refused_read_only | nothing_to_reset | error
    detail: str | None = None
    left: int = 0  # items of the scope a search still returns
    store_locked: bool = False
    error: str | None = None  # the backend's text (operator text: it can quote a turn)

    @property
    def done(self) -> bool:
        return self.status in ("reset", "stores_nothing", "nothing_to_reset") \
            and self.left == 0

    def line(self, *, errors: bool = True) -> str:
        if self.status == "stores_nothing":
            return (f"'{self.name}' stores nothing from conversations: nothing of this scope "
                    "was ever kept there, so nothing was deleted; what it shows is its "
                    "configuration (memory.json), which forgetting does not change")
        if self.status == "error":
            why = f" ({self.error})" if errors and self.error else ""
            return f"'{self.name}' still holds it: {self.detail}{why}"
        if self.status not in ("reset", "nothing_to_reset"):
            return f"'{self.name}' still holds it: it answered {self.status}"
        check = (f"a search still returned {self.left} item(s) of this scope" if self.left
                 else "searching for it again returns nothing")
        return f"check ({self.name}): {check}"


@dataclass
class ForgetOutcome:
    scope: MemoryScope
    outbox_rows: int
    results: list[ProviderForget] = field(default_factory=list)
    busy: bool = False
    nothing: bool = False  # nothing of the scope is stored anywhere the outbox knows
    known: list[str] = field(default_factory=list)  # scopes the outbox knows (nothing)

    @property
    def active(self) -> ProviderForget | None:
        return self.results[0] if self.results else None

    @property
    def status(self) -> str:
        if self.busy:
            return "busy"
        if self.nothing:
            return "nothing_stored"
        return self.active.status if self.active else "nothing_stored"

    @property
    def left(self) -> int:
        return sum(r.left for r in self.results)

    @property
    def done(self) -> bool:
        return not self.busy and not self.nothing and all(r.done for r in self.results)

    def headline(self) -> str:
        """The outcome in fixed words, nothing of the scope in them: what a chat that is
        not the person's alone is told (the report names the scope, a person's id)."""
        if self.busy:
            return "not forgotten yet: another nanobot process is delivering turns; try again"
        if self.nothing:
            return "nothing stored for you; nothing was deleted"
        return "forgotten" if self.done else "NOT fully forgotten"

    def errors(self) -> str:
        """The backends' own error text, one line each (operator text)."""
        return "\n".join(f"'{r.name}': {r.error}" for r in self.results if r.error)

    def report(self, provider: str, *, list_known: bool = False, errors: bool = True) -> str:
        """The whole outcome; ``errors=False`` leaves the backends' error text out (a
        chat's reply: it goes to the operator, ``errors()``)."""
        if self.busy:
            return ("not forgotten yet: another nanobot process is delivering turns to the "
                    "memory right now (one of this chat's could land after the deletion); "
                    "nothing was deleted. Try again in a moment")
        if self.nothing:
            why = "" if self.results else (
                f"no provider the outbox knows holds a turn of it and '{provider}' returns "
                "nothing for it; ")
            line = f"nothing stored for this scope ({self.scope.key}): {why}nothing was deleted"
            line += "".join(f"\n{r.line(errors=errors)}" for r in self.results)
            if list_known:
                line += ("\nknown scopes: " + (", ".join(self.known) if self.known else
                                               "none (the outbox knows no turn yet)"))
            return line
        deleted = [r.name for r in self.results if r.status in ("reset", "nothing_to_reset")]
        head = ("forgotten" if self.done else
                "NOT fully forgotten (see below what still holds it)")
        names = " and ".join(f"'{n}'" for n in deleted) or "no provider"
        lines = [f"{head}: {names} deleted this chat's memory (scope {self.scope.key}); "
                 f"{self.outbox_rows} outbox row(s) of it removed. What stays: nanobot's "
                 "own session history of the chat (its next replies still see this "
                 "conversation; /new starts a fresh one)."]
        lines += [r.line(errors=errors) for r in self.results]
        for r in self.results:
            if r.detail and r.status in ("reset", "nothing_to_reset"):
                lines.append(f"what '{r.name}' did: {r.detail}")
        lines.append("a later backfill skips this scope's turns up to now (unless told "
                     "--include-forgotten).")
        lines.append("nanobot itself keeps this conversation in its session files "
                     "(workspace sessions/); delete them there if they must go too.")
        return "\n".join(lines)


async def forget_scope(adapter: MemoryAdapter, outbox: Outbox, scope: MemoryScope, *,
                       wait_s: float = 30.0, provider: str | None = None,
                       build: Builder | None = None) -> ForgetOutcome:
    """The one forget, for chat and CLI: the scope's outbox rows go first (nothing is
    delivered after), then each holding provider's own deletion (the active one, then
    every other the outbox shows holding the scope, built with ``build``), then a search
    with the forgotten turns' own words (and a generic question) that must come back
    empty. All of it waits (up to ``wait_s``) for the outbox's drain lock, so no other
    process delivers a row of the scope between the removal and the deletion."""
    name = provider or adapter.info.name
    async with outbox.drain_lock_waiting(wait_s) as mine:
        if not mine:
            # Another process is delivering: one of this scope's rows could land after
            # the deletion. Nothing is deleted; the caller says to try again.
            return ForgetOutcome(scope, 0, busy=True)
        holders = await asyncio.to_thread(outbox.holders, scope)
        try:
            holds = await _holds_any(adapter, scope)
        except AdapterError as exc:
            if mentions_lock_contention(exc):
                # another process holds the store: nothing is touched, not even the
                # outbox (its rows are that process's to deliver or to forget)
                return ForgetOutcome(scope, 0, [ProviderForget(
                    name, "error", "its store is held", store_locked=True,
                    error=_short(exc))])
            holds = True  # cannot tell: go on and let the deletion say what happened
        events = await asyncio.to_thread(outbox.forget_scope, scope.key)
        if not events and not holders and not holds:
            # nothing stored now, but the request is a fact: nothing said before it is
            # filed into this scope later (a migration, a backfill)
            await asyncio.to_thread(outbox.forget_delivered, scope, set())
            known = await asyncio.to_thread(outbox.known_scopes)
            return ForgetOutcome(scope, 0, nothing=True, known=known)
        results = [await _forget_in(name, adapter, scope, events)]
        for other in sorted(holders - {name}):
            results.append(await _forget_other(other, build, scope, events))
        if all(r.status == "stores_nothing" for r in results):
            # nothing of the scope was ever stored: said so, not "forgotten"
            await asyncio.to_thread(outbox.forget_delivered, scope, set())
            known = await asyncio.to_thread(outbox.known_scopes)
            return ForgetOutcome(scope, len(events), results, nothing=True, known=known)
        gone = {r.name for r in results if r.done}
        await asyncio.to_thread(outbox.forget_delivered, scope, gone)
    return ForgetOutcome(scope, len(events), results)


async def _holds_any(adapter: MemoryAdapter, scope: MemoryScope) -> bool:
    """Whether a generic question finds anything of the scope (raises AdapterError)."""
    if not adapter.info.stores_events:
        return False
    result = await adapter.retrieve(RetrieveRequest(
        query=GENERIC_PROBE, scope=scope, budget=ContextBudget(max_tokens=2000)))
    return bool(result.items)


async def _forget_other(name: str, build: Builder | None, scope: MemoryScope,
                        events: list[MemoryEvent]) -> ProviderForget:
    if build is None:
        return ProviderForget(name, "error", "this process cannot build it (run "
                              "`nanobot-memory forget` with memory.json)")
    try:
        adapter = await build(name)
    except Exception as exc:  # its block is missing or its store cannot be opened here
        return ProviderForget(name, "error", "it cannot be opened here",
                              store_locked=mentions_lock_contention(exc), error=_short(exc))
    try:
        return await _forget_in(name, adapter, scope, events)
    finally:
        await adapter.aclose()


async def _forget_in(name: str, adapter: MemoryAdapter, scope: MemoryScope,
                     events: list[MemoryEvent]) -> ProviderForget:
    """One provider's deletion and the check after it."""
    if not adapter.info.stores_events:
        return ProviderForget(name, "stores_nothing")
    try:
        receipt = await adapter.reset_scope(scope)
    except AdapterError as exc:
        return ProviderForget(name, "error", "its deletion failed",
                              store_locked=mentions_lock_contention(exc), error=_short(exc))
    left = 0
    if receipt.status == "reset":
        queries = [m.content for e in events[-PROBE_QUERIES:] for m in e.messages
                   if m.role == "user" and m.content.strip()][:PROBE_QUERIES]
        for query in [*queries, GENERIC_PROBE]:
            result = await adapter.retrieve(RetrieveRequest(
                query=query, scope=scope, budget=ContextBudget(max_tokens=2000)))
            left = max(left, len(result.items))
    return ProviderForget(name, receipt.status, receipt.detail, left)


def _short(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def provider_builder(raw: dict[str, Any], settings_path: Path, nanobot_config: Path | None,
                     *, exclude: str) -> Builder:
    """Builds a provider other than the active one from memory.json's own block for it
    (``"llm": "nanobot"`` resolved from nanobot's config)."""

    async def build(name: str) -> MemoryAdapter:
        from nanobot_memory_adapters.nanobot.settings import (
            data_dir_for,
            parse_settings,
            with_provider,
        )
        from nanobot_memory_adapters.nanobot_llm import resolve_nanobot_llm
        from nanobot_memory_adapters.registry import available_providers, load_provider

        if name == exclude:
            raise ValueError(f"'{name}' is the active provider")
        spec = available_providers().get(name)
        if spec is None:
            raise ValueError(f"'{name}' is not installed")
        settings = parse_settings(settings_path, with_provider(raw, name, spec.kind))
        if settings.error or settings.memory is None:
            raise ValueError(settings.error or "no memory block")
        memory = resolve_nanobot_llm(settings.memory, nanobot_config)
        return await asyncio.to_thread(load_provider, memory, data_dir=data_dir_for(settings))

    return build
