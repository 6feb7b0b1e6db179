"""Scope -> Graphiti group id (injective); an event's episode name and source description,
and the event id an episode was recorded from."""

from __future__ import annotations

import re

from nanobot_memory_adapters.contract import (
    MemoryEvent,
    MemoryScope,
)

_GROUP_SAFE = re.compile(r"[A-Za-z0-9-]")
EVENT_IN_SOURCE = re.compile(r"^nanobot event=(.+?); session=")
KUZU_FTS_SPECIAL = re.compile(r"[?*\\]")


_GROUP_SAFE_FULLTEXT = re.compile(r"[A-Za-z0-9]")


def _encode_group_part(value: str, safe: re.Pattern[str] = _GROUP_SAFE) -> str:
    """Graphiti group ids allow [A-Za-z0-9_-]. Keep letters, digits and '-', escape the
    rest (including '_') as ``_xx`` hex bytes, so the encoding is injective and ``__``
    can never occur inside a part.

    Deliberately not shared with ``honcho.native_name``: the two agree on ASCII but not
    beyond (UTF-8 bytes here, code points there), and changing either would move existing
    users' data to new group ids."""
    out = []
    for ch in value:
        if safe.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8"))
    return "".join(out)


def group_id_for(scope: MemoryScope, *, dash: bool = True) -> str:
    """``<run>__<persona>``: the run is the prefix, the persona the suffix.

    ``dash=False`` (FalkorDB) escapes '-' as well (``_2d``): graphiti-core 0.31.1's
    FalkorDB full-text query filters on the group id as a RediSearch phrase, and a group
    id with a '-' (a separator there) never matches, so BM25 found nothing for any run id
    with a dash (vector search alone still did)."""
    parts = [scope.run_id, scope.persona_id]
    safe = _GROUP_SAFE if dash else _GROUP_SAFE_FULLTEXT
    group = "__".join(_encode_group_part(p, safe) for p in parts)
    if not group or not re.fullmatch(r"[A-Za-z0-9_-]+", group):  # pragma: no cover
        raise ValueError(f"cannot build a Graphiti group_id from scope {scope.key!r}")
    return group




def episode_name(event: MemoryEvent) -> str:
    """``<session>:<turn>``: how the adapter finds an event's episode again."""
    return f"{event.session_id}:{event.turn_id}"


def source_description(event: MemoryEvent) -> str:
    parts = [f"nanobot event={event.event_id}", f"session={event.session_id}"]
    parts += [f"{k}={v}" for k, v in event.tags().items()]
    return "; ".join(parts)


def event_id_of(description: str | None) -> str | None:
    """The event id ``source_description`` stored with an episode (None if foreign)."""
    match = EVENT_IN_SOURCE.match(description or "")
    return match.group(1) if match else None
