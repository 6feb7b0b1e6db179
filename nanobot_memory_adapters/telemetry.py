"""Telemetry of the SDKs the adapters drive: off, decided here and nowhere else.

Nothing runs at package import, so a process that embeds this package (nanobot with the
plugin) keeps its own environment. The backends call these when they load their SDK:

- mem0 reads ``MEM0_TELEMETRY`` once, while it is imported (and creates its analytics
  client then): the variable is set for the import only, then restored, and mem0's module
  flags are switched off, so later events are never sent either;
- graphiti-core reads ``GRAPHITI_TELEMETRY_ENABLED`` each time it would send an event:
  its own check is replaced by one that says no.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def quiet_mem0() -> None:
    """Import mem0 with its telemetry off (safe to call again). A mem0 imported before,
    with the variable unset, made its hosted client's analytics client at import (a
    PostHog client whose flag poller a forked process restarts): that client is closed."""
    if "mem0.memory.main" not in sys.modules:
        with _env("MEM0_TELEMETRY", "False"):
            importlib.import_module("mem0.memory.main")
    for name in ("mem0.memory.telemetry", "mem0.memory.main"):
        module: Any = sys.modules.get(name)
        if module is not None:
            module.MEM0_TELEMETRY = False
    analytics: Any = getattr(sys.modules.get("mem0.memory.telemetry"), "client_telemetry", None)
    if getattr(analytics, "posthog", None) is not None:
        with contextlib.suppress(Exception):
            analytics.close()
        analytics.posthog = None


def quiet_graphiti() -> None:
    """graphiti-core's telemetry check answers no (safe to call again)."""
    module: Any = importlib.import_module("graphiti_core.telemetry.telemetry")
    module.is_telemetry_enabled = lambda: False
