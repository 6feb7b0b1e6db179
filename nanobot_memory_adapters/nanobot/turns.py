"""A persisted nanobot turn -> one ``MemoryEvent``.

The turn's messages are the session messages written since the turn started (all the
user's messages of the turn, including ones injected while it ran, and the assistant's
replies). Slash-command exchanges, summary checkpoints and the placeholders nanobot
writes after a crash or a model error are nanobot's own, not conversation, and are left
out; runtime-context blocks appended to user messages (the memory
context itself, skill hints, quotes) are stripped so memory never re-ingests memory. For
the same reason, with tool results recorded (``include_tool_messages``), what the plugin's
own tools return is not: ``memory_search`` returns memory, ``memory_guide`` the plugin's
guide (whose example lines would read as things this user said).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from nanobot_memory_adapters.config import MemoryConfig
from nanobot_memory_adapters.events import MemoryEvent, Message
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.people import person_id, stand_in_sender
from nanobot_memory_adapters.nanobot.search_tool import SEARCH_TOOL_NAME
from nanobot_memory_adapters.nanobot.skill import GUIDE_TOOL_NAME
from nanobot_memory_adapters.scope import MemoryScope

_TAG_KEYS = ("scenario", "context", "attribute")

# Tools whose results are memory or the plugin's guide, never new conversation.
MEMORY_TOOL_NAMES = frozenset({SEARCH_TOOL_NAME, GUIDE_TOOL_NAME})


def is_recorded(message: Mapping[str, Any], *, include_tools: bool = False) -> bool:
    """Whether a session message of a turn goes into its memory event: the user's and
    the assistant's messages, and with ``include_tools`` the results of tools other than
    the plugin's own (nanobot's internal and synthetic messages are checked by callers)."""
    role = message.get("role")
    if role == "tool":
        return include_tools and message.get("name") not in MEMORY_TOOL_NAMES
    return role in ("user", "assistant") and not seams.is_session_message(message)


def identity_values(
    *, channel: str, chat_id: str, sender_id: str | None, session_key: str,
    attributes: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The template fields of a chat; ``sender_id`` is the person's part of the sender id
    (``people.person_id``: Telegram's numeric id, without the username; an SDK
    session's placeholder sender as a person of its own)."""
    values = {k: v for k, v in (attributes or {}).items() if isinstance(v, str) and v}
    values.update(
        channel=channel or "unknown",
        chat_id=chat_id or "unknown",
        sender_id=person_id(channel, sender_id, session_key) if sender_id else "unknown",
        session_key=session_key,
    )
    return values


def chat_scope(memory: MemoryConfig, *, channel: str, chat_id: str, sender_id: str | None,
               session_key: str, attributes: Mapping[str, Any] | None = None
               ) -> tuple[MemoryScope, str]:
    """(scope, session id) of a chat: the one mapping recall, search, turn recording,
    backfill, forget and the replies all use. Raises ValueError on a bad template."""
    return scope_for(memory, identity_values(channel=channel, chat_id=chat_id,
                                             sender_id=sender_id, session_key=session_key,
                                             attributes=attributes))


def command_scope(memory: MemoryConfig, ctx: Any) -> tuple[MemoryScope, str]:
    """``chat_scope`` of the chat a slash command came from. Raises ValueError for a
    sender that names nobody (``people.stand_in_sender``): its scope would be everyone's
    who speaks so, for ``/memory-forget`` to delete."""
    msg = ctx.msg
    why = stand_in_sender(msg.channel, msg.chat_id, msg.sender_id, msg.metadata)
    if why is not None:
        raise ValueError(why)
    return chat_scope(memory, channel=msg.channel, chat_id=msg.chat_id,
                      sender_id=msg.sender_id, session_key=ctx.key)


def scope_for(memory: MemoryConfig, values: dict[str, str]) -> tuple[MemoryScope, str]:
    """(scope, session id) for a request or a turn. Raises ValueError on a bad template."""
    scope = MemoryScope(
        run_id=memory.scope.render("run_id", values),
        persona_id=memory.scope.render("persona_id", values),
        agent_id=memory.scope.render("agent_id", values),
    )
    return scope, memory.scope.render("session_id", values)


def tags_from(attributes: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: v for k in _TAG_KEYS if isinstance(v := (attributes or {}).get(k), str) and v}


def as_of_from(attributes: Mapping[str, Any] | None) -> datetime | None:
    """The request's point on the user's timeline, when the caller says (a replayed
    benchmark does, through the ``as_of`` request attribute); None = now."""
    value = (attributes or {}).get("as_of")
    if isinstance(value, datetime):
        return value if value.tzinfo else None
    parsed = _parse_ts(value)
    return parsed if parsed is not None and parsed.tzinfo is not None else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text") or ""))
            elif isinstance(block, Mapping) and block.get("type") in ("image_url", "image"):
                parts.append("[image]")
        return "\n".join(p for p in parts if p)
    return "" if content is None else str(content)


