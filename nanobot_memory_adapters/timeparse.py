"""ISO 8601 times from native payloads and from callers, parsed by one policy.

Naive times (no UTC offset) never get a timezone invented for them:

- ``parse_time`` reads a time a backend returned (``created_at`` of a mem0, Honcho or MemOS
  record). Missing or unparsable values become ``None``; a naive value stays naive,
  exactly as the backend wrote it, so a trace never claims an offset the backend did not.
- ``require_time`` reads a time a caller hands in (Graphiti's ``as_of``, ``valid_at``...).
  Anything that is not an offset-aware ISO 8601 time is refused with a ``ValueError``
  naming the field, because guessing the zone would move the instant silently.

A trailing ``Z`` is read as UTC in both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

__all__ = ["parse_time", "require_time"]


def _from_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def parse_time(value: Any) -> datetime | None:
    """A native timestamp: a datetime as given, an ISO 8601 string parsed, else ``None``.

    Naive values stay naive (see the module docstring)."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return _from_iso(value)
    except ValueError:
        return None


def require_time(value: Any, name: str) -> datetime:
    """A caller-supplied, offset-aware time; ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = _from_iso(value)
        except ValueError:
            raise ValueError(f"{name} {value!r} is not an ISO 8601 time") from None
    else:
        raise ValueError(f"{name} must be a datetime or an ISO 8601 string")
    if parsed.tzinfo is None:
        raise ValueError(f"{name} {value!r} has no timezone; add one (e.g. +00:00)")
    return parsed
