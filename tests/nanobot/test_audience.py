"""One audience per request, end to end through a real nanobot ``AgentLoop``: the paths by
which one person's memory reached another person's request or reply in a shared gateway
(each reproduced on the code before the audience gate), and what a chat command may show.

The model is the LLM double with ``[llm-double:echo]``: it repeats every memory section it
is shown in its answer, as a small model does, so a leak through a reply (and the saved
history) is seen as well as one through the request."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from nanobot_memory_adapters.contract import AdapterError
from nanobot_memory_adapters.nanobot import plugin_for
from nanobot_memory_adapters.nanobot.search_tool import SEARCH_TOOL_NAME
from tests.nanobot.conftest import VENV_BIN, agent_request, long_term_memory
from tests.nanobot.test_cli import reply_of
from tests.nanobot.test_scopes import (
    _cron_job,
    _CronRecords,
    _memory,
    _plugin,
    channel_turn,
    talk,
)

ECHO = "[llm-double:echo]"
PIN = "PIN-4471-KESTREL"
# nanobot 0.3.5's inbound metadata per channel: a direct chat and a group
WHATSAPP_DM = {"is_group": False}
WHATSAPP_GROUP = {"is_group": True}
DISCORD_DM = {"guild_id": None}
DISCORD_GUILD = {"guild_id": "4242"}
SLACK_GROUP = {"slack": {"channel_type": "channel"}}


def _requests_with(double: Any, text: str, since: int) -> list[Any]:
    return [r for r in double.chat_requests()[since:] if r.tools and text in r.all_text]


async def _seed_pin(loop: Any, channel: str, chat: str, sender: str,
                    meta: dict[str, Any]) -> None:
    """The member tells the bot a secret in a direct chat; it is stored."""
    await channel_turn(loop, channel, chat, sender, f"Remember: my bank PIN is {PIN}.", meta)
    assert await _plugin(loop).flush(timeout_s=120) == 0


# -- cron turns in a group ------------------------------------------------------------------
GROUPS = [
    ("whatsapp", "ann@s.whatsapp.net", WHATSAPP_DM, "team@g.us", WHATSAPP_GROUP),
    ("discord", "dm-ann", DISCORD_DM, "guild-chan", DISCORD_GUILD),
    ("slack", "D-ann", {"slack": {"channel_type": "im"}}, "C-team", SLACK_GROUP),
]


@pytest.mark.parametrize(("channel", "dm", "dm_meta", "group", "group_meta"), GROUPS,
                         ids=[g[0] for g in GROUPS])
@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "restarted"])
async def test_a_cron_turn_in_a_group_recalls_nobodys_memory(
        home, llm_double, channel, dm, dm_meta, group, group_meta, restart):
    """nanobot's cron runner sends ``sender_id="cron"`` with no channel metadata: the
    group flag is unseen on that turn. The turn was filed under the group's last speaker,
    whose DM'd PIN went into the group's request and its reply."""
    from nanobot.cron.bound_runner import run_bound_cron_job

    home.write_memory(_memory("full_history"))
    loop = home.loop()
    await _seed_pin(loop, channel, dm, "ann", dm_meta)
    await channel_turn(loop, channel, group, "ann", "Hi team, remind us daily at 9.", group_meta)
    if restart:
        await channel_turn(loop, channel, group, "ben", "Sounds good.", group_meta)
        await home.close(loop)
        loop = home.loop()
    before = len(llm_double.chat_requests())
    job = _cron_job("daily", channel, group, f"Daily reminder for the team. {ECHO}")
    outcome = await run_bound_cron_job(job, agent=loop, cron=_CronRecords())
    reqs = _requests_with(llm_double, "Daily reminder for the team", before)
    assert reqs, "the cron turn reached the model"
    assert all(PIN not in r.all_text for r in reqs), [r.system[-400:] for r in reqs]
    assert PIN not in json.dumps(outcome, default=str)
    assert await _plugin(loop).flush(timeout_s=120) == 0
    # the cron turn is nobody's: not recorded under the last speaker
    users = {json.loads(r["payload"])["user_id"]
             for r in _plugin(loop).outbox.rows("full_history")
             if "Daily reminder" in r["payload"]}
    assert users == set(), users


async def test_a_cron_turn_in_an_unflagged_room_after_a_restart_is_nobodys(home, llm_double):
    from nanobot.cron.bound_runner import run_bound_cron_job

    home.write_memory(_memory("full_history"))
    loop = home.loop()
    await _seed_pin(loop, "matrix", "dm-ann", "@ann:x.org", {})  # dm-*: declared direct
    await channel_turn(loop, "matrix", "!room:x.org", "@ann:x.org", "Hello room.", {})
    await channel_turn(loop, "matrix", "!room:x.org", "@ben:x.org", "Hi Ann.", {})
    await home.close(loop)
    loop = home.loop()
    before = len(llm_double.chat_requests())
    await run_bound_cron_job(_cron_job("r", "matrix", "!room:x.org", f"Room digest. {ECHO}"),
                             agent=loop, cron=_CronRecords())
    reqs = _requests_with(llm_double, "Room digest", before)
    assert reqs and all(PIN not in r.all_text for r in reqs)


async def test_a_cron_turn_in_a_one_person_chat_is_still_that_persons(home, llm_double):
    """After a restart the chat book still knows the WhatsApp DM is Ann's: her reminder
    reads her memory (the cron turn carries no metadata of its own)."""
    from nanobot.cron.bound_runner import run_bound_cron_job

    home.write_memory(_memory("full_history"))
    loop = home.loop()
    await _seed_pin(loop, "whatsapp", "ann@s.whatsapp.net", "ann", WHATSAPP_DM)
    await home.close(loop)
    loop = home.loop()
    before = len(llm_double.chat_requests())
    await run_bound_cron_job(_cron_job("p", "whatsapp", "ann@s.whatsapp.net",
                                       "Which PIN did I give you?"),
                             agent=loop, cron=_CronRecords())
    [req] = _requests_with(llm_double, "Which PIN did I give you?", before)
    assert PIN in req.all_text


# -- memory_search in a chat not known to be a group ------------------------------------------
@pytest.mark.parametrize(("channel", "room", "meta"), [
    ("matrix", "!room:x.org", {}),
    ("email", "thread-77@x.org", {}),
    ("dingtalk", "group:cid-9", {"conversation_type": "2"}),
], ids=["matrix", "email-thread", "dingtalk-group"])
async def test_memory_search_is_not_offered_results_where_others_read_the_history(
        home, llm_double, channel, room, meta):
    """The first speaker's ``memory_search`` result (her DM memory) was saved in the room's
    history as a ``role: tool`` message and replayed in the next speaker's requests, with
    the assistant's echo of it."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    await _seed_pin(loop, channel, "dm-ann", "ann", {})
    ask = json.dumps({"query": "bank PIN"})
    reply = await channel_turn(loop, channel, room, "ann",
                               f"What is my PIN? [llm-double:tool {SEARCH_TOOL_NAME} {ask}]",
                               meta)
    assert PIN not in reply, reply
    before = len(llm_double.chat_requests())
    reply = await channel_turn(loop, channel, room, "ben", f"Ben here, hello. {ECHO}", meta)
    assert PIN not in reply, reply
    reqs = _requests_with(llm_double, "Ben here, hello.", before)
    assert reqs and all(PIN not in r.all_text for r in reqs)
    session = loop.sessions.get_or_create(f"{channel}:{room}")
    assert PIN not in json.dumps(session.messages)


