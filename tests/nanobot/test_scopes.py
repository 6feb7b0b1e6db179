"""Users and scopes: no two people share a memory (issue 28), and one person's memory
never reaches another through a group chat (issue 34).

A real nanobot ``AgentLoop`` with the plugin, the LLM double at the HTTP boundary (its
requests are the model's view: ``llm_double.chat_requests()``), several senders on several
channels, nanobot's own cron runner.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from nanobot_memory_adapters.nanobot import plugin_for
from nanobot_memory_adapters.nanobot.search_tool import SEARCH_TOOL_NAME
from nanobot_memory_adapters.nanobot.settings import parse_settings
from nanobot_memory_adapters.scope import ScopeTemplates
from tests.nanobot.conftest import agent_request, long_term_memory

# Pairs of senders one channel gave the same scope before ids were made injective.
COLLIDING = [
    ("email", "alice+bank@example.com", "alice_bank@example.com"),
    ("matrix", "@bob/work:example.org", "@bob=work:example.org"),
    ("discord", "josé", "jos"),
    ("mochat", "张三", "李四"),
]
PROVIDERS = ["full_history", "simple_rag"]
WITH_MEM0 = [*PROVIDERS, "mem0"]  # mem0 extracting with the LLM double


# The tests' direct chats are named "dm-…": declared one person's, as an operator declares
# chats of channels that do not mark them (unknown means shared: no personal recall).
DIRECT = ["*:dm-*"]


def _memory(condition: str, double: Any = None, **plugin: Any) -> dict[str, Any]:
    plugin.setdefault("direct_chats", DIRECT)
    if condition in ("simple_rag", "mem0"):
        pytest.importorskip("mem0")
    if condition == "mem0":
        return {"memory": {"backend": "mem0", "budget": {"max_tokens": 800}, "mem0": {
            "llm": {"base_url": double.base_url, "model": "double", "api_key": "x"}}},
            "nanobot": plugin}
    return {"memory": {"condition": condition, "budget": {"max_tokens": 800}},
            "nanobot": plugin}


async def talk(loop: Any, channel: str, chat: str, sender: str, text: str,
               session_key: str | None = None) -> str:
    reply = await loop.process_direct(text, session_key=session_key or f"{channel}:{chat}",
                                      channel=channel, chat_id=chat, sender_id=sender)
    return reply.content if reply is not None else ""


def _plugin(loop: Any) -> Any:
    plugin = plugin_for(loop)
    assert plugin is not None and plugin.status == "active", plugin and plugin.reason
    return plugin


def _ask(name: str, **args: object) -> str:
    return f"[llm-double:tool {name} {json.dumps(args, ensure_ascii=False)}]"


def _events(plugin: Any) -> list[dict[str, Any]]:
    return [json.loads(r["payload"]) for r in plugin.outbox.rows(plugin.provider)]


# -- the mapping itself ---------------------------------------------------------------------
def test_rendered_ids_are_injective_and_plain_ids_keep_their_old_name():
    from nanobot_memory_adapters.scope import legacy_id, plain_id

    templates = ScopeTemplates()

    def persona(channel: str, sender: str) -> str:
        return templates.render("persona_id", {"channel": channel, "sender_id": sender})

    for channel, a, b in COLLIDING:
        assert legacy_id(f"{channel}-{a}") == legacy_id(f"{channel}-{b}")  # the old merge
        assert persona(channel, a) != persona(channel, b), (a, b)
        assert persona(channel, a) == persona(channel, a)  # stable
    # plain ids keep exactly the name they had, so their users need no migration
    for sender in ("alice", "1001", "alice_bank@example.com", "u.s-er:1@x"):
        assert persona("telegram", sender) == legacy_id(f"telegram-{sender}")
    # an escaped id can never equal a plain one: '~' is outside the plain alphabet
    escaped = plain_id("discord-josé")
    assert escaped.startswith("discord-jos~") and len(escaped) == len("discord-jos~") + 16
    assert plain_id(escaped) != escaped  # a sender literally named like it is escaped too
    # a long id with one non-plain character still fits (the hash keeps it unique)
    for length in (183, 190, 199, 200, 400):
        long_a, long_b = "a" * length + "é", "a" * length + "ü"
        assert persona("email", long_a) != persona("email", long_b)
        assert len(persona("email", long_a)) <= 200
    # a plain id over 200 characters (a long Matrix id) is hashed too, never refused
    long_plain = "@" + "a" * 250 + ":example.org"
    kept = persona("matrix", long_plain)
    assert len(kept) <= 200 and "~" in kept
    assert kept != persona("matrix", long_plain[:-1])
    assert persona("matrix", "@" + "a" * 150 + ":x.org") == "matrix-@" + "a" * 150 + ":x.org"


def test_format_specs_and_conversions_in_templates_are_refused_in_one_line(tmp_path):
    for template in ("{channel}-{sender_id:.3}", "{sender_id!r}", "{channel}-{sender_id!s:>4}"):
        loaded = parse_settings(tmp_path / "memory.json", {"memory": {
            "condition": "full_history", "scope": {"persona_id": template}}})
        assert loaded.memory is None and loaded.error is not None, template
        assert "\n" not in loaded.error
        assert "memory.scope.persona_id" in loaded.error
        assert "write {sender_id} without ':' or '!'" in loaded.error, loaded.error


# -- people whose ids collided ----------------------------------------------------------------
@pytest.mark.parametrize("condition", WITH_MEM0)
async def test_senders_whose_old_ids_collided_keep_separate_memories(home, llm_double,
                                                                     condition):
    home.write_memory(_memory(condition, llm_double))
    loop = home.loop()
    plugin = _plugin(loop)
    for i, (channel, a, _b) in enumerate(COLLIDING):
        await talk(loop, channel, f"dm-a{i}", a, f"My locker code is LOCKER-{i}-ALPHA.")
    assert await plugin.flush(timeout_s=120) == 0
    for i, (channel, _a, b) in enumerate(COLLIDING):
        question = f"What is my locker code, number {i}?"
        reply = await talk(loop, channel, f"dm-b{i}", b,
                           question + " " + _ask(SEARCH_TOOL_NAME, query="locker code"))
        seen = long_term_memory(agent_request(llm_double, question))
        assert f"LOCKER-{i}-ALPHA" not in seen, (channel, b, seen)
        assert f"LOCKER-{i}-ALPHA" not in reply, (channel, b, reply)  # memory_search
        assert reply.startswith(f"tool {SEARCH_TOOL_NAME} returned:"), reply
        # B forgets B's memory: A's stays
        assert (await talk(loop, channel, f"dm-b{i}", b, "/memory-forget confirm")
                ).startswith("forgotten")
    for i, (channel, a, _b) in enumerate(COLLIDING):
        question = f"Remind me of my locker code, number {i}."
        await talk(loop, channel, f"dm-a{i}", a, question)
        assert f"LOCKER-{i}-ALPHA" in long_term_memory(agent_request(llm_double, question)), a


async def test_a_wechat_room_that_gives_itself_as_the_sender_is_nobodys(home, llm_double):
    """nanobot's WeChat channel gives a room's messages the room as both chat and sender
    (``xxx@chatroom``): the room read as one person's chat, so every member's words were
    filed in one scope that any member (or one who joined later) recalled and searched. A
    room is shared and its speaker unknown: nothing filed, nothing recalled or searched. A
    WeChat direct chat (the same shape, not a room) is its person's."""
    home.write_memory(_memory("full_history", group_recall="personal"))
    loop = home.loop()
    plugin = _plugin(loop)
    room = "team@chatroom"
    await talk(loop, "weixin", room, room, "Ann here: my locker code is LOCKER-5-ROOM.")
    assert await plugin.flush() == 0
    assert _events(plugin) == []
    reply = await talk(loop, "weixin", room, room,
                       "Ben here. " + _ask(SEARCH_TOOL_NAME, query="locker code"))
    assert "LOCKER-5-ROOM" not in reply and reply.startswith(
        f"tool {SEARCH_TOOL_NAME} returned:"), reply
    await talk(loop, "weixin", "ann@im.wechat", "ann@im.wechat", "My cat is PEPPER-5.")
    assert await plugin.flush() == 0
    assert {e["user_id"] for e in _events(plugin)} == {"weixin-ann@im.wechat"}


