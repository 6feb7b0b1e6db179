"""The one ``<memory-context>`` section every provider renders into.

Budget enforcement lives here (one shared tokenizer), but only as the last guard: the
budget is also passed into each backend's native retrieval. Memory text is data, so it
is XML-escaped and can neither close the section nor open a forged one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from nanobot_memory_adapters.contract import ContextBudget, RetrievedItem
from nanobot_memory_adapters.tokens import count_tokens, truncate_to_tokens

SECTION_TAG = "memory-context"
# A partially fitting item is truncated only if at least this many tokens remain for it.
_MIN_TRUNCATED_ITEM_TOKENS = 12


def escape_text(text: str) -> str:
    """Escape memory text so no tag (ours or a forged one) survives."""
    return escape(text, quote=False)


def _attr(value: str) -> str:
    return escape(value, quote=True)


def _time(value: datetime | None) -> str | None:
    return value.isoformat(timespec="minutes") if value else None


def item_label(item: RetrievedItem) -> str:
    """Source labels kept next to the text: id, type, score and the times the backend gave."""
    parts: list[str] = []
    if item.native_type:
        parts.append(f"type={item.native_type}")
    if item.score is not None:
        parts.append(f"score={item.score:.3f}")
    if item.event_at:
        parts.append(f"at={_time(item.event_at)}")
    if item.created_at and item.created_at != item.event_at:
        parts.append(f"created={_time(item.created_at)}")
    if item.updated_at and item.updated_at != item.created_at:
        parts.append(f"updated={_time(item.updated_at)}")
    if item.valid_at or item.invalid_at:
        parts.append(f"valid={_time(item.valid_at) or '?'}..{_time(item.invalid_at) or 'now'}")
    if item.expired_at:
        parts.append(f"expired={_time(item.expired_at)}")
    if item.source:
        parts.append(f"source={item.source}")
    if item.native_id:
        parts.append(f"id={item.native_id}")
    return "[" + "; ".join(parts) + "]" if parts else ""


def item_line(item: RetrievedItem) -> str:
    """One ``- [labels] text`` entry; continuation lines are indented so stored text can
    never pass for a group heading or another item."""
    label = item_label(item)
    lines = [" ".join(part.split()) for part in item.text.strip().splitlines()]
    text = "\n  ".join(escape_text(part) for part in lines if part)
    return f"- {escape_text(label)} {text}" if label else f"- {text}"


def frame_tokens(backend: str, scope: str) -> int:
    """Tokens the section's opening and closing tags take."""
    return count_tokens(_head(backend, scope) + "\n" + f"</{SECTION_TAG}>")


def _head(backend: str, scope: str) -> str:
    return f'<{SECTION_TAG} backend="{_attr(backend)}" scope="{_attr(scope)}">'


@dataclass(frozen=True)
class RenderedContext:
    text: str
    token_count: int
    included: int
    dropped: int
    shortfall_tokens: int | None


def render_context(
    *,
    backend: str,
    scope: str,
    items: Sequence[RetrievedItem],
    budget: ContextBudget,
    line: Callable[[RetrievedItem], str] = item_line,
    group_title: Callable[[str, Sequence[RetrievedItem]], str] | None = None,
) -> RenderedContext:
    """Pack ``items`` (already in the backend's order) into one section within the budget.

    Items with a ``group`` are kept under their native group heading, in the order the
    groups first appear. Returns an empty text when there is nothing to show or when not
    even the section's frame fits the budget.
    """
    head = _head(backend, scope)
    tail = f"</{SECTION_TAG}>"
    limit = budget.max_tokens
    if budget.max_items is not None:
        items = list(items)[: budget.max_items]
    if not items or count_tokens(head + "\n" + tail) > limit:
        return RenderedContext("", 0, 0, len(items), _shortfall(budget, 0))

    groups: dict[str | None, list[RetrievedItem]] = {}
    for item in items:
        groups.setdefault(item.group, []).append(item)
    titled = len(groups) > 1 or next(iter(groups)) is not None
    title_of = group_title or _default_group_title

    # Every candidate line (group titles and items). Each is counted once as ``line + "\n"``:
    # cl100k pre-tokenization never merges across a newline that is followed by a
    # non-space character, so the section's tokens are the sum of its pieces (the
    # property test in tests/test_formatting.py checks this against a full count).
    entries: list[tuple[str, bool]] = []  # (line, is_item)
    for group, members in groups.items():
        if titled:
            entries.append((title_of(group or "ungrouped", members), False))
        entries.extend((line(item), True) for item in members)
    additive = all(text[:1] and not text[:1].isspace() for text, _ in entries)

    lines: list[str] = [head]
    used = count_tokens(head + "\n") + count_tokens(tail)
    included = 0
    last_is_title = False
    for text, is_item in entries:
        cost = count_tokens(text + "\n")
        if used + cost <= limit:
            lines.append(text)
            used += cost
            included += is_item
            last_is_title = not is_item
            continue
        room = limit - used - 1
        if is_item and room >= _MIN_TRUNCATED_ITEM_TOKENS:
            cut = truncate_to_tokens(text, room)
            lines.append(cut)
            used += count_tokens(cut + "\n")
            included += 1
            last_is_title = False
        break
    if last_is_title:
        used -= count_tokens(lines.pop() + "\n")  # a group title with no item under it
    lines.append(tail)
    text = "\n".join(lines)
    tokens = used if additive else count_tokens(text)
    while tokens > limit and len(lines) > 2:
        lines.pop(-2)
        included = max(0, included - 1)
        text = "\n".join(lines)
        tokens = count_tokens(text)
    if included == 0:
        return RenderedContext("", 0, 0, len(items), _shortfall(budget, 0))
    return RenderedContext(
        text, tokens, included, len(items) - included, _shortfall(budget, tokens)
    )


def _default_group_title(group: str, members: Sequence[RetrievedItem]) -> str:
    types = sorted({m.native_type for m in members if m.native_type})
    suffix = f" ({', '.join(types)})" if types else ""
    return f"## {escape_text(group)}{escape_text(suffix)}"


def _shortfall(budget: ContextBudget, tokens: int) -> int | None:
    if budget.min_tokens is None or tokens >= budget.min_tokens:
        return None
    return budget.min_tokens - tokens
