"""What acting on a value looks like, per attribute of the phrase bank (written for this
project), and how a request arrives in each context.

- ``ACTS``: the surface forms of a reply that acts on a value ("a decaf flat white" acts
  on decaf). The judge-free behaviour score classifies a reply by them: current value,
  another value (superseded, other context, the usual choice an implied value rules
  out), both, or none. Exact for the generator's own data (it knows every value's words);
  a reply that paraphrases beyond them reads as ``none`` (docs/preferences.md, limits).
- ``DEFAULT``: the value an assistant with no knowledge of the user picks (the PET first
  value, the work value of a CS pair, the usual choice an IQI value rules out). The ideal
  reader acts on it when the memory says nothing; its rate is the no-memory baseline.
- ``CONTEXT_OPENINGS``: CS requests, distinct and natural per context (the agent can tell
  a message to the team from one to the family without any tag).
- ``CHANNELS``: where a request of a context arrives in a real deployment (nanobot's
  channel and chat), recorded in tests and accumulation sessions.
- ``FOLLOW_UP``: the recognition task's follow-up turn (a retrieval query: the generator's
  leak check reads it).
- ``memory_items``: the memory section split into its items (the one reader of that
  layout: the exposure scores and the ideal reader both use it).
"""

from __future__ import annotations

import functools
import html
import re

from nanobot_memory_adapters.formatting import SECTION_TAG, opens_item
from nanobot_memory_adapters.harness.preferences.bank import DomainSpec

ACTS: dict[str, dict[str, tuple[str, ...]]] = {
    "coffee_order": {
        "espresso": ("espresso", "ristretto"),
        "decaf": ("decaf", "decaffeinated", "caffeine-free"),
    },
    "exercise": {
        "running": ("a run", "running", "jog", "jogging", "5-mile"),
        "swimming": ("swim", "swimming", "laps", "pool", "lane"),
    },
    "flight_seat": {"window": ("window",), "aisle": ("aisle",)},
    "transport": {
        "car": ("drive", "driving", "car", "rental hatchback", "parking", "by road"),
        "train": ("train", "rail", "intercity", "fast service"),
    },
    "spice_level": {
        "hot": ("vindaloo", "phaal", "extra hot", "spicy", "chilli"),
        "mild": ("korma", "mild", "dal makhani", "gentle on the heat"),
    },
    "summary_style": {
        "bullets": ("bullet", "bullets", "bullet points", "three short points",
                    "one-line points", "tight list"),
        "story": ("whole story", "detailed message", "moment by moment", "chatty letter",
                  "all the little details", "long, chatty"),
    },
    "meeting_time": {
        "early": ("8:30", "first thing", "first slot of the day", "early morning"),
        "evening": ("evening", "7:30 pm", "after dinner", "8 pm"),
    },
    "message_language": {"english": ("english",), "spanish": ("spanish", "español")},
    "dessert": {
        "no_dairy": ("sorbet", "poached pears", "dairy-free", "vegan"),
        "dairy": ("cheesecake", "tiramisu", "crème brûlée", "creme brulee", "ice cream",
                  "vanilla cream"),
    },
    "travels_with_dog": {
        "pet_friendly": ("dogs welcome", "dog-friendly", "dog friendly", "pet-friendly",
                         "dogs stay free", "Fernbank Cottage", "Old Mill"),
        "no_pets": ("no pets", "no animals", "adults only", "Grand Lakeside",
                    "Harbour View"),
    },
    "sun_exposure": {
        "shade": ("shade", "shaded", "shady", "museum", "cooking class", "stone farmhouse"),
        "sunny": ("beach", "sun lounger", "sunbathing", "boat trip"),
    },
    "bedtime": {
        "early": ("6:00 pm", "6 pm", "early set", "matinee", "5 pm", "early show"),
        "late": ("11:30 pm", "late show", "midnight"),
    },
}