@pytest.mark.parametrize("stand_in", ["1087968824|GroupAnonymousBot", "136817688|Channel_Bot",
                                      "777000|Telegram"])
async def test_a_telegram_service_account_is_nobody(home, llm_double, stand_in):
    """Telegram sends an anonymous admin's message as GroupAnonymousBot, a post sent as a
    channel as Channel_Bot and a channel post forwarded to its discussion group as
    Telegram (777000): one id for whoever speaks so, in every group. Read as a person,
    what one group's anonymous admin said was filed in one scope that another group's
    anonymous admin recalled (``group_recall: personal``) and could forget. Nobody's:
    nothing filed, nothing recalled or searched."""
    home.write_memory(_memory("full_history", group_recall="personal"))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "telegram", "-100700", stand_in, "Admin here: the vault code is VAULT-77.")
    assert await plugin.flush() == 0
    assert _events(plugin) == []
    reply = await talk(loop, "telegram", "-100800", stand_in,
                       "Other admin. " + _ask(SEARCH_TOOL_NAME, query="vault code"))
    assert "VAULT-77" not in reply
    assert "VAULT-77" not in json.dumps(agent_request(llm_double, "Other admin.").body)
    await talk(loop, "telegram", "-100800", "1001|ann", "My cat is PEPPER-6.")
    assert await plugin.flush() == 0
    assert {e["user_id"] for e in _events(plugin)} == {"telegram-1001"}
    # nor can one of them forget the scope an older version filed all of them under
    reply = await talk(loop, "telegram", "-100700", stand_in, "/memory-forget confirm")
    assert "anonymous admin" in reply and "deleted" not in reply.lower(), reply


async def test_a_telegram_user_who_changes_username_keeps_their_memory(home, llm_double):
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "telegram", "1001", "1001|ann", "My cat is called PEPPER-TIGER.")
    assert await plugin.flush() == 0
    await talk(loop, "telegram", "1001", "1001|ann_renamed", "What is my cat called?")
    seen = long_term_memory(agent_request(llm_double, "What is my cat called?"))
    assert 'scope="default/telegram-1001"' in seen and "PEPPER-TIGER" in seen
    assert {e["user_id"] for e in _events(plugin)} == {"telegram-1001"}


# -- turns from no person ----------------------------------------------------------------------
class _CronRecords:
    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}

    def write_run_record(self, run_id: str, record: dict[str, Any]) -> None:
        self.records[run_id] = record


def _cron_job(job_id: str, channel: str, chat_id: str, message: str) -> Any:
    from nanobot.cron.types import CronJob, CronPayload

    return CronJob(id=job_id, name=f"reminder {job_id}", payload=CronPayload(
        kind="agent_turn", message=message, session_key=f"{channel}:{chat_id}",
        origin_channel=channel, origin_chat_id=chat_id))


