"""What memory did, per turn: the opt-in line, trivial turns skipping recall, and the
last recall in ``/memory-health`` — on a real nanobot ``AgentLoop`` (full_history, a
local condition; nanobot's LLM is the HTTP test double)."""

from __future__ import annotations

from typing import Any

import pytest

from nanobot_memory_adapters.nanobot import plugin_for
from nanobot_memory_adapters.nanobot.settings import DEFAULT_TRIVIAL, parse_settings
from nanobot_memory_adapters.nanobot.turn_line import is_trivial
from tests.nanobot.conftest import agent_request, long_term_memory, say


def _memory(**plugin: object) -> dict:
    # recall on the reply path every turn (no prepared section): these tests count the
    # retrieves a turn makes (test_prepared_recall.py covers the prepared path)
    return {"memory": {"condition": "full_history", "budget": {"max_tokens": 800}},
            "nanobot": {"prepare_recall": False, **plugin}}


def _count_retrieves(plugin) -> list[str]:
    """Spy on the real adapter's retrieve (it still runs): the queries it was asked."""
    adapter = plugin.adapter
    original = adapter.retrieve
    asked: list[str] = []

    async def retrieve(request):
        asked.append(request.query)
        return await original(request)

    adapter.retrieve = retrieve
    return asked


async def _alice_told_her_drink(home: Any, memory: dict[str, Any]
                                ) -> tuple[Any, Any, list[str]]:
    """A loop on ``memory`` where alice said what she drinks (delivered), and the list
    every later retrieve's query is appended to."""
    home.write_memory(memory)
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "alice", "I love green tea with jasmine.")
    assert await plugin.flush() == 0
    return loop, plugin, _count_retrieves(plugin)


async def test_turn_line_and_trivial_turns_skip_recall(home, llm_double):
    loop, _plugin, asked = await _alice_told_her_drink(home, _memory(turn_line=True))

    reply = await say(loop, "alice", "What do I like to drink?")
    assert asked == ["What do I like to drink?"]
    last = reply.rstrip().splitlines()[-1]
    assert last.startswith("[memory: full_history — ") and " tokens, " in last, reply
    items = int(last.split("— ", 1)[1].split(" item", 1)[0])
    assert items >= 1, reply
    # the line is the user's only: nanobot's saved session and the next prompt lack it
    session = loop.sessions.get_or_create("telegram:alice")
    assert not any("[memory: " in str(m.get("content")) for m in session.messages)

    reply = await say(loop, "alice", "thanks!")
    assert asked == ["What do I like to drink?"], asked  # no retrieve for a trivial turn
    assert reply.rstrip().endswith("[memory: full_history — skipped (trivial)]"), reply
    # nothing new is appended to a trivial turn (the earlier recall stays in the history)
    assert long_term_memory(agent_request(llm_double, "thanks!")) == ""

    health = await say(loop, "alice", "/memory-health")
    assert "last recall (" in health and "skipped (trivial)" in health, health
    assert "[memory: " not in health  # commands get no per-turn line


async def test_turn_line_is_opt_in_and_per_channel(home, llm_double):
    home.write_memory(_memory(turn_line_channels=["slack"], turn_line=True))
    loop = home.loop()
    reply = await say(loop, "alice", "I love green tea with jasmine.")
    assert "[memory: " not in reply  # telegram is not in turn_line_channels

    home.write_memory(_memory())
    loop2 = home.loop()
    reply = await say(loop2, "bob", "I drink black coffee.")
    assert "[memory: " not in reply  # off by default


async def test_trivial_list_is_configurable(home, llm_double):
    loop, _plugin, asked = await _alice_told_her_drink(home, _memory(trivial_prompts=[]))
    await say(loop, "alice", "ok")
    assert asked == ["ok"]  # [] recalls on every turn


def test_trivial_patterns():
    for text in ("ok", "Thanks!", " thank you. ", "/memory-health", "👍", "k",
                 "/memory-mode mem0", "/remember that\nand this"):
        assert is_trivial(text, DEFAULT_TRIVIAL), text
    for text in ("ok, what did I say about tea?", "thanks — and my sister's name?",
                 "no milk in my coffee please",
                 # a path is a question about a file, not a command: it gets recall
                 "/notes/plan.txt — what did I say was in it?", "/etc/hosts?"):
        assert not is_trivial(text, DEFAULT_TRIVIAL), text


def test_a_bad_trivial_pattern_is_one_clear_line(tmp_path):
    path = tmp_path / "memory.json"
    loaded = parse_settings(path, {"memory": {"condition": "full_history"},
                                   "nanobot": {"trivial_prompts": ["(ok"]}})
    assert loaded.error and "trivial_prompts" in loaded.error and "(ok" in loaded.error
    assert "Traceback" not in loaded.error


@pytest.mark.servers
def test_turn_line_shows_in_the_terminal_after_a_streamed_reply(home):
    """``nanobot agent -m`` streams the reply and never prints the amended final message:
    the line never showed in a terminal. It is printed after the streamed reply."""
    home.write_memory({"memory": {"condition": "full_history"},
                       "nanobot": {"turn_line": True}})
    first = home.cli("My cat is called PEPPER.")
    assert first.returncode == 0, first.stderr[-2000:]
    proc = home.cli("What is my cat called?")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[memory: full_history —" in proc.stdout, proc.stdout
    assert proc.stdout.index("You said: What is my cat called?") < proc.stdout.index(
        "[memory: full_history —")
