"""The one gate: memory-derived text reaches a model request or a chat reply only when its
owner is in that request's audience.

Privacy enforced path by path (recall, the search tool, cron turns, history, health)
leaks by the next path nobody listed. So every piece of text the plugin hands to nanobot
is a ``Piece`` that says where it came from:

- ``Piece.memory(text, scope_key)``: derived from that scope's memory (a recall section, a
  ``memory_search`` result, a forget report about that scope, its last recall);
- ``Piece.plain(text)``: the plugin's own words, nobody's memory (the guidance, usage,
  the provider's name, outbox counts);
- ``Piece.operator(text)``: for the machine's operator only: backend error text (which
  can quote another user's turn), other people's ids. Released only to nanobot's own
  terminal (the ``cli`` channel); a chat gets the piece's ``withheld`` text instead.

``release`` is the hand-off. A turn's ``Audience`` is computed once, from the session's
facts (``people``/``chat_book``): the one person of a one-person chat; in a shared or
unknown chat nobody's personal scope, unless ``group_recall`` says so (``group``: the
chat's own scope; ``personal``: the speaker's, in the system prompt only: the audience is
``prompt_only``, and text saved in the chat's history — a command's reply, a tool's result
— is released to ``in_history()``, which admits no scope then).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot.seams import LOG_PREFIX as LOG

Origin = Literal["memory", "plain", "operator"]
WITHHELD_OPERATOR = "(details are in the gateway's log)"


@dataclass(frozen=True)
class Audience:
    """Whose memory may reach one request (and its reply)."""

    scopes: frozenset[str]  # scope keys whose memory may be shown
    one_person: bool  # the chat is known to be one person's
    operator: bool = False  # the machine's own terminal (nanobot's CLI channel)
    # the scopes may reach this turn's system prompt only, never text the chat's history
    # keeps (a shared chat's personal recall: the others in it replay that history)
    prompt_only: bool = False

    @classmethod
    def nobody(cls) -> Audience:
        return cls(frozenset(), False)

    def in_history(self) -> Audience:
        """Who may see text that is saved in the chat's history (a reply, a command's
        answer, a tool's result): everyone who can read the chat, so no scope of a
        prompt-only audience."""
        return replace(self, scopes=frozenset()) if self.prompt_only else self

    def admits(self, scope_key: str | None) -> bool:
        return scope_key is not None and scope_key in self.scopes


@dataclass(frozen=True)
class Piece:
    text: str
    origin: Origin
    scope_key: str | None = None
    withheld: str = ""  # said instead when the audience does not admit the piece

    @classmethod
    def memory(cls, text: str, scope_key: str, withheld: str = "") -> Piece:
        return cls(text, "memory", scope_key, withheld)

    @classmethod
    def plain(cls, text: str) -> Piece:
        return cls(text, "plain")

    @classmethod
    def operator(cls, text: str, withheld: str = WITHHELD_OPERATOR) -> Piece:
        return cls(text, "operator", None, withheld)


def admitted(piece: Piece, audience: Audience) -> str:
    """The piece's text if the audience may see it, else what is said instead."""
    if piece.origin == "plain":
        return piece.text
    if piece.origin == "memory" and audience.admits(piece.scope_key):
        return piece.text
    if piece.origin == "operator" and audience.operator:
        return piece.text
    if piece.text:
        logger.debug("{}: withheld {} text ({} chars) from a request of another audience",
                     LOG, piece.origin, len(piece.text))
    return piece.withheld


def release(pieces: Iterable[Piece], audience: Audience, sep: str = "\n") -> str:
    """The text handed to nanobot: each piece admitted or replaced (empty ones dropped)."""
    return sep.join(t for t in (admitted(p, audience) for p in pieces) if t)
