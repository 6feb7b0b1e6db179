"""A canary leak fuzzer for a shared nanobot gateway with the memory plugin.

Each person tells the bot a unique canary in a direct chat; then seeded random
interleavings drive a real nanobot ``AgentLoop`` with the plugin through what a gateway
meets: every channel nanobot 0.3.5 ships, with the inbound metadata each gives (flagged and
unflagged groups, direct chats, DingTalk's per-sender group sessions, nanobot's unified
session, an app's sessions on nanobot's SDK and on its API server, where every caller is
sender ``user``), cron turns (nanobot's own ``run_bound_cron_job``), subagent results, heartbeat
turns, ``/new``, restarts, ``memory_search`` calls, ``/memory-health``, ``/memory-mode``,
``/memory-forget``, a backfill, ``migrate-scopes`` and a second nanobot process on the same
home (killed now and then with SIGKILL).

The oracle knows what the plugin cannot: who is in each chat (in an unflagged room every
member reads the bot's replies, whether or not they have spoken yet). Every request the LLM
double receives and every reply is checked: a canary may appear only where everyone who
reads that chat already knew it (its owner, for a canary said in a direct chat; the
members, for one said in a group). The double repeats every memory section it is shown in
its answer (``[llm-double:echo]``), as a small model does, so a leak through a reply and
the saved history is seen too. Every reply is also checked for identifiers: it may name a
person (a phone number, an address, a scope or session key made of one) only in that
person's own direct chat (and, under ``group_recall: personal``, the speaker's recall in
their turn's answer); other people's ids are the operator's.

An interleaving is one episode: canaries seeded, then 4-12 random operations, all checked.
The world (stores, sessions, the chat book) persists across the episodes of a segment, so
later episodes meet what earlier ones left; a fresh home starts every ``segment``
episodes.

By hand (the long run): ``python -m tests.privacy.fuzz --episodes 20000 --seed 7``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANARY = re.compile(r"CANARY(\d+)X(\d+)Z")
# a person's identifiers as the world gives them (``sender_id``, ``_dm``), in the forms a
# scope key, a session key or a sender id renders them; each alternative captures the
# person's number (telegram: its id, 7000 + the number). A phone number is not matched
# inside a longer token (a digest after ``~``); canaries and op tags are removed first.
PERSON_ID = re.compile(
    r"(?<![0-9A-Za-z~])4915(\d{4})(?!\d)|(?<![0-9A-Za-z~])4916(\d{4})(?!\d)"
    r"|(?<![\w@])user(\d+)@example\.org|@user(\d+):example\.org"
    r"|(?<![0-9A-Za-z])uuid-(\d+)(?!\d)|(?<!\d)70(\d\d)\|user|telegram[-:/]70(\d\d)(?!\d)"
    r"|(?<![0-9A-Za-z])uid(\d+)x"
    r"|(?<![\w-])(?:oc_p2p|single|dmchan|webui-|private:|dm|sdk:s|api:s|D|session-|a:)(\d+)"
    r"(?!\d)")
WHOLE_SECTION = re.compile(r"<memory-context .*?</memory-context>", re.S)
ECHO = "[llm-double:echo]"
OP_TAG = re.compile(r"\[op:(\w+)-(\d+)\]")
AGENT_MARKER = "# Tool Usage Notes"  # nanobot's agent prompt (tests/llm_double handler)
WORKER = Path(__file__).with_name("worker.py")
NANOBOT_SKILLS = ["clawhub", "cron", "github", "image-generation", "memory", "my",
                  "skill-creator", "summarize", "tmux", "update-setup", "weather",
                  "memory-context"]
REPO = Path(__file__).resolve().parents[2]


# -- the world: people and chats, as nanobot's channels deliver them ---------------------------
@dataclass(frozen=True)
class Chat:
    name: str  # for reports
    channel: str
    chat_id: str
    members: frozenset[int]
    kind: str  # dm | group | room (unflagged, several people) | unified
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    session_key: str = ""  # default: channel:chat_id
    per_sender: bool = False  # DingTalk group_user_isolation: a session per sender
    sender_as: str | None = None  # the sender id the channel gives every member's turn

    def sender_for(self, user: int) -> str:
        """The sender id a turn of ``user`` arrives with (nanobot's weixin channel gives a
        room's messages the room itself as the sender, whoever wrote them)."""
        return self.sender_as or sender_id(self.channel, user)

    def chat_for(self, sender: int | None) -> str:
        """The chat id a turn of ``sender`` arrives in (nanobot's unified session: each
        person's own direct chat, one session for all)."""
        if self.kind == "unified" and sender is not None:
            return f"uni-{sender}"
        return self.chat_id

    def key_for(self, sender: int | None) -> str:
        if self.per_sender and sender is not None:
            return f"{self.channel}:{self.chat_id}:{self.sender_for(sender)}"
        return self.session_key or f"{self.channel}:{self.chat_id}"


def sender_id(channel: str, user: int) -> str:
    """The id nanobot's channel gives person ``user`` (Telegram: "<id>|<username>")."""
    return {
        "telegram": f"{7000 + user}|user{user}",
        "whatsapp": f"4915{user:04d}",
        "signal": f"+4916{user:04d}|uuid-{user}",
        "email": f"user{user}@example.org",
        "matrix": f"@user{user}:example.org",
        "cli": "user",  # nanobot's placeholder: the CLI, the SDK (Nanobot.run) and
        "api": "user",  # the API server give no person's id
    }.get(channel, f"uid{user}x")  # distinctive: the identifier check finds it


def _dm(channel: str, user: int) -> Chat:
    """User ``user``'s direct chat on ``channel``, with the metadata nanobot 0.3.5 gives."""
    sid = sender_id(channel, user)
    one = frozenset({user})
    if channel == "sdk":  # an app on nanobot's SDK: Nanobot.run(session_key=...) defaults
        return Chat(f"sdk session of {user}", "cli", "direct", one, "dm", {},
                    session_key=f"sdk:s{user}")
    if channel == "api":  # nanobot's API server: every client chat "default", a session each
        return Chat(f"api session of {user}", "api", "default", one, "dm", {},
                    session_key=f"api:s{user}")
    specs: dict[str, tuple[str, dict[str, Any]]] = {
        "telegram": (str(7000 + user), {"is_group": False}),
        "whatsapp": (f"{sid}@s.whatsapp.net", {"is_group": False}),
        "signal": (sid.split("|")[0], {"is_group": False}),
        "discord": (f"dm{user}", {"guild_id": None}),
        "slack": (f"D{user}", {"slack": {"channel_type": "im"}}),
        "feishu": (f"oc_p2p{user}", {"chat_type": "p2p"}),
        "wecom": (f"single{user}", {"chat_type": "single"}),
        "dingtalk": (sid, {"conversation_type": "1"}),
        "napcat": (f"private:{user}", {"is_group": False}),
        "mochat": (f"session-{user}", {"is_group": False}),
        "msteams": (f"a:{user}", {"msteams": {"conversation_type": "personal"}}),
        "mattermost": (f"dmchan{user}", {"mattermost": {"channel_type": "dm"}}),
        "email": (sid, {}),  # the chat id is the sender's address
        "qq": (sid, {}),  # c2c: the chat id is the user's openid
        "weixin": (sid, {}),
        "matrix": (f"!dm{user}:example.org", {}),  # no DM flag in nanobot 0.3.5: unknown
        "websocket": (f"webui-{user}", {}),  # unknown
    }
    chat_id, meta = specs[channel]
    return Chat(f"{channel} DM of {user}", channel, chat_id, one, "dm", meta)


GROUP_SPECS: list[tuple[str, str, dict[str, Any], str]] = [
    ("telegram", "-100500", {"is_group": True}, "group"),
    ("whatsapp", "team@g.us", {"is_group": True}, "group"),
    ("signal", "group.abc=", {"is_group": True}, "group"),
    ("discord", "guild-chan", {"guild_id": "4242"}, "group"),
    ("slack", "C-team", {"slack": {"channel_type": "channel"}}, "group"),
    ("feishu", "oc_group", {"chat_type": "group"}, "group"),
    ("wecom", "wr-group", {"chat_type": "group"}, "group"),
    ("dingtalk", "group:cid-9", {"conversation_type": "2"}, "group"),
    ("napcat", "group:77", {"is_group": True}, "group"),
    ("mochat", "panel-1", {"is_group": True}, "group"),
    ("mattermost", "town", {"mattermost": {"channel_type": "public"}}, "group"),
    ("matrix", "!room:example.org", {}, "room"),  # no group flag
    ("email", "thread-42@example.org", {}, "room"),
    ("qq", "group-openid-5", {}, "room"),
    ("websocket", "shared-webui", {}, "room"),
]
DM_CHANNELS = ["telegram", "whatsapp", "signal", "discord", "slack", "feishu", "wecom",
               "dingtalk", "napcat", "mochat", "msteams", "mattermost", "email", "qq",
               "weixin", "matrix", "websocket", "sdk", "api"]


@dataclass
class World:
    users: int
    rng: random.Random
    groups: list[Chat] = field(default_factory=list)
    dms: dict[tuple[str, int], Chat] = field(default_factory=dict)

    @classmethod
    def make(cls, rng: random.Random, users: int = 6) -> World:
        world = cls(users, rng)
        for channel, chat_id, meta, kind in GROUP_SPECS:
            size = rng.randint(2, min(4, users))
            members = frozenset(rng.sample(range(users), size))
            world.groups.append(Chat(f"{channel} {kind} {chat_id}", channel, chat_id, members,
                                     kind, meta))
        # DingTalk with group_user_isolation: each sender's own session, one group's replies
        iso = frozenset(rng.sample(range(users), 3))
        world.groups.append(Chat("dingtalk isolated group", "dingtalk", "group:iso-1", iso,
                                 "group", {"conversation_type": "2"}, per_sender=True))
        # nanobot's unified session: every chat of this channel in one session
        world.groups.append(Chat("unified session", "websocket", "uni-0",
                                 frozenset(range(users)), "unified", {},
                                 session_key="unified:default"))
        # a WeChat room: nanobot's weixin channel gives the room as chat and as sender
        room = "team-7@chatroom"
        world.groups.append(Chat("weixin room", "weixin", room,
                                 frozenset(rng.sample(range(users), 3)), "room", {},
                                 sender_as=room))
        return world

    def dm(self, user: int, channel: str | None = None) -> Chat:
        channel = channel or self.rng.choice(DM_CHANNELS)
        chat = self.dms.get((channel, user))
        if chat is None:
            chat = self.dms[(channel, user)] = _dm(channel, user)
        return chat

    def any_chat(self) -> Chat:
        if self.rng.random() < 0.5 and self.dms:
            return self.rng.choice(list(self.dms.values()))
        return self.rng.choice(self.groups)


# -- what the oracle knows and checks ----------------------------------------------------------
@dataclass
class Leak:
    episode: int
    op: int
    what: str  # request | reply | reply names a person
    canary: str
    knowers: list[int]
    chat: str
    members: list[int]
    excerpt: str


@dataclass
class Tally:
    episodes: int = 0
    ops: int = 0
    requests_checked: int = 0
    requests_with_canaries: int = 0
    replies_checked: int = 0
    canaries: int = 0
    recalled_own: int = 0  # requests in a one-person chat that carried its owner's canary
    own_ids_shown: int = 0  # replies that named their one reader's own identifiers
    untagged: int = 0  # requests no operation's message is in (not checked)
    ops_by_kind: dict[str, int] = field(default_factory=dict)
    leaks: list[Leak] = field(default_factory=list)


class Oracle:
    def __init__(self) -> None:
        self.knowers: dict[str, set[int]] = {}

    def said(self, canary: str, chat: Chat) -> None:
        self.knowers.setdefault(canary, set()).update(chat.members)

    def check(self, text: str, chat: Chat, *, tally: Tally, episode: int, op: int,
              what: str, speaker: int | None = None) -> bool:
        """False (and a Leak) when ``text`` carries a canary someone in ``chat`` did not
        know. ``speaker`` (``group_recall: personal`` only: the person whose turn this is)
        may have what they know shown in the chat they speak in: the operator chose that
        the speaker's memory answers them there, so from then on the chat knows it."""
        found = {m.group(0) for m in CANARY.finditer(text)}
        for canary in sorted(found):
            knowers = self.knowers.setdefault(canary, set())
            if speaker is not None and speaker in knowers:
                knowers.update(chat.members)  # the reply is read by everyone in the chat
                continue
            if not chat.members <= knowers:
                at = text.find(canary)
                tally.leaks.append(Leak(episode, op, what, canary, sorted(knowers), chat.name,
                                        sorted(chat.members),
                                        text[max(0, at - 300):at + 100]))
                return False
        return True


    def check_ids(self, text: str, chat: Chat, *, tally: Tally, episode: int, op: int,
                  speaker: int | None = None) -> bool:
        """False (and a Leak) when a reply names a person who is not its chat's one
        reader: other people's ids are the operator's (a scope key, a session key, a
        phone number). ``speaker`` as in ``check``: in a shared chat under
        ``group_recall: personal`` the model may repeat the speaker's own recall, which
        names its scope."""
        text = OP_TAG.sub("", CANARY.sub("", text))  # ids of their own, nobody's
        for match in PERSON_ID.finditer(text):
            number = next(g for g in match.groups() if g is not None)
            person = int(number)
            if chat.members == {person} or person == speaker:
                tally.own_ids_shown += chat.members == {person}
                continue
            at = match.start()
            tally.leaks.append(Leak(episode, op, "reply names a person", match.group(0),
                                    [person], chat.name, sorted(chat.members),
                                    text[max(0, at - 300):at + 100]))
            return False
        return True


# -- driving nanobot -----------------------------------------------------------------------------
def _config(home: Path, base_url: str, provider: str, group_recall: str) -> None:
    (home / "workspace").mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(home / "workspace"), "model": "double",
                                "provider": "custom",
                                # nanobot re-parses every listed skill's front matter several
                                # times a turn (60 % of a turn here); skills are not what is
                                # fuzzed, so none is listed
                                "disabledSkills": NANOBOT_SKILLS}},
        "providers": {"custom": {"apiKey": "test-key", "apiBase": base_url}},
    }))
    (home / "memory.json").write_text(json.dumps({
        "memory": {"condition": provider, "budget": {"max_tokens": 600}},
        "nanobot": {"group_recall": group_recall, "retry_initial_s": 0.2,
                    "retry_max_s": 1.0, "recall_timeout_s": 20,
                    "exit_delivery_s": 5},
    }))


