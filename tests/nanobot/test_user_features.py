"""What a nanobot user expects of memory beyond the automatic recall: a read-only search
tool the model can call, and forgetting on request. Real AgentLoop, LLM double."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
from nanobot_memory_adapters.nanobot import plugin_for
from nanobot_memory_adapters.nanobot.search_tool import SEARCH_TOOL_NAME, MemorySearchTool
from nanobot_memory_adapters.nanobot.skill import GUIDE_TOOL_NAME
from tests.nanobot.conftest import VENV_BIN, agent_request, cli_turn, say

FULL_HISTORY = {"memory": {"condition": "full_history"}}


def _ask(name: str, **args: object) -> str:
    return f"[llm-double:tool {name} {json.dumps(args)}]"


async def test_the_model_calls_memory_search_and_gets_the_scoped_section(home, llm_double):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "alice", "My bicycle is a green Gazelle from 1987.")
    await say(loop, "bob", "My bicycle is a red racing bike.")
    assert await plugin.flush() == 0
    before = plugin.outbox.stats(plugin.provider)

    reply = await say(loop, "alice", "Which bike? " + _ask(SEARCH_TOOL_NAME, query="bicycle",
                                                          limit=5))
    req = agent_request(llm_double, "Which bike?")
    assert SEARCH_TOOL_NAME in {t["function"]["name"] for t in req.tools}
    assert reply.startswith(f"tool {SEARCH_TOOL_NAME} returned: <memory-context "
                            'backend="full_history" scope="default/telegram-alice">'), reply
    assert "green Gazelle" in reply and "red racing" not in reply  # this user's scope only
    # nothing was written by the search itself (only the turns, as always)
    after = plugin.outbox.stats(plugin.provider)
    assert after.delivered + after.pending == before.delivered + before.pending + 1


async def test_memory_search_cannot_write_and_is_gone_without_a_provider(home):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    tool = loop.tools.get(SEARCH_TOOL_NAME)
    assert isinstance(tool, MemorySearchTool) and tool.read_only
    assert set(tool.parameters["properties"]) == {"query", "limit"}
    # outside a turn it refuses; extra arguments are not a way to write
    assert "only inside a conversation turn" in str(await tool.execute(query="x", text="save"))
    stats = plugin.outbox.stats(plugin.provider)
    assert (stats.pending, stats.delivered, stats.failed) == (0, 0, 0)
    guide = loop.tools.get(GUIDE_TOOL_NAME)
    assert guide is not None and guide.read_only and not guide.parameters["properties"]
    await plugin.switch_provider("rolling_summary")  # nanobot's own memory in charge
    assert loop.tools.get(SEARCH_TOOL_NAME) is None and loop.tools.get(GUIDE_TOOL_NAME) is None
    await plugin.switch_provider("full_history")
    assert loop.tools.get(SEARCH_TOOL_NAME) is not None
    assert loop.tools.get(GUIDE_TOOL_NAME) is not None


# -- /memory-forget ---------------------------------------------------------------------

ALICE = MemoryScope(run_id="default", persona_id="telegram-alice", agent_id="nanobot")
BOB = MemoryScope(run_id="default", persona_id="telegram-bob", agent_id="nanobot")


async def _items(plugin, scope: MemoryScope, query: str) -> list[str]:
    result = await plugin.adapter.retrieve(RetrieveRequest(
        query=query, scope=scope, budget=ContextBudget(max_tokens=2000)))
    return [i.text for i in result.items]


@pytest.mark.parametrize("memory", [
    {"memory": {"condition": "full_history"}},
    {"memory": {"condition": "simple_rag"}},
    "mem0",
], ids=["full_history", "simple_rag", "mem0-extraction"])
async def test_memory_forget_deletes_this_users_memory_only(home, llm_double, memory):
    if memory == "mem0":
        pytest.importorskip("mem0")
        memory = {"memory": {"backend": "mem0", "mem0": {"llm": {
            "base_url": llm_double.base_url, "model": "double", "api_key": "x"}}}}
    elif memory["memory"]["condition"] == "simple_rag":
        pytest.importorskip("mem0")
    home.write_memory(memory)
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "alice", "My sister Ana lives in Porto.")
    await say(loop, "bob", "My brother Tom lives in Oslo.")
    assert await plugin.flush(timeout_s=120) == 0
    assert await _items(plugin, ALICE, "Where does my sister live?")
    bob_before = await _items(plugin, BOB, "Where does my brother live?")
    assert bob_before

    preview = await say(loop, "alice", "/memory-forget")
    assert "would delete" in preview and "user=telegram-alice" in preview
    assert await _items(plugin, ALICE, "Where does my sister live?")  # a preview only

    reply = await say(loop, "alice", "/memory-forget confirm")
    assert reply.startswith(f"forgotten: '{plugin.provider}'"), reply
    assert "searching for it again returns nothing" in reply
    assert "session files" in reply  # says what nanobot itself keeps
    assert await _items(plugin, ALICE, "Where does my sister live?") == []
    assert await _items(plugin, ALICE, "what do you remember about me") == []
    assert await _items(plugin, BOB, "Where does my brother live?") == bob_before
    rows = plugin.outbox.rows()
    assert not any('"telegram-alice"' in r["payload"] for r in rows)
    assert any('"telegram-bob"' in r["payload"] for r in rows)


async def test_memory_forget_is_refused_in_read_only_mode(home):
    home.write_memory({"memory": {"condition": "full_history"}})
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "alice", "I keep bees.")
    assert await plugin.flush() == 0
    await say(loop, "alice", "/memory-mode read-only on")
    reply = await say(loop, "alice", "/memory-forget confirm")
    assert "read-only" in reply and "refused" in reply
    assert await _items(plugin, ALICE, "bees")


async def test_memory_mode_keeps_what_the_user_wrote_into_memory_json_since_start(home):
    """/memory-mode changes one setting in the file as it is now: edits made while nanobot
    runs stay (before: the copy read at start was written back over them), and a file
    that cannot be read now is left as it is."""
    home.write_memory({"memory": {"condition": "full_history"}})
    loop = home.loop()
    await say(loop, "alice", "Hello.")
    edited = {"memory": {"condition": "full_history", "budget": {"max_tokens": 1234},
                         "mem0": {"collection_name": "mine"}},
              "nanobot": {"recall_timeout_s": 7}}
    home.write_memory(edited)
    reply = await say(loop, "alice", "/memory-mode read-only on")
    assert "read-only" in reply and "saved to" in reply, reply
    now = home.read_memory()
    assert now["memory"]["budget"] == {"max_tokens": 1234}
    assert now["memory"]["mem0"] == {"collection_name": "mine"}
    assert now["nanobot"] == {"recall_timeout_s": 7, "read_only": True}
    await say(loop, "alice", "/memory-mode read-only off")
    reply = await say(loop, "alice", "/memory-mode simple_rag")
    now = home.read_memory()
    assert now["memory"].get("mem0") == {"collection_name": "mine"}, (reply, now)
    assert now["nanobot"]["recall_timeout_s"] == 7
    home.write_memory('{"memory": {"condition": ')  # half-way through an edit
    reply = await say(loop, "alice", "/memory-mode full_history")
    assert "cannot switch" in reply and "left as it is" in reply, reply
    assert home.memory_path.read_text() == '{"memory": {"condition": '


async def test_a_switch_that_waited_for_a_write_keeps_edits_made_meanwhile(home):
    """/memory-mode during a write answers at once and switches when the write is done;
    by then the user may have edited memory.json: the switch writes its one change into
    the file as it is then (an edit stays; a half-made edit is left as it is)."""
    home.write_memory({"memory": {"condition": "full_history"}})
    loop = home.loop()
    await say(loop, "alice", "Hello.")
    plugin = plugin_for(loop)
    assert plugin is not None
    await plugin.flush()
    for edit, broken in (({"memory": {"condition": "full_history",
                                      "budget": {"max_tokens": 1234}}}, False),
                         ('{"memory": {"condition": ', True)):
        lock = plugin.state.queues.draining()
        await lock.acquire()  # a write in progress
        try:
            reply = await say(loop, "alice", "/memory-mode no_memory")
            assert "as soon as the write in progress finishes" in reply, reply
            home.write_memory(edit)  # the user edits the file meanwhile
        finally:
            lock.release()
        for _ in range(200):
            if plugin.state.provider == "no_memory":
                break
            await asyncio.sleep(0.05)
        assert plugin.state.provider == "no_memory"
        if broken:
            assert home.memory_path.read_text() == edit  # left as it is
        else:
            now = home.read_memory()
            assert now["memory"]["budget"] == {"max_tokens": 1234}, now
            assert now["memory"]["condition"] == "no_memory", now
        home.write_memory({"memory": {"condition": "full_history"}})
        await say(loop, "alice", "/memory-mode full_history")


async def test_a_switch_leaves_no_earlier_providers_error_in_health(home):
    home.write_memory({"memory": {"condition": "full_history",
                                  "simple_rag": {"embedding_dims": 7}}})
    loop = home.loop()
    await say(loop, "alice", "Hello.")
    await plugin_for(loop).flush()  # no write in progress: the switch is not deferred
    await say(loop, "alice", "/memory-mode simple_rag")  # its store opens on first use
    await say(loop, "alice", "What do you remember?")
    health = await say(loop, "alice", "/memory-health")
    # error text stays with the operator (nanobot's own terminal) and the log: a chat
    # gets the operation and its age
    assert "memory.simple_rag.embedding_dims" not in health, health
    assert "last error: " in health and "gateway's log" in health, health
    terminal = await cli_turn(loop, "/memory-health")
    assert "memory.simple_rag.embedding_dims" in terminal, terminal
    for _ in range(100):  # the failing write to simple_rag ends: the switch is not deferred
        if "busy:" not in await say(loop, "alice", "/memory-health"):
            break
        await asyncio.sleep(0.1)
    switched = await say(loop, "alice", "/memory-mode full_history")
    assert "now 'full_history'" in switched, switched
    health = await say(loop, "alice", "/memory-health")
    assert "last error: none" in health, health


@pytest.mark.servers
async def test_forget_from_the_terminal(home):
    home.write_memory({"memory": {"condition": "full_history"}})
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "alice", "I keep bees on the roof.")
    await say(loop, "bob", "I keep chickens.")
    assert await plugin.flush() == 0
    await home.close(loop)

    nm = str(VENV_BIN / "nanobot-memory")
    args = [nm, "forget", "--persona", "telegram-alice", "--config", str(home.memory_path)]
    preview = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert preview.returncode == 0 and "would delete" in preview.stdout, preview.stderr
    done = subprocess.run([*args, "--yes"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "forgotten: 'full_history'" in done.stdout
    assert "searching for it again returns nothing" in done.stdout

    loop = home.loop()
    plugin = plugin_for(loop)
    assert await plugin._ensure_adapter()
    assert await _items(plugin, ALICE, "bees") == []
    assert await _items(plugin, BOB, "chickens")
    bad = subprocess.run([nm, "forget", "--persona", "x\ny", "--config", str(home.memory_path),
                          "--yes"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


async def _hold_drain_lock(home) -> subprocess.Popen:
    """Another process that holds the outbox's drain lock (as a nanobot delivering); waited
    for off the event loop, which may be delivering (holding the lock) right now."""
    lock = str(home.data_dir / "nanobot-outbox.sqlite3") + ".drain.lock"
    code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT);"
            " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", code, lock], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout is not None
    assert (await asyncio.wait_for(asyncio.to_thread(holder.stdout.readline), 60)).strip() \
        == "held"
    return holder


@pytest.mark.servers
async def test_forget_waits_while_another_process_delivers(home):
    """A forget that ran while another process delivers could be undone by a row that
    process writes after the deletion: it waits for the drain lock, and deletes nothing
    when it does not get it."""
    from nanobot_memory_adapters.nanobot.forget import forget_scope

    home.write_memory({"memory": {"condition": "full_history"}})
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "alice", "I keep bees on the roof.")
    assert await plugin.flush() == 0
    holder = await _hold_drain_lock(home)
    try:
        busy = await forget_scope(plugin.adapter, plugin.outbox, ALICE, wait_s=1.0)
        assert busy.status == "busy" and not busy.done
        assert "nothing was deleted" in busy.report("full_history")
        assert await _items(plugin, ALICE, "bees")  # untouched
    finally:
        holder.kill()
        holder.wait()
    done = await forget_scope(plugin.adapter, plugin.outbox, ALICE, wait_s=5.0)
    assert done.done, done
    assert await _items(plugin, ALICE, "bees") == []


# -- backfill ----------------------------------------------------------------------------

TURNS = [f"Fact number {n}: my favourite {w} is {c}." for n, (w, c) in enumerate(
    [("colour", "teal"), ("fruit", "mango"), ("city", "Lyon"), ("tree", "oak"),
     ("bird", "heron"), ("river", "Douro"), ("cheese", "comte"), ("tea", "sencha"),
     ("song", "Nardis"), ("poet", "Szymborska")] * 3, 1)]


async def _simple_rag_memories(plugin, scope: MemoryScope) -> list[str]:
    memory = await plugin.adapter.store._native(scope)
    got = await memory.get_all(filters={"user_id": scope.persona_id, "run_id": scope.run_id},
                               top_k=1000)
    return [r["memory"] for r in got["results"]]


async def _wait_backfilled(plugin, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (plugin.backfill_progress and plugin.backfill_progress.done):
        assert time.monotonic() < deadline, plugin.backfill_line()
        await asyncio.sleep(0.2)


async def _told_under_full_history(home, *, bob: bool):
    """A loop on full_history that alice told TURNS (and bob one fact), all delivered."""
    pytest.importorskip("mem0")
    home.write_memory({"memory": {"condition": "full_history"}})
    loop = home.loop()
    plugin = plugin_for(loop)
    for text in TURNS:
        await say(loop, "alice", text)
    if bob:
        await say(loop, "bob", "Bob's favourite colour is grey.")
    assert await plugin.flush() == 0
    return loop, plugin


async def test_switching_with_backfill_brings_the_past_along(home, monkeypatch):
    loop, plugin = await _told_under_full_history(home, bob=True)
    from nanobot_memory_adapters.store import StoreProvider

    cls = StoreProvider  # simple_rag is a native store: its provider is the one wrapper
    bulk_calls: list[int] = []
    original = cls.record_events

    async def counting(self, events):
        if self.backend_name == "simple_rag":
            bulk_calls.append(len(events))
        return await original(self, events)

    monkeypatch.setattr(cls, "record_events", counting)

    reply = await say(loop, "alice", "/memory-mode simple_rag --backfill")
    assert "memory provider is now 'simple_rag'" in reply, reply
    assert "backfill: 31 turn(s) from 2 nanobot session(s) queued" in reply, reply
    assert "never seen live" not in reply  # who spoke was recorded with the live turns
    await _wait_backfilled(plugin)
    health = await say(loop, "alice", "/memory-health")
    assert "backfill into simple_rag: done (31 turn(s))" in health, health
    stored = await _simple_rag_memories(plugin, ALICE)
    for text in TURNS:
        assert stored.count(text) == 1, text  # every earlier turn, once
    assert (await _items(plugin, ALICE, TURNS[4]))[0] == TURNS[4]
    assert "Bob's favourite colour is grey." in await _simple_rag_memories(plugin, BOB)
    assert sum(bulk_calls) == 31 and max(bulk_calls) > 1  # through bulk ingest

    again = await say(loop, "alice", "/memory-mode simple_rag --backfill")
    assert "backfill: 0 turn(s)" in again, again
    await _wait_backfilled(plugin)
    assert sorted(await _simple_rag_memories(plugin, ALICE)) == sorted(stored)


async def test_a_drain_started_as_the_turns_are_queued_leaves_them_to_bulk_ingest(
        home, monkeypatch):
    """A drain that starts right after the backfill queues its turns (the one the switch
    schedules, a live turn's) waits for the bulk delivery instead of taking the fresh
    rows one by one (CI once saw all 31 go through ``record_event``)."""
    loop, plugin = await _told_under_full_history(home, bob=False)
    from nanobot_memory_adapters.nanobot import backfill

    bulk_calls, single_calls = _bulk_counter(monkeypatch)
    running = asyncio.get_running_loop()
    real_enqueue = backfill.enqueue
    drains: list[asyncio.Future[int]] = []

    def enqueue_then_a_drain_starts(*args):
        count = real_enqueue(*args)
        drains.append(asyncio.run_coroutine_threadsafe(plugin.flush(), running))  # type: ignore[arg-type]
        time.sleep(0.5)  # the drain runs while the queueing thread finishes
        return count

    monkeypatch.setattr(backfill, "enqueue", enqueue_then_a_drain_starts)
    reply = await say(loop, "alice", "/memory-mode simple_rag --backfill")
    assert f"backfill: {len(TURNS)} turn(s)" in reply, reply
    await _wait_backfilled(plugin)
    assert drains and await asyncio.wrap_future(drains[0]) == 0
    assert single_calls == [] and sum(bulk_calls) == len(TURNS), (single_calls, bulk_calls)
    stored = await _simple_rag_memories(plugin, ALICE)
    assert all(stored.count(text) == 1 for text in TURNS)


def _bulk_counter(monkeypatch) -> tuple[list[int], list[str]]:
    """Count simple_rag's bulk and single writes (events per bulk call, single event ids)."""
    from nanobot_memory_adapters.store import StoreProvider

    cls = StoreProvider  # simple_rag is a native store: its provider is the one wrapper
    bulk_calls: list[int] = []
    single_calls: list[str] = []
    original_bulk, original_single = cls.record_events, cls.record_event

    async def counting_bulk(self, events):
        if self.backend_name == "simple_rag":
            bulk_calls.append(len(events))
        return await original_bulk(self, events)

    async def counting_single(self, event):
        if self.backend_name == "simple_rag":
            single_calls.append(event.event_id)
        return await original_single(self, event)

    monkeypatch.setattr(cls, "record_events", counting_bulk)
    monkeypatch.setattr(cls, "record_event", counting_single)
    return bulk_calls, single_calls


def _a_delivery_starts_after_planning(plugin, monkeypatch) -> asyncio.Lock:
    """Once the backfill is planned (the switch is over), something takes this process's
    drain lock, as a delivery of live turns would; the test releases it."""
    from nanobot_memory_adapters.nanobot import backfill

    lock = plugin.state.queues.draining()
    running = asyncio.get_running_loop()
    real_plan = backfill.plan_backfill

    def plan_then_a_delivery_starts(*args, **kwargs):
        plan = real_plan(*args, **kwargs)
        asyncio.run_coroutine_threadsafe(lock.acquire(), running).result(timeout=30)
        return plan

    monkeypatch.setattr(backfill, "plan_backfill", plan_then_a_delivery_starts)
    return lock


async def test_a_stopped_backfill_command_leaves_the_backfill_running(home, monkeypatch):
    """Cancelling the command while it waits for a delivery in progress (nanobot's /stop)
    leaves the backfill to queue and deliver in bulk once the delivery finishes."""
    _loop, plugin = await _told_under_full_history(home, bob=False)
    bulk_calls, single_calls = _bulk_counter(monkeypatch)
    lock = _a_delivery_starts_after_planning(plugin, monkeypatch)
    command = asyncio.ensure_future(plugin.switch_with_backfill("simple_rag"))
    try:
        deadline = time.monotonic() + 30
        while "planned" not in getattr(plugin.backfill_line(), "text", ""):
            assert time.monotonic() < deadline and not command.done(), plugin.backfill_line()
            await asyncio.sleep(0.05)
        assert plugin.backfill_line().text.endswith(
            "queued once the delivery in progress finishes"), plugin.backfill_line()
        command.cancel()
        with pytest.raises(asyncio.CancelledError):
            await command
    finally:
        if lock.locked():
            lock.release()
    await _wait_backfilled(plugin)
    assert single_calls == [] and sum(bulk_calls) == len(TURNS), (single_calls, bulk_calls)
    stored = await _simple_rag_memories(plugin, ALICE)
    assert all(stored.count(text) == 1 for text in TURNS)


async def test_a_backfill_that_waited_does_not_start_after_read_only(home, monkeypatch):
    """The command answers after ``QUEUE_WAIT_S`` when a delivery is in progress; what
    changed meanwhile (read-only here) is checked before anything is queued."""
    loop, plugin = await _told_under_full_history(home, bob=False)
    from nanobot_memory_adapters.nanobot import backfill_chat

    bulk_calls, single_calls = _bulk_counter(monkeypatch)
    monkeypatch.setattr(backfill_chat, "QUEUE_WAIT_S", 0.3)
    lock = _a_delivery_starts_after_planning(plugin, monkeypatch)
    try:
        reply = await say(loop, "alice", "/memory-mode simple_rag --backfill")
        assert (f"backfill: {len(TURNS)} turn(s) from 1 nanobot session(s) to queue once the "
                "delivery in progress finishes") in reply, reply
        reply = await say(loop, "alice", "/memory-mode read-only on")
        assert "memory is now read-only" in reply, reply
    finally:
        if lock.locked():
            lock.release()
    deadline = time.monotonic() + 30
    while "not started" not in getattr(plugin.backfill_line(), "text", ""):
        assert time.monotonic() < deadline, plugin.backfill_line()
        await asyncio.sleep(0.1)
    assert plugin.backfill_line().text == ("backfill into simple_rag: not started (read-only "
                                           "mode: nothing is written)")
    health = await say(loop, "alice", "/memory-health")
    assert "backfill into simple_rag: not started (read-only mode" in health, health
    assert plugin.outbox.stats("simple_rag").pending == 0  # nothing queued
    assert bulk_calls == [] and single_calls == []


@pytest.mark.long(40)
@pytest.mark.servers
async def test_a_killed_backfill_resumes_without_duplicates(home):
    loop, _plugin = await _told_under_full_history(home, bob=False)
    await home.close(loop)

    nm = str(VENV_BIN / "nanobot-memory")
    args = [nm, "backfill", "--nanobot-config", str(home.config_path), "--provider",
            "simple_rag", "--batch", "3"]
    outbox = home.data_dir / "nanobot-outbox.sqlite3"
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    killed_at = None
    while proc.poll() is None and time.monotonic() < deadline:
        with sqlite3.connect(outbox) as db:
            done = db.execute("SELECT count(*) FROM outbox WHERE provider='simple_rag' AND "
                              "status='delivered'").fetchone()[0]
        if done >= 3:
            os.kill(proc.pid, signal.SIGKILL)
            killed_at = done
            break
        time.sleep(0.02)
    proc.wait()
    assert killed_at is not None and killed_at < len(TURNS), "the backfill was not caught mid-way"

    # While another process (a running nanobot) is delivering, the terminal's backfill
    # leaves the queued turns to it instead of draining beside it.
    holder = await _hold_drain_lock(home)
    try:
        beside = subprocess.run(args, capture_output=True, text=True, timeout=240)
    finally:
        holder.kill()
        holder.wait()
    assert beside.returncode == 1, beside.stdout + beside.stderr  # turns still pending
    assert "another process (a running nanobot) is delivering" in beside.stdout, beside.stdout
    assert "delivered 0" in beside.stdout and "Traceback" not in beside.stderr

    done = subprocess.run(args, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed 0, still pending 0" in done.stdout
    again = subprocess.run(args, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0 and "0 newly queued" in again.stdout, again.stdout

    home.write_memory({"memory": {"condition": "simple_rag"}})
    loop = home.loop()
    plugin = plugin_for(loop)
    assert await plugin._ensure_adapter()
    stored = await _simple_rag_memories(plugin, ALICE)
    assert sorted(t for t in stored if t.startswith("Fact")) == sorted(TURNS)  # once each



@pytest.mark.long(26)
@pytest.mark.servers
async def test_backfill_options_from_the_terminal(home):
    """--session and --since choose what is replayed; bad values and read-only mode are
    one line each, exit 2."""
    loop, _plugin = await _told_under_full_history(home, bob=True)
    await home.close(loop)
    nm = str(VENV_BIN / "nanobot-memory")
    base = [nm, "backfill", "--nanobot-config", str(home.config_path), "--provider",
            "simple_rag"]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *extra], capture_output=True, text=True, timeout=240)

    later = run("--since", "2999-01-01")
    assert later.returncode == 0 and "0 turn(s)" in later.stdout, later.stdout + later.stderr
    bob = run("--session", "telegram:bob")
    assert bob.returncode == 0, bob.stdout + bob.stderr
    assert "1 turn(s) in 1 session(s): 1 newly queued" in bob.stdout, bob.stdout
    assert "delivered 1, failed 0, still pending 0" in bob.stdout
    assert "readiness" in bob.stdout  # the wait at the end is reported
    for extra, said in ((["--since", "last tuesday"], "--since"),
                        (["--session", "telegram:nobody"], "--session")):
        bad = run(*extra)
        assert bad.returncode == 2 and said in bad.stderr, bad.stdout + bad.stderr
        assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    memory = home.read_memory()
    memory["nanobot"] = {**memory.get("nanobot", {}), "read_only": True}
    home.write_memory(memory)
    refused = run()
    assert refused.returncode == 2 and "read-only" in refused.stderr, refused.stderr


# -- "llm": "nanobot" ------------------------------------------------------------------

async def test_llm_nanobot_extracts_with_nanobots_own_endpoint_and_keeps_the_key_out(
        home, llm_double, tmp_path):
    """mem0 with ``"llm": "nanobot"``: its extraction calls go to the endpoint nanobot is
    configured with (a second double, so the calls are told apart), and nanobot's key is
    in no file the plugin writes."""
    pytest.importorskip("mem0")
    from tests.llm_double import LLMDouble

    nanobots_llm = LLMDouble()
    nanobots_llm.start()
    try:
        secret = "sk-nanobot-only-9f3c2e71"
        data = home.config_data()
        data["providers"]["custom"] = {"apiKey": secret, "apiBase": nanobots_llm.base_url}
        home.config_path.write_text(json.dumps(data))
        home.write_memory({"memory": {"backend": "mem0", "mem0": {"llm": "nanobot"}}})
        loop = home.loop()
        plugin = plugin_for(loop)
        assert plugin is not None and plugin.status == "active", plugin.reason
        await say(loop, "alice", "My sister Ana lives in Porto.")
        assert await plugin.flush(timeout_s=120) == 0
        assert plugin.adapter is not None and plugin.adapter.backend_name == "mem0"
        extraction = [r for r in nanobots_llm.chat_requests() if r.response_format]
        assert extraction, "mem0 never asked nanobot's endpoint"
        assert "Ana" in extraction[0].user + extraction[0].system
        assert await _items(plugin, ALICE, "Where does my sister live?")
        health = await say(loop, "alice", "/memory-health")
        await home.close(loop)
        assert home.read_memory()["memory"]["mem0"]["llm"] == "nanobot"  # never copied
        assert secret not in health
        written = [p for p in home.root.rglob("*") if p.is_file() and p != home.config_path]
        assert written
        for path in written:
            assert secret.encode() not in path.read_bytes(), path
    finally:
        nanobots_llm.stop()


def test_llm_nanobot_refuses_a_provider_that_is_not_openai_compatible(tmp_path):
    from nanobot_memory_adapters.config import ConfigError, MemoryConfig
    from nanobot_memory_adapters.nanobot_llm import resolve_nanobot_llm

    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "agents": {"defaults": {"model": "claude-sonnet-4", "provider": "anthropic"}},
        "providers": {"anthropic": {"apiKey": "sk-ant-x"}}}))
    memory = MemoryConfig.model_validate({"backend": "mem0", "mem0": {"llm": "nanobot"}})
    with pytest.raises(ConfigError, match=r"memory\.mem0\.llm: .*'anthropic' speaks "
                                          r"anthropic, not an OpenAI-compatible API"):
        resolve_nanobot_llm(memory, config)
    implicit = MemoryConfig.model_validate({"backend": "mem0"})
    assert resolve_nanobot_llm(implicit, config) == implicit  # no llm block: left as it is
    with pytest.raises(ConfigError, match="give --nanobot-config"):
        resolve_nanobot_llm(memory, None)
