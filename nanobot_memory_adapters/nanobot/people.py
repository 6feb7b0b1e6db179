"""Who a turn belongs to, and whether its chat is shared.

nanobot's gateway serves many people; the plugin promises each person their own memory.
Three rules live here, in one place, for recall, ``memory_search`` and turn recording:

- **a person's identity** is the channel and the sender id, except on Telegram, whose
  sender id is ``"<numeric id>|<username>"``: the numeric id is the person (a changed
  username is the same person);
- **a turn from no person** (nanobot's cron runner sends ``sender_id="cron"``; subagent
  results, session tools, triggers, the heartbeat session and ``system:*`` senders) is
  attributed to the person of the session it runs in, when the chat is not shared and
  that person is known; otherwise it is neither recalled for nor recorded;
- **a shared chat** is one the channel flags as a group (``is_group``, ``chat_type``),
  a Telegram chat with a negative id, or a session where two different people spoke.
"""

from __future__ import annotations

from collections import OrderedDict
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
    negative Telegram chat id (nanobot 0.3.5's inbound metadata)."""
    meta = metadata or {}
    if meta.get("is_group") is True:
        return True
    chat_type = meta.get("chat_type")
    if isinstance(chat_type, str) and chat_type.lower() in _SHARED_CHAT_TYPES:
        return True
    if channel == "discord" and meta.get("guild_id"):
        return True
    for name, direct in (("slack", "im"), ("mattermost", "dm")):
        nested = meta.get(name)
        kind = nested.get("channel_type") if isinstance(nested, Mapping) else None
        if channel == name and isinstance(kind, str) and kind and kind != direct:
            return True
    return channel == "telegram" and chat_id.startswith("-")


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


@dataclass(frozen=True)
class Attribution:
    person: str | None  # the sender id whose memory this turn reads and writes; None: nobody's
    shared: bool  # a chat several people see


class People:
    """Who spoke in each session, as this process saw it (bounded, most recent kept)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._seen: OrderedDict[str, list[str]] = OrderedDict()

    def saw(self, session_key: str, person: str) -> None:
        people = self._seen.setdefault(session_key, [])
        if person in people:
            people.remove(person)
        people.append(person)
        self._seen.move_to_end(session_key)
        while len(self._seen) > self.size:
            self._seen.popitem(last=False)

    def last(self, session_key: str) -> str | None:
        people = self._seen.get(session_key)
        return people[-1] if people else None

    def several(self, session_key: str) -> bool:
        return len(self._seen.get(session_key, ())) > 1


def group_sender(chat_id: str) -> str:
    """The sender id a shared chat's own memory is kept under (``group_recall: group``).
    It starts with NUL, which no channel puts in a person's id, so the rendered scope
    (``telegram-_group:-500~<hash>``) is never a person's."""
    return f"\x00group:{chat_id}"


def attribute(people: People, *, session_key: str, channel: str, chat_id: str,
              sender_id: str | None, metadata: Mapping[str, Any] | None,
              remembered: str | None = None, group_scope: bool = False) -> Attribution:
    """Whose turn this is. ``remembered`` is the session's sender from an earlier process
    (the outbox's record), used for a turn from no person when this process saw nobody.
    ``group_scope``: a shared chat's turns are the group's own (``group_sender``)."""
    if is_person(sender_id, metadata, session_key):
        assert sender_id is not None
        people.saw(session_key, canonical_sender(channel, sender_id))
    shared = flagged_shared(channel, chat_id, metadata) or people.several(session_key)
    if shared and group_scope and session_key != HEARTBEAT_SESSION:
        return Attribution(group_sender(chat_id), True)
    if is_person(sender_id, metadata, session_key):
        return Attribution(sender_id, shared)
    if shared or session_key == HEARTBEAT_SESSION:
        return Attribution(None, shared)
    person = people.last(session_key)
    if person is None and remembered and is_person(remembered, None, session_key):
        person = remembered
        people.saw(session_key, canonical_sender(channel, person))  # for the sync prompt
    if person is None and channel == "telegram" and chat_id.isdigit():
        person = chat_id  # a Telegram private chat's id is its user's id
    return Attribution(person, False)
