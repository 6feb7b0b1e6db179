"""Honcho's context as items that fit a budget whole.

Honcho does not cut the peer representation to ``tokens`` (docs/honcho.md): at a small
budget it crowded out everything else and was cut mid-line. So the adapter asks Honcho
for only as many conclusions as the budget's share can show, all of them the ones most
relevant to the query (``search_top_k`` = ``max_conclusions``: Honcho then fills every
slot by semantic search), and splits the representation Honcho wrote into one item per
observation, so the formatter keeps or drops observations whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from nanobot_memory_adapters.contract import ContextBudget, RetrievedItem
from nanobot_memory_adapters.formatting import RenderedContext, SectionPacker, render_context

# Tokens an observation takes in the section: its short label (time only; no score or
# id, Honcho's representation has neither) and its text (Honcho's conclusions are one
# sentence: ~20 tokens).
OBSERVATION_TOKENS = 6 + 20
# The share of a session's budget the representation may take; messages and the summary
# get the rest (Honcho fits them to ``tokens`` after the representation).
SESSION_REPRESENTATION_SHARE = 0.4

_HEADING = re.compile(r"^#{1,6}\s*(?P<title>.+?)\s*$")
_OBSERVATION = re.compile(
    r"^\[(?P<at>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?)\]\s*(?P<text>.*)$")

GROUP_TITLES = {
    "peer_card": "## Honcho peer card",
    "summary": "## Session summary",
    "messages": "## Recent session messages",
}


def group_title(group: str, members: Sequence[RetrievedItem]) -> str:
    if group.startswith("observations:"):
        return f"## Honcho's {group.split(':', 1)[1].lower()} (derived)"
    return GROUP_TITLES.get(group, f"## {group}")


def max_conclusions(budget: ContextBudget, *, in_session: bool) -> int:
    """How many conclusions the budget can show (Honcho's limit is 1..100)."""
    share = budget.max_tokens * (SESSION_REPRESENTATION_SHARE if in_session else 1.0)
    if budget.max_items is not None:
        return max(1, min(100, budget.max_items))
    return max(1, min(100, int(share) // OBSERVATION_TOKENS))


def observation_items(representation: str | None, *, observer: str, observed: str
                      ) -> list[RetrievedItem]:
    """One item per observation of Honcho's markdown (``## Explicit Observations`` then
    ``[YYYY-MM-DD HH:MM:SS] text`` lines; indented lines such as a deduction's premises
    belong to the observation above). Text that does not parse that way is kept as one
    item per line, so nothing Honcho wrote is lost and nothing is cut mid-line."""
    items: list[RetrievedItem] = []
    level = "observations"
    meta = {"observer": observer, "observed": observed}
    for raw in (representation or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        heading = _HEADING.match(line)
        if heading:
            level = heading.group("title")
            continue
        obs = _OBSERVATION.match(line)
        if obs is None and items and raw[:1].isspace():
            items[-1] = items[-1].model_copy(update={"text": items[-1].text + "\n" + line})
            continue
        at = (datetime.fromisoformat(obs.group("at").replace(" ", "T")).replace(tzinfo=UTC)
              if obs else None)
        items.append(RetrievedItem(
            text=obs.group("text") if obs else line, native_type="observation",
            group=f"observations:{level}", event_at=at,
            metadata={**meta, "level": level}, raw={"line": raw},
        ))
    return items


def render(backend: str, key: str, items: list[RetrievedItem], budget: ContextBudget
           ) -> RenderedContext:
    """Observations, card and summary first (each whole or not at all), then the NEWEST
    messages that still fit, shown oldest first."""
    packer = SectionPacker(backend=backend, scope=key, budget=budget, items=items,
                           group_title=group_title)
    for item in items:
        if item.group != "messages":
            packer.offer(item)
    for item in reversed([i for i in items if i.group == "messages"]):
        if not packer.offer(item):
            break
    return render_context(backend=backend, scope=key, items=items, budget=budget,
                          group_title=group_title, packer=packer)

