"""The one ``<memory-context>`` section every provider renders into.

Budget enforcement lives here (one shared tokenizer), but only as the last guard: the
budget is also passed into each backend's native retrieval. Memory text is data, so it
is XML-escaped and can neither close the section nor open a forged one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import NamedTuple

from nanobot_memory_adapters.contract import ContextBudget, RetrievedItem
from nanobot_memory_adapters.tokens import count_tokens, count_tokens_cached

SECTION_TAG = "memory-context"


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


def _clock(value: datetime) -> str:
    """Minute resolution; the zone only when it is not UTC (a naive time shows none)."""
    text = value.strftime("%H:%M")
    offset = value.utcoffset()
    if offset is None or not offset:
        return text
    zone = value.strftime("%z")
    return f"{text}{zone[:3]}:{zone[3:5]}"


def _day(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value else ""


def day_heading(day: str, clock: str | None = None) -> str:
    """``### DAY TIME``: the time is that of the first item packed under it; items of the
    same minute leave theirs out (a LoCoMo session, a burst of chat turns), others keep
    their own."""
    return f"### {day} {clock}" if clock else f"### {day}"


def _label_parts(item: RetrievedItem, clock: bool = True) -> tuple[str, str]:
    """The label as (bracketed part, who said it).

    Written for the model that reads it, and paid for once where it can be: the day is
    the heading the item sits under, and the time of day only shows when it differs from
    the heading's. The bracket holds what a reader needs about *when*, in a fixed order —
    the time it happened (minute resolution), the storage day of an item without an event
    time (``stored=``), the validity of a temporal fact (``valid=from..to``, ``expired=``)
    — and is left out when there is none. Who said it leads the text as ``Name:``, as in a
    transcript. Relevance, ids, native types and storage details are for a debugger: they
    stay in the item and the trace (issue 31: tokens go to memories, not labels)."""
    # keyed by each time's text: equal instants in other zones label differently (the
    # storage time shows only for an item without an event time)
    return _stable_label(*(t.isoformat() if t else None for t in (
        item.event_at, None if item.event_at else item.created_at, item.valid_at,
        item.invalid_at, item.expired_at)), item.source, clock)


@functools.lru_cache(maxsize=16384)
def _stable_label(event_iso: str | None, created_iso: str | None, valid_iso: str | None,
                  invalid_iso: str | None, expired_iso: str | None, source: str | None,
                  clock: bool) -> tuple[str, str]:
    """The label: the same each time an item comes back, so it is built once (a running
    agent sees the same memories turn after turn)."""
    event_at, created_at, valid_at, invalid_at, expired_at = (
        datetime.fromisoformat(t) if t else None
        for t in (event_iso, created_iso, valid_iso, invalid_iso, expired_iso))
    when: list[str] = []
    # One time for when it happened: the event's own time, else when the backend stored
    # it (marked: a replayed history is stored long after it happened).
    if event_at:
        if clock:
            when.append(_clock(event_at))
    elif created_at:
        when.append(f"stored={_day(created_at)}")
    if valid_at or invalid_at:
        when.append(f"valid={_day(valid_at)}..{_day(invalid_at)}")
    if expired_at:
        when.append(f"expired={_day(expired_at)}")
    bracket = escape_text("[" + " ".join(when) + "]") if when else ""
    # a name never opens with a bracket or a line marker, so it cannot pass for the label
    who = one_line(source).lstrip("[]-#* ") if source else ""
    return bracket, escape_text(who)


# An item label that says the fact no longer holds: validity with an end, or an expiry
# (see ``_label_parts``), inside the line's leading bracket (a line opens with ``[`` only
# for a label: text without a label or a speaker follows ``- ``). Used by metrics that must
# tell a superseded fact shown as history from one shown as current.
_ENDED = re.compile(r"^\[[^\]]*(?:\bvalid=[^\s\]]*\.\.\d|\bexpired=)")


def ended_validity(line: str) -> bool:
    """Whether an item line's label marks its fact as ended (invalidated or expired)."""
    return bool(_ENDED.search(line))