class Worker:
    """A second nanobot process on the same home (``worker.py``)."""

    def __init__(self, home: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
               "HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False"}
        env.pop("NANOBOT_MEMORY_CONFIG", None)
        self.log = (home / "worker.log").open("a")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(home / "config.json")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)

    def call(self, request: dict[str, Any], timeout_s: float = 120) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the second nanobot process died (see {self.log.name})")
        return str(json.loads(line).get("reply", ""))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.log.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.call({"kind": "close"}, timeout_s=60)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Gateway:
    """The main nanobot process (this one) and, when asked, a second one."""

    def __init__(self, home: Path, provider: str) -> None:
        self.home = home
        self.provider = provider
        self.loop: Any = None
        self.worker: Worker | None = None

    def open(self) -> None:
        from nanobot.agent.loop import AgentLoop
        from nanobot.agent.tools.registry import ToolRegistry
        from nanobot.config.loader import load_config

        self.loop = AgentLoop.from_config(load_config(self.home / "config.json"),
                                          tool_registry=ToolRegistry())

    async def close(self) -> None:
        from nanobot_memory_adapters.nanobot import plugin_for

        if self.loop is None:
            return
        plugin = plugin_for(self.loop)
        await self.loop.aclose()
        if plugin is not None:
            await plugin.aclose()
        self.loop = None

    @property
    def plugin(self) -> Any:
        from nanobot_memory_adapters.nanobot import plugin_for

        return plugin_for(self.loop)

    async def turn(self, chat: Chat, sender: int, text: str) -> str:
        from nanobot.bus.events import InboundMessage

        msg = InboundMessage(channel=chat.channel, sender_id=chat.sender_for(sender),
                             chat_id=chat.chat_for(sender), content=text, media=[],
                             metadata=dict(chat.meta))
        reply = await self.loop._process_message(msg, session_key=chat.key_for(sender))
        return reply.content if reply is not None else ""

    async def cron(self, chat: Chat, text: str, job_id: str) -> str:
        from nanobot.cron.bound_runner import run_bound_cron_job
        from nanobot.cron.types import CronJob, CronPayload

        key = chat.key_for(None)
        job = CronJob(id=job_id, name=f"job {job_id}", payload=CronPayload(
            kind="agent_turn", message=text, session_key=key, origin_channel=chat.channel,
            origin_chat_id=chat.chat_id))
        result = await run_bound_cron_job(job, agent=self.loop, cron=_CronRecords())
        return str(result.response or "")

    async def subagent(self, chat: Chat, text: str) -> str:
        from nanobot.bus.events import InboundMessage

        msg = InboundMessage(channel="system", sender_id="subagent",
                             chat_id=f"{chat.channel}:{chat.chat_id}", content=text,
                             session_key_override=chat.key_for(None),
                             metadata={"injected_event": "subagent_result",
                                       "subagent_task_id": "t1"})
        reply = await self.loop._process_message(msg)
        return reply.content if reply is not None else ""

    async def heartbeat(self, chat: Chat, text: str) -> str:
        reply = await self.loop.process_direct(text, session_key="heartbeat",
                                               channel=chat.channel, chat_id=chat.chat_id)
        return reply.content if reply is not None else ""

    def second(self) -> Worker:
        if self.worker is None or self.worker.proc.poll() is not None:
            self.worker = Worker(self.home)
        return self.worker


