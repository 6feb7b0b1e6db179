"""Embedded stores shared within a process: one handle per path, reference-counted.

Embedded databases allow one open handle per path and process (Qdrant's local mode
raises "already accessed by another instance"; Kuzu allows one read-write ``Database``).
Several adapters on the same path (the plugin and the harness, two providers sharing a
data dir) therefore share one handle; the last ``release`` closes it.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Entry(Generic[T]):
    handle: T
    users: int = 0
    state: dict[str, Any] = field(default_factory=dict)  # per-store flags (e.g. indexed)


class SharedStores(Generic[T]):
    """``acquire(path, open_)`` -> the process-wide handle for ``path`` (opened on first
    use); ``release(path)`` -> closed with ``close`` when its last user lets go."""

    def __init__(self, close: Callable[[T], None]) -> None:
        self._close = close
        self._lock = threading.Lock()
        self._open: dict[str, _Entry[T]] = {}
        # A host that never closes its adapters (``nanobot agent -m`` exits without it)
        # still gets its stores closed while the interpreter can import: closing them in
        # a destructor at shutdown fails ("sys.meta_path is None") and may leave a lock.
        atexit.register(self.close_all)

    def close_all(self) -> None:
        """Close every handle still open (at exit); a failure to close one is ignored."""
        with self._lock:
            entries, self._open = list(self._open.values()), {}
        for entry in entries:
            with contextlib.suppress(Exception):  # shutting down: nothing left to tell
                self._close(entry.handle)

    @staticmethod
    def key(path: str | Path) -> str:
        return str(Path(path).resolve())

    def acquire(self, path: str | Path, open_: Callable[[str], T]) -> T:
        key = self.key(path)
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                entry = self._open[key] = _Entry(open_(key))
            entry.users += 1
            return entry.handle

    def release(self, path: str | Path) -> None:
        key = self.key(path)
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                return
            entry.users -= 1
            if entry.users <= 0:
                del self._open[key]
                self._close(entry.handle)

    def users(self, path: str | Path) -> int:
        entry = self._open.get(self.key(path))
        return entry.users if entry is not None else 0

    def is_open(self, path: str | Path) -> bool:
        return self.key(path) in self._open

    def state(self, path: str | Path) -> dict[str, Any]:
        """Per-store flags that live as long as the handle (empty once it closed)."""
        entry = self._open.get(self.key(path))
        return entry.state if entry is not None else {}
