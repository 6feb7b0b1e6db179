"""Who a turn belongs to, and whether its chat is one person's.

nanobot's gateway serves many people; the plugin promises each person their own memory.
The rules live here, in one place, for recall, ``memory_search``, turn recording and the
commands' replies:

- **a person's identity** is the channel and the sender id, except on Telegram, whose
  sender id is ``"<numeric id>|<username>"``: the numeric id is the person (a changed
  username is the same person);
- **unknown means shared**: a session is one person's only when a turn showed it (nanobot's
  CLI, a chat whose id is its sender's, a chat the channel marks as direct, or a session
  the operator declared in ``direct_chats``), the session is that chat's own (not
  nanobot's unified session), and no turn ever showed a group flag or a second person.
  What turns showed is kept on disk (``chat_book.ChatBook``), so it holds across restarts
  and processes;
- **a turn from no person** (nanobot's cron runner sends ``sender_id="cron"``; subagent
  results, session tools, triggers, the heartbeat session and ``system:*`` senders) is the
  person's of a one-person session, and nobody's anywhere else (or the group's own, with
  ``group_recall: group``): never the last speaker's.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nanobot_memory_adapters.nanobot import seams

# Sender ids nanobot itself uses for turns nobody typed (nanobot-ai 0.3.5).
NON_PERSON_SENDERS = frozenset({
    "cron", "heartbeat", "subagent", "session", "session_timeout", "runtime", "trigger",
    "webui-settings", "system",
})
HEARTBEAT_SESSION = "heartbeat"  # the gateway's heartbeat runs in this session
_SHARED_CHAT_TYPES = frozenset({"group", "supergroup", "channel", "room"})


def canonical_sender(channel: str, sender_id: str) -> str:
    """The part of a sender id that names the person (Telegram: the numeric id)."""
    if channel == "telegram":
        head, sep, _username = sender_id.partition("|")
        if sep and head.lstrip("-").isdigit():
            return head
    return sender_id


SDK_SESSION_PREFIX = "sdk:"  # nanobot's SDK (``Nanobot.run``) names its sessions sdk:<name>
PLACEHOLDER_SENDER = "user"  # nanobot's sender id when the caller gives none (CLI, SDK)


def person_id(channel: str, sender_id: str, session_key: str | None) -> str:
    """The person a sender id names, for scopes and the chat book: ``canonical_sender``,
    except where nanobot puts the placeholder sender ``user`` for whoever calls: its
    OpenAI-compatible API server (channel ``api``, every client ``chat_id="default"``) and
    an SDK session (channel ``cli``, session ``sdk:<name>``) whose caller gave no
    ``sender_id``. An app serving several people keeps them apart by session key (nanobot
    keeps their histories apart so), so each such session is a person of its own. An SDK
    caller that passes ``sender_id`` keeps one person's memory across sessions; nanobot's
    own CLI (``cli:*`` or ``-s NAME``) stays its one user's."""
    return canonical_sender(channel, sender_of(channel, sender_id, session_key))


def sender_of(channel: str, sender_id: str, session_key: str | None) -> str:
    """The sender id as the plugin counts it (``person_id`` says why an SDK session's
    placeholder is its own person)."""
    if sender_id == PLACEHOLDER_SENDER and session_key and (
            channel == "api"
            or (channel == "cli" and session_key.startswith(SDK_SESSION_PREFIX))):
        return f"{PLACEHOLDER_SENDER}@{session_key}"
    return sender_id


def is_person(sender_id: str | None, metadata: Mapping[str, Any] | None,
              session_key: str | None) -> bool:
    """Whether a person typed this turn (not cron, a subagent, the heartbeat...)."""
    if not sender_id or session_key == HEARTBEAT_SESSION:
        return False
    if seams.is_automation_turn(metadata):
        return False
    return sender_id not in NON_PERSON_SENDERS and not sender_id.startswith("system:")


def flagged_shared(channel: str, chat_id: str, metadata: Mapping[str, Any] | None) -> bool:
    """The channel says this chat is a group: ``is_group`` (Telegram, WhatsApp, Signal,
    NapCat, Mochat), ``chat_type`` (Feishu, WeCom), a Discord ``guild_id`` (None in a DM),
    Slack's or Mattermost's ``channel_type`` other than a DM (``im`` / ``dm``), or a
    negative Telegram chat id (nanobot 0.3.5's inbound metadata), or a WeChat room."""
    meta = metadata or {}
    if meta.get("is_group") is True:
        return True
    chat_type = meta.get("chat_type")
    if isinstance(chat_type, str) and chat_type.lower() in _SHARED_CHAT_TYPES:
        return True
    if channel == "discord" and meta.get("guild_id"):
        return True
    if channel == "dingtalk" and str(meta.get("conversation_type")) == "2":
        return True
    for name, direct in (("slack", "im"), ("mattermost", "dm")):
        nested = meta.get(name)
        kind = nested.get("channel_type") if isinstance(nested, Mapping) else None
        if channel == name and isinstance(kind, str) and kind and kind != direct:
            return True
    if channel == "weixin" and chat_id.endswith(WEIXIN_ROOM_SUFFIX):
        return True
    return channel == "telegram" and chat_id.startswith("-")


