"""``/memory-forget``: the user asks the agent to forget them, and it does.

``/memory-forget`` shows what would go (this chat's scope in the active provider);
``/memory-forget confirm`` deletes it through the provider's own deletion
(``reset_scope``), removes the scope's turns from the shared outbox (so none is
delivered afterwards), then asks the provider again with the forgotten turns' own words
and says whether anything of the scope still comes back — and what the backend keeps by
its design (the provider's reset detail) and what nanobot itself keeps (its session
files).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from nanobot_memory_adapters.contract import (
    AdapterError,
    ContextBudget,
    MemoryAdapter,
    MemoryScope,
    RetrieveRequest,
)
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.plugin_state import PluginState
from nanobot_memory_adapters.nanobot.turns import command_scope

PROBE_QUERIES = 3
GENERIC_PROBE = "what do you remember about me"


class ForgetMixin(PluginState):
    def _target(self, ctx: Any) -> MemoryScope | str:
        """This chat's scope, or why there is nothing to forget here."""
        if self.status != "active":
            return (f"nothing to forget here: {self.reason or 'no memory provider is active'}"
                    " (nanobot's own MEMORY.md is edited by asking the agent or by hand)")
        if self.read_only:
            return ("memory is read-only (/memory-mode read-only on): forgetting is a write, "
                    "so it is refused; turn read-only off first")
        assert self.settings.memory is not None
        try:
            return command_scope(self.settings.memory, ctx)[0]
        except ValueError as exc:
            return f"this chat's memory scope cannot be built ({exc})"

    def forget_preview(self, ctx: Any) -> str:
        scope = self._target(ctx)
        if isinstance(scope, str):
            return scope
        return "\n".join([
            f"/memory-forget confirm would delete everything provider '{self.provider}' "
            f"holds for this chat's scope (run={scope.run_id} user={scope.persona_id} "
            f"agent={scope.agent_id}), through the provider's own deletion,",
            "and this scope's turns still waiting in the outbox. Other users' memory is "
            "not touched. nanobot's own session files are not deleted.",
        ])

    async def forget(self, ctx: Any) -> str:
        scope = self._target(ctx)
        if isinstance(scope, str):
            return scope
        if not await self._ensure_adapter():
            return f"cannot forget now: provider '{self.provider}' is not reachable"
        adapter = self.adapter
        assert adapter is not None
        async with self._lock():  # no delivery of this process in between
            try:
                outcome = await forget_scope(adapter, self.outbox, scope)
            except AdapterError as exc:
                self._note_error("forget", exc, retryable=exc.retryable)
                return (f"forgetting failed in '{self.provider}': {exc}. Try "
                        "/memory-forget confirm again")
        self.cache.clear()
        return outcome.report(self.provider)


@dataclass
class ForgetOutcome:
    scope: MemoryScope
    outbox_rows: int
    status: str
    detail: str | None
    left: int

    @property
    def done(self) -> bool:
        return self.status == "reset" and self.left == 0

    def report(self, provider: str) -> str:
        if self.status == "busy":
            return ("not forgotten yet: another nanobot process is delivering turns to the "
                    "memory right now (one of this chat's could land after the deletion); "
                    "nothing was deleted. Try again in a moment")
        if self.status != "reset":
            return (f"not forgotten: '{provider}' answered {self.status}; "
                    f"{self.outbox_rows} queued row(s) of the scope were removed")
        head = ("forgotten" if not self.left else
                "NOT fully forgotten (the check below still finds some of it)")
        lines = [f"{head}: '{provider}' deleted this chat's memory (scope "
                 f"{self.scope.key}); {self.outbox_rows} outbox row(s) of it removed.",
                 "check: " + (f"a search still returned {self.left} item(s) of this scope"
                              if self.left else "searching for it again returns nothing")]
        if self.detail:
            lines.append(f"what the backend says it keeps: {self.detail}")
        lines.append("nanobot itself keeps this conversation in its session files "
                     "(workspace sessions/); delete them there if they must go too.")
        return "\n".join(lines)


async def forget_scope(adapter: MemoryAdapter, outbox: Outbox, scope: MemoryScope, *,
                       wait_s: float = 30.0) -> ForgetOutcome:
    """The one forget, for chat and CLI: the scope's outbox rows go first (nothing is
    delivered after), then the provider's own deletion, then a search with the forgotten
    turns' own words (and a generic question) that must come back empty. All of it waits
    (up to ``wait_s``) for the outbox's drain lock, so no other process delivers a row of
    the scope between the removal and the deletion."""
    async with outbox.drain_lock_waiting(wait_s) as mine:
        if not mine:
            # Another process is delivering: one of this scope's rows could land after
            # the deletion. Nothing is deleted; the caller says to try again.
            return ForgetOutcome(scope, 0, "busy", None, 0)
        events = await asyncio.to_thread(outbox.forget_scope, scope.key)
        receipt = await adapter.reset_scope(scope)
    left = 0
    if receipt.status == "reset":
        queries = [m.content for e in events[-PROBE_QUERIES:] for m in e.messages
                   if m.role == "user" and m.content.strip()][:PROBE_QUERIES]
        for query in [*queries, GENERIC_PROBE]:
            result = await adapter.retrieve(RetrieveRequest(
                query=query, scope=scope, budget=ContextBudget(max_tokens=2000)))
            left = max(left, len(result.items))
    return ForgetOutcome(scope, len(events), receipt.status, receipt.detail, left)
