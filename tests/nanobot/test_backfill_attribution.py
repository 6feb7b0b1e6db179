"""A backfill never files a turn the plugin did not see under the one sender it did see,
when several people may have said it: nanobot's unified session (every chat in one
session) and a group whose live turns showed it a group (the chat book). Before, Bob's
turn in both was filed in Alice's scope, and recalled in her one-person chats."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from nanobot_memory_adapters.config import MemoryConfig
from nanobot_memory_adapters.nanobot.backfill import plan_backfill
from nanobot_memory_adapters.nanobot.chat_book import CHATS_FILE, ChatBook
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.people import observe
from nanobot_memory_adapters.nanobot.turns import event_from_messages

MEMORY = MemoryConfig.model_validate({"condition": "full_history"})


class _Session:
    def __init__(self, key: str, messages: list[dict[str, Any]]) -> None:
        self.key, self.messages, self.policy = key, messages, None


class _Manager:
    def __init__(self, session: _Session) -> None:
        self.sessions = {session.key: session}

    def list_sessions(self) -> list[dict[str, str]]:
        return [{"key": k} for k in self.sessions]

    def get_cached(self, key: str) -> _Session | None:
        return self.sessions.get(key)

    def get_or_create(self, key: str) -> _Session:
        return self.sessions[key]


def _at(minutes: float) -> str:
    return (dt.datetime(2025, 1, 1, 10, 0) + dt.timedelta(minutes=minutes)).isoformat()


@pytest.mark.parametrize(("key", "channel", "chat", "alice", "meta"), [
    ("unified:default", "telegram", "7001", "7001|alice", None),
    ("whatsapp:team@g.us", "whatsapp", "team@g.us", "49150001", {"is_group": True}),
    # a room whose channel marks nothing (Matrix) and no direct_chats entry: live, it was
    # never shown one person's, so a turn there without a seen sender is nobody's
    ("matrix:!room:example.org", "matrix", "!room:example.org", "@alice:example.org", {}),
], ids=["unified", "group", "unflagged-room"])
def test_an_unseen_turn_of_a_shared_session_is_nobodys(tmp_path, key, channel, chat, alice,
                                                       meta):
    outbox = Outbox(tmp_path / "outbox.sqlite3")
    messages = [  # Bob's turn, before the plugin was installed
        {"role": "user", "content": "my PIN is CANARY-BOB", "timestamp": _at(0)},
        {"role": "assistant", "content": "noted", "timestamp": _at(0.1)},
        # Alice's turn, seen live
        {"role": "user", "content": "hello from alice", "timestamp": _at(5)},
        {"role": "assistant", "content": "hi", "timestamp": _at(5.1)}]
    live = event_from_messages(memory=MEMORY, chosen=messages[2:], event_id="nb-live",
                               turn_id=f"{key}:1", channel=channel, chat_id=chat,
                               sender_id=alice, session_key=key)
    outbox.enqueue("full_history", live, key, (channel, chat, alice))
    if meta is not None:  # what her live turn showed: the chat is a group
        book = ChatBook(tmp_path / CHATS_FILE)
        book.observe(key, observe(session_key=key, channel=channel, chat_id=chat,
                                  sender_id=alice, metadata=meta))
        book.close()
    plan = plan_backfill(_Manager(_Session(key, messages)), MEMORY, outbox, "full_history")
    said = [m.content for _, e in plan.events for m in e.messages]
    assert "my PIN is CANARY-BOB" not in said, plan.events
    assert plan.unknown_sender == 1 and plan.unknown_sender_sessions == {key}
    outbox.close()


def test_heartbeat_turns_are_nobodys(tmp_path):
    """nanobot's gateway runs its heartbeat in session ``heartbeat`` (no ``:``, as a CLI
    session's id): live its turns are nobody's; a backfill filed them under the
    terminal's user (``cli-user``), whose next turn recalled another person's reminder."""
    outbox = Outbox(tmp_path / "outbox.sqlite3")
    messages = [
        {"role": "user", "content": "Heartbeat task: remind Ann her gate code is GATE-4471",
         "timestamp": _at(0)},
        {"role": "assistant", "content": "reminded", "timestamp": _at(0.1)}]
    plan = plan_backfill(_Manager(_Session("heartbeat", messages)), MEMORY, outbox,
                         "full_history")
    assert plan.events == [] and plan.nobodys == 1, plan
    assert any("heartbeat" in line for line in plan.notes(name_scopes=False))
    outbox.close()


def test_heartbeat_turns_before_since_are_not_counted(tmp_path):
    """``backfill --since`` counts what it skipped within its window only: a heartbeat
    turn before it is not one the plan passed over."""
    outbox = Outbox(tmp_path / "outbox.sqlite3")
    messages = [
        {"role": "user", "content": "Heartbeat task: water the plants", "timestamp": _at(0)},
        {"role": "assistant", "content": "done", "timestamp": _at(0.1)},
        {"role": "user", "content": "Heartbeat task: feed the cat", "timestamp": _at(60)},
        {"role": "assistant", "content": "done", "timestamp": _at(60.1)}]
    since = dt.datetime.fromisoformat(_at(30)).astimezone(dt.UTC)
    plan = plan_backfill(_Manager(_Session("heartbeat", messages)), MEMORY, outbox,
                         "full_history", since=since)
    assert plan.events == [] and plan.nobodys == 1, plan
    outbox.close()
