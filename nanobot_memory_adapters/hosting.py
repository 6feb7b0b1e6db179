"""For programs that embed nanobot: switch the memory plugin off, or hand it a provider.

Neutral ground between the plugin (``nanobot/``) and code that builds its own nanobot
``AgentLoop`` (the rolling_summary condition's private Dream loop, the harness's test
agents): both sides import this module, neither imports the other.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_suppressed: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nanobot_memory_plugin_suppressed", default=False
)


@contextlib.contextmanager
def plugin_disabled() -> Iterator[None]:
    """AgentLoops built inside this block get no memory plugin (so a user's memory.json
    does not reach a loop built for another purpose)."""
    token = _suppressed.set(True)
    try:
        yield
    finally:
        _suppressed.reset(token)


def plugin_suppressed() -> bool:
    return _suppressed.get()


@dataclass(frozen=True)
class ProvidedMemory:
    """A provider the embedding program already holds, with the memory.json content that
    describes it (``{"memory": {...}, "nanobot": {...}}``). The plugin uses the adapter as
    it is, instead of building one from memory.json, and never closes it."""

    adapter: Any
    settings: dict[str, Any]


_provided: contextvars.ContextVar[ProvidedMemory | None] = contextvars.ContextVar(
    "nanobot_memory_plugin_provided", default=None
)


@contextlib.contextmanager
def provided_memory(adapter: Any, settings: dict[str, Any]) -> Iterator[None]:
    """AgentLoops built inside this block get the memory plugin on ``adapter`` (the
    benchmark harness runs its test sessions through a real nanobot this way, on the very
    provider instance it accumulated memory into)."""
    token = _provided.set(ProvidedMemory(adapter, settings))
    try:
        yield
    finally:
        _provided.reset(token)


def provided() -> ProvidedMemory | None:
    return _provided.get()