CONTEXT_OPENINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "summary_style": {
        "work": ("Can you write up how today's planning call went so I can post it in the "
                 "team channel?",
                 "Write up this week's project update for my manager, please."),
        "personal": ("Write up how our weekend at the lake went so I can send it to the "
                     "family chat.",
                     "Can you write up Grandma's birthday party for my cousins who missed "
                     "it?"),
    },
    "meeting_time": {
        "work": ("Can you find a slot for a project catch-up with Priya from the design team "
                 "next week?",
                 "Set up a budget review with Jonas from finance next Tuesday, would you?"),
        "personal": ("Find a time to catch up with my old school friend Priya next week?",
                     "Set up a time to see my cousin Jonas next Tuesday, would you?"),
    },
    "message_language": {
        "work": ("Draft a quick note to the client saying I can't make Sunday's site visit "
                 "after all.",
                 "Write a short message to my team saying the launch review moves to "
                 "Friday."),
        "personal": ("Draft a quick note to my aunt saying I can't make it to Sunday lunch "
                     "after all.",
                     "Write a short message to the family saying the barbecue moves to "
                     "Friday."),
    },
}

CHANNELS: dict[str | None, tuple[str, str]] = {
    "work": ("slack", "acme-workspace"),
    "personal": ("whatsapp", "family-chat"),
    None: ("telegram", "direct"),
}


def default_key(domain: DomainSpec) -> str:
    """The value an assistant that knows nothing of the user picks."""
    if domain.dimension == "PET":
        return domain.first
    if domain.dimension == "CS":
        return domain.by_context["work"]
    return domain.violating[0]


def domain_of(attribute: str | None) -> DomainSpec | None:
    from nanobot_memory_adapters.harness.preferences.bank import DOMAINS

    return next((d for d in DOMAINS if d.attribute == attribute), None)


@functools.lru_cache(maxsize=4096)
def cue_pattern(cue: str) -> re.Pattern[str]:
    """A cue as whole words, case-insensitive (the exposure metrics use the same rule)."""
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(cue) + r"(?![A-Za-z0-9])", re.I)


# the recognition task's one follow-up turn when no option could be read (it is a query
# too: the generator's leak check reads it)
FOLLOW_UP = "Please just pick one of the options for me: reply with its letter, e.g. (a)."


def has_any(text: str, phrases: list[str] | tuple[str, ...]) -> bool:
    return any(cue_pattern(p).search(text) for p in phrases)


_HEADING = re.compile(r"^#{2,4}\s+(\d{4}-\d{2}-\d{2})(?:\s+(\d{2}:\d{2}))?")
_CLOCK = re.compile(r"^\[[^\]]*?\b(\d{2}:\d{2})\b")
_OPEN = f"<{SECTION_TAG}"
_CLOSE = f"</{SECTION_TAG}>"


def memory_items(memory: str) -> list[tuple[str, str | None]]:
    """The memory's items in reading order, each with its indented continuation lines and
    its time ``YYYY-MM-DD HH:MM`` (from the day heading above it and the item's clock,
    else the heading's; None under no day heading). Inside a ``<memory-context>`` section
    an item is any line ``formatting.opens_item`` says opens one; outside (a native memory
    file), a ``- `` line."""
    items: list[tuple[str, str | None]] = []
    day: str | None = None
    day_clock: str | None = None
    inside = False
    for raw in (memory or "").splitlines():
        # the tags are read before unescaping: stored text cannot open or close a section
        if raw.startswith(_OPEN):
            inside = True
            continue
        if raw.startswith(_CLOSE):
            inside = False
            continue
        line = html.unescape(raw)
        heading = _HEADING.match(line)
        if heading:
            day, day_clock = heading.group(1), heading.group(2)
        elif line.startswith("- ") or (inside and opens_item(raw)):
            clock = _CLOCK.match(line)
            at = f"{day} {clock.group(1) if clock else day_clock or '00:00'}" if day else None
            items.append((line, at))
        elif line.startswith("  ") and items:
            items[-1] = (items[-1][0] + "\n" + line, items[-1][1])
    return items


def act_of(reply: str, current: list[str], other: list[str]) -> str:
    """What a reply acts on: ``current``, ``other`` (another value), ``both`` or ``none``."""
    cur, oth = has_any(reply, current), has_any(reply, other)
    return "both" if cur and oth else "current" if cur else "other" if oth else "none"