async def test_an_older_search_result_in_a_shared_history_is_withdrawn(home, llm_double):
    """A ``memory_search`` result an older version saved in a chat's history goes once the
    chat is seen to be shared, as a recalled block does."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    session = loop.sessions.get_or_create("matrix:!old:x.org")
    session.messages.append({"role": "tool", "name": SEARCH_TOOL_NAME, "tool_call_id": "c1",
                             "content": f"<memory-context>{PIN}</memory-context>"})
    loop.sessions.save(session)
    await channel_turn(loop, "matrix", "!old:x.org", "@ben:x.org", "Hello there.", {})
    session = loop.sessions.get_or_create("matrix:!old:x.org")
    assert PIN not in json.dumps(session.messages)


def test_a_chat_seen_shared_drops_the_providers_saved_conversation(tmp_path):
    """With OpenAI's Responses API nanobot saves the exact earlier input (recall blocks
    and memory results included) as the session's provider state and replays it instead of
    the history: stripping the history alone left the first person's recall in every later
    request. The state goes with the blocks, on disk too."""
    from nanobot.providers.base import ProviderConversationState
    from nanobot.runtime_context import (
        RUNTIME_CONTEXT_HISTORY_META,
        RuntimeContextBlock,
        append_runtime_context,
    )
    from nanobot.session.manager import SessionManager

    from nanobot_memory_adapters.nanobot.seams import LOG_PREFIX, strip_memory_blocks

    sessions = SessionManager(tmp_path)
    session = sessions.get_or_create("sdk:room")
    block = RuntimeContextBlock(source=LOG_PREFIX,
                                content=f"<memory-context>PIN {PIN}</memory-context>")
    text, marker = append_runtime_context("what is my PIN?", [block])
    session.add_message("user", text, **{RUNTIME_CONTEXT_HISTORY_META: marker})
    session.provider_state = ProviderConversationState(
        kind="openai_responses", provider="openai", model="gpt", version=1,
        payload={"items": [{"role": "user", "content": text}]})
    sessions.save(session)
    assert strip_memory_blocks(sessions, "sdk:room") == 1
    reread = SessionManager(tmp_path).get_or_create("sdk:room")
    assert reread.provider_state is None
    assert PIN not in json.dumps(reread.messages)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and PIN in p.read_text()]


# -- an unflagged room echoes nothing of a member's memory (through a real reply) -------------
async def test_an_unflagged_room_gets_no_personal_recall_to_echo(home, llm_double):
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    await _seed_pin(loop, "matrix", "dm-ann", "@ann:x.org", {})
    reply = await channel_turn(loop, "matrix", "!room:x.org", "@ann:x.org",
                               f"Tell the room what you know about me. {ECHO}", {})
    assert PIN not in reply, reply
    before = len(llm_double.chat_requests())
    reply = await channel_turn(loop, "matrix", "!room:x.org", "@ben:x.org",
                               f"What did the bot say before? {ECHO}", {})
    assert PIN not in reply
    assert all(PIN not in r.all_text for r in llm_double.chat_requests()[before:])
    # in her own (declared) direct chat the echo does show her memory: the double echoes
    reply = await channel_turn(loop, "matrix", "dm-ann", "@ann:x.org",
                               f"What do you know about me? {ECHO}", {})
    assert PIN in reply


# -- what chat commands show ------------------------------------------------------------------
async def test_memory_health_shows_neither_another_users_error_text_nor_their_recall(
        home, llm_double, monkeypatch):
    """A backend error body can quote the submitted turn (MemOS, FastAPI): the gateway-wide
    last error was shown to whoever asked. So were the last recall and its user."""
    home.write_memory(_memory("full_history", retry_initial_s=30, retry_max_s=60))
    loop = home.loop()
    plugin = _plugin(loop)
    await channel_turn(loop, "whatsapp", "ann@s.whatsapp.net", "ann", "Hello, bot.",
                       WHATSAPP_DM)
    assert await plugin.flush() == 0
    adapter = plugin.adapter
    assert adapter is not None

    async def echoing_failure(event: Any) -> Any:
        text = " ".join(m.content for m in event.messages)
        raise AdapterError(f"422 Unprocessable Entity: {{'detail': 'bad input: {text}'}}",
                           backend_name="full_history", operation="record_event",
                           retryable=True)

    monkeypatch.setattr(adapter, "record_event", echoing_failure)
    await channel_turn(loop, "whatsapp", "ann@s.whatsapp.net", "ann",
                       f"My PIN is {PIN}.", WHATSAPP_DM)
    await plugin.flush(timeout_s=2)
    assert plugin.last_error is not None and PIN in plugin.last_error.message
    health = await channel_turn(loop, "whatsapp", "ben@s.whatsapp.net", "ben",
                                "/memory-health", WHATSAPP_DM)
    assert "last error: record_event" in health, health
    assert PIN not in health and "whatsapp-ann" not in health, health
    ann_health = await channel_turn(loop, "whatsapp", "ann@s.whatsapp.net", "ann",
                                    "/memory-health", WHATSAPP_DM)
    assert "last recall" in ann_health and PIN not in ann_health
    assert "last recall" not in health  # Ben has made none: nothing of Ann's is shown
    mode = await channel_turn(loop, "whatsapp", "team@g.us", "ben", "/memory-mode",
                              WHATSAPP_GROUP)
    assert "user=" not in mode and "not known to be yours alone" in mode, mode


async def test_a_group_forget_reply_describes_no_ones_memory(home, llm_double):
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    await _seed_pin(loop, "whatsapp", "ann@s.whatsapp.net", "ann", WHATSAPP_DM)
    reply = await channel_turn(loop, "whatsapp", "team@g.us", "ann", "/memory-forget",
                               WHATSAPP_GROUP)
    assert "user=" not in reply and "whatsapp-ann" not in reply, reply
    reply = await channel_turn(loop, "whatsapp", "team@g.us", "ann",
                               "/memory-forget confirm", WHATSAPP_GROUP)
    assert reply.startswith("forgotten"), reply
    assert "whatsapp-ann" not in reply and "scope" not in reply, reply
    # it did forget: her DM no longer recalls the PIN
    await channel_turn(loop, "whatsapp", "ann@s.whatsapp.net", "ann", "My PIN?", WHATSAPP_DM)
    assert PIN not in agent_request(llm_double, "My PIN?").system + \
        agent_request(llm_double, "My PIN?").last_user


@pytest.mark.servers
async def test_memory_health_in_a_one_shot_run_waits_for_the_provider_to_start(home):
    """``nanobot agent -m "/memory-health"`` said "unavailable" every time: its 0.5 s check
    was shorter than a fresh process's provider start."""
    pytest.importorskip("mem0")
    home.write_memory({"memory": {"condition": "simple_rag"}})
    for _ in range(2):
        health = reply_of(home.cli("/memory-health"))
        assert health.startswith("memory: simple_rag — ok"), health
        assert "backend health: ok" in health, health


