"""Who may read what, per turn: the plugin's audience collaborator.

It owns the chat book (what turns showed about each session, on disk) and each
session's current turn's ``Audience``, computed once per turn (``attribute`` then
``audience_of``) and read back, without I/O, by the synchronous prompt build of that same
turn (``now``). Recall, delivery and the runtime ask it; nobody else keeps audience state.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.audience import Audience
from nanobot_memory_adapters.nanobot.chat_book import CHATS_FILE, ChatBook
from nanobot_memory_adapters.nanobot.people import Attribution, attribute, observe
from nanobot_memory_adapters.nanobot.settings import LoadedSettings
from nanobot_memory_adapters.nanobot.turns import chat_scope

#: How many sessions' current audiences are kept (the oldest go first).
NOTED_SESSIONS = 4096


class Audiences:
    """The chat book and each session's current audience. ``settings`` and ``base_dir``
    are read when needed (a reload replaces the plugin's settings)."""

    def __init__(self, settings: Callable[[], LoadedSettings],
                 base_dir: Callable[[], Path]) -> None:
        self._settings = settings
        self._base_dir = base_dir
        self._book: ChatBook | None = None
        # session key -> (turn id, audience, whether any audience of that turn was
        # prompt-only) of its current turn
        self._noted: OrderedDict[str, tuple[str | None, Audience, bool]] = OrderedDict()

    @property
    def book(self) -> ChatBook:
        """The chat book, in the data directory the plugin started with (it is about
        chats, not providers: a switch keeps it)."""
        if self._book is None:
            self._book = ChatBook(self._base_dir() / CHATS_FILE)
        return self._book

    def close(self) -> None:
        if self._book is not None:
            self._book.close()
            self._book = None

    @property
    def group_scope(self) -> bool:
        """``group_recall: group``: a shared chat reads and writes its own scope."""
        return self._settings().plugin.group_recall == "group"

    async def attribute(self, *, session_key: str, channel: str, chat_id: str,
                        sender_id: str | None, metadata: dict[str, Any] | None
                        ) -> Attribution:
        """Whose turn this is: this turn's observation merged into the session's facts on
        disk (``chat_book``), then ``people.attribute`` (recall, search, delivery alike)."""
        seen = observe(session_key=session_key, channel=channel, chat_id=chat_id,
                       sender_id=sender_id, metadata=metadata,
                       direct_chats=self._settings().plugin.direct_chats)
        facts = await asyncio.to_thread(self.book.observe, session_key, seen)
        who = attribute(facts, seen, session_key=session_key, chat_id=chat_id,
                        channel=channel, group_scope=self.group_scope)
        source = seams.session_message_source(metadata)
        if source is not None and source != session_key and who.person is not None:
            # another session's model wrote this turn (``send_session_message``), on behalf
            # of whoever spoke there: it is this session's person's only when the source
            # session is known to be that same one person's; else nobody's (no recall of
            # this session's person for the sender, and not filed as their words)
            sent_by = await asyncio.to_thread(self.book.recorded, source)
            # a sender id names a person on one channel only (two channels, two scopes)
            mine = facts.one_person is not None and sent_by is not None \
                and sent_by.one_person is not None and sent_by.canonical == facts.canonical \
                and _channel_of(source) == _channel_of(session_key)
            if not mine:
                return Attribution(None, True)
        return who

    def audience_of(self, who: Attribution, *, channel: str, chat_id: str, session_key: str,
                    attributes: dict[str, Any] | None) -> Audience:
        """Whose memory may reach this turn's request and reply: the turn's own scope in a
        one-person chat; in a shared (or unknown) chat only what ``group_recall`` allows
        (``group``: the chat's own scope; ``personal``: the speaker's; ``none``: nothing)."""
        settings = self._settings()
        memory = settings.memory
        if memory is None or who.person is None:
            return Audience.nobody()
        if who.shared and settings.plugin.group_recall == "none":
            return Audience.nobody()
        try:
            scope = chat_scope(memory, channel=channel, chat_id=chat_id, sender_id=who.person,
                               session_key=session_key, attributes=attributes)[0]
        except ValueError:
            return Audience.nobody()
        # a shared chat's speaker scope (group_recall "personal") may reach the prompt only
        personal = who.shared and not self.group_scope
        return Audience(frozenset({scope.key}), one_person=not who.shared,
                        prompt_only=personal)

    def note(self, session_key: str, turn_id: str | None, audience: Audience) -> None:
        """This turn's audience, for the same turn's synchronous prompt build. A message
        nanobot injects into a running turn notes its own audience under the same turn;
        whether the turn's prompt already carried prompt-only memory is kept."""
        earlier = self._noted.get(session_key)
        carried = (earlier is not None and turn_id is not None and earlier[0] == turn_id
                   and earlier[2])
        self._noted[session_key] = (turn_id, audience, carried or audience.prompt_only)
        self._noted.move_to_end(session_key)
        while len(self._noted) > NOTED_SESSIONS:
            self._noted.popitem(last=False)

    def now(self, session_key: str, turn_id: str | None) -> Audience:
        """The audience noted for this very turn (no I/O); nobody when this turn was not
        seen (fails closed)."""
        noted = self._noted.get(session_key)
        if noted is None or noted[0] != turn_id:
            return Audience.nobody()
        return noted[1]

    def carried_prompt_only(self, session_key: str, turn_id: str | None) -> bool:
        """Whether any audience of this turn was prompt-only: nanobot builds a turn's
        system prompt once, so memory that prompt carried stays in it after a message
        injected mid-turn (another session's relay: nobody's) noted a later audience."""
        noted = self._noted.get(session_key)
        return noted is not None and noted[0] == turn_id and noted[2]


def _channel_of(session_key: str) -> str:
    """The channel a session key names (``telegram:1001`` -> ``telegram``; a key without
    one, nanobot's ``-s work`` or an SDK app's name, is nanobot's terminal's, ``cli``)."""
    head, sep, _rest = session_key.partition(":")
    return head if sep else "cli"