@functools.lru_cache(maxsize=16384)
def _body_of(text: str) -> str:
    lines = [" ".join(part.split()) for part in text.strip().splitlines()]
    return "\n  ".join(escape_text(part) for part in lines if part)


def item_line(item: RetrievedItem, clock: bool = True) -> str:
    """One ``[when] Who: text`` entry, as in a transcript (each part only when there is
    one). A line that would open with the stored text itself (no label, no speaker) opens
    with ``- `` instead, so stored text can never pass for a label, a heading or a
    speaker's line; continuation lines are indented for the same reason."""
    bracket, who = _label_parts(item, clock)
    parts: list[str] = []
    if bracket:
        parts.append(bracket)
    if who:
        parts.append(who + ":")
    body = _body_of(item.text)
    if not parts:
        return "- " + body
    if body:
        parts.append(body)
    return " ".join(parts)


def opens_item(line: str) -> bool:
    """Whether a line of a section's body opens an item: anything but a heading (``#``),
    an indented continuation, a blank or the section's own tags (the reader of the
    grammar ``item_line`` and ``_layout`` write)."""
    return bool(line) and not line.startswith(
        ("#", " ", f"<{SECTION_TAG}", f"</{SECTION_TAG}>"))


def frame_tokens(backend: str, scope: str) -> int:
    """Tokens the section's opening and closing tags take (``"\\n"`` then ``"<"`` is a
    pre-tokenizer boundary, so the two tags count apart; both recur on every call)."""
    return count_tokens_cached(_head(backend, scope) + "\n") + count_tokens_cached(
        f"</{SECTION_TAG}>"
    )


def _head(backend: str, scope: str) -> str:
    return f'<{SECTION_TAG} backend="{_attr(backend)}" scope="{_attr(scope)}">'


_FRAME = re.compile(rf"<{SECTION_TAG}(?: [^>\n]*)?>|</{SECTION_TAG}>")


def section_body(context: str) -> str:
    """The section without its frame (the tags, with their backend and scope attributes):
    what a metric of the memory's content reads, so a provider's own name never counts."""
    return _FRAME.sub("", context)


@dataclass(frozen=True)
class RenderedContext:
    text: str
    token_count: int
    included: int
    dropped: int
    shortfall_tokens: int | None
    # The items that appear whole in ``text`` (not one cut by the budget), in order.
    shown: tuple[RetrievedItem, ...] = ()
    # ``text``'s lines inside its frame: what a composition of several sections takes,
    # so nobody has to cut a rendered section back apart.
    lines: tuple[str, ...] = ()


class _Placed(NamedTuple):
    """How a chosen item's line was charged: whether it shows its own time of day (not
    when the day heading above it shows the same)."""

    item: RetrievedItem
    clock: bool


@functools.lru_cache(maxsize=65536)
def _day_and_clock(at: datetime, _offset: timedelta | None) -> tuple[str, str]:
    # keyed by the offset too: equal instants in other zones label differently
    return _day(at), _clock(at)


