"""Recall prepared off the reply path (full_history: query-independent, with a store
version): a turn is served the section retrieved after the previous turn's writes landed,
and never one that a write since — this process's or another process's — made stale."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest

from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
)
from nanobot_memory_adapters.nanobot import plugin_for
from tests.nanobot.conftest import agent_request, long_term_memory, say

FULL_HISTORY = {"memory": {"condition": "full_history", "budget": {"max_tokens": 800}},
                "nanobot": {"turn_line": True}}
ALICE = MemoryScope(run_id="default", persona_id="telegram-alice", agent_id="nanobot")


async def _alice_told(home, llm_double):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "alice", "I keep three ferrets called Ada, Bo and Cy.")
    assert await plugin.flush() == 0
    await plugin.prepared.wait_idle()
    prepared = plugin.prepared.prepared_for("telegram:alice")
    assert prepared is not None and "three ferrets" in prepared.text  # there to be served
    return loop, plugin


async def _section_now(plugin) -> str:
    """What a retrieve gives right now for alice's next turn."""
    result = await plugin.adapter.retrieve(RetrieveRequest(
        query="anything", scope=ALICE, session_id=None,
        budget=plugin.settings.memory.budget.to_budget()))
    return result.formatted_context


async def test_next_turn_is_served_the_prepared_section_equal_to_a_retrieve(home, llm_double):
    loop, plugin = await _alice_told(home, llm_double)
    expected = await _section_now(plugin)
    assert "three ferrets" in expected
    served = plugin.prepared.served

    reply = await say(loop, "alice", "What pets do I have?")
    assert plugin.prepared.served == served + 1
    shown = long_term_memory(agent_request(llm_double, "What pets do I have?"))
    assert shown == expected
    assert "(prepared)" in reply  # the per-turn line says where the recall came from


async def test_a_write_by_this_process_since_is_not_served_stale(home, llm_double):
    loop, plugin = await _alice_told(home, llm_double)
    # this process writes to alice's scope outside a turn (as a backfill or an import)
    await plugin.adapter.record_event(MemoryEvent(
        event_id="own-1", run_id="default", user_id="telegram-alice", agent_id="nanobot",
        session_id="import", turn_id="1", timestamp=datetime.now(UTC),
        messages=[Message(role="user", content="I also adopted a tortoise named Dot.")]))
    served = plugin.prepared.served
    await say(loop, "alice", "Which animals live with me?")
    assert plugin.prepared.served == served  # the version moved: retrieved, not served
    shown = long_term_memory(agent_request(llm_double, "Which animals live with me?"))
    assert "tortoise named Dot" in shown
    assert "three ferrets" in shown


@pytest.mark.servers  # a second process
async def test_a_write_by_another_process_since_is_not_served_stale(home, llm_double):
    loop, plugin = await _alice_told(home, llm_double)
    # another process (a second nanobot on the same config dir) writes to the same file
    script = textwrap.dedent(f"""
        import asyncio
        from datetime import UTC, datetime
        from nanobot_memory_adapters.conditions.full_history import FullHistory
        from nanobot_memory_adapters.contract import MemoryEvent, Message
        from nanobot_memory_adapters.store import StoreProvider

        async def main():
            adapter = StoreProvider(FullHistory({str(plugin.adapter.store.path)!r}))
            receipt = await adapter.record_event(MemoryEvent(
                event_id="other-1", run_id="default", user_id="telegram-alice",
                agent_id="nanobot", session_id="elsewhere", turn_id="1",
                timestamp=datetime.now(UTC),
                messages=[Message(role="user", content="I moved to Reykjavik last week.")]))
            assert receipt.status == "committed", receipt
            await adapter.aclose()

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    served = plugin.prepared.served
    # the store as the next request will see it (this turn's own write lands after its
    # reply, so a retrieve after the turn would hold the turn too)
    expected = await _section_now(plugin)
    await say(loop, "alice", "Where do I live now?")
    assert plugin.prepared.served == served
    shown = long_term_memory(agent_request(llm_double, "Where do I live now?"))
    assert "moved to Reykjavik" in shown
    assert shown == expected


async def test_another_persons_turn_never_gets_alices_prepared_section(home, llm_double):
    loop, plugin = await _alice_told(home, llm_double)
    served = plugin.prepared.served
    await say(loop, "bob", "What pets do I have?")
    assert plugin.prepared.served == served
    shown = long_term_memory(agent_request(llm_double, "What pets do I have?"))
    assert "ferrets" not in shown


async def test_in_a_group_the_next_speaker_never_gets_the_last_speakers_section(
        home, llm_double):
    """One session, two people (``group_recall: personal``): the section prepared after
    Ann's turn is Ann's; Ben's turn in the same session retrieves his own."""
    home.write_memory({**FULL_HISTORY, "nanobot": {"group_recall": "personal"}})
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None

    async def group(sender: str, text: str) -> None:
        await loop.process_direct(text, session_key="telegram:-500", channel="telegram",
                                  chat_id="-500", sender_id=sender)

    await loop.process_direct("My codename is ZEBRA-PAPAYA.", session_key="telegram:1001",
                              channel="telegram", chat_id="1001", sender_id="1001|ann")
    assert await plugin.flush() == 0
    await group("1001|ann", "Hi all, what is my codename?")
    assert "ZEBRA-PAPAYA" in agent_request(llm_double, "Hi all, what is my codename?").system
    assert await plugin.flush() == 0
    await plugin.prepared.wait_idle()
    prepared = plugin.prepared.prepared_for("telegram:-500")
    assert prepared is not None and "ZEBRA-PAPAYA" in prepared.text  # Ann's, ready
    served = plugin.prepared.served
    await group("2002|ben", "Ben here, any codename for me?")
    assert plugin.prepared.served == served
    assert "ZEBRA" not in agent_request(llm_double, "Ben here, any codename").all_text


async def test_a_provider_switch_drops_what_was_prepared(home, llm_double):
    loop, plugin = await _alice_told(home, llm_double)
    await say(loop, "alice", "/memory-mode no_memory")
    assert plugin.prepared.prepared_for("telegram:alice") is None
    served = plugin.prepared.served
    await say(loop, "alice", "Do you remember my pets?")
    assert plugin.prepared.served == served
    assert "ferrets" not in long_term_memory(
        agent_request(llm_double, "Do you remember my pets?"))


def test_budget_is_part_of_what_must_match() -> None:
    """A prepared section is keyed by the whole request but its query."""
    from nanobot_memory_adapters.nanobot.prepared import request_key

    one = RetrieveRequest(query="a", scope=ALICE, budget=ContextBudget(max_tokens=800))
    assert request_key(one) == request_key(one.model_copy(update={"query": "b"}))
    assert request_key(one) != request_key(
        one.model_copy(update={"budget": ContextBudget(max_tokens=700)}))
    assert request_key(one) != request_key(one.model_copy(update={
        "scope": MemoryScope(run_id="default", persona_id="telegram-bob", agent_id="nanobot")}))


async def test_switched_off_nothing_prepared_earlier_is_served(home, llm_double):
    loop, plugin = await _alice_told(home, llm_double)
    plugin.settings.plugin = plugin.settings.plugin.model_copy(update={"prepare_recall": False})
    served = plugin.prepared.served
    await say(loop, "alice", "What pets do I have, again?")
    assert plugin.prepared.served == served
    assert "three ferrets" in long_term_memory(
        agent_request(llm_double, "What pets do I have, again?"))