@pytest.mark.parametrize("condition", PROVIDERS)
async def test_cron_turns_use_and_feed_their_own_users_memory(home, llm_double, condition):
    from nanobot.cron.bound_runner import run_bound_cron_job

    home.write_memory(_memory(condition))
    loop = home.loop()
    plugin = _plugin(loop)
    users = [("telegram", "1001", "1001|ann", "ANN-ORCHID"),
             ("telegram", "2002", "2002|ben", "BEN-QUARTZ"),
             ("discord", "dm-77", "u77", "CAT-MAGNOLIA")]
    for channel, chat, sender, marker in users:
        await talk(loop, channel, chat, sender, f"My project codename is {marker}.")
    assert await plugin.flush(timeout_s=120) == 0
    records = _CronRecords()
    before = len(llm_double.chat_requests())  # the double serves the whole test session
    for i, (channel, chat, _sender, _marker) in enumerate(users):
        job = _cron_job(f"job{i}", channel, chat, f"Tell me my project codename, job {i}.")
        await run_bound_cron_job(job, agent=loop, cron=records)
    assert await plugin.flush(timeout_s=120) == 0
    for i, (_channel, _chat, _sender, marker) in enumerate(users):
        [req] = [r for r in llm_double.chat_requests()[before:]
                 if r.tools and f"Tell me my project codename, job {i}." in r.last_user]
        seen = long_term_memory(req)
        assert marker in seen, (marker, seen)
        assert not any(m in seen for *_, m in users if m != marker), seen
    events = _events(plugin)
    assert not any(e["user_id"].endswith("-cron") for e in events)
    cron_users = sorted(e["user_id"] for e in events if "Scheduled cron job" in json.dumps(e))
    assert cron_users == ["discord-u77", "telegram-1001", "telegram-2002"]


@pytest.mark.parametrize("placement", ["user_message", "system_prompt"])
async def test_a_cron_turn_in_a_new_process_finds_the_sessions_person(home, llm_double,
                                                                       placement):
    """After a restart the plugin has seen nobody: the session's person comes from the
    outbox's record of the session."""
    from nanobot.cron.bound_runner import run_bound_cron_job

    home.write_memory(_memory("full_history", context_placement=placement))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "discord", "dm-88", "u88", "My locker is number LOCKER-8888.")
    assert await plugin.flush() == 0
    await home.close(loop)
    loop = home.loop()
    await run_bound_cron_job(_cron_job("j88", "discord", "dm-88", "Which locker is mine?"),
                             agent=loop, cron=_CronRecords())
    req = [r for r in llm_double.chat_requests()
           if r.tools and "Which locker is mine?" in r.last_user][-1]
    assert "LOCKER-8888" in long_term_memory(req)


async def test_heartbeat_turns_are_nobodys(home, llm_double):
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "telegram", "1001", "1001|ann", "My locker is LOCKER-1001.")
    assert await plugin.flush() == 0
    # what the gateway's heartbeat does: process_direct in the 'heartbeat' session
    await loop.process_direct("Heartbeat check: what is the locker?", session_key="heartbeat",
                              channel="telegram", chat_id="1001")
    assert await plugin.flush() == 0
    req = agent_request(llm_double, "Heartbeat check")
    assert long_term_memory(req) == ""
    assert not any("Heartbeat check" in json.dumps(e) for e in _events(plugin))


# -- the cached recall belongs to one scope ---------------------------------------------------
async def test_a_turn_without_text_never_gets_the_previous_speakers_recall(
        home, llm_double, tmp_path):
    home.write_memory(_memory("full_history", context_placement="system_prompt",
                              group_recall="personal"))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "telegram", "1001", "1001|ann", "My bank PIN is PIN-4471.")
    assert await plugin.flush() == 0
    await talk(loop, "telegram", "-500", "1001|ann", "Hello group, what is my bank PIN?")
    assert "PIN-4471" in long_term_memory(agent_request(llm_double, "Hello group"))
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    before = len(llm_double.chat_requests())
    await loop.process_direct("", session_key="telegram:-500", channel="telegram",
                              chat_id="-500", sender_id="2002|ben", media=[str(image)])
    after = [r for r in llm_double.chat_requests()[before:] if r.tools]
    assert after, "the text-less turn reached the model"
    assert all("PIN-4471" not in r.system for r in after)


# -- group chats --------------------------------------------------------------------------------
SECRET = "my codename is ZEBRA-PAPAYA and my bank PIN is 4471"


@pytest.mark.parametrize("condition", WITH_MEM0)
@pytest.mark.parametrize("policy", ["default", "personal"])
async def test_a_group_member_never_sees_another_members_private_memory(
        home, llm_double, condition, policy):
    extra = {} if policy == "default" else {"group_recall": "personal"}
    home.write_memory(_memory(condition, llm_double, **extra))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "telegram", "1001", "1001|ann", f"Remember this: {SECRET}.")
    assert await plugin.flush(timeout_s=120) == 0
    await talk(loop, "telegram", "-500", "1001|ann", "Hi all, what is my codename?")
    ann = agent_request(llm_double, "Hi all, what is my codename?")
    if policy == "default":  # no personal recall in a group
        assert "ZEBRA-PAPAYA" not in ann.all_text
    else:  # the speaker's own recall, in this turn's system prompt only
        assert "ZEBRA-PAPAYA" in ann.system and "ZEBRA-PAPAYA" not in ann.last_user
    before = len(llm_double.chat_requests())
    for text in ("Ben here, what was said about a PIN?", "Ben again, any codename?"):
        await talk(loop, "telegram", "-500", "2002|ben", text + " "
                   + _ask(SEARCH_TOOL_NAME, query="codename PIN"))
    assert await plugin.flush(timeout_s=120) == 0
    # the agent's requests for Ben's turns (mem0's own extraction calls for Ann's
    # recorded turn are Ann's scope talking to its LLM, not a prompt Ben's turn gets)
    bens = [r for r in llm_double.chat_requests()[before:] if r.tools]
    assert len(bens) == 4  # two turns, each a tool call and the answer
    for req in bens:
        assert "4471" not in req.all_text and "ZEBRA" not in req.all_text, req.last_user
    session = loop.sessions.get_or_create("telegram:-500")
    assert not any("memory-context" in json.dumps(m) for m in session.messages)