class SectionPacker:
    """Chooses whole items for one section within a budget, in the order they are offered.

    Each offer is charged exactly what the item adds to the section: its line, plus the
    group title and the day heading it is the first to need. An item that does
    not fit is left out whole (never cut mid-line) and later, smaller ones may still fit.
    ``render_context`` packs in the backend's order; a provider that fills a section in
    another order (newest first) offers its items itself and passes the packer on."""

    def __init__(self, *, backend: str, scope: str, budget: ContextBudget,
                 items: Sequence[RetrievedItem],
                 group_title: Callable[[str, Sequence[RetrievedItem]], str] | None = None
                 ) -> None:
        self.limit = budget.max_tokens
        self.max_items = budget.max_items
        self.used = frame_tokens(backend, scope)
        members: dict[str | None, list[RetrievedItem]] = {}
        for item in items:
            members.setdefault(item.group, []).append(item)
        self.titled = len(members) > 1 or (bool(members) and next(iter(members)) is not None)
        title_of = group_title or _default_group_title
        # a provider's own title too is one heading line, never a forged item
        self.titles = {
            group: "## " + one_line(title_of(group or "ungrouped", m)).removeprefix(
                "## ").removeprefix("##")
            for group, m in members.items()
        }
        self._titles_opened: set[str | None] = set()
        # (group, day) -> the time its heading shows (that of the first item under it)
        self.heading_clocks: dict[tuple[str | None, str], str | None] = {}
        self.chosen: list[RetrievedItem] = []
        # Entries keep their item: a caller that offers items it builds on the fly drops
        # those that do not fit, and CPython reuses a freed object's id for the next one —
        # without the reference a new item would read a dropped item's line. (A chosen
        # item stays alive in ``chosen``, so its id names it for the packer's life.)
        self._placed: dict[int, _Placed] = {}
        self._lines: dict[tuple[int, bool], tuple[RetrievedItem, str, int]] = {}
        self._days: dict[int, tuple[RetrievedItem, str | None, str | None]] = {}

    def _when(self, item: RetrievedItem) -> tuple[str | None, str | None]:
        """The item's day and time of day as its heading and label show them."""
        entry = self._days.get(id(item))
        if entry is None or entry[0] is not item:
            at = item.event_at
            day, clock = _day_and_clock(at, at.utcoffset()) if at else (None, None)
            entry = self._days[id(item)] = (item, day, clock)
        return entry[1], entry[2]

    def day(self, item: RetrievedItem) -> str | None:
        return self._when(item)[0]

    def _line(self, item: RetrievedItem, clock: bool) -> tuple[str, int]:
        key = (id(item), clock)
        entry = self._lines.get(key)
        if entry is None or entry[0] is not item:  # built once per render; layout reuses it
            line = item_line(item, clock)
            entry = self._lines[key] = (item, line, count_tokens_cached(line + "\n"))
        return entry[1], entry[2]

    def _plan(self, item: RetrievedItem
              ) -> tuple[_Placed, int, tuple[str | None, str] | None]:
        """How ``item`` would be placed now: its line's form, the tokens it adds (the
        headings it opens included), and the day heading it would open."""
        cost = 0
        if self.titled and item.group not in self._titles_opened:
            cost += count_tokens_cached(self.titles[item.group] + "\n")
        day, clock_text = self._when(item)
        clock = True
        opens = None
        if day is not None:
            key = (item.group, day)
            if key in self.heading_clocks:
                clock = clock_text != self.heading_clocks[key]
            else:  # this item opens the day: the heading shows its time
                opens = key
                cost += count_tokens_cached(day_heading(day, clock_text) + "\n")
                clock = False
        cost += self._line(item, clock)[1]
        return _Placed(item, clock), cost, opens

    def cost(self, item: RetrievedItem) -> int:
        """Tokens the section grows by if ``item`` is added now."""
        return self._plan(item)[1]

    def offer(self, item: RetrievedItem) -> bool:
        """Add ``item`` if it fits whole; False (and nothing changes) if it does not."""
        if self.max_items is not None and len(self.chosen) >= self.max_items:
            return False
        placed, cost, opens = self._plan(item)
        if self.used + cost > self.limit:
            return False
        self._titles_opened.add(item.group)
        if opens is not None:
            self.heading_clocks[opens] = self._when(item)[1]
        self._placed.setdefault(id(item), placed)
        self.used += cost
        self.chosen.append(item)
        return True

    def _placement(self, item: RetrievedItem) -> _Placed:
        return self._placed[id(item)]

    def placed_line(self, item: RetrievedItem) -> tuple[str, int]:
        """A chosen item's line, as it was charged (its time form included)."""
        return self._line(item, self._placement(item).clock)


