"""Two processes on one config dir, as users run nanobot: a gateway holding an
``AgentLoop`` open (and with it the embedded Qdrant store) and ``nanobot agent -m`` from a
terminal. The terminal's turn cannot open the store; it stays pending (a lock is a wait,
not a failure) and the gateway delivers it. Nothing parked as failed, nothing twice."""

from __future__ import annotations

import os

import pytest

from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
from nanobot_memory_adapters.nanobot import plugin_for
from tests.nanobot.conftest import say
from tests.nanobot.test_cli import reply_of

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

pytest.importorskip("mem0")


async def test_gateway_and_cli_share_the_store_and_lose_nothing(home):
    home.write_memory({"memory": {"condition": "simple_rag"}})
    gateway = home.loop()
    await say(gateway, "alice", "I grow tomatoes on my balcony.")
    plugin = plugin_for(gateway)
    assert plugin is not None
    assert await plugin.flush(timeout_s=60) == 0  # the gateway now holds the store

    cli = home.cli("I bake sourdough every Sunday.", timeout=300)
    reply_of(cli)  # the terminal still gets its answer
    assert "Traceback" not in cli.stderr
    # the terminal cannot open the store the gateway holds: it either finds another
    # process draining the shared outbox, or tries, meets the lock and keeps its turn
    # (retryable) — never parks it as failed
    assert "parked" not in cli.stderr
    if "already accessed by another instance" in cli.stderr:
        assert "kept in the outbox" in cli.stderr

    # /memory-health in the terminal names the process holding the store (this one)
    health = reply_of(home.cli("/memory-health", timeout=300))
    assert f"store: held by pid {os.getpid()} (" in health, health
    assert "keeps answering" in health

    await say(gateway, "alice", "I also keep basil.")  # the gateway drains what is pending
    assert await plugin.flush(timeout_s=60) == 0
    stats = plugin.outbox.stats(plugin.provider)
    assert (stats.failed, stats.pending) == (0, 0), stats
    assert stats.delivered == 3

    adapter = plugin.adapter
    assert adapter is not None
    for persona, said in (("telegram-alice", "I grow tomatoes on my balcony."),
                          ("telegram-alice", "I also keep basil."),
                          ("cli-user", "I bake sourdough every Sunday.")):
        result = await adapter.retrieve(RetrieveRequest(
            query=said, scope=MemoryScope(run_id="default", persona_id=persona,
                                          agent_id="nanobot"),
            budget=ContextBudget(max_tokens=2000)))
        hits = [i for i in result.items if i.text == said]  # the user's own message
        assert len(hits) == 1, (persona, said, [i.text for i in result.items])