async def channel_turn(loop: Any, channel: str, chat: str, sender: str, text: str,
                       metadata: dict[str, Any]) -> str:
    """A turn as a channel delivers it: nanobot's InboundMessage with the channel's own
    metadata (``process_direct`` carries none)."""
    from nanobot.bus.events import InboundMessage

    msg = InboundMessage(channel=channel, sender_id=sender, chat_id=chat, content=text,
                         media=[], metadata=metadata)
    reply = await loop._process_message(msg, session_key=f"{channel}:{chat}")
    return reply.content if reply is not None else ""


async def test_a_discord_guild_channel_is_a_group_from_its_first_turn(home, llm_double):
    """nanobot's Discord channel sets ``guild_id`` (None in a DM): no personal recall rides
    on Ann's group turn, so Ben's first turn replays nothing of hers."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await channel_turn(loop, "discord", "dm-ann", "ann", f"Remember this: {SECRET}.",
                       {"guild_id": None, "message_id": "1"})
    assert await plugin.flush() == 0
    guild = {"guild_id": "4242", "message_id": "2"}
    await channel_turn(loop, "discord", "guild-chan", "ann", "What is my codename, team?",
                       guild)
    assert "ZEBRA" not in agent_request(llm_double, "What is my codename, team?").all_text
    await channel_turn(loop, "discord", "guild-chan", "ben", "Ben says hello.", guild)
    assert "ZEBRA" not in agent_request(llm_double, "Ben says hello.").all_text
    # the DM still recalls Ann's own memory
    await channel_turn(loop, "discord", "dm-ann", "ann", "And my codename in here?",
                       {"guild_id": None, "message_id": "3"})
    assert "ZEBRA" in agent_request(llm_double, "And my codename in here?").all_text


def test_slack_and_mattermost_channel_types_mark_groups():
    from nanobot_memory_adapters.nanobot.people import flagged_shared

    assert flagged_shared("slack", "C1", {"slack": {"channel_type": "channel"}})
    assert not flagged_shared("slack", "D1", {"slack": {"channel_type": "im"}})
    assert flagged_shared("mattermost", "c", {"mattermost": {"channel_type": "public"}})
    assert not flagged_shared("mattermost", "d", {"mattermost": {"channel_type": "dm"}})
    assert flagged_shared("discord", "c", {"guild_id": "1"})
    assert not flagged_shared("discord", "c", {"guild_id": None})


async def test_a_chat_the_channel_does_not_flag_is_shared_until_known_otherwise(
        home, llm_double):
    """A Matrix room carries no group flag and no DM flag in nanobot 0.3.5: unknown means
    shared, so even its first speaker's turn gets no personal recall (before, the first
    speaker's recall rode on the turn and the bot's reply quoting it reached the next
    member), and its history holds none."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "matrix", "dm-ann", "ann", f"Remember this: {SECRET}.")
    assert await plugin.flush() == 0
    await talk(loop, "matrix", "room-1", "ann", "What is my codename, team?")
    await talk(loop, "matrix", "room-1", "ben", "Ben says hello.")
    assert "ZEBRA" not in agent_request(llm_double, "What is my codename, team?").all_text
    assert "ZEBRA" not in agent_request(llm_double, "Ben says hello.").all_text
    session = loop.sessions.get_or_create("matrix:room-1")
    assert not any("memory-context" in json.dumps(m) for m in session.messages)
    await talk(loop, "matrix", "room-1", "ben", "Ben asks: any PIN?")
    assert "4471" not in agent_request(llm_double, "Ben asks: any PIN?").all_text
    # the chat the operator declared Ann's (direct_chats) still recalls her memory
    await talk(loop, "matrix", "dm-ann", "ann", "Ann asks in private, my codename?")
    assert "ZEBRA" in agent_request(llm_double, "Ann asks in private").all_text


