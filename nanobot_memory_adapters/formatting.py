"""The one ``<memory-context>`` section every provider renders into.

Budget enforcement lives here (one shared tokenizer), but only as the last guard: the
budget is also passed into each backend's native retrieval. Memory text is data, so it
is XML-escaped and can neither close the section nor open a forged one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from nanobot_memory_adapters.contract import ContextBudget, RetrievedItem
from nanobot_memory_adapters.tokens import count_tokens, count_tokens_cached, truncate_to_tokens

SECTION_TAG = "memory-context"
# A partially fitting item is truncated only if at least this many tokens remain for it.
_MIN_TRUNCATED_ITEM_TOKENS = 12


def escape_text(text: str) -> str:
    """Escape memory text so no tag (ours or a forged one) survives."""
    return escape(text, quote=False)


# Controls, zero-width and bidi format characters, line/paragraph separators: none may
# reach a label, where it could start a forged line or hide text (ZWNJ/ZWJ are kept,
# some scripts need them inside names).
_LABEL_NOISE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def one_line(value: str) -> str:
    """A label part, whatever a backend returned: one line, single spaces, no controls."""
    return " ".join(_LABEL_NOISE.sub(" ", value).split())


def _attr(value: str) -> str:
    return escape(one_line(value), quote=True)


def _when(value: datetime) -> str:
    """Minute resolution; the zone only when it is not UTC (a naive time shows none)."""
    text = value.strftime("%Y-%m-%d %H:%M")
    offset = value.utcoffset()
    if offset is None or not offset:
        return text
    zone = value.strftime("%z")
    return f"{text}{zone[:3]}:{zone[3:5]}"


def _day(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value else ""


def short_id(native_id: str) -> str:
    """Six hex characters standing for a native id in the prompt (unique within a section
    but for a 1-in-16-million chance per pair); the full id stays in the item and trace."""
    return hashlib.blake2s(native_id.encode("utf-8"), digest_size=3).hexdigest()


def _label_parts(item: RetrievedItem) -> tuple[list[str], list[str]]:
    """The compact label, split after the relevance: (relevance, everything else).

    One grammar for every provider, written for the model that reads it, space-separated
    in a fixed order: relevance (2 decimals), when it happened (minute resolution), the
    validity of a temporal fact (``valid=from..to``, ``expired=``), who said it, and a
    short id. What only a debugger needs (native types, full ids, storage details) stays
    in the trace. The relevance is the only part that changes between retrievals."""
    head: list[str] = []
    tail: list[str] = []
    if item.score is not None:
        head.append(f"{item.score:.2f}")
    # One time for when it happened: the event's own time, else when the backend stored
    # it (marked: a replayed history is stored long after it happened).
    if item.event_at:
        tail.append(_when(item.event_at))
    elif item.created_at:
        tail.append(f"stored={_day(item.created_at)}")
    if item.valid_at or item.invalid_at:
        tail.append(f"valid={_day(item.valid_at)}..{_day(item.invalid_at)}")
    if item.expired_at:
        tail.append(f"expired={_day(item.expired_at)}")
    if item.source:
        who = one_line(item.source)
        if who:
            tail.append(who)
    if item.native_id:
        tail.append("#" + short_id(item.native_id))
    return head, tail


# An item label that says the fact no longer holds: validity with an end, or an expiry
# (see ``_label_parts``). Used by metrics that must tell a superseded fact shown as
# history from one shown as current.
_ENDED = re.compile(r"\bvalid=[^\s\]]*\.\.\d|\bexpired=")


def ended_validity(line: str) -> bool:
    """Whether an item line's label marks its fact as ended (invalidated or expired)."""
    return bool(_ENDED.search(line))


def _body(item: RetrievedItem) -> str:
    lines = [" ".join(part.split()) for part in item.text.strip().splitlines()]
    return "\n  ".join(escape_text(part) for part in lines if part)