# -- a forget sticks in mem0 (extraction) ------------------------------------------------------
async def test_a_forget_on_mem0_leaves_nothing_the_next_extraction_sees(home, llm_double):
    """mem0 keeps the scope's last raw messages and feeds them to the next extraction: the
    forgotten PIN went back to the model with the next turn, which wrote it back."""
    pytest.importorskip("mem0")
    home.write_memory(_memory("mem0", llm_double))
    loop = home.loop()
    plugin = _plugin(loop)
    await _seed_pin(loop, "whatsapp", "ann@s.whatsapp.net", "ann", WHATSAPP_DM)
    forgot = await channel_turn(loop, "whatsapp", "ann@s.whatsapp.net", "ann",
                                "/memory-forget confirm", WHATSAPP_DM)
    assert forgot.startswith("forgotten"), forgot
    assert "What stays: nanobot's own session history" in forgot.splitlines()[0]
    before = len(llm_double.requests)
    await loop.process_direct("/new", session_key="whatsapp:ann@s.whatsapp.net",
                              channel="whatsapp", chat_id="ann@s.whatsapp.net",
                              sender_id="ann")
    await channel_turn(loop, "whatsapp", "ann@s.whatsapp.net", "ann",
                       "I started learning the cello this week.", WHATSAPP_DM)
    assert await plugin.flush(timeout_s=120) == 0
    extractions = [r for r in llm_double.requests[before:] if r.get("handler") == "mem0.extract"]
    assert extractions, "the new turn was extracted"
    assert all(PIN not in json.dumps(r["body"]) for r in extractions)
    await channel_turn(loop, "whatsapp", "ann@s.whatsapp.net", "ann", "What is my PIN?",
                       WHATSAPP_DM)
    assert PIN not in long_term_memory(agent_request(llm_double, "What is my PIN?"))