def test_people_rules():
    from nanobot_memory_adapters.nanobot.people import (
        Attribution,
        ChatFacts,
        attribute,
        canonical_sender,
        flagged_shared,
        observe,
    )

    assert canonical_sender("telegram", "1001|ann") == "1001"
    assert canonical_sender("telegram", "1001") == "1001"
    assert canonical_sender("slack", "1001|ann") == "1001|ann"
    assert flagged_shared("telegram", "-500", None)
    assert flagged_shared("whatsapp", "x", {"is_group": True})
    assert flagged_shared("feishu", "x", {"chat_type": "group"})
    assert not flagged_shared("feishu", "x", {"chat_type": "p2p"})
    from nanobot_memory_adapters.nanobot.people import one_persons_chat

    assert one_persons_chat("cli", "direct", "user", None)
    assert one_persons_chat("telegram", "1001", "1001|ann", None)
    assert one_persons_chat("feishu", "x", "ou_1", {"chat_type": "p2p"})
    assert one_persons_chat("slack", "D1", "U1", {"slack": {"channel_type": "im"}})
    assert one_persons_chat("discord", "c", "u", {"guild_id": None})
    # nanobot 0.3.5's DMs whose chat id is not the sender's id say is_group: False
    assert one_persons_chat("whatsapp", "123@s.whatsapp.net", "123", {"is_group": False})
    assert one_persons_chat("signal", "+4912", "+4912|uuid-1", {"is_group": False})
    assert one_persons_chat("napcat", "private:77", "77", {"is_group": False})
    teams = {"msteams": {"conversation_type": "personal"}}
    assert one_persons_chat("msteams", "a:1", "u", teams)
    teams = {"msteams": {"conversation_type": "channel"}}
    assert not one_persons_chat("msteams", "a:1", "u", teams)
    assert not one_persons_chat("whatsapp", "g@g.us", "123", {"is_group": True})
    assert not one_persons_chat("matrix", "room-1", "ann", None)
    assert not one_persons_chat("telegram", "-500", "-500", None)
    assert not one_persons_chat("discord", "c", "u", {"guild_id": "1"})
    assert not one_persons_chat("discord", "c", "u", {})
    # unknown means shared: facts come from turns, and only grow towards shared
    def turn(facts: ChatFacts, sender: str, meta: dict[str, Any] | None = None,
             key: str = "slack:c", chat: str = "c") -> tuple[ChatFacts, Any]:
        seen = observe(session_key=key, channel="slack", chat_id=chat, sender_id=sender,
                       metadata=meta or {})
        facts = facts.merged(seen)
        return facts, attribute(facts, seen, session_key=key, chat_id=chat, channel="slack")

    facts, who = turn(ChatFacts(), "cron")
    assert who.person is None and who.shared  # nobody spoke there yet: nobody's
    facts, who = turn(facts, "u1")  # an unflagged channel: not known to be u1's alone
    assert who.person == "u1" and who.shared
    assert turn(facts, "system:continuation")[1].person is None
    im = {"slack": {"channel_type": "im"}}
    facts, who = turn(ChatFacts(), "u1", im)  # Slack says it is a DM
    assert who == Attribution("u1", False)
    assert turn(facts, "cron")[1] == Attribution("u1", False)  # a cron turn is u1's
    facts, who = turn(facts, "u2", im)  # a second person, whatever the flag said
    assert who.shared and turn(facts, "cron")[1] == Attribution(None, True)
    # a session that is not the chat's own (nanobot's unified session) is never one's
    facts, who = turn(ChatFacts(), "u1", im, key="unified:default")
    assert who.shared and facts.one_person is None
    # nanobot's CLI names sessions freely (-s work) and has one user; not the unified one
    seen = observe(session_key="work", channel="cli", chat_id="direct", sender_id="user",
                   metadata={})
    assert ChatFacts().merged(seen).one_person == "user"
    seen = observe(session_key="unified:default", channel="cli", chat_id="direct",
                   sender_id="user", metadata={})
    assert ChatFacts().merged(seen).one_person is None
    # in the unified session a direct chat whose id is its sender's keeps its person (a
    # turn is still theirs, filed in their scope); a WeChat room, whose messages give the
    # room as sender, names nobody
    for channel, chat, sender in (("telegram", "7001", "7001|alice"),
                                  ("email", "a@x.org", "a@x.org"), ("weixin", "w1", "w1")):
        seen = observe(session_key="unified:default", channel=channel, chat_id=chat,
                       sender_id=sender, metadata={})
        assert seen.shared and seen.person == sender, (channel, seen)
    seen = observe(session_key="weixin:r@chatroom", channel="weixin", chat_id="r@chatroom",
                   sender_id="r@chatroom", metadata={})
    assert seen.shared and seen.person is None
    # the operator's declaration (direct_chats) makes an unflagged chat one person's
    seen = observe(session_key="matrix:!dm", channel="matrix", chat_id="!dm",
                   sender_id="@ann:x", metadata={}, direct_chats=["matrix:!dm"])
    assert ChatFacts().merged(seen).one_person == "@ann:x"
    # a Telegram private chat's id is its user's: a cron turn there is theirs at once
    seen = observe(session_key="telegram:1001", channel="telegram", chat_id="1001",
                   sender_id="cron", metadata={})
    facts = ChatFacts().merged(seen)
    assert attribute(facts, seen, session_key="telegram:1001", chat_id="1001",
                     channel="telegram").person == "1001"
    assert observe(session_key="dingtalk:group:c1", channel="dingtalk", chat_id="group:c1",
                   sender_id="u1", metadata={"conversation_type": "2"}).shared


# -- migrating scopes recorded under the old names -------------------------------------------
@pytest.mark.servers
async def test_migrate_scopes_refuses_a_nanobot_config_that_is_not_a_file(home):
    """A given --nanobot-config that is missing or a folder was silently dropped (the
    provider then built without nanobot's model); now one line, exit 2."""
    import subprocess

    from nanobot_memory_adapters.nanobot.outbox import Outbox
    from nanobot_memory_adapters.nanobot.state import OUTBOX_FILE
    from tests.nanobot.conftest import VENV_BIN

    home.write_memory(_memory("full_history"))
    home.data_dir.mkdir(parents=True)
    outbox = Outbox(home.data_dir / OUTBOX_FILE)  # as the plugin leaves it: else "no outbox"
    outbox.check()
    outbox.close()
    for given, said in ((home.root / "conifg.json", "no such file"),
                        (home.root, "is a directory")):
        done = subprocess.run([str(VENV_BIN / "nanobot-memory"), "migrate-scopes", "--config",
                               str(home.memory_path), "--nanobot-config", str(given),
                               "--reset-shared"], capture_output=True, text=True, timeout=120)
        err = done.stderr.strip()
        assert done.returncode == 2 and len(err.splitlines()) == 1, done.stdout + err
        assert f"--nanobot-config {given}: {said}" in err, err