class _CronRecords:
    def write_run_record(self, run_id: str, record: dict[str, Any]) -> None:
        return None


# -- the fuzzer ----------------------------------------------------------------------------------
OPS = [  # (kind, weight)
    ("dm_turn", 16), ("group_turn", 24), ("cron", 8), ("subagent", 5), ("heartbeat", 3),
    ("new", 4), ("health", 5), ("mode", 2), ("forget_preview", 2), ("forget", 1),
    ("second_process", 5), ("restart", 1), ("kill_second", 1), ("backfill", 1),
    ("migrate", 1),
]


class Fuzzer:
    def __init__(self, *, seed: int, double: Any, provider: str = "full_history",
                 group_recall: str = "none", segment: int = 60, root: Path | None = None,
                 second_process: bool = True, own_double: bool = False) -> None:
        self.rng = random.Random(seed)
        self.own_double = own_double  # nobody else reads the double's request log
        self.seed = seed
        self.double = double
        self.provider = provider
        self.group_recall = group_recall
        self.segment = segment
        self.root = Path(root or tempfile.mkdtemp(prefix="canary-fuzz-"))
        self.second_process = second_process
        self.tally = Tally()
        self.oracle = Oracle()
        self.world = World.make(self.rng)
        self.gateway: Gateway | None = None
        self.op_no = 0
        self.run_id = f"r{seed}x{random.Random().randrange(10**6)}"  # this run's op tags
        self._seen_requests = len(double.requests)  # the double may have served others
        self.op_chats: dict[int, Chat] = {}
        self.canary_no = 0
        self.log: list[str] = []  # the operations, to reproduce a failure by reading

    # -- segments ------------------------------------------------------------------------------
    async def _fresh_home(self, n: int) -> None:
        if self.gateway is not None:
            await self._shutdown()
        home = self.root / f"home-{n}"
        home.mkdir(parents=True)
        _config(home, self.double.base_url, self.provider, self.group_recall)
        self.gateway = Gateway(home, self.provider)
        self.gateway.open()
        # the oracle is kept: canaries are unique, and a late request of the previous
        # home (a compaction nanobot finishes after /new) is judged by what it knew
        self.world = World.make(self.rng)

    async def _shutdown(self) -> None:
        assert self.gateway is not None
        if self.gateway.worker is not None:
            self.gateway.worker.close()
            self.gateway.worker = None
        await self.gateway.close()

    async def run(self, episodes: int, *, stop_on_leak: bool = True,
                  on_segment: Any = None) -> Tally:
        try:
            for episode in range(episodes):
                if episode % self.segment == 0:
                    if on_segment is not None and episode:
                        on_segment(self.tally)
                    await self._fresh_home(episode // self.segment)
                await self.episode(episode)
                self.tally.episodes += 1
                if self.tally.leaks and stop_on_leak:
                    break
        finally:
            if self.gateway is not None:
                await self._shutdown()
        return self.tally

    # -- one interleaving ------------------------------------------------------------------------
    async def episode(self, episode: int) -> None:
        rng = self.rng
        for user in rng.sample(range(self.world.users), rng.randint(1, 3)):
            chat = self.world.dm(user)
            canary = self._canary(user)
            await self._say(episode, chat, user, f"Remember this: my secret code is {canary}.",
                            canary=canary)
        kinds, weights = zip(*OPS, strict=True)
        for _ in range(rng.randint(4, 12)):
            kind = rng.choices(kinds, weights)[0]
            if kind in ("second_process", "kill_second") and not self.second_process:
                kind = "group_turn"
            await self.operation(episode, kind)
            if self.tally.leaks:
                return

    def _canary(self, user: int) -> str:
        self.canary_no += 1
        self.tally.canaries += 1
        return f"CANARY{user}X{self.seed}0{self.canary_no}Z"  # unique to this run

    def _extras(self) -> str:
        rng = self.rng
        parts = []
        if rng.random() < 0.7:
            parts.append(ECHO)
        if rng.random() < 0.3:
            query = rng.choice(["secret code", "CANARY", "what do you remember", "code"])
            parts.append(f"[llm-double:tool memory_search {json.dumps({'query': query})}]")
        return " ".join(parts)

    async def operation(self, episode: int, kind: str) -> None:
        rng, world = self.rng, self.world
        gw = self.gateway
        assert gw is not None
        self.tally.ops_by_kind[kind] = self.tally.ops_by_kind.get(kind, 0) + 1
        if kind == "dm_turn":
            user = rng.randrange(world.users)
            chat = world.dm(user, rng.choice(DM_CHANNELS) if rng.random() < 0.3 else None)
            canary = self._canary(user) if rng.random() < 0.3 else None
            text = (f"Also remember {canary}." if canary else "What do you know about me?")
            await self._say(episode, chat, user, f"{text} {self._extras()}", canary=canary)
        elif kind == "group_turn":
            chat = rng.choice(world.groups)
            user = rng.choice(sorted(chat.members))
            canary = self._canary(user) if rng.random() < 0.2 else None
            text = (f"Team, note {canary}." if canary else
                    rng.choice(["Hi all, what is my secret code?", "Any news?",
                                "What did the bot say before?", "Tell us what you know."]))
            await self._say(episode, chat, user, f"{text} {self._extras()}", canary=canary)
        elif kind in ("cron", "subagent", "heartbeat"):
            chat = world.any_chat()
            op = self._next_op(kind, chat)
            tag = f"[op:{self.run_id}-{op}]"
            text = f"{tag} Scheduled check-in: what is the secret code? {ECHO}"
            if kind == "cron":
                reply = await gw.cron(chat, text, f"job{op}")
            elif kind == "subagent":
                reply = await gw.subagent(chat, f"{tag} Subagent finished: summarise what you "
                                                f"know about the user. {ECHO}")
            else:
                reply = await gw.heartbeat(chat, text)
            await self._check(episode, op, chat, reply)
        elif kind == "new":
            chat = world.any_chat()
            user = rng.choice(sorted(chat.members))
            await self._command(episode, chat, user, "/new")
        elif kind in ("health", "mode", "forget_preview", "forget"):
            chat = world.any_chat()
            user = rng.choice(sorted(chat.members))
            text = {"health": "/memory-health", "mode": "/memory-mode",
                    "forget_preview": "/memory-forget",
                    "forget": "/memory-forget confirm"}[kind]
            await self._command(episode, chat, user, text)
        elif kind == "second_process":
            chat = world.any_chat()
            user = rng.choice(sorted(chat.members))
            canary = self._canary(user) if rng.random() < 0.3 else None
            text = f"From the other process: {canary or 'what is my code?'} {self._extras()}"
            await self._say(episode, chat, user, text, canary=canary, second=True)
        elif kind == "kill_second":
            if gw.worker is not None:
                gw.worker.kill()
                gw.worker = None
        elif kind == "restart":
            if gw.worker is not None:
                gw.worker.close()
                gw.worker = None
            await gw.close()
            gw.open()
        elif kind == "backfill":
            chat = world.any_chat()
            user = rng.choice(sorted(chat.members))
            await self._command(episode, chat, user, f"/memory-mode {self.provider} --backfill")
            plugin = gw.plugin
            if plugin is not None and plugin.backfill_progress is not None:
                await _wait(lambda: plugin.backfill_progress.done, 60)
        elif kind == "migrate":
            from nanobot_memory_adapters.nanobot.migrate import migrate

            plugin = gw.plugin
            if plugin is not None and plugin.state.settings.memory is not None:
                await asyncio.to_thread(_migrate_sync, migrate, plugin)
                plugin._delivery.schedule_drain()
        self.tally.ops += 1

    def _next_op(self, kind: str, chat: Chat) -> int:
        self.op_no += 1
        self.op_chats[self.op_no] = chat
        self.log.append(f"{self.op_no} {kind} {chat.name}")
        return self.op_no

    async def _say(self, episode: int, chat: Chat, user: int, text: str, *,
                   canary: str | None, second: bool = False) -> None:
        op = self._next_op("second" if second else "turn", chat)
        if canary is not None:
            self.oracle.said(canary, chat)
        text = f"[op:{self.run_id}-{op}] {text}"
        if second:
            reply = await asyncio.to_thread(self.gateway.second().call, {  # type: ignore[union-attr]
                "kind": "turn", "channel": chat.channel, "chat_id": chat.chat_for(user),
                "sender": chat.sender_for(user), "text": text, "meta": chat.meta,
                "key": chat.key_for(user)})
        else:
            assert self.gateway is not None
            reply = await self.gateway.turn(chat, user, text)
        personal = self.group_recall == "personal" and chat.kind != "dm"
        await self._check(episode, op, chat, reply, speaker=user if personal else None)

    async def _command(self, episode: int, chat: Chat, user: int, text: str) -> None:
        op = self._next_op(text, chat)
        assert self.gateway is not None
        reply = await self.gateway.turn(chat, user, text)
        await self._check(episode, op, chat, reply)

    async def _check(self, episode: int, op: int, chat: Chat, reply: str, *,
                     speaker: int | None = None) -> None:
        tally = self.tally
        tally.replies_checked += 1
        for req, chats in self._attributed():
            tally.requests_checked += 1
            text = req.all_text
            if CANARY.search(text):
                tally.requests_with_canaries += 1
                if all(c.kind == "dm" for c in chats) and any(
                        int(m.group(1)) in c.members for m in CANARY.finditer(text)
                        for c in chats):
                    tally.recalled_own += 1
            # a request's text flows back into the sessions it came from (its reply, a
            # compaction's checkpoint): everyone reading any of them must know a canary
            audience = Chat(" + ".join(sorted({c.name for c in chats})), chats[0].channel,
                            chats[0].chat_id, frozenset().union(*(c.members for c in chats)),
                            chats[0].kind)
            self.oracle.check(text, audience, tally=tally, episode=episode, op=op,
                              what="request",
                              speaker=speaker if all(c == chat for c in chats) else None)
        # the reply after its requests: what the speaker's own recall showed the chat
        self.oracle.check(reply, chat, tally=tally, episode=episode, op=op, what="reply",
                          speaker=speaker)
        self.oracle.check_ids(reply, chat, tally=tally, episode=episode, op=op,
                              speaker=speaker)

    def _attributed(self) -> Iterator[tuple[Any, list[Chat]]]:
        """Each new request with the chats of the operations whose messages it carries
        (their ``[op:N]`` tags in user messages, recalled sections aside): a turn's own
        requests, and nanobot's background work on a session (a compaction after /new)."""
        for req in self._new_chat_requests():
            tags: set[int] = set()
            for message in req.messages:
                if message.get("role") != "user":
                    continue
                content = message.get("content")
                text = content if isinstance(content, str) else json.dumps(content)
                tags.update(int(n) for run, n in OP_TAG.findall(WHOLE_SECTION.sub("", text))
                            if run == self.run_id)
            chats = [self.op_chats[t] for t in sorted(tags) if t in self.op_chats]
            if chats:
                yield req, chats
            else:
                self.tally.untagged += 1

    def _new_chat_requests(self) -> list[Any]:
        from tests.llm_double.server import ChatRequest

        records = self.double.requests[self._seen_requests:]
        self._seen_requests += len(records)
        if self.own_double:  # checked requests are dropped: a long run's memory stays flat
            del self.double.requests[: self._seen_requests]
            self._seen_requests = 0
        return [ChatRequest(r["body"]) for r in records
                if r["path"].endswith("completions")]


def _migrate_sync(migrate: Any, plugin: Any) -> None:
    asyncio.run(migrate(plugin.outbox, plugin.state.settings.memory, plugin.provider))


async def _wait(done: Any, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while not done() and time.monotonic() < end:
        await asyncio.sleep(0.05)


# -- the long run, by hand ------------------------------------------------------------------------
def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--provider", default="full_history")
    parser.add_argument("--group-recall", default="none", choices=["none", "group", "personal"])
    parser.add_argument("--segment", type=int, default=60)
    parser.add_argument("--no-second-process", action="store_true")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the result JSON here (benchmarks/results/...)")
    args = parser.parse_args(argv)
    from loguru import logger

    from tests.llm_double.server import LLMDouble

    logger.remove()  # nanobot logs every turn stage at DEBUG: warnings are enough here
    logger.add(sys.stderr, level="WARNING")

    started = time.time()

    def result(tally: Tally, complete: bool) -> dict[str, Any]:
        return {
            "command": "python -m tests.privacy.fuzz " + " ".join(argv or sys.argv[1:]),
            "commit": _git_commit(), "machine": f"{platform.node()} {platform.machine()} "
            f"{os.cpu_count()} cpu", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "complete": complete, "seconds": round(time.time() - started, 1),
            "seed": args.seed, "provider": args.provider, "group_recall": args.group_recall,
            "episodes": tally.episodes, "ops": tally.ops, "ops_by_kind": tally.ops_by_kind,
            "requests_checked": tally.requests_checked,
            "requests_with_canaries": tally.requests_with_canaries,
            "requests_untagged": tally.untagged, "recalled_own": tally.recalled_own,
            "own_ids_shown": tally.own_ids_shown,
            "replies_checked": tally.replies_checked, "canaries": tally.canaries,
            "leaks": [leak.__dict__ for leak in tally.leaks],
        }

    def write(tally: Tally, complete: bool = False) -> str:
        text = json.dumps(result(tally, complete), indent=2)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        return text

    with LLMDouble() as double:
        fuzzer = Fuzzer(seed=args.seed, double=double, provider=args.provider,
                        group_recall=args.group_recall, segment=args.segment,
                        second_process=not args.no_second_process, own_double=True)
        tally = asyncio.run(fuzzer.run(args.episodes, on_segment=write))
    print(write(tally, complete=True))
    return 1 if tally.leaks else 0


if __name__ == "__main__":
    raise SystemExit(main())