# -- a forget is a fact: migrate-scopes does not file the forgotten turns back ----------------
@pytest.mark.servers
async def test_migrate_scopes_after_a_forget_files_nothing_back(home, llm_double,
                                                                monkeypatch):
    from nanobot_memory_adapters.nanobot import turns
    from nanobot_memory_adapters.scope import legacy_id

    home.write_memory(_memory("full_history"))
    with monkeypatch.context() as old:  # what the plugin did before: legacy scope names
        old.setattr("nanobot_memory_adapters.scope.plain_id", legacy_id)
        old.setattr(turns, "person_id", lambda channel, sender, session_key: sender)
        loop = home.loop()
        await channel_turn(loop, "discord", "dm-jose", "josé", f"My PIN is {PIN}.",
                           DISCORD_DM)
        assert await _plugin(loop).flush() == 0
        await home.close(loop)
    loop = home.loop()
    forgot = await channel_turn(loop, "discord", "dm-jose", "josé", "/memory-forget confirm",
                                DISCORD_DM)
    assert forgot.startswith(("forgotten", "nothing stored")), forgot
    await home.close(loop)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(VENV_BIN / "nanobot-memory"), "migrate-scopes", "--config",
                               str(home.memory_path), *args], capture_output=True, text=True,
                              timeout=120)

    dry = run("--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert (planned["moved"], planned["forgotten"]) == (0, 1), planned
    done = run("--json")
    assert json.loads(done.stdout)["moved"] == 0, done.stdout
    loop = home.loop()
    plugin = _plugin(loop)
    await plugin._ensure_adapter()
    assert await plugin.flush() == 0
    await channel_turn(loop, "discord", "dm-jose", "josé", "José asks: my PIN?", DISCORD_DM)
    # (nanobot's own session history of the chat still holds it: the forget says so)
    assert PIN not in long_term_memory(agent_request(llm_double, "José asks: my PIN?"))


# -- long plain ids -----------------------------------------------------------------------------
async def test_a_sender_id_over_200_plain_characters_keeps_its_turns(home, llm_double):
    """A long Matrix id was plain but over the 200-character limit: every turn was lost
    with only a warning."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    sender = "@" + "a" * 230 + ":example.org"
    await channel_turn(loop, "matrix", "dm-long", sender, f"My PIN is {PIN}.", {})
    assert await plugin.flush() == 0
    rows = plugin.outbox.rows("full_history")
    assert any(PIN in r["payload"] for r in rows), "the turn was recorded"
    await channel_turn(loop, "matrix", "dm-long", sender, "Which PIN is mine?", {})
    assert PIN in agent_request(llm_double, "Which PIN is mine?").all_text


async def test_the_chat_book_outlives_the_process(home, llm_double):
    """What turns showed is kept on disk: after a restart a group stays a group even when
    the next turn carries no flag."""
    home.write_memory(_memory("full_history", group_recall="personal"))
    loop = home.loop()
    await _seed_pin(loop, "whatsapp", "ann@s.whatsapp.net", "ann", WHATSAPP_DM)
    await channel_turn(loop, "whatsapp", "team@g.us", "ann", "hello team", WHATSAPP_GROUP)
    await home.close(loop)
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await channel_turn(loop, "whatsapp", "team@g.us", "ann", f"and again {ECHO}", {})
    req = agent_request(llm_double, "and again")
    # group_recall "personal": her own recall, in the system prompt only, never saved
    assert PIN in req.system and PIN not in req.last_user
    session = loop.sessions.get_or_create("whatsapp:team@g.us")
    assert not any("memory-context" in json.dumps(m) for m in session.messages
                   if m.get("role") == "user")


async def test_a_named_cli_session_keeps_its_users_memory(home, llm_double):
    """``nanobot agent -s work``: the CLI's session key is not ``cli:<chat>``, and the
    CLI has one user: its memory is recalled there (the real-model lane's chats too)."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    await loop.process_direct(f"My PIN is {PIN}.", session_key="work", channel="cli",
                              chat_id="direct", sender_id="user")
    assert await _plugin(loop).flush() == 0
    await loop.process_direct("Which PIN is mine?", session_key="other", channel="cli",
                              chat_id="direct", sender_id="user")
    assert PIN in long_term_memory(agent_request(llm_double, "Which PIN is mine?"))


# -- nanobot's placeholder sender: its SDK and its API server -------------------------------
@pytest.mark.parametrize("group_recall", ["none", "personal", "group"])
@pytest.mark.parametrize(("channel", "keys"), [
    ("cli", ("sdk:alice", "sdk:bob")),  # Nanobot.run(session_key=...), its other defaults
    ("api", ("api:alice", "api:bob")),  # the API server: every client chat "default"
], ids=["sdk", "api"])
async def test_callers_that_nanobot_calls_user_keep_their_memories_apart(
        home, llm_double, channel, keys, group_recall):
    """nanobot's SDK and API server give every caller sender ``user`` (the API server also
    chat ``default``); an app keeps its people apart by session key. Before: every SDK
    session was the CLI's one user (Bob's request and reply carried Alice's PIN), and with
    ``group_recall: group`` every API client shared one group scope. Now each such session
    is a person of its own, and a caller's own session still recalls its memory."""
    home.write_memory(_memory("full_history", group_recall=group_recall))
    loop = home.loop()
    alice, bob = keys
    chat = "direct" if channel == "cli" else "default"
    await loop.process_direct(f"Remember: my PIN is {PIN}.", session_key=alice,
                              channel=channel, chat_id=chat, sender_id="user")
    assert await _plugin(loop).flush() == 0
    reply = await loop.process_direct(f"What do you know about me? {ECHO}", session_key=bob,
                                      channel=channel, chat_id=chat, sender_id="user")
    assert PIN not in agent_request(llm_double, "What do you know about me?").all_text
    assert PIN not in (reply.content if reply else "")
    if channel == "cli" or group_recall != "none":  # an API session is not known to be
        await loop.process_direct(f"Which PIN is mine? {ECHO}", session_key=alice,  # one's
                                  channel=channel, chat_id=chat, sender_id="user")
        assert PIN in agent_request(llm_double, "Which PIN is mine?").all_text


# -- text said instead of a withheld piece, and personal recall's command replies ---------
async def test_a_group_forget_with_nothing_stored_names_no_scope(home, llm_double):
    """The text a group gets instead of the forget report was cut from the report's first
    line, which for "nothing stored" is ``nothing stored for this scope (<scope key>)``:
    the group was shown the asker's scope key (here a Signal phone number)."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    _plugin(loop)
    reply = await channel_turn(loop, "signal", "group.abc=", "+491601234567|uuid-ann",
                               "/memory-forget confirm", {"is_group": True})
    assert "nothing stored for you" in reply, reply
    assert "491601234567" not in reply and "scope (" not in reply, reply


async def test_personal_recall_never_reaches_a_groups_command_replies(home, llm_double):
    """``group_recall: personal`` lets the speaker's memory into that turn's system prompt
    only. A command's reply is sent to the group and saved in its history, yet it was
    released to the same audience: the group saw the asker's scope ids, their last recall
    and the full forget preview."""
    home.write_memory(_memory("full_history", group_recall="personal"))
    loop = home.loop()
    plugin = _plugin(loop)
    ann = "4915123456789@s.whatsapp.net"
    await channel_turn(loop, "whatsapp", ann, ann, f"Remember: my PIN is {PIN}.", WHATSAPP_DM)
    assert await plugin.flush(timeout_s=60) == 0
    # (not echoed: the model may repeat a personal recall in its answer, as documented)
    await channel_turn(loop, "whatsapp", "team@g.us", ann, "Which PIN is mine?",
                       WHATSAPP_GROUP)
    assert PIN in agent_request(llm_double, "Which PIN is mine?").all_text  # still recalled
    replies = {command: await channel_turn(loop, "whatsapp", "team@g.us", ann, command,
                                           WHATSAPP_GROUP)
               for command in ("/memory-mode", "/memory-forget", "/memory-health")}
    shown = {c: r for c, r in replies.items()
             if "4915123456789" in r or "last recall" in r or PIN in r}
    # the command replies nanobot saved in the group's history (``_command``)
    saved = [m for m in loop.sessions.get_or_create("whatsapp:team@g.us").messages
             if m.get("_command") and "4915123456789" in str(m.get("content"))]
    assert len([m for m in loop.sessions.get_or_create("whatsapp:team@g.us").messages
                if m.get("_command") and m.get("role") == "assistant"]) >= 3
    assert not shown and not saved, (shown, saved)


async def test_a_groups_turn_line_shows_no_personal_recall_counts(home, llm_double):
    """The opt-in per-turn line is sent with the reply to everyone in the chat. Under
    ``group_recall: personal`` it said how many of the speaker's memories were recalled
    (and their size) to the whole group; in the speaker's direct chat it still does."""
    home.write_memory(_memory("full_history", group_recall="personal", turn_line=True,
                              prepare_recall=False))
    loop = home.loop()
    ann = "4915123456789@s.whatsapp.net"
    await channel_turn(loop, "whatsapp", ann, ann, f"Remember: my PIN is {PIN}.", WHATSAPP_DM)
    assert await _plugin(loop).flush(timeout_s=60) == 0
    direct = await channel_turn(loop, "whatsapp", ann, ann, "Which PIN is mine?", WHATSAPP_DM)
    assert "[memory: full_history — 1 item" in direct  # the person's own chat: counts shown
    group = await channel_turn(loop, "whatsapp", "team@g.us", ann, "Which PIN is mine?",
                               WHATSAPP_GROUP)
    assert PIN in agent_request(llm_double, "Which PIN is mine?").all_text  # still recalled
    line = group[group.rindex("[memory: "):]
    assert "item" not in line and "token" not in line, line
    assert line.startswith("[memory: full_history"), line


def _gateway_whose_next_build_fails(home: Any, monkeypatch: Any) -> tuple[Any, Any]:
    """A gateway on full_history whose next provider build fails with a backend's body
    that quotes a person's PIN."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)

    def failing_build(memory: Any) -> Any:
        raise AdapterError(f"500: {{'detail': 'cannot index: My bank PIN is {PIN}'}}",
                           backend_name="no_memory", operation="build", retryable=False)

    monkeypatch.setattr(plugin, "_build", failing_build)
    return loop, plugin


async def test_a_switch_that_fails_tells_a_chat_nothing_of_the_backends_error(
        home, llm_double, monkeypatch):
    """``/memory-mode NAME`` quoted the provider's build error to the chat it was sent
    in. A backend's error body can quote a stored turn (a person's PIN); it is operator
    text now: nanobot's own terminal reads it, a group reads that the switch failed."""
    loop, plugin = _gateway_whose_next_build_fails(home, monkeypatch)
    from nanobot_memory_adapters.logs import logger

    logged: list[str] = []
    sink = logger.add(lambda message: logged.append(str(message)), level="WARNING")
    try:
        group = await channel_turn(loop, "whatsapp", "team@g.us", "ann",
                                   "/memory-mode no_memory", WHATSAPP_GROUP)
    finally:
        logger.remove(sink)
    assert "cannot switch to 'no_memory'" in group and "gateway's log" in group, group
    assert PIN not in group and "Still using 'full_history'" in group, group
    assert any(PIN in line for line in logged), logged  # where the chat is told to look
    assert await plugin.flush() == 0
    backfill = await channel_turn(loop, "whatsapp", "team@g.us", "ann",
                                  "/memory-mode no_memory --backfill", WHATSAPP_GROUP)
    assert "backfill: not started" in backfill and PIN not in backfill, backfill
    assert await plugin.flush() == 0
    terminal = await talk(loop, "cli", "direct", "user", "/memory-mode no_memory")
    assert PIN in terminal and "cannot switch to 'no_memory'" in terminal, terminal
    assert plugin.provider == "full_history"