def item_line_parts(item: RetrievedItem) -> tuple[str, str]:
    """``item_line`` as ``(head, tail)`` with ``head + tail == item_line(item)``.

    ``head`` is ``"- [0.81"`` (empty without a relevance) and ends with its last digit;
    ``tail`` starts with ``" "`` or ``"]"``. cl100k's pre-tokenizer never joins a digit
    to a following space or bracket, so ``tokens(head) + tokens(tail) ==
    tokens(head + tail)``: the tail (time, who, id, text) is the same each time an item
    comes back, so its count can be cached while the relevance is counted afresh. The
    property test in tests/test_formatting.py checks it."""
    head, tail = _label_parts(item)
    body = _body(item)
    if not head:
        label = escape_text("[" + " ".join(tail) + "]") if tail else ""
        return "", f"- {label} {body}" if label else f"- {body}"
    rest = "".join(" " + part for part in tail) + "]"
    return "- " + escape_text("[" + " ".join(head)), escape_text(rest) + " " + body


def item_line(item: RetrievedItem) -> str:
    """One ``- [labels] text`` entry; continuation lines are indented so stored text can
    never pass for a group heading or another item."""
    head, tail = item_line_parts(item)
    return head + tail


def item_tokens(item: RetrievedItem) -> int:
    """Tokens ``item_line(item)`` takes in a section, its newline included: exactly what
    ``render_context`` charges for it, so callers that pack items themselves (newest
    first, say) agree with it. The stable part's count is remembered across calls."""
    return _line_with_tokens(item)[1]


def _line_with_tokens(item: RetrievedItem) -> tuple[str, int]:
    lead, rest = item_line_parts(item)  # the score apart from the stable rest
    return lead + rest, count_tokens_cached(lead) + count_tokens_cached(rest + "\n")


def frame_tokens(backend: str, scope: str) -> int:
    """Tokens the section's opening and closing tags take (``"\\n"`` then ``"<"`` is a
    pre-tokenizer boundary, so the two tags count apart; both recur on every call)."""
    return count_tokens_cached(_head(backend, scope) + "\n") + count_tokens_cached(
        f"</{SECTION_TAG}>"
    )


def _head(backend: str, scope: str) -> str:
    return f'<{SECTION_TAG} backend="{_attr(backend)}" scope="{_attr(scope)}">'


@dataclass(frozen=True)
class RenderedContext:
    text: str
    token_count: int
    included: int
    dropped: int
    shortfall_tokens: int | None
    # The items that appear whole in ``text`` (not one cut by the budget), in order.
    shown: tuple[RetrievedItem, ...] = ()


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
    frame = frame_tokens(backend, scope)
    if not items or frame > limit:
        return RenderedContext("", 0, 0, len(items), _shortfall(budget, 0))

    groups: dict[str | None, list[RetrievedItem]] = {}
    for item in items:
        groups.setdefault(item.group, []).append(item)
    titled = len(groups) > 1 or next(iter(groups)) is not None
    title_of = group_title or _default_group_title

    def entries() -> Iterator[tuple[str, int, RetrievedItem | None]]:
        """(line, tokens of ``line + "\\n"``, its item or None for a group title), built only
        as far as they are read.

        Each line is counted once with its newline: cl100k pre-tokenization never merges
        across a newline that is followed by a non-space character, so the section's
        tokens are the sum of its pieces (checked against a full count by the property
        test in tests/test_formatting.py, and re-counted below when a line could break it).
        """
        for group, members in groups.items():
            if titled:
                # a provider's own title too is one heading line, never a forged item
                title = "## " + one_line(title_of(group or "ungrouped", members)).removeprefix(
                    "## ").removeprefix("##")
                yield title, count_tokens(title + "\n"), None
            for item in members:
                if line is item_line:
                    yield (*_line_with_tokens(item), item)
                else:
                    text = line(item)
                    yield text, count_tokens(text + "\n"), item

    lines: list[str] = [head]
    # What each line after the head shows: the whole item, None (a title) or a cut item.
    owners: list[RetrievedItem | None] = []
    whole: list[bool] = []
    used = frame
    additive = True
    for text, cost, item in entries():
        if used + cost <= limit:
            lines.append(text)
            owners.append(item)
            whole.append(item is not None)
            used += cost
            additive = additive and text[:1] != "" and not text[:1].isspace()
            continue
        room = limit - used - 1
        if item is not None and room >= _MIN_TRUNCATED_ITEM_TOKENS:
            cut = _keep_line_shape(truncate_to_tokens(text, room))
            lines.append(cut)
            owners.append(item)
            whole.append(False)
            used += count_tokens(cut + "\n")
            additive = additive and cut[:1] != "" and not cut[:1].isspace()
        break
    if owners and owners[-1] is None:
        used -= count_tokens(lines.pop() + "\n")  # a group title with no item under it
        owners.pop()
        whole.pop()
    lines.append(tail)
    text = "\n".join(lines)
    tokens = used if additive else count_tokens(text)
    while tokens > limit and len(lines) > 2:
        lines.pop(-2)
        owners.pop()
        whole.pop()
        text = "\n".join(lines)
        tokens = count_tokens(text)
    included = sum(1 for o in owners if o is not None)
    if included == 0:
        return RenderedContext("", 0, 0, len(items), _shortfall(budget, 0))
    shown = tuple(o for o, w in zip(owners, whole, strict=True) if o is not None and w)
    return RenderedContext(
        text, tokens, included, len(items) - included, _shortfall(budget, tokens), shown
    )


