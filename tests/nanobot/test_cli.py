"""``nanobot agent -c CONFIG -m TEXT`` as a subprocess: the installed entry point, the
``-c`` directory's memory.json, and the outbox flushed before the process exits."""

from __future__ import annotations

import pytest

from tests.nanobot.conftest import agent_request, long_term_memory

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers


def reply_of(proc) -> str:
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split("🐈 nanobot", 1)[-1].strip()


async def test_cli_agent_runs_with_the_plugin(home, llm_double):
    home.write_memory({"memory": {"condition": "full_history"}})
    first = reply_of(home.cli("I keep bees on my roof."))
    assert "You said: I keep bees on my roof." in first

    health = reply_of(home.cli("/memory-health"))
    # the previous process delivered its turn before exiting (nanobot drains background tasks)
    assert "memory: full_history — ok" in health
    assert "outbox: 0 pending, 0 failed, 1 delivered" in health

    second = reply_of(home.cli("What do I keep on my roof?"))
    assert "memory sections: full_history:default/cli-user." in second
    req = agent_request(llm_double, "What do I keep on my roof?")
    assert "I keep bees on my roof." in long_term_memory(req)

    help_text = reply_of(home.cli("/help"))
    assert "/memory-mode [read-only on|off | retry-failed | <provider> [--backfill]]" in help_text
    assert "/memory-forget" in help_text
    assert "/memory-health" in help_text


async def test_cli_with_a_broken_memory_config_still_answers(home):
    home.write_memory('{"memory": {"backend": "mem0", "mem0": {"embedding_dims": "lots"}}}')
    proc = home.cli("Are you there?")
    assert "You said: Are you there?" in reply_of(proc)
    assert "memory disabled — memory.mem0.embedding_dims" in proc.stderr  # the log says why
    health = reply_of(home.cli("/memory-health"))
    assert health.startswith("memory: disabled — memory.mem0.embedding_dims")
    assert "nanobot is running with its own memory" in health


@pytest.mark.long(34)
async def test_cli_memory_mode_mem0_persists_to_the_next_process(home):
    pytest.importorskip("mem0")
    home.write_memory({"memory": {"condition": "no_memory"}})
    switched = reply_of(home.cli("/memory-mode mem0"))
    assert "memory provider is now 'mem0'" in switched
    assert home.read_memory()["memory"] == {"backend": "mem0"}
    shown = reply_of(home.cli("/memory-mode"))
    assert "memory provider: mem0 (backend)" in shown
    reply_of(home.cli("My dog is called Rex."))
    answer = reply_of(home.cli("What is my dog called?"))
    assert "default/cli-user" in answer  # a mem0 section for this CLI user reached the LLM


@pytest.mark.long(41)
async def test_cli_runs_with_simple_rag_exit_cleanly(home):
    """Embedded stores are closed before interpreter shutdown: no 'Exception ignored in
    QdrantClient.__del__' (and no Qdrant lock left behind for the next run).

    Two runs that open the store prove it: without the atexit close every such run
    printed the message (3 of 3 measured; a run that opens no store never does), and the
    second run opens the store the first one left. (This was twenty runs: 262 s in CI.)"""
    pytest.importorskip("mem0")
    home.write_memory({"memory": {"condition": "simple_rag"}})
    for i, text in enumerate(["Note number 0: I like tea.", "Note number 1: I like coffee.",
                              "/memory-health"]):
        proc = home.cli(text)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Exception ignored" not in proc.stderr, (i, proc.stderr[-2000:])
        assert "already accessed by another instance" not in proc.stderr, i
    assert "0 pending, 0 failed, 2 delivered" in reply_of(proc)


def test_a_one_shot_run_says_when_earlier_turns_are_not_stored_yet(home):
    """A one-shot user's memory lagged runs behind without a word when extraction outlasts
    the process (mem0 on nanobot's one-slot model): the next run says that earlier turns
    of the chat are still being saved, so its recall is not taken for the whole memory."""
    pytest.importorskip("mem0")
    home.write_memory({"memory": {"backend": "mem0", "mem0": {"llm": {
        "base_url": "http://127.0.0.1:9/v1", "model": "m"}}},  # nobody answers there
        "nanobot": {"exit_delivery_s": 1}})
    first = home.cli("My cat is called PEPPER.")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "still being saved" not in first.stdout
    second = home.cli("What is my cat called?")
    assert second.returncode == 0, second.stderr[-2000:]
    assert "[memory: 1 earlier turn(s) of this chat are still being saved to 'mem0'" in \
        second.stdout, second.stdout