# Telegram's service accounts: the sender of an anonymous group admin's message
# (GroupAnonymousBot), of a post sent as a channel (Channel_Bot) and of a channel post
# forwarded into its discussion group (Telegram, 777000). One id for everyone who speaks
# so in every group: not a person.
TELEGRAM_SERVICE_ACCOUNTS = frozenset({"1087968824", "136817688", "777000"})


def service_account(channel: str, sender_id: str) -> bool:
    """The sender id is a channel's stand-in for whoever spoke
    (``TELEGRAM_SERVICE_ACCOUNTS``)."""
    return (channel == "telegram"
            and canonical_sender(channel, sender_id) in TELEGRAM_SERVICE_ACCOUNTS)


def stand_in_sender(channel: str, chat_id: str, sender_id: str,
                    metadata: Mapping[str, Any] | None) -> str | None:
    """Why the sender id names nobody (a reason to show), else None: the channel gave its
    group as the sender (a WeChat room), or a Telegram service account (the same id for
    every anonymous admin or channel, in every group)."""
    if canonical_sender(channel, sender_id) == chat_id and flagged_shared(
            channel, chat_id, metadata):
        return "the channel gives this group as the sender, so who spoke is unknown"
    if service_account(channel, sender_id):
        return ("Telegram sends this for an anonymous admin or a channel: one id for "
                "everyone who speaks so; ask from your own account")
    return None


# nanobot's WeChat channel gives a room's messages the room's id (``xxx@chatroom``) as
# both chat and sender: a room, whoever spoke in it
WEIXIN_ROOM_SUFFIX = "@chatroom"


# chat types and DM markers channels give a one-person chat (Feishu ``p2p``, WeCom
# ``single``, Slack ``im``, Mattermost ``dm``)
_DIRECT_CHAT_TYPES = frozenset({"private", "p2p", "single", "dm", "im", "direct",
                                "personal"})


def one_persons_chat(channel: str, chat_id: str, sender_id: str | None,
                     metadata: Mapping[str, Any] | None) -> bool:
    """The chat is known to be one person's: nanobot's CLI, a chat whose id is its
    sender's (a Telegram private chat), or one the channel marks as direct (``is_group``
    false: WhatsApp, Signal, NapCat, Mochat; ``chat_type``; Slack's or Mattermost's
    ``channel_type``; Teams' ``conversation_type`` ``personal``; a Discord message without
    a guild). Any other chat may gain a second person at any turn."""
    meta = metadata or {}
    if flagged_shared(channel, chat_id, meta):
        return False
    if channel == "cli" or meta.get("is_group") is False:
        return True
    if sender_id and chat_id and chat_id == canonical_sender(channel, sender_id):
        return True
    kinds = [meta.get("chat_type"), *(
        nested.get(key) for name, key in (("slack", "channel_type"),
                                          ("mattermost", "channel_type"),
                                          ("msteams", "conversation_type"))
        if isinstance(nested := meta.get(name), Mapping))]
    if any(isinstance(k, str) and k.lower() in _DIRECT_CHAT_TYPES for k in kinds):
        return True
    return channel == "discord" and "guild_id" in meta and not meta.get("guild_id")


UNIFIED_SESSION_KEY = "unified:default"  # nanobot 0.3.5's one session for every chat


CLI_SENDER = "user"  # the sender id nanobot's terminal gives every turn


def operators_terminal(channel: str, session_key: str, sender_id: str | None) -> bool:
    """The reader is the machine's operator: nanobot's own terminal (the ``cli`` channel,
    sender ``user``) on one of its own sessions (``cli:*`` or a name without a channel,
    ``-s work``). Not an app's SDK session (``sdk:*``, or any session whose app names its
    user as a sender other than ``user``: read by that user; the SDK's default sender is
    ``user``, so an app that passes none cannot be told from the terminal), nor another
    channel's chat opened from the
    terminal (``-s websocket:xyz``: nanobot saves a command's reply in that session, which
    the chat's own readers see)."""
    if (channel != "cli" or sender_id != CLI_SENDER
            or session_key.startswith(SDK_SESSION_PREFIX)):
        return False
    return ":" not in session_key or session_key.startswith("cli:")


