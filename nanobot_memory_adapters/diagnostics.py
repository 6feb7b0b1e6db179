"""A backend's own error as raw diagnostics, and whether retrying later can succeed.

One classification for every adapter: transport failures, overload (5xx, 429), a model's
unusable answer, and lock contention on an embedded store are retryable; anything else
(a bad request, a missing table) is not.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx

from nanobot_memory_adapters.redaction import redact

__all__ = ["is_lock_contention", "mentions_lock_contention", "native_diagnostics",
           "raw_mentions_lock_contention", "store_holders"]

_RETRYABLE = (ConnectionError, TimeoutError, asyncio.TimeoutError, httpx.TransportError)
# SDKs vendor their own HTTP stacks (openai 3.x raises over its bundled ``httpx2``), so
# transport failures are also recognised by class name anywhere in the MRO. The names
# cover openai's, graphiti-core's and httpx's transient errors; SDKs that wrap them (mem0's
# LLMError) are seen through, because the whole cause chain is checked.
_RETRYABLE_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "TransportError",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "RemoteProtocolError",
        "ServiceUnavailableError",
        "RateLimitError",
        "InternalServerError",  # openai's 5xx, also when wrapped (no status_code on top)
        # A model's answer that could not be used (cut at max_tokens, not JSON, empty):
        # the next attempt may well succeed (graphiti-core raises these after its retries).
        "JSONDecodeError",
        "EmptyResponseError",
        "LengthFinishReasonError",
    }
)


# Another process holds an embedded store (Qdrant local's folder lock, Kuzu's file lock,
# SQLite's write lock): a wait, not a failure — the same write succeeds once it lets go.
_LOCK_NAMES = frozenset({"AlreadyLocked", "LockException", "BlockingIOError"})
_LOCK_MESSAGES = (
    "database is locked",
    "database is busy",
    "already accessed by another instance",  # qdrant_client local mode
    "could not set lock on file",  # kuzu
    "resource temporarily unavailable",  # fcntl/flock on a held lock (EAGAIN)
)


def is_lock_contention(exc: BaseException) -> bool:
    """Whether ``exc`` says another process holds an embedded store's lock."""
    if any(cls.__name__ in _LOCK_NAMES for cls in type(exc).__mro__):
        return True
    message = str(exc).lower()
    return any(m in message for m in _LOCK_MESSAGES)


def mentions_lock_contention(exc: BaseException) -> bool:
    """Lock contention anywhere in ``exc``: itself, its cause chain, or the raw backend
    diagnostics an ``AdapterError`` carries (its own cause is gone by then)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if is_lock_contention(current):
            return True
        raw = getattr(current, "raw", None)
        if isinstance(raw, dict) and raw_mentions_lock_contention(raw):
            return True
        current = current.__cause__ or current.__context__
    return False


def raw_mentions_lock_contention(raw: dict[str, Any]) -> bool:
    """Whether raw diagnostics (``native_diagnostics``' dict) describe lock contention."""
    values = [str(v) for v in raw.values() if not isinstance(v, list)]
    values += [str(c) for c in raw.get("cause_chain") or []]
    return any(any(m in v.lower() for m in _LOCK_MESSAGES)
               or v.rsplit(".", 1)[-1].split(":", 1)[0] in _LOCK_NAMES for v in values)


def store_holders(directory: Path, *, skip: tuple[str, ...] = ()) -> list[str]:
    """Other processes that have a file under ``directory`` open, as ``pid N (command)``.

    Read from Linux's ``/proc`` (the processes of this user); elsewhere, or when nothing
    is readable, the answer is an empty list: the holder is then simply not known. Files
    whose name starts with one of ``skip`` (e.g. the shared outbox) do not count."""
    proc = Path("/proc")
    root = str(directory.resolve())
    found: list[str] = []
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            targets = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:  # gone, or another user's
            continue
        if not any(t.startswith(root + os.sep) and not Path(t).name.startswith(skip)
                   for t in targets):
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        found.append(f"pid {entry.name} ({_command(argv) or '?'})")
    return sorted(found)


def _command(argv: list[bytes]) -> str:
    """The program and its sub-commands (``python3 nanobot gateway``), nothing after the
    first option: arguments may hold a user's message or a key."""
    words: list[str] = []
    for i, arg in enumerate(a.decode(errors="replace") for a in argv[:6] if a):
        if arg == "-m" and i == 1:
            continue
        if arg.startswith("-"):
            break
        words.append(Path(arg).name)
    return redact(" ".join(words))[:80]


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _RETRYABLE) or is_lock_contention(exc):
        return True
    return any(cls.__name__ in _RETRYABLE_NAMES for cls in type(exc).__mro__)


def native_diagnostics(exc: BaseException) -> tuple[dict[str, Any], bool]:
    """The backend's own error, kept raw, and whether retrying later could succeed."""
    raw: dict[str, Any] = {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc)[:4000],
    }
    retryable = _retryable(exc)
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None) or getattr(exc, "status_code", None)
    if status is not None:
        raw["status_code"] = status
        try:
            raw["body"] = response.text[:4000] if response is not None else None
        except Exception:  # a streamed or closed body
            raw["body"] = None
        retryable = retryable or int(status) >= 500 or int(status) == 429
    # Every cause decides retryability; the first 8 are kept in the diagnostics.
    causes: list[str] = []
    seen = {id(exc)}
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if len(causes) < 8:
            causes.append(f"{type(cause).__qualname__}: {str(cause)[:1000]}")
        retryable = retryable or _retryable(cause)
        cause = cause.__cause__ or cause.__context__
    if causes:
        raw["cause"] = causes[0]
        raw["cause_chain"] = causes
    return redact(raw), retryable
