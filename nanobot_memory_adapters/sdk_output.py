"""What the backends' SDKs print on their own goes to loguru at DEBUG, nowhere else.

mem0, Qdrant's local client, graphiti-core and the sentence-transformers stack each talk
to stderr while they load: weight-loading progress bars, Qdrant's "payload indexes have
no effect" UserWarning, mem0's spaCy/fastembed notices (stdlib logging with no handler,
so Python's last-resort handler prints them), pydantic deprecations raised by graphiti's
models. None of it is actionable for a user of this package, and it buries the
package's own lines. ``route_sdk_output`` sends all of it to loguru at DEBUG (so a
``--log-file`` keeps it), once per process:

- stdlib loggers of the SDKs get one handler that forwards to loguru and stop
  propagating (transformers' own stderr handler is swapped for it);
- warnings whose code lives in an SDK package are logged instead of shown; every other
  warning (the host's, this package's) goes to the previous ``warnings.showwarning``;
- ``quiet_progress`` (around a model load) routes transformers' own logger too, and
  switches its progress bars off for the load, restoring the previous setting after.

The backends call these when they load their SDK; nothing runs at package import.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from nanobot_memory_adapters.logs import logger

__all__ = ["SDK_LOGGERS", "SDK_PACKAGES", "quiet_progress", "route_sdk_output"]

#: stdlib logger names of the SDKs the adapters load in-process.
SDK_LOGGERS = (
    "mem0", "qdrant_client", "graphiti_core", "neo4j", "sentence_transformers", "transformers",
    "redislite",  # falkordblite
)
#: top-level packages whose warnings are SDK chatter when raised from their own code.
SDK_PACKAGES = (*SDK_LOGGERS, "kuzu")

_lock = threading.Lock()
_routed = False


class _ToLoguru(logging.Handler):
    """Forward a stdlib record to loguru at DEBUG, keeping the SDK's logger and level."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed SDK log call must not break the caller
            message = str(record.msg)
        logger.debug("[{} {}] {}", record.name, record.levelname, message)


_HANDLER = _ToLoguru(level=logging.DEBUG)


_SITE_PATH = re.compile(r"[\\/](?:site|dist)-packages[\\/]([A-Za-z0-9_]+)[\\/]")


class _SdkAsyncioNoise(logging.Filter):
    """asyncio reports an SDK's orphaned task ("Task exception was never retrieved", e.g.
    graphiti's Neo4j driver building indexes against a server that is down) on its own
    logger with a traceback: when an SDK raised it (the exception's class, a traceback
    frame or the task's ``defined at`` path is an installed SDK's), it goes to DEBUG.
    Anything else — the host's tasks, this package's own code — is left alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        if self._from_sdk(record):
            _HANDLER.emit(record)
            return False
        return True

    @staticmethod
    def _from_sdk(record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            if type(exc).__module__.split(".", 1)[0] in SDK_PACKAGES:
                return True
            frames = traceback.extract_tb(exc.__traceback__)
            if any(_sdk_file(frame.filename) for frame in frames):
                return True
        return any(m.group(1) in SDK_PACKAGES for m in _SITE_PATH.finditer(record.getMessage()))


_ASYNCIO_FILTER = _SdkAsyncioNoise()


def _sdk_file(filename: str) -> bool:
    """Is this file an installed SDK's own code (not this package's ``backends/mem0``)?"""
    parts = Path(filename).parts
    for index, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages") and parts[index + 1] in SDK_PACKAGES:
            return True
    return False


def _route_warnings() -> None:
    previous = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if _sdk_file(filename):
            logger.debug("[warning {}] {}:{}: {}", category.__name__, filename, lineno, message)
            return
        previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show


_transformers_routed = False


def _route_transformers(hf_logging: Any) -> None:
    """transformers prints through its own stderr handler: swap it for ours, once."""
    global _transformers_routed
    with _lock:
        if not _transformers_routed:
            hf_logging.disable_default_handler()
            hf_logging.add_handler(_HANDLER)
            _transformers_routed = True


def route_sdk_output() -> None:
    """Send the SDKs' logs and warnings to loguru at DEBUG (safe to call again)."""
    global _routed
    with _lock:
        if _routed:
            return
        for name in SDK_LOGGERS:
            sdk_logger = logging.getLogger(name)
            if _HANDLER not in sdk_logger.handlers:
                sdk_logger.addHandler(_HANDLER)
            sdk_logger.propagate = False
        asyncio_logger = logging.getLogger("asyncio")
        if _ASYNCIO_FILTER not in asyncio_logger.filters:
            asyncio_logger.addFilter(_ASYNCIO_FILTER)
        _route_warnings()
        _routed = True


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """No transformers progress bars while a model loads; the previous setting after."""
    hf_logging: Any
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    route_sdk_output()
    _route_transformers(hf_logging)
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