def session_is_the_chats(session_key: str, channel: str, chat_id: str) -> bool:
    """The session holds this chat alone (``channel:chat_id``, or a thread of it), so only
    the chat's people read its history. nanobot's unified session (every chat in one
    session) and per-sender sessions inside a group are not a chat's own. nanobot's CLI
    names its sessions freely (``nanobot agent -s work``) and has one user: any session of
    it but the unified one is that user's."""
    if session_key == UNIFIED_SESSION_KEY:
        return False
    if channel == "cli":
        return True
    own = f"{channel}:{chat_id}"
    if channel == "api":
        # nanobot's API server gives every client chat "default" and keys the session on
        # the client's own session id: ``api:default:x`` is a client's, not a thread
        return session_key == own
    return session_key == own or session_key.startswith(own + ":")


def declared_direct(session_key: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """The operator declared this session one person's (``direct_chats``, shell-style
    patterns over session keys): for channels that do not mark direct chats (Matrix)."""
    return any(fnmatch.fnmatchcase(session_key, p) for p in patterns)


@dataclass(frozen=True)
class Observation:
    """What one turn shows about its session (``ChatBook.observe`` keeps it)."""

    direct: bool  # this turn showed the session is one person's
    shared: bool  # this turn showed several people may read it
    person: str | None  # the person who typed the turn (raw sender id), None: nobody
    canonical: str | None  # the same person's identity (``canonical_sender``)


def observe(*, session_key: str, channel: str, chat_id: str, sender_id: str | None,
            metadata: Mapping[str, Any] | None,
            direct_chats: tuple[str, ...] | list[str] = ()) -> Observation:
    """What this turn shows about its session, from the turn alone."""
    person = (sender_of(channel, sender_id, session_key)
              if sender_id and is_person(sender_id, metadata, session_key) else None)
    own = session_is_the_chats(session_key, channel, chat_id)
    shared = flagged_shared(channel, chat_id, metadata) or (
        person is not None and not own and not declared_direct(session_key, direct_chats))
    if person is not None and stand_in_sender(channel, chat_id, person, metadata):
        person = None
    direct = False
    if person is not None and not shared:
        direct = (own and one_persons_chat(channel, chat_id, person, metadata)) \
            or declared_direct(session_key, direct_chats)
    if (person is None and not shared and own and channel == "telegram"
            and chat_id.isdigit()):
        # a Telegram private chat's id is its user's id: known without a turn of theirs
        return Observation(True, False, chat_id, chat_id)
    return Observation(direct, shared, person,
                       canonical_sender(channel, person) if person is not None else None)


@dataclass(frozen=True)
class ChatFacts:
    """What every turn so far showed about a session (merged, across processes)."""

    direct: bool = False
    shared: bool = False
    person: str | None = None  # the first person seen (raw sender id)
    canonical: str | None = None

    @property
    def one_person(self) -> str | None:
        """The sender id of the one person who may read this session, else None."""
        return self.person if self.direct and not self.shared else None

    def merged(self, seen: Observation) -> ChatFacts:
        second = (seen.canonical is not None and self.canonical is not None
                  and seen.canonical != self.canonical)
        return ChatFacts(
            direct=self.direct or seen.direct,
            shared=self.shared or seen.shared or second,
            person=self.person if self.person is not None else seen.person,
            canonical=self.canonical if self.canonical is not None else seen.canonical)


@dataclass(frozen=True)
class Attribution:
    person: str | None  # the sender id whose memory this turn reads and writes; None: nobody's
    shared: bool  # not known to be one person's: a group, or a chat nobody vouched for


def group_sender(chat_id: str) -> str:
    """The sender id a shared chat's own memory is kept under (``group_recall: group``).
    It starts with NUL, which no channel puts in a person's id, so the rendered scope
    (``telegram-_group:-500~<hash>``) is never a person's."""
    return f"\x00group:{chat_id}"


def group_key(session_key: str, channel: str, chat_id: str) -> str:
    """What a shared chat's own scope is keyed on: the chat, when the session is the
    chat's own (its readers are the chat's people); else the session, whose readers may be
    fewer (nanobot's API server gives every client ``chat_id="default"``: keyed on the chat,
    one client would read another's memory)."""
    if session_is_the_chats(session_key, channel, chat_id):
        return chat_id
    return f"session:{session_key}"


def attribute(facts: ChatFacts, seen: Observation, *, session_key: str, chat_id: str,
              channel: str, group_scope: bool = False) -> Attribution:
    """Whose turn this is, from the session's facts (this turn's observation merged in).
    A person's turn is theirs (recorded in their scope wherever they speak); a turn from
    no person is the one person's of a one-person session, else nobody's; with
    ``group_scope`` every turn of a shared session is the group's own."""
    one = facts.one_person
    if one is None and group_scope and session_key != HEARTBEAT_SESSION:
        return Attribution(group_sender(group_key(session_key, channel, chat_id)), True)
    if seen.person is not None:
        return Attribution(seen.person, one is None)
    if session_key == HEARTBEAT_SESSION:
        return Attribution(None, one is None)
    return Attribution(one, one is None)
