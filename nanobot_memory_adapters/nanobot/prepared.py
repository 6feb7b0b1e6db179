"""Recall prepared off the reply path, for providers whose recall ignores the message.

A provider that declares ``query_independent`` and the ``store_version`` capability
(full_history) returns the same section whatever the user writes next. So once a turn's
writes have landed, the plugin retrieves the session's next section in the background
and keeps it with the store's version from before that retrieve; the next turn serves it
when the request is the same but for its query and the version still holds (nothing was
written to the scope by this process, nor anything by another process since). Otherwise
the turn retrieves as usual: a prepared section is never staler than a retrieve would be.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from nanobot_memory_adapters.contract import (
    MemoryAdapter,
    RetrieveRequest,
    supports,
)
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot.plugin_state import PluginState
from nanobot_memory_adapters.nanobot.state import CACHE_SESSIONS, LOG
from nanobot_memory_adapters.provider import is_query_independent

# The query a prepared retrieve carries (and its trace shows): the message is not known.
PREPARED_QUERY = "-"


@dataclass(frozen=True)
class PreparedRecall:
    adapter: MemoryAdapter  # the provider instance that retrieved it (a switch drops it)
    request_key: str  # the request but for its query
    version: str  # the store's version taken before the retrieve
    text: str
    items: int


def request_key(request: RetrieveRequest) -> str:
    return request.model_dump_json(exclude={"query"})


def preparable(adapter: MemoryAdapter | None) -> bool:
    """Whether this provider's recall can be prepared before the message is known."""
    return (adapter is not None and is_query_independent(adapter)
            and supports(adapter, "store_version"))


class PreparedRecalls:
    """Per session: the request of its last recall, and the section prepared for the next."""

    def __init__(self, state: PluginState) -> None:
        self.state = state
        self._requests: OrderedDict[str, RetrieveRequest] = OrderedDict()
        self._prepared: dict[str, PreparedRecall] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self.served = 0  # turns answered from a prepared section (the bench, tests)

    def remember(self, session_key: str, request: RetrieveRequest) -> None:
        """The session's latest recall request: what its next turn will most likely ask."""
        if not self.state.settings.plugin.prepare_recall or not preparable(self.state.adapter):
            return
        self._requests[session_key] = request
        self._requests.move_to_end(session_key)
        while len(self._requests) > CACHE_SESSIONS:
            old, _ = self._requests.popitem(last=False)
            self._prepared.pop(old, None)

    def soon(self, session_key: str) -> None:
        """A write of the session landed: prepare its next recall in the background (once
        more after the running preparation, if one is running). Never raises."""
        if session_key not in self._requests or self.state.closed:
            return
        running = self._tasks.get(session_key)
        if running is not None and not running.done():
            self._again.add(session_key)
            return
        try:
            self._tasks[session_key] = asyncio.get_running_loop().create_task(
                self._prepare(session_key), name=f"memory-prepare-{session_key}")
        except RuntimeError:  # no running loop (a synchronous caller at exit)
            return

    async def _prepare(self, session_key: str) -> None:
        try:
            while True:
                self._again.discard(session_key)
                await self._prepare_once(session_key)
                if session_key not in self._again:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the turn retrieves as usual (and reports a failure)
            self._prepared.pop(session_key, None)
            logger.debug("{}: could not prepare the next recall of {}: {}", LOG, session_key,
                         exc)
        finally:
            self._tasks.pop(session_key, None)

    async def _prepare_once(self, session_key: str) -> None:
        adapter = self.state.adapter
        remembered = self._requests.get(session_key)
        if (remembered is None or not preparable(adapter)
                or not supports(adapter, "store_version")
                or self.state.status != "active" or self.state.closed):
            self._prepared.pop(session_key, None)
            return
        request = remembered.model_copy(update={"query": PREPARED_QUERY})
        timeout = self.state.settings.plugin.recall_timeout_s
        version = await asyncio.wait_for(adapter.store_version(request.scope), timeout)
        result = await asyncio.wait_for(adapter.retrieve(request), timeout)
        if adapter is not self.state.adapter:  # switched meanwhile: not this provider's
            return
        self.state.health.reads_failing_since = None  # a retrieve succeeded
        self._prepared[session_key] = PreparedRecall(
            adapter, request_key(request), version, result.formatted_context or "",
            len(result.shown))

    def prepared_for(self, session_key: str) -> PreparedRecall | None:
        """The section prepared for the session's next turn, if any."""
        return self._prepared.get(session_key)

    async def take(self, session_key: str, request: RetrieveRequest,
                   timeout_s: float) -> PreparedRecall | None:
        """The section prepared for this turn, if it is still what a retrieve would give:
        same provider instance, same request but for the query, same store version. A
        preparation still running for the session is awaited (it is this retrieve, begun
        earlier); all of it within ``timeout_s``."""
        adapter = self.state.adapter
        if (not self.state.settings.plugin.prepare_recall  # switched off since it was made
                or not supports(adapter, "store_version")
                or session_key not in self._requests):
            return None
        try:
            async with asyncio.timeout(timeout_s):
                running = self._tasks.get(session_key)
                if running is not None and not running.done():
                    await asyncio.wait({running})
                prepared = self._prepared.get(session_key)
                if (prepared is None or prepared.adapter is not adapter
                        or prepared.request_key != request_key(request)):
                    return None
                version = await adapter.store_version(request.scope)
        except Exception as exc:  # cannot tell in time: retrieve as usual
            logger.debug("{}: no prepared recall for {} ({})", LOG, session_key,
                         exc or type(exc).__name__)
            return None
        if version != prepared.version:
            if self._prepared.get(session_key) is prepared:  # not a newer one
                del self._prepared[session_key]
            return None
        self.served += 1
        return prepared

    async def wait_idle(self) -> None:
        """Until no preparation is running (tests, and a caller that wants it done)."""
        while running := [t for t in self._tasks.values() if not t.done()]:
            await asyncio.wait(running)

    async def aclose(self) -> None:
        """Stop preparing (the provider is about to be closed)."""
        tasks = [t for t in self._tasks.values() if not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._prepared.clear()