@pytest.mark.servers
async def test_migrate_scopes_refiles_old_turns_under_each_persons_new_scope(
        home, llm_double, monkeypatch):
    import subprocess

    from nanobot_memory_adapters.nanobot import turns
    from nanobot_memory_adapters.scope import legacy_id
    from tests.nanobot.conftest import VENV_BIN

    home.write_memory(_memory("full_history"))
    # what the plugin did before: the legacy rendering, the whole Telegram sender id
    with monkeypatch.context() as old:
        old.setattr("nanobot_memory_adapters.scope.plain_id", legacy_id)
        old.setattr(turns, "person_id", lambda channel, sender, session_key: sender)
        loop = home.loop()
        await talk(loop, "discord", "dm-jose", "josé", "My locker code is JOSE-LOCKER-11.")
        await talk(loop, "discord", "dm-jos", "jos", "My locker code is JOS-LOCKER-22.")
        await talk(loop, "telegram", "1001", "1001|ann", "My cat is called PEPPER-TIGER.")
        assert await _plugin(loop).flush() == 0
        assert {e["user_id"] for e in _events(_plugin(loop))} == {
            "discord-jos", "telegram-1001_ann"}  # josé and jos merged, as reported
        await home.close(loop)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(VENV_BIN / "nanobot-memory"), "migrate-scopes", "--config",
                               str(home.memory_path), *args], capture_output=True, text=True,
                              timeout=120)

    dry = run("--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["moved"] == 2  # josé's and ann's turns; jos's id is plain: unchanged
    assert planned["shared_old_scopes"] == {"default/discord-jos": 1}
    done = run()
    assert done.returncode == 0, done.stderr
    assert "queued 2 turn(s)" in done.stdout, done.stdout
    assert "default/telegram-1001_ann -> default/telegram-1001" in done.stdout
    assert "default/discord-jos is still a person's scope" in done.stdout  # jos's, with josé's
    reset = run("--reset-shared", "--json")
    assert reset.returncode == 0, reset.stderr
    emptied = json.loads(reset.stdout)
    assert (emptied["moved"], emptied["already_moved"]) == (0, 2)  # nothing queued twice
    assert (emptied["reset"], emptied["refiled"]) == (["default/discord-jos"], 1)
    again = json.loads(run("--reset-shared", "--json").stdout)
    assert (again["moved"], again["reset"], again["refiled"]) == (0, [], 0)

    loop = home.loop()
    plugin = _plugin(loop)
    await plugin._ensure_adapter()
    assert await plugin.flush() == 0
    await talk(loop, "discord", "dm-jose", "josé", "José asks: my locker code?")
    await talk(loop, "discord", "dm-jos", "jos", "Jos asks: my locker code?")
    await talk(loop, "telegram", "1001", "1001|ann", "Ann asks: my cat?")
    jose = long_term_memory(agent_request(llm_double, "José asks"))
    jos = long_term_memory(agent_request(llm_double, "Jos asks"))
    assert "JOSE-LOCKER-11" in jose and "JOS-LOCKER-22" not in jose
    assert "JOS-LOCKER-22" in jos and "JOSE-LOCKER-11" not in jos
    assert "PEPPER-TIGER" in long_term_memory(agent_request(llm_double, "Ann asks"))


@pytest.mark.parametrize("condition", PROVIDERS)
async def test_group_recall_group_gives_the_chat_its_own_memory(home, llm_double, condition):
    home.write_memory(_memory(condition, group_recall="group"))
    loop = home.loop()
    plugin = _plugin(loop)
    await talk(loop, "telegram", "1001", "1001|ann", f"Remember this: {SECRET}.")
    await talk(loop, "telegram", "-500", "1001|ann", "Team: our meeting room is ROOM-KIWI-7.")
    assert await plugin.flush(timeout_s=120) == 0
    await talk(loop, "telegram", "-500", "2002|ben", "Ben asks: which meeting room is ours?")
    ben = agent_request(llm_double, "Ben asks: which meeting room")
    assert "ROOM-KIWI-7" in ben.system and "ZEBRA" not in ben.all_text
    reply = await talk(loop, "telegram", "-500", "2002|ben",
                       "Search it " + _ask(SEARCH_TOOL_NAME, query="codename PIN meeting room"))
    assert "4471" not in reply and "ZEBRA" not in reply, reply
    await talk(loop, "telegram", "1001", "1001|ann", "Ann in private: what is my codename?")
    assert "ZEBRA-PAPAYA" in long_term_memory(agent_request(llm_double, "Ann in private"))
    users = {e["user_id"] for e in _events(plugin)}
    assert "telegram-1001" in users and not any(u == "telegram-2002" for u in users)
    [group] = [u for u in users if u.startswith("telegram-_group:-500~")]
    assert group  # the group's own scope, never a person's


# -- many senders ---------------------------------------------------------------------------------
MANY = [  # 20 senders on 3 channels; the Discord and email ids all collided before
    *[("telegram", f"{3000 + k}", f"{3000 + k}|user_{k}") for k in range(7)],
    *[("discord", f"dm-d{k}", s) for k, s in enumerate(
        ["josé", "jose", "jos", "josè", "jo sé", "JOSÉ/x", "jos_"])],
    # nanobot's email channel: the chat id is the sender's address
    *[("email", s, s) for s in
      ["a+b@x.org", "a_b@x.org", "a b@x.org", "a/b@x.org", "a=b@x.org", "a*b@x.org"]],
]


async def test_many_colliding_senders_each_keep_exactly_their_own_turns(home, llm_double):
    import re

    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    rounds = 4
    marker = re.compile(r"M(\d+)X(\d+)Z")
    for j in range(rounds):
        for i, (channel, chat, sender) in enumerate(MANY):
            if channel == "telegram" and j >= rounds // 2:
                sender = sender.replace("|user_", "|renamed_")  # same person, new username
            before = len(llm_double.chat_requests())
            await talk(loop, channel, chat, sender, f"Note {j}: my marker is M{i}X{j}Z.")
            [req] = [r for r in llm_double.chat_requests()[before:] if r.tools]
            recalled = {int(m[0]) for m in marker.findall(long_term_memory(req))}
            assert recalled <= {i}, (sender, recalled)
            assert j == 0 or i in recalled, (sender, j)  # their own past is recalled
        assert await plugin.flush(timeout_s=120) == 0
    by_user: dict[str, list[tuple[int, int]]] = {}
    for event in _events(plugin):
        text = " ".join(m["content"] for m in event["messages"] if m["role"] == "user")
        by_user.setdefault(event["user_id"], []).extend(
            (int(a), int(b)) for a, b in marker.findall(text))
    assert len(by_user) == len(MANY)  # one scope per person
    for stored in by_user.values():
        owners = {i for i, _ in stored}
        assert len(owners) == 1, stored
        assert sorted(j for _, j in stored) == list(range(rounds))  # every turn once


async def test_a_reset_shared_run_stopped_part_way_is_finished_by_the_next_run(
        tmp_path, monkeypatch):
    """``--reset-shared`` empties a shared old scope, then queues its owner's turns into it
    again. A run that stops between the two (killed, disk full) must not leave the owner's
    remaining turns out for good: the next run queues the missing copies, without emptying
    the scope a second time (that would delete copies already delivered), and turns the
    owner said after the emptying get no copy (they are stored there already)."""
    import time

    from nanobot_memory_adapters.nanobot import turns
    from nanobot_memory_adapters.nanobot.migrate import migrate
    from nanobot_memory_adapters.nanobot.outbox import Outbox
    from nanobot_memory_adapters.scope import legacy_id

    memory = parse_settings(tmp_path / "memory.json",
                            {"memory": {"condition": "full_history"}}).memory
    assert memory is not None
    box = Outbox(tmp_path / "outbox.sqlite3")

    def said(chat: str, sender: str, text: str, turn: str) -> None:
        messages = [{"role": "user", "content": text, "timestamp": f"2026-01-01T10:0{turn}"}]
        event = turns.build_event(memory=memory, messages=messages, turn_id=turn,
                                  channel="discord", chat_id=chat, sender_id=sender,
                                  session_key=f"discord:{chat}")
        assert event is not None
        assert box.enqueue("full_history", event, f"discord:{chat}")

    with monkeypatch.context() as old:  # recorded under the old, colliding names
        old.setattr("nanobot_memory_adapters.scope.plain_id", legacy_id)
        said("dm-jose", "josé", "My locker code is JOSE-LOCKER-11.", "1")
        said("dm-jos", "jos", "My locker code is JOS-LOCKER-22.", "2")
        said("dm-jos", "jos", "My bike is red.", "3")

    class Resetting:
        def __init__(self) -> None:
            self.resets: list[str] = []

        async def reset_scope(self, scope: Any) -> None:
            self.resets.append(scope.key)

    adapter = Resetting()
    real_enqueue = Outbox.enqueue
    calls = {"refiled": 0}

    def stops_after_one_copy(self: Outbox, provider: str, event: Any, *args: Any,
                             **kw: Any) -> bool:
        if (event.metadata or {}).get("moved_from") == "default/discord-jos" \
                and event.user_id == "discord-jos":
            calls["refiled"] += 1
            if calls["refiled"] == 2:
                raise OSError("killed")  # the run stops between its two re-filed copies
        return real_enqueue(self, provider, event, *args, **kw)

    with monkeypatch.context() as crash:
        crash.setattr(Outbox, "enqueue", stops_after_one_copy)
        with pytest.raises(OSError):
            await migrate(box, memory, "full_history", adapter=adapter)  # type: ignore[arg-type]
    assert adapter.resets == ["default/discord-jos"]
    time.sleep(0.01)
    said("dm-jos", "jos", "My dog is called REX.", "4")  # after the emptying: stored there

    def copies() -> list[str]:
        return sorted(json.loads(r["payload"])["messages"][0]["content"]
                      for r in box.rows("full_history")
                      if json.loads(r["payload"])["metadata"].get("moved_from")
                      == "default/discord-jos"
                      and json.loads(r["payload"])["user_id"] == "discord-jos")

    assert copies() == ["My locker code is JOS-LOCKER-22."]
    again = await migrate(box, memory, "full_history")  # no --reset-shared needed
    assert (again.resumed, again.reset, again.refiled) == (["default/discord-jos"], [], 1)
    assert copies() == ["My bike is red.", "My locker code is JOS-LOCKER-22."]
    last = await migrate(box, memory, "full_history", adapter=adapter)  # type: ignore[arg-type]
    assert (last.resumed, last.reset, last.refiled, last.moved) == ([], [], 0, 0)
    assert adapter.resets == ["default/discord-jos"]  # never emptied twice
    box.close()


async def test_a_session_message_is_filed_under_the_chats_person(home, llm_double):
    """A turn nanobot routes into a session (a session timeout; ``send_session_message``
    from a session of the same person) arrives as
    channel ``system`` with the target session as its chat id. Its recall saw the routed
    chat (``telegram``/``1001``); its record used ``system``/``telegram:1001`` and filed
    the turn under a ``system-…`` scope, overwriting its arrival row: Ann's recall never
    saw it and her /memory-forget never reached it."""
    from nanobot.bus.events import InboundMessage

    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await channel_turn(loop, "telegram", "1001", "1001|ann", "hi", {"is_group": False})
    await loop._process_message(InboundMessage(
        channel="system", sender_id="session", chat_id="telegram:1001",
        content="Ben: the meeting moved to FRIDAY-9AM", session_key_override="telegram:1001",
        input_role="user"))
    assert await plugin.flush() == 0
    scopes = {e["user_id"] for e in _events(plugin) if "FRIDAY-9AM" in json.dumps(e)}
    assert scopes == {"telegram-1001"}, scopes


async def test_a_session_message_from_another_persons_session_reads_and_files_nothing(
        home, llm_double):
    """``send_session_message`` lets a group's model write into Ann's direct session, with
    "Reply with send_session_message": recall for that turn was Ann's, queried by Ben's
    text, and the answer went back to the group; Ben's text was filed as Ann's words. A
    session message is its target's person's only when its source session is that same
    one person's."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await channel_turn(loop, "telegram", "1001", "1001|ann", "My locker code is LOCKER-22.",
                       {"is_group": False})
    await channel_turn(loop, "telegram", "-500", "2002|ben", "hello all", {"is_group": True})
    assert await plugin.flush() == 0
    await _session_message(loop, "telegram:-500", "telegram:1001",
                           "Ben asks: what is this user's locker code? Ann's PIN is PIN-7788.")
    assert "LOCKER-22" not in long_term_memory(agent_request(llm_double, "Ben asks"))
    assert await plugin.flush() == 0
    assert not [e for e in _events(plugin) if "PIN-7788" in json.dumps(e)]
    # Ann's own next turn still reads her memory
    await channel_turn(loop, "telegram", "1001", "1001|ann", "What is my locker code?",
                       {"is_group": False})
    assert "LOCKER-22" in long_term_memory(agent_request(llm_double, "What is my locker code?"))


async def test_a_session_message_from_the_same_persons_session_recalls_but_files_nothing(
        home, llm_double):
    """From a session of the same one person (a topic of Ann's own chat) a session message
    reads Ann's memory, but its text is another model's, not Ann's words: neither its
    arrival row (which a restart would have promoted) nor its turn is queued."""
    from nanobot.bus.events import InboundMessage

    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await channel_turn(loop, "telegram", "1001", "1001|ann", "My locker code is LOCKER-22.",
                       {"is_group": False})
    await loop._process_message(InboundMessage(
        channel="telegram", sender_id="1001|ann", chat_id="1001", content="topic chat",
        media=[], metadata={"is_group": False}), session_key="telegram:1001:topic")
    assert await plugin.flush() == 0
    await _session_message(loop, "telegram:1001:topic", "telegram:1001",
                           "Relayed: what is my locker code? RELAY-5511")
    assert "LOCKER-22" in long_term_memory(agent_request(llm_double, "Relayed:"))
    assert await plugin.flush() == 0
    assert not [r for r in plugin.outbox.rows() if "RELAY-5511" in r["payload"]]


async def test_a_session_message_from_the_same_id_on_another_channel_reads_nothing(
        home, llm_double):
    """The relay rule compared the two sessions' people by sender id without their
    channel: Ben's DingTalk DM (staff id 1001) relayed into Ann's Telegram chat (user id
    1001) read Ann's memory. Ids on two channels are two people (two scopes)."""
    home.write_memory(_memory("full_history"))
    loop = home.loop()
    plugin = _plugin(loop)
    await channel_turn(loop, "telegram", "1001", "1001|ann", "My locker code is LOCKER-22.",
                       {"is_group": False})
    await channel_turn(loop, "dingtalk", "1001", "1001", "Hello from Ben.",
                       {"conversation_type": "1"})
    assert await plugin.flush() == 0
    await _session_message(loop, "dingtalk:1001", "telegram:1001",
                           "Relayed: what is the locker code?")
    # (the target session's own history holds Ann's words: docs/gaps.md; not its memory)
    assert "LOCKER-22" not in long_term_memory(agent_request(llm_double, "Relayed:"))


async def _session_message(loop: Any, source: str, target: str, text: str) -> None:
    """A turn as nanobot's ``send_session_message`` tool delivers it: channel ``system``,
    sender ``session``, the target session as chat id, the tool's envelope."""
    from nanobot.bus.events import InboundMessage
    from nanobot.session.session_messages import SESSION_MESSAGE_METADATA_KEY

    envelope = {"message_id": "m1", "created_at_ms": 1, "expect_reply": True,
                "source_handle": "source", "source_session_key": source,
                "target_session_key": target}
    await loop._process_message(InboundMessage(
        channel="system", sender_id="session", chat_id=target, content=text,
        metadata={SESSION_MESSAGE_METADATA_KEY: envelope}, session_key_override=target,
        input_role="user"))