def _parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def turn_messages(
    messages: Sequence[Mapping[str, Any]], turn_id: str, *, include_tools: bool = False
) -> list[Mapping[str, Any]]:
    """The messages this turn added to the session."""
    started = seams.turn_started_at(turn_id)
    picked: list[Mapping[str, Any]] = []
    if started is not None:
        for message in reversed(messages):
            ts = _parse_ts(message.get("timestamp"))
            if ts is None or ts.tzinfo is not None or ts < started:
                break
            picked.append(message)
        picked.reverse()
        # the turn starts at its user message: what comes before it in the window is
        # another turn's (nanobot's restore of an interrupted turn's checkpoint stamps
        # that turn's assistant message and tool results with the time it restores them)
        if picked:
            first = next((i for i, m in enumerate(picked) if m.get("role") == "user"
                          and not seams.is_internal_message(m)), None)
            if first is None:
                return []  # nothing this turn's person said is in its window
            picked = picked[first:]
    if not picked:  # unknown turn-id shape: walk back to the turn's user message
        for message in reversed(messages):
            picked.append(message)
            if (message.get("role") == "user" and not seams.is_internal_message(message)
                    and not seams.is_session_message(message)):
                break
        picked.reverse()
    # another session's message that came in mid-turn (nanobot injects it into the
    # running turn): the turn's record ends there, what follows answers someone else
    cut = next((i for i, m in enumerate(picked) if i and seams.is_session_message(m)), None)
    if cut is not None:
        picked = picked[:cut]
    return [m for m in picked if is_recorded(m, include_tools=include_tools)
            and not seams.is_internal_message(m) and not seams.is_synthetic_message(m)]


def turn_event_id(session_key: str, turn_id: str) -> str:
    """The event id of a live turn: the user half written at arrival and the whole turn
    written after the reply share it, so a turn is one outbox row."""
    digest = hashlib.sha256(f"{session_key}\x00{turn_id}".encode()).hexdigest()[:32]
    return f"nb-{digest}"


def build_event(
    *,
    memory: MemoryConfig,
    messages: Sequence[Mapping[str, Any]],
    turn_id: str,
    channel: str,
    chat_id: str,
    sender_id: str | None,
    session_key: str,
    attributes: Mapping[str, Any] | None = None,
    include_tools: bool = False,
) -> MemoryEvent | None:
    """The turn as a MemoryEvent, or None when it holds no user speech (commands, etc.)."""
    return event_from_messages(
        memory=memory, chosen=turn_messages(messages, turn_id, include_tools=include_tools),
        event_id=turn_event_id(session_key, turn_id), turn_id=turn_id, channel=channel,
        chat_id=chat_id, sender_id=sender_id, session_key=session_key, attributes=attributes)


def event_from_messages(
    *,
    memory: MemoryConfig,
    chosen: Sequence[Mapping[str, Any]],
    event_id: str,
    turn_id: str,
    channel: str,
    chat_id: str,
    sender_id: str | None,
    session_key: str,
    attributes: Mapping[str, Any] | None = None,
) -> MemoryEvent | None:
    """One turn's messages (already chosen) as a MemoryEvent with the time of its first
    message; None when no user speech is in them. The live recorder and the backfill of
    nanobot's session files both build events here."""
    out: list[Message] = []
    first_ts: datetime | None = None
    tools_used: list[str] = []
    for raw in chosen:
        message = seams.public_message(raw)
        role = message.get("role")
        for call in message.get("tool_calls") or []:
            name = (call.get("function") or {}).get("name") if isinstance(call, Mapping) else None
            if name:
                tools_used.append(str(name))
        text = _text(message.get("content")).strip()
        if not text:
            continue
        if role == "tool":
            out.append(Message(role="tool", content=text,
                               tool_call_id=message.get("tool_call_id") or None,
                               name=message.get("name") or None))
        else:
            out.append(Message(role=role, content=text))  # type: ignore[arg-type]
        if first_ts is None:
            first_ts = _parse_ts(message.get("timestamp"))
    if not any(m.role == "user" for m in out):
        return None
    scope, session_id = chat_scope(memory, channel=channel, chat_id=chat_id,
                                   sender_id=sender_id, session_key=session_key,
                                   attributes=attributes)
    when = (first_ts.astimezone() if first_ts and first_ts.tzinfo is None else first_ts) \
        or datetime.now(UTC)
    tags = tags_from(attributes)
    return MemoryEvent(
        event_id=event_id,
        run_id=scope.run_id,
        user_id=scope.persona_id,
        agent_id=scope.agent_id or "nanobot",
        session_id=session_id,
        turn_id=turn_id,
        timestamp=when.astimezone(UTC),
        messages=out,
        metadata={
            "source": "nanobot",
            "channel": channel,
            "chat_id": chat_id,
            "sender_id": sender_id,
            "session_key": session_key,
            **({"tools_used": sorted(set(tools_used))} if tools_used else {}),
        },
        **tags,
    )