async def test_a_chat_opened_from_the_terminal_keeps_no_operator_text(
        home, llm_double, monkeypatch):
    """``nanobot agent -s websocket:team -m "/memory-mode …"`` arrives on the ``cli``
    channel, but nanobot saves the reply in the WebUI chat's session, which its readers
    see (history hydration, nanobot's session tools): operator text stays out of it, as
    out of an SDK app's session whose sender is the app's user."""
    loop, plugin = _gateway_whose_next_build_fails(home, monkeypatch)
    opened = await talk(loop, "cli", "direct", "user", "/memory-mode no_memory",
                        session_key="websocket:team")
    assert "cannot switch to 'no_memory'" in opened and PIN not in opened, opened
    saved = loop.sessions.get_or_create("websocket:team").messages
    assert saved and not [m for m in saved if PIN in str(m.get("content"))], saved
    assert await plugin.flush() == 0
    named = await talk(loop, "cli", "direct", "user", "/memory-mode no_memory",
                       session_key="work")  # the terminal's own named session
    assert PIN in named, named
    # an app on nanobot's SDK names its session without a channel (channel "cli" by
    # default) and its user as the sender: that user reads the reply, not the operator
    app = await talk(loop, "cli", "direct", "alice", "/memory-mode no_memory",
                     session_key="alice")
    assert PIN not in app, app