def _keep_line_shape(cut: str) -> str:
    """A cut can end inside a continuation's indent ("...\\n …"); then the marker goes to
    the end of the previous line, so every line is still an item line or indented."""
    head, newline, last = cut.rpartition("\n")
    if newline and not last.startswith("  "):
        return head.rstrip() + " …"
    return cut


def _default_group_title(group: str, members: Sequence[RetrievedItem]) -> str:
    types = sorted({one_line(m.native_type) for m in members if m.native_type})
    suffix = f" ({', '.join(types)})" if types else ""
    return f"## {escape_text(one_line(group))}{escape_text(suffix)}"


def _shortfall(budget: ContextBudget, tokens: int) -> int | None:
    if budget.min_tokens is None or tokens >= budget.min_tokens:
        return None
    return budget.min_tokens - tokens


# -- one section from several (a question asked of more than one scope) -----------------


def _heading(label: str) -> str:
    return f"## {escape_text(one_line(label))}"


def split_budget(
    budget: ContextBudget, backend: str, scope: str, parts: Sequence[tuple[str, str]]
) -> list[ContextBudget]:
    """Equal shares of ``budget`` for sections rendered apart and then composed by
    ``compose_sections``: ``parts`` are (heading label, inner section's scope key). Each
    share pays its own frame back (it is stripped) and the composition's frame and
    headings come off the top, so the composed section fits ``budget`` exactly."""
    overhead = frame_tokens(backend, scope) + sum(
        count_tokens(_heading(label) + "\n") for label, _ in parts
    )
    share = (budget.max_tokens - overhead) // max(1, len(parts))
    out = []
    for _, inner in parts:
        tokens = max(1, share + frame_tokens(backend, inner))
        out.append(ContextBudget(
            max_tokens=tokens,
            max_items=budget.max_items,
            min_tokens=None if budget.min_tokens is None
            else min(tokens, budget.min_tokens // max(1, len(parts))),
        ))
    return out


def compose_sections(
    backend: str, scope: str, parts: Sequence[tuple[str, str]], max_tokens: int
) -> tuple[str, bool]:
    """One ``<memory-context>`` holding each rendered section's lines under a heading
    (``parts``: heading label, formatted section), and whether every line made it. Empty
    sections are left out; the result never exceeds ``max_tokens`` (trailing lines go
    first if it would; with shares from ``split_budget`` it never has to)."""
    lines = [_head(backend, scope)]
    for label, section in parts:
        inner = section.split("\n")[1:-1] if section else []
        if inner:
            lines.append(_heading(label))
            lines.extend(inner)
    if len(lines) == 1:
        return "", True
    lines.append(f"</{SECTION_TAG}>")
    text = "\n".join(lines)
    complete = True
    while count_tokens(text) > max_tokens and len(lines) > 2:
        lines.pop(-2)
        complete = False
        text = "\n".join(lines)
    return (text, complete) if len(lines) > 2 else ("", False)
