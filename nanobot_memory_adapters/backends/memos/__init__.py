"""MemOS (PyPI ``MemoryOS`` 2.0.33) over its product HTTP API: ``config.py`` the block
and ids, ``store.py`` the native store, ``readiness.py`` scheduler status, ``feedback.py``
native feedback's request (declared with ``feedback: true``); ``server.py`` provisions and
runs a local MemOS server."""

from __future__ import annotations

from nanobot_memory_adapters.backends.memos.config import MEMOS_GROUPS, MemOSConfig
from nanobot_memory_adapters.backends.memos.store import MemOSStore

__all__ = ["MEMOS_GROUPS", "MemOSConfig", "MemOSStore"]