async def test_the_turn_line_is_its_own_turns(home, llm_double):
    """The line was looked up under the reply message's ``channel:chat_id``, which is not
    the session of an API (or SDK) turn: every API session's reply took the note the
    default session's last recall left (its scope's counts), and its own was never
    shown. A note a turn left without a reply is never another turn's line."""
    home.write_memory(_memory("full_history", group_recall="group", turn_line=True,
                              prepare_recall=False))
    loop = home.loop()
    plugin = _plugin(loop)
    for n in range(3):
        await talk(loop, "api", "default", "user", f"Remember: note {n} is {PIN}.",
                   session_key="api:default")
    assert await plugin.flush(timeout_s=60) == 0
    # the default session's next turn recalls; the API timeout cancels it before its reply
    await plugin.recall(session_key="api:default", query="Which PIN is mine?",
                        channel="api", chat_id="default", sender_id="user",
                        turn_id="api:default:cancelled")
    alice = await talk(loop, "api", "default", "user", "What do you know about me?",
                       session_key="api:alice")
    line = alice[alice.rfind("[memory: "):]
    assert "[memory: full_history — 0 items" in line, alice  # her own scope's: nothing yet


async def test_a_forget_that_fails_quotes_no_backend_text_to_a_chat(
        home, llm_double, monkeypatch):
    """``/memory-forget confirm`` said the backend's error in the asker's chat; a backend's
    body can quote any stored turn (here another person's). The chat reads that the
    deletion failed, the terminal's ``nanobot-memory forget`` and the log read why."""
    from nanobot_memory_adapters.contract import MemoryScope
    from nanobot_memory_adapters.nanobot.forget import ForgetOutcome, ProviderForget

    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await _seed_pin(loop, "whatsapp", "ann@s.whatsapp.net", "ann", WHATSAPP_DM)
    adapter = plugin.adapter
    assert adapter is not None

    async def failing_reset(scope: Any) -> Any:
        raise AdapterError("409: {'detail': 'locked by request: Ben said my PIN is BEN-9981'}",
                           backend_name="full_history", operation="reset_scope",
                           retryable=False)

    monkeypatch.setattr(adapter, "reset_scope", failing_reset)
    reply = await channel_turn(loop, "whatsapp", "ann@s.whatsapp.net", "ann",
                               "/memory-forget confirm", WHATSAPP_DM)
    assert "NOT fully forgotten" in reply and "its deletion failed" in reply, reply
    assert "BEN-9981" not in reply and "gateway's log" in reply, reply
    # the operator's report (nanobot-memory forget) keeps the backend's words
    failed = ProviderForget("full_history", "error", "its deletion failed", error="409: x")
    scope = MemoryScope(run_id="default", persona_id="p")
    assert "(409: x)" in ForgetOutcome(scope, 0, [failed]).report("x")