def _layout(chosen: Sequence[RetrievedItem], packer: SectionPacker) -> list[tuple[str, int]]:
    """The section's inner lines with their tokens (newline included): native groups in
    the order they first appear, in each the undated items, then one heading per day
    (first-appearance order) over that day's items, each line as the packer charged it."""
    lines: list[tuple[str, int]] = []
    by_group: dict[str | None, list[RetrievedItem]] = {}
    for item in chosen:
        by_group.setdefault(item.group, []).append(item)
    titles = packer.titles
    for group, members in by_group.items():
        if packer.titled:
            lines.append((titles[group], count_tokens_cached(titles[group] + "\n")))
        by_day: dict[str | None, list[RetrievedItem]] = {}
        for item in members:
            by_day.setdefault(packer.day(item), []).append(item)
        for day in sorted(by_day, key=lambda d: d is not None):  # stable: undated first
            if day is not None:
                heading = day_heading(day, packer.heading_clocks.get((group, day)))
                lines.append((heading, count_tokens_cached(heading + "\n")))
            lines.extend(packer.placed_line(item) for item in by_day[day])
    return lines


def render_context(
    *,
    backend: str,
    scope: str,
    items: Sequence[RetrievedItem],
    budget: ContextBudget,
    group_title: Callable[[str, Sequence[RetrievedItem]], str] | None = None,
    packer: SectionPacker | None = None,
) -> RenderedContext:
    """Pack ``items`` (already in the backend's order) into one section within the budget.

    Items are shown whole or not at all (``SectionPacker``). Items with a ``group`` are
    kept under their native group heading, in the order the groups first appear; dated
    items under a heading for their day. ``packer``: one a provider filled itself (in
    its own order, over the same ``items``); its items are shown in ``items``' order.
    Returns an empty text when there is nothing to show or when not even the section's
    frame fits.
    """
    head = _head(backend, scope)
    tail = f"</{SECTION_TAG}>"
    if packer is None:
        packer = SectionPacker(backend=backend, scope=scope, budget=budget, items=items,
                               group_title=group_title)
        if packer.used <= budget.max_tokens:
            for item in items:
                packer.offer(item)
    if frame_tokens(backend, scope) > budget.max_tokens:
        return RenderedContext("", 0, 0, len(items), _shortfall(budget, 0))
    keep = {id(i) for i in packer.chosen}
    picked = [i for i in items if id(i) in keep]
    if not picked:
        return RenderedContext("", 0, 0, len(items), _shortfall(budget, 0))
    # No line starts with whitespace (cl100k's pre-tokenizer never joins a newline to
    # the text after it), so cl100k counts the section as the sum of its lines (the
    # property tests check it) and the packer's charges add up to it.
    frame = frame_tokens(backend, scope)
    while picked:
        lines = _layout(picked, packer)
        body = tuple(line for line, _ in lines)
        text = "\n".join([head, *body, tail])
        tokens = frame + sum(c for _, c in lines)
        if tokens <= budget.max_tokens:
            return RenderedContext(text, tokens, len(picked), len(items) - len(picked),
                                   _shortfall(budget, tokens), tuple(picked), body)
        picked = picked[:-1]  # a guard only: a caller's packer over other items
    return RenderedContext("", 0, 0, len(items), _shortfall(budget, 0))


def _default_group_title(group: str, members: Sequence[RetrievedItem]) -> str:
    """The native group's name (its native types are debugger detail: they stay in the
    trace)."""
    return f"## {escape_text(one_line(group))}"


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
    backend: str, scope: str, parts: Sequence[tuple[str, Sequence[str]]], max_tokens: int
) -> tuple[str, bool]:
    """One ``<memory-context>`` holding each section's lines under a heading (``parts``:
    heading label, the lines inside a rendered section's frame, as ``RenderedContext.lines``
    and ``RetrieveResult.section_lines`` give them), and whether every line made it.
    Empty sections are left out; the result never exceeds ``max_tokens`` (trailing lines
    go first if it would; with shares from ``split_budget`` it never has to)."""
    lines = [_head(backend, scope)]
    for label, inner in parts:
        if isinstance(inner, str):  # a rendered section, not its lines: one per character
            raise TypeError("compose_sections takes each section's lines "
                            "(RenderedContext.lines), not its rendered text")
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
