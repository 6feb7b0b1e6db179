"""Units of the plugin: outbox, turn extraction, settings, the seam guard, the skill copy."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nanobot_memory_adapters.config import MemoryConfig
from nanobot_memory_adapters.events import MemoryEvent, Message
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.backfill import session_turns
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.settings import (
    load_settings,
    settings_path,
    with_plugin_option,
    with_provider,
)
from nanobot_memory_adapters.nanobot.skill import SKILL_TEXT, install_skill, remove_skill
from nanobot_memory_adapters.nanobot.turns import build_event, turn_messages

REPO = Path(__file__).resolve().parents[2]


def event(i: int, **kw) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"e{i}", run_id="r", user_id="u", agent_id="a", session_id="s",
        turn_id=f"t{i}", timestamp=datetime.now(UTC),
        messages=[Message(role="user", content=f"turn {i}")], **kw,
    )


def test_outbox_keeps_order_and_is_idempotent_by_event_id(tmp_path):
    box = Outbox(tmp_path / "o.sqlite3")
    assert [box.enqueue("p", event(i), "k") for i in (1, 2, 3)] == [True, True, True]
    assert box.enqueue("p", event(2), "k") is False  # same event_id: no second row
    assert box.enqueue("other", event(2), "k") is True  # per provider
    assert [r.event_id for r in box.pending("p")] == ["e1", "e2", "e3"]
    first = box.pending("p")[0]
    box.mark_retry(first.seq, "down")
    assert box.pending("p")[0].event_id == "e1"  # a retry keeps its place
    box.mark_delivered(first.seq, status="committed", native_ids=["n1"], latency_ms=1.0)
    box.mark_failed(box.pending("p")[0].seq, "rejected")
    assert box.enqueue("p", event(1), "k") is False  # delivered ids stay known
    stats = box.stats("p")
    assert (stats.pending, stats.failed, stats.delivered, stats.pending_other_providers) == (
        1, 1, 1, 1)
    assert stats.last_error == "rejected"
    assert box.requeue_failed("p") == 1
    box.close()
    reopened = Outbox(tmp_path / "o.sqlite3")  # durable across processes
    assert [r.event_id for r in reopened.pending("p")] == ["e2", "e3"]
    assert reopened.pending("p")[0].event().messages[0].content == "turn 2"


def test_outbox_drain_lock_admits_one_drainer(tmp_path):
    a, b = Outbox(tmp_path / "o.sqlite3"), Outbox(tmp_path / "o.sqlite3")
    with a.drain_lock() as first, b.drain_lock() as second:
        assert first and not second
    with b.drain_lock() as again:
        assert again


def test_outbox_prunes_old_delivered_rows(tmp_path):
    box = Outbox(tmp_path / "o.sqlite3", keep_delivered=2)
    for i in range(5):
        box.enqueue("p", event(i), "k")
        row = box.pending("p")[0]
        box.mark_delivered(row.seq, status="committed", native_ids=[], latency_ms=None)
    assert [r["event_id"] for r in box.rows()] == ["e3", "e4"]


def test_outbox_prunes_in_batches_not_on_every_delivery(tmp_path):
    box = Outbox(tmp_path / "o.sqlite3", keep_delivered=20)
    assert box.prune_every == 2
    statements: list[str] = []
    box._conn().set_trace_callback(statements.append)
    delivered = []
    for i in range(31):
        box.enqueue("p", event(i), "k")
        row = box.pending("p")[0]
        box.mark_delivered(row.seq, status="committed", native_ids=[], latency_ms=None)
        delivered.append(f"e{i}")
        kept = [r["event_id"] for r in box.rows()]
        assert len(kept) <= 20 + box.prune_every - 1  # bounded between prunes
        assert kept == delivered[-len(kept):]  # always the newest ones
    prunes = [s for s in statements if s.startswith("DELETE FROM outbox")]
    assert len(prunes) == 16  # deliveries 1, 3, 5, ..., 31: not one scan per delivery
    assert [r["event_id"] for r in box.rows()] == [f"e{i}" for i in range(11, 31)]
    box.close()
    # A reopened outbox prunes at its first delivery, whatever the last process left.
    reopened = Outbox(tmp_path / "o.sqlite3", keep_delivered=5)
    reopened.enqueue("p", event(99), "k")
    row = reopened.pending("p")[0]
    reopened.mark_delivered(row.seq, status="committed", native_ids=[], latency_ms=None)
    assert [r["event_id"] for r in reopened.rows()] == ["e27", "e28", "e29", "e30", "e99"]
    assert reopened.enqueue("p", event(30), "k") is False  # kept rows still dedupe
    assert reopened.stats("p").delivered == 5


def _ts(offset_s: float) -> str:
    return (datetime.now() + timedelta(seconds=offset_s)).isoformat()


def test_turn_messages_take_the_whole_turn_and_skip_commands():
    turn_id = f"telegram:a:{time.time_ns()}"
    messages = [
        {"role": "user", "content": "old turn", "timestamp": _ts(-60)},
        {"role": "assistant", "content": "old reply", "timestamp": _ts(-59)},
        {"role": "user", "content": "/memory-health", "_command": True, "timestamp": _ts(-50)},
        {"role": "assistant", "content": "memory: ok", "_command": True, "timestamp": _ts(-50)},
        {"role": "user", "content": "first part", "timestamp": _ts(1)},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}],
         "timestamp": _ts(2)},
        {"role": "tool", "tool_call_id": "c1", "name": "grep", "content": "hits",
         "timestamp": _ts(2)},
        {"role": "user", "content": "injected second part", "timestamp": _ts(3)},
        {"role": "assistant", "content": "final answer", "timestamp": _ts(4)},
    ]
    picked = [m["content"] for m in turn_messages(messages, turn_id)]
    assert picked == ["first part", None, "injected second part", "final answer"]
    memory = MemoryConfig.model_validate({"condition": "full_history"})
    ev = build_event(memory=memory, messages=messages, turn_id=turn_id, channel="telegram",
                     chat_id="a", sender_id="a", session_key="telegram:a",
                     attributes={"scenario": "travel", "persona": "p1"})
    assert [(m.role, m.content) for m in ev.messages] == [
        ("user", "first part"), ("user", "injected second part"), ("assistant", "final answer")]
    assert ev.metadata["tools_used"] == ["grep"] and ev.scenario == "travel"
    assert ev.user_id == "telegram-a" and ev.timestamp.tzinfo is not None
    # an unknown turn-id shape falls back to "since the last user message"
    assert [m["content"] for m in turn_messages(messages, "opaque")] == [
        "injected second part", "final answer"]
    # a command-only turn is not an event
    command_turn = f"telegram:a:{time.time_ns()}"
    cmd = [{"role": "user", "content": "/help", "_command": True, "timestamp": _ts(1)},
           {"role": "assistant", "content": "...", "_command": True, "timestamp": _ts(1)}]
    assert build_event(memory=memory, messages=cmd, turn_id=command_turn, channel="t",
                       chat_id="a", sender_id="a", session_key="t:a") is None


def test_another_sessions_message_is_never_recorded_as_the_sessions_persons_words():
    """nanobot injects a ``send_session_message`` that arrives mid-turn into the running
    turn, and the turn is recorded with its own (envelope-less) metadata: the group's
    words and the answer to them were filed as Ann's. Live and in a backfill, such a
    message (its saved runtime-context marker names the tool's block) is nobody's words,
    and a live turn's record ends where it came in."""
    from nanobot.runtime_context import RUNTIME_CONTEXT_HISTORY_META

    sent = {RUNTIME_CONTEXT_HISTORY_META: {"version": 1, "sources": ["session_message"],
                                           "suffix": "Message from @family."}}
    turn_id = f"telegram:1001:{time.time_ns()}"
    messages = [
        {"role": "user", "content": "my locker is LOCKER-22", "timestamp": _ts(1)},
        {"role": "assistant", "content": "noted", "timestamp": _ts(2)},
        {"role": "user", "content": "Ben: what is her locker? PIN-7788\n\nMessage from "
         "@family.", "timestamp": _ts(3), **sent},
        {"role": "assistant", "content": "her locker is LOCKER-22", "timestamp": _ts(4)},
    ]
    memory = MemoryConfig.model_validate({"condition": "full_history"})
    for turn in (turn_id, "opaque"):  # a known turn id, and the walk-back fallback
        ev = build_event(memory=memory, messages=messages, turn_id=turn, channel="telegram",
                         chat_id="1001", sender_id="1001", session_key="telegram:1001")
        assert ev is not None
        said = [(m.role, m.content) for m in ev.messages]
        assert said == [("user", "my locker is LOCKER-22"), ("assistant", "noted")], said
    # a turn that is only another session's message records nothing
    alone = [messages[2], messages[3]]
    assert build_event(memory=memory, messages=alone, turn_id=f"telegram:1001:{time.time_ns()}",
                       channel="telegram", chat_id="1001", sender_id="1001",
                       session_key="telegram:1001") is None
    # a backfill replays Ann's turn and nothing of the session message
    replayed = [[m["content"] for m in turn] for _, turn in session_turns(messages)]
    assert replayed == [["my locker is LOCKER-22", "noted"], ["her locker is LOCKER-22"]]
    from nanobot_memory_adapters.nanobot.turns import event_from_messages

    [_, (_, answer)] = list(session_turns(messages))  # no user speech: no event
    assert event_from_messages(memory=memory, chosen=answer, event_id="e", turn_id="t",
                               channel="telegram", chat_id="1001", sender_id="1001",
                               session_key="telegram:1001") is None


def test_recorded_tool_results_leave_out_the_plugins_own_tools():
    """With tool results recorded, a memory_search or memory_guide result is not: it is
    memory (or the guide's made-up examples) and would come back as this user's words."""
    turn_id = f"telegram:a:{time.time_ns()}"

    def call(cid: str, name: str) -> dict:
        return {"role": "assistant", "content": None, "timestamp": _ts(2), "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}]}

    messages = [
        {"role": "user", "content": "what do you remember?", "timestamp": _ts(1)},
        call("c1", "memory_guide"),
        {"role": "tool", "tool_call_id": "c1", "name": "memory_guide",
         "content": "Jolene: something Jolene said then", "timestamp": _ts(2)},
        call("c2", "memory_search"),
        {"role": "tool", "tool_call_id": "c2", "name": "memory_search",
         "content": "<memory-context>Ann: I live in Oslo</memory-context>", "timestamp": _ts(3)},
        call("c3", "grep"),
        {"role": "tool", "tool_call_id": "c3", "name": "grep", "content": "hits",
         "timestamp": _ts(3)},
        {"role": "assistant", "content": "You live in Oslo.", "timestamp": _ts(4)},
    ]
    memory = MemoryConfig.model_validate({"condition": "full_history"})
    ev = build_event(memory=memory, messages=messages, turn_id=turn_id, channel="telegram",
                     chat_id="a", sender_id="a", session_key="telegram:a",
                     include_tools=True)
    assert ev is not None
    assert [(m.role, m.content) for m in ev.messages] == [
        ("user", "what do you remember?"), ("tool", "hits"),
        ("assistant", "You live in Oslo.")]
    assert ev.metadata["tools_used"] == ["grep", "memory_guide", "memory_search"]
    # the backfill of nanobot's session files picks a turn's messages the same way
    turns = list(session_turns(messages, include_tools=True))
    assert [[m.get("name") or m["role"] for m in turn] for _, turn in turns] == [
        ["user", "assistant", "assistant", "assistant", "grep", "assistant"]]
    assert not any(m.get("role") == "tool" for _, turn in session_turns(messages)
                   for m in turn)


def test_runtime_context_is_stripped_from_recorded_user_messages():
    from nanobot.runtime_context import RuntimeContextBlock, append_runtime_context

    text, marker = append_runtime_context(
        "hello", [RuntimeContextBlock(source="x", content="<memory-context>old</memory-context>")])
    turn_id = f"c:d:{time.time_ns()}"
    messages = [{"role": "user", "content": text, "_runtime_context": marker,
                 "timestamp": _ts(1)},
                {"role": "assistant", "content": "hi", "timestamp": _ts(2)}]
    memory = MemoryConfig.model_validate({"condition": "full_history"})
    ev = build_event(memory=memory, messages=messages, turn_id=turn_id, channel="c",
                     chat_id="d", sender_id="d", session_key="c:d")
    assert ev.messages[0].content == "hello"


def test_templates_with_unknown_attributes_fail_the_turn_not_the_load(tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps({"memory": {"condition": "full_history",
                                           "scope": {"persona_id": "{persona}"}}}))
    loaded = load_settings(path)
    assert loaded.error is None
    memory = loaded.memory
    turn_id = f"c:d:{time.time_ns()}"
    msgs = [{"role": "user", "content": "x", "timestamp": _ts(1)}]
    with pytest.raises(ValueError, match="unknown field"):
        build_event(memory=memory, messages=msgs, turn_id=turn_id, channel="c", chat_id="d",
                    sender_id="d", session_key="c:d")
    ev = build_event(memory=memory, messages=msgs, turn_id=turn_id, channel="c", chat_id="d",
                     sender_id="d", session_key="c:d", attributes={"persona": "p7"})
    assert ev.user_id == "p7"


def test_settings_file_shapes_and_edits(tmp_path, monkeypatch):
    path = tmp_path / "memory.json"
    assert settings_path(tmp_path) == path
    monkeypatch.setenv("NANOBOT_MEMORY_CONFIG", str(tmp_path / "elsewhere.json"))
    assert settings_path(tmp_path) == tmp_path / "elsewhere.json"
    path.write_text(json.dumps({"condition": "no_memory", "nanobot": {"recall_timeout_s": 2}}))
    loaded = load_settings(path)
    assert loaded.memory.provider_name == "no_memory" and loaded.plugin.recall_timeout_s == 2
    path.write_text(json.dumps({"memory": {"condition": "no_memory"}, "extra": 1}))
    assert "unknown top-level key" in load_settings(path).error
    path.write_text(json.dumps({"memory": {"condition": "no_memory"},
                                "nanobot": {"recall_timeout": 2}}))
    assert "nanobot.recall_timeout" in load_settings(path).error
    raw = {"memory": {"condition": "no_memory", "budget": {"max_tokens": 9}}}
    assert with_provider(raw, "mem0", "backend") == {
        "memory": {"budget": {"max_tokens": 9}, "backend": "mem0"}}
    assert with_plugin_option({"condition": "x"}, "read_only", True) == {
        "memory": {"condition": "x"}, "nanobot": {"read_only": True}}


def test_skill_copy_matches_the_repository_skill(tmp_path):
    shipped = REPO / "nanobot_memory_adapters" / "nanobot" / "skills" / "memory-context"
    assert (shipped / "SKILL.md").read_text() == SKILL_TEXT  # the one copy, as installed
    assert SKILL_TEXT.startswith("---\nname: memory-context\n")
    assert install_skill(tmp_path) and not install_skill(tmp_path)
    path = tmp_path / "skills" / "memory-context" / "SKILL.md"
    assert remove_skill(tmp_path) and not path.exists()
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: memory-context\ndescription: mine\n---\nuser's own\n")
    assert not install_skill(tmp_path) and not remove_skill(tmp_path)  # never touch theirs
    from nanobot.agent.skills import SkillsLoader

    path.unlink()
    install_skill(tmp_path)
    loader = SkillsLoader(tmp_path)  # listed for the model to read, not always in the prompt
    assert "memory-context" not in loader.get_always_skills()
    assert "**memory-context**" in loader.build_skills_summary()


def test_incompatible_nanobot_means_plugin_disabled(monkeypatch, tmp_path):
    from nanobot.agent.tools.context import ToolContext

    from nanobot_memory_adapters.nanobot.tool import MemoryPluginTool

    monkeypatch.setattr(seams, "_compat_cache", None)
    monkeypatch.setattr(seams, "nanobot_version", lambda: "0.4.0")
    ok, reason = seams.check_compatibility()
    assert not ok and "0.4.0 is not supported" in reason
    assert MemoryPluginTool.enabled(ToolContext(config=None, workspace=str(tmp_path))) is False
    monkeypatch.setattr(seams, "_compat_cache", None)
    monkeypatch.setattr(seams, "nanobot_version", lambda: "0.3.5")
    monkeypatch.setattr(seams, "_shape_problems", lambda: ["AgentLoop.schedule_background is gone"])
    ok, reason = seams.check_compatibility()
    assert not ok and "changed shape" in reason
    monkeypatch.setattr(seams, "_compat_cache", None)


def test_installed_nanobot_passes_the_shape_check():
    assert seams._shape_problems() == []
    assert seams.nanobot_version().startswith("0.3.")


async def test_incompatible_nanobot_runs_untouched(home, monkeypatch):
    from nanobot.agent.memory import MemoryStore

    from nanobot_memory_adapters.nanobot import plugin_for
    from tests.nanobot.conftest import say

    home.write_memory({"memory": {"condition": "full_history"}})
    monkeypatch.setattr(seams, "_compat_cache", (False, "nanobot-ai 9.9 is not supported"))
    loop = home.loop()
    assert plugin_for(loop) is None
    assert type(loop.context.memory) is MemoryStore
    assert "You said: still fine" in await say(loop, "nia", "still fine")
    assert "Unknown command" in await say(loop, "nia", "/memory-health")
    monkeypatch.setattr(seams, "_compat_cache", None)


async def test_plugin_can_be_switched_off_per_loop_or_by_environment(home, monkeypatch):
    from nanobot.agent.memory import MemoryStore

    from nanobot_memory_adapters.nanobot import plugin_disabled, plugin_for

    home.write_memory({"memory": {"condition": "full_history"}})
    with plugin_disabled():
        loop = home.loop()
    assert plugin_for(loop) is None and type(loop.context.memory) is MemoryStore
    assert plugin_for(home.loop()) is not None
    monkeypatch.setenv("NANOBOT_MEMORY_PLUGIN", "off")
    assert plugin_for(home.loop()) is None


def test_nanobot_placeholders_are_never_recorded():
    """After a crash nanobot writes "Error: Task interrupted before a response was
    generated." into the session (nanobot's own recovery code makes it here); model errors
    leave "[Assistant reply unavailable due to model error.]". Neither is conversation."""
    from nanobot.agent.runner import _PERSISTED_MODEL_ERROR_PLACEHOLDER
    from nanobot.session.manager import Session
    from nanobot.session.recovery import PENDING_USER_TURN_KEY, restore_pending_interruption

    session = Session(key="telegram:a")
    session.metadata[PENDING_USER_TURN_KEY] = True  # the process died mid-turn
    session.messages.append({"role": "user", "content": "my sister Ana lives in Porto",
                             "timestamp": _ts(-30)})
    turn_id = f"telegram:a:{time.time_ns()}"
    restore_pending_interruption(session)
    placeholder = session.messages[-1]
    assert placeholder["content"].startswith("Error: Task interrupted")
    placeholder["timestamp"] = _ts(1)  # written when the next turn starts
    session.messages += [
        {"role": "user", "content": "where does Ana live?", "timestamp": _ts(2)},
        {"role": "assistant", "content": _PERSISTED_MODEL_ERROR_PLACEHOLDER,
         "timestamp": _ts(3)},
        {"role": "assistant", "content": "Porto, you said.", "timestamp": _ts(4)},
    ]
    memory = MemoryConfig.model_validate({"condition": "full_history"})
    ev = build_event(memory=memory, messages=session.messages, turn_id=turn_id,
                     channel="telegram", chat_id="a", sender_id="a", session_key="telegram:a")
    assert [(m.role, m.content) for m in ev.messages] == [
        ("user", "where does Ana live?"), ("assistant", "Porto, you said.")]
    assert seams.is_synthetic_message(placeholder)
    assert not seams.is_synthetic_message({"role": "user", "content":
                                           _PERSISTED_MODEL_ERROR_PLACEHOLDER})


def test_a_restored_checkpoint_is_not_the_next_speakers_turn():
    """A gateway restarted during Bob's tool-using turn: the next turn's restore puts that
    turn's assistant message and tool results back into the session, stamped with the
    current time (after the new turn began). They were recorded as Alice's turn: Bob's
    payslip in her scope, recalled in her direct chat."""
    from nanobot.session.manager import Session
    from nanobot.session.recovery import RUNTIME_CHECKPOINT_KEY, restore_runtime_checkpoint

    session = Session(key="telegram:-500")
    session.messages.append({"role": "user", "content": "Bob: read my payslip.pdf",
                             "timestamp": _ts(-60)})
    call = {"id": "c1", "type": "function",
            "function": {"name": "read_file", "arguments": "{}"}}
    session.metadata[RUNTIME_CHECKPOINT_KEY] = {
        "phase": "tools_completed",
        "assistant_message": {"role": "assistant", "content": "Reading Bob's payslip.",
                              "tool_calls": [call]},
        "completed_tool_results": [{"role": "tool", "tool_call_id": "c1",
                                    "name": "read_file", "content": "NET-5400 IBAN DE89"}],
        "pending_tool_calls": []}
    turn_id = f"telegram:-500:{time.time_ns() - 1_000_000_000}"  # Alice's turn began
    assert restore_runtime_checkpoint(session)  # what her turn's restore stage does
    session.messages += [
        {"role": "user", "content": "Alice: what's the weather?", "timestamp": _ts(2)},
        {"role": "assistant", "content": "Sunny.", "timestamp": _ts(3)}]
    memory = MemoryConfig.model_validate({"condition": "full_history"})
    ev = build_event(memory=memory, messages=session.messages, turn_id=turn_id,
                     channel="telegram", chat_id="-500", sender_id="111|alice",
                     session_key="telegram:-500", include_tools=True)
    assert [(m.role, m.content) for m in ev.messages] == [
        ("user", "Alice: what's the weather?"), ("assistant", "Sunny.")]


def test_a_whole_turn_arriving_while_its_user_half_is_written_is_kept():
    """The writer takes the list's head (a turn's user half) and awaits the outbox; a whole
    turn arriving meanwhile supersedes that half in the list. Marking the half written must
    not drop the whole turn (it once popped the head, which was by then the whole turn, and
    the turn's row stayed ``open`` for good)."""
    from nanobot_memory_adapters.nanobot.unqueued import UnqueuedTurns, Write

    kept = UnqueuedTurns()
    half = Write("full_history", event(1), "telegram:kim", ("telegram", "kim", "kim"),
                 open_turn=True)
    other = Write("full_history", event(2), "telegram:kim", ("telegram", "kim", "kim"),
                  open_turn=True)
    kept.add(half)
    kept.add(other)
    in_flight = kept.writes[0]  # what the writer is writing now
    whole = Write("full_history", event(1), "telegram:kim", ("telegram", "kim", "kim"))
    kept.add(whole)  # arrives while the half is in flight
    kept.written(in_flight)
    assert kept.writes == [other, whole]
    kept.written(other)
    kept.written(whole)
    assert kept.writes == []


async def test_the_exit_safe_executor_starts_threads_only_when_it_needs_a_worker():
    """Its workers are daemons (created from a helper thread); a call an idle worker can
    take must not start a helper (it once started one per call, for every to_thread of
    nanobot's whole process)."""
    import asyncio
    import threading
    import weakref

    from nanobot_memory_adapters.nanobot.exit_executor import ExitSafeExecutor

    executor = ExitSafeExecutor()
    loop = asyncio.get_running_loop()
    started = 0
    start = threading.Thread.start

    def counting(thread: threading.Thread) -> None:
        nonlocal started
        target = getattr(thread, "_target", None)
        # this executor's helpers and workers only: other tests' loops (the session's
        # default executor may be another ExitSafeExecutor) start threads too
        args = getattr(thread, "_args", ())
        worker_of = args[0] if args and isinstance(args[0], weakref.ref) else None
        if (getattr(target, "__self__", None) is executor
                or (worker_of is not None and worker_of() is executor)):
            started += 1
        start(thread)

    threading.Thread.start = counting  # type: ignore[method-assign]
    try:
        for _ in range(200):
            await loop.run_in_executor(executor, lambda: None)
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
        executor.shutdown(wait=True)
    # A helper and a worker for the first call; under load a call can come before the
    # last worker has said it is idle (the pool then adds one, as the stdlib pool does),
    # so a few more: never one per call (400).
    assert started <= 20, started
    assert all(t.daemon for t in executor._threads)  # type: ignore[attr-defined]