async def test_a_chat_cannot_hand_every_chats_prompt_nanobots_own_memory(home, llm_double):
    """``/memory-mode rolling_summary`` from a group made nanobot's one MEMORY.md (Dream
    builds it from every chat, DMs included, and keeps running beside a provider) part of
    every chat's prompt. A chat is refused; nanobot's terminal may switch."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    for channel, chat, meta in (("whatsapp", "team@g.us", WHATSAPP_GROUP),
                                ("whatsapp", "ann@s.whatsapp.net", WHATSAPP_DM)):
        for command in ("/memory-mode rolling_summary", "/memory-mode ROLLING_SUMMARY",
                        "/memory-mode rolling_summary --backfill"):
            said = await channel_turn(loop, channel, chat, "ann", command, meta)
            assert "not switched to from a chat" in said, (chat, command, said)
            assert plugin.provider == "full_history" and plugin.status == "active"
    assert "full_history" in home.memory_path.read_text()
    terminal = await talk(loop, "cli", "direct", "user", "/memory-mode rolling_summary")
    assert "now 'rolling_summary'" in terminal, terminal
    assert plugin.status == "passthrough"


def test_a_memory_view_that_breaks_shows_no_memory_rather_than_memory_md():
    """The prompt's memory slot fell back to nanobot's MEMORY.md (built from every chat)
    when the plugin's view raised: it fails closed now."""
    from nanobot_memory_adapters.nanobot.seams import MemoryView

    class Store:
        def read_memory(self) -> str:
            return "Ann's PIN is 4417"

    def broken() -> str | None:
        raise RuntimeError("the audience is unknown")

    assert MemoryView(Store(), broken).read_memory() == ""
    assert MemoryView(Store(), lambda: None).read_memory() == "Ann's PIN is 4417"


async def test_api_sessions_named_default_something_keep_their_own_group_scope(
        home, llm_double):
    """An API client's session id ``default:a`` (key ``api:default:a``) read as a thread
    of the default session's chat: under ``group_recall: group`` every such session shared
    the default chat's scope, though each is one client's."""
    home.write_memory(_memory("full_history", group_recall="group", prepare_recall=False))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "api", "default", "user", f"Remember: my PIN is {PIN}.",
               session_key="api:default:a")
    assert await plugin.flush(timeout_s=60) == 0
    question = "Which PIN did I give you?"
    await talk(loop, "api", "default", "user", question, session_key="api:default:b")
    assert PIN not in long_term_memory(agent_request(llm_double, question))
    await talk(loop, "api", "default", "user", question, session_key="api:default:a")
    assert PIN in long_term_memory(agent_request(llm_double, question))


def _summariser_inputs(loop: Any, monkeypatch: Any) -> tuple[list[list[dict[str, Any]]], Any]:
    """What nanobot's summariser is handed (each call's history, kept in the list) and a
    runtime for ``summarize_transcript``; the summariser's model is not called."""
    from types import SimpleNamespace

    seen: list[list[dict[str, Any]]] = []

    async def archive(source: Any, **kw: Any) -> str:
        seen.append(kw["history"])
        return "summary"

    monkeypatch.setattr(loop.consolidator.archiver, "archive", archive)
    return seen, SimpleNamespace(context_window_tokens=8000,
                                 generation=SimpleNamespace(max_tokens=500))


async def test_a_groups_compaction_never_summarises_the_speakers_personal_recall(
        home, llm_double, monkeypatch):
    """Under ``group_recall: personal`` the speaker's recall is in that turn's system
    prompt only. nanobot's in-turn compaction sent the whole accepted history, system
    prompt included, to the model whose summary is saved in the group's session: the
    summariser does not see the system prompt of such a turn now (a direct chat's turn
    keeps nanobot's behaviour), also after a message injected mid-turn noted a later,
    not prompt-only audience for the same turn."""

    from nanobot.agent.tools.context import (
        RequestContext,
        bind_request_context,
        reset_request_context,
    )

    home.write_memory(_memory("full_history", group_recall="personal"))
    loop = home.loop()
    plugin = _plugin(loop)
    seen, runtime = _summariser_inputs(loop, monkeypatch)
    for chat, meta, turn in (("team@g.us", WHATSAPP_GROUP, "g1"),
                             ("ann@s.whatsapp.net", WHATSAPP_DM, "d1")):
        key = f"whatsapp:{chat}"
        await plugin.recall(session_key=key, query="my PIN?", channel="whatsapp",
                            chat_id=chat, sender_id="ann", metadata=meta, turn_id=turn)
        if turn == "g1":  # another session's relay injected into the running turn: it
            # is nobody's, and the prompt built with Ann's recall is still the turn's
            await plugin.recall(session_key=key, query="No reply from @x", channel="system",
                                chat_id=key, sender_id="session_timeout", metadata={},
                                turn_id=turn)
        token = bind_request_context(RequestContext(channel="whatsapp", chat_id=chat,
                                                    session_key=key, turn_id=turn))
        try:
            await loop.consolidator.summarize_transcript(
                [{"role": "system", "content": f"## Long-term Memory\nPIN {PIN}"},
                 {"role": "user", "content": "hello"}], None,
                runtime=runtime, session_key=key, tools=[])
        finally:
            reset_request_context(token)
    group, direct = seen
    assert [m["role"] for m in group] == ["user"], group
    assert [m["role"] for m in direct] == ["system", "user"], direct


