"""Argument templates and result paths: how config names a server's tool arguments and
where its answers keep what the adapter needs.

A template is JSON with ``{name}`` placeholders. A string that is exactly one
placeholder takes the value as it is (a list stays a list); elsewhere values are
written into the string. Only the placeholders an operation offers may appear (checked
when the config loads, so a typo is one clear line, not a failed write).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")

#: What each operation can put into its arguments.
RECORD_FIELDS = frozenset({
    "scope", "scope_tag", "event_id", "session_id", "turn_id", "timestamp", "when",
    "transcript", "user_text", "agent_id", "scenario", "context", "attribute",
})
SEARCH_FIELDS = frozenset({"scope", "scope_tag", "query", "limit"})
LIST_FIELDS = frozenset({"scope", "scope_tag"})
DELETE_FIELDS = frozenset({"scope", "scope_tag", "ids", "id"})


def placeholders(template: Any) -> set[str]:
    """Every placeholder name used anywhere in a template."""
    if isinstance(template, str):
        return set(PLACEHOLDER.findall(template))
    if isinstance(template, Mapping):
        return set().union(*(placeholders(v) for v in template.values()), set())
    if isinstance(template, list):
        return set().union(*(placeholders(v) for v in template), set())
    return set()


def check(template: Any, allowed: frozenset[str], where: str) -> None:
    unknown = sorted(placeholders(template) - allowed)
    if unknown:
        raise ValueError(
            f"{where} uses unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
            f"available: {', '.join('{' + a + '}' for a in sorted(allowed))}"
        )


def render(template: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)
    if isinstance(template, Mapping):
        return {k: render(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, values) for v in template]
    return template


def pick(data: Any, path: str | None) -> Any:
    """The value at a dotted path (``entities``, ``metadata.event_id``; ``""`` or None is
    the data itself); None when any step is missing."""
    if not path:
        return data
    for step in path.split("."):
        if isinstance(data, Mapping):
            data = data.get(step)
        elif isinstance(data, list) and step.isdigit() and int(step) < len(data):
            data = data[int(step)]
        else:
            return None
    return data