async def test_a_summary_never_carries_recalled_memory_into_the_workspace_history(
        home, llm_double, monkeypatch):
    """A compaction's summary is saved in the session *and* in nanobot's workspace-wide
    ``history.jsonl``, which Dream folds into the files every chat loads and ``/dream-log``
    shows in any chat. The transcript it is made from now has every ``<memory-context>``
    section cut (user message, system prompt, replayed history) and the memory tool's
    results left out; the person's own words stay (nanobot's design)."""
    from nanobot_memory_adapters.nanobot.seams import SUMMARISED_TOOL_RESULT

    home.write_memory(_memory("full_history"))
    loop = home.loop()
    seen, runtime = _summariser_inputs(loop, monkeypatch)
    section = f'<memory-context scope="default/whatsapp-ann">PIN {PIN}</memory-context>'
    await loop.consolidator.summarize_transcript(
        [{"role": "system", "content": f"## Long-term Memory\n{section}\nguide"},
         {"role": "user", "content": f"what is my PIN?\n\n{section}"},
         {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
         {"role": "tool", "tool_call_id": "c1", "name": "memory_search",
          "content": f"PIN {PIN}"},
         {"role": "user", "content": [{"type": "text", "text": "hi"},
                                      {"type": "text", "text": section}]}], None,
        runtime=runtime, session_key="whatsapp:ann@s.whatsapp.net", tools=[])
    (history,) = seen
    assert PIN not in json.dumps(history), history
    assert history[0]["content"] == "## Long-term Memory\n\nguide"
    assert history[1]["content"] == "what is my PIN?\n\n"
    assert history[3]["content"] == SUMMARISED_TOOL_RESULT


async def test_a_compact_summarises_a_direct_chat_without_its_recall(home, llm_double):
    """``/compact`` (``/new``, idle compaction) archives a session from its saved messages,
    where the default placement keeps each turn's recall; the summary lands in the
    workspace-wide ``history.jsonl``. nanobot's archive reads a copy without the recall
    blocks; the session itself keeps them (it is the person's own chat)."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    dm = "ann@s.whatsapp.net"
    await channel_turn(loop, "whatsapp", dm, "ann", f"My bank PIN is {PIN}.", WHATSAPP_DM)
    assert await plugin.flush() == 0
    await channel_turn(loop, "whatsapp", dm, "ann", "note two: what is my bank PIN?",
                       WHATSAPP_DM)
    saved = json.dumps(plugin.state.sessions.get_or_create(f"whatsapp:{dm}").messages)
    assert "<memory-context " in saved  # the person's own chat keeps its recall
    before = len(llm_double.requests)
    await channel_turn(loop, "whatsapp", dm, "ann", "/compact", WHATSAPP_DM)
    for _ in range(50):  # /compact runs as its own task
        if any("note two" in json.dumps(r["body"]) for r in llm_double.requests[before:]):
            break
        await asyncio.sleep(0.1)
    asked = [r for r in llm_double.requests[before:] if "note two" in json.dumps(r["body"])]
    assert asked, "the archive never asked the model"
    assert not [r for r in asked if "<memory-context " in json.dumps(r["body"])]


async def test_a_groups_compact_never_shows_the_summariser_nanobots_memory_file(
        home, llm_double):
    """``/compact`` (and ``/new``, idle compaction) archives a session with a prompt built
    outside any turn, where the memory slot fell back to nanobot's MEMORY.md: Dream keeps
    writing it from every chat beside a provider, and the summary is saved in the group's
    session. While nanobot archives a session the slot holds no memory."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    memory_md = home.workspace / "memory" / "MEMORY.md"
    memory_md.parent.mkdir(parents=True, exist_ok=True)
    memory_md.write_text(f"- Ann's bank PIN is {PIN}\n")
    for n in range(2):
        await channel_turn(loop, "whatsapp", "team@g.us", "ben", f"group note {n}",
                           WHATSAPP_GROUP)
    assert await plugin.flush() == 0
    before = len(llm_double.requests)
    await channel_turn(loop, "whatsapp", "team@g.us", "ben", "/compact", WHATSAPP_GROUP)
    for _ in range(50):  # /compact runs as its own task
        if any("group note" in json.dumps(r["body"]) for r in llm_double.requests[before:]):
            break
        await asyncio.sleep(0.1)
    asked = [r for r in llm_double.requests[before:] if "group note" in json.dumps(r["body"])]
    assert asked, "the archive never asked the model"
    assert not [r for r in asked if PIN in json.dumps(r["body"])]
