"""The package's logger (every line scrubbed of credentials), and where the command
line's logs go: stderr at the chosen level, plus one DEBUG file.

The console stays readable (WARNING by default) while the file keeps everything the
package, nanobot and the backends' SDKs log (``sdk_output`` routes the SDKs' own
chatter to loguru at DEBUG). Long jobs (bench, demo, preferences run) write
``<out>/debug.log`` unless ``--log-file`` chose another file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from loguru import logger as _loguru

from nanobot_memory_adapters.redaction import redact_text

__all__ = ["LOG_LEVELS", "configure_logging", "default_log_file", "log_file", "logger",
           "logging_settings"]

LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")


def _scrub(record: Any) -> None:
    """Redact the message, and the logged exception's text (its type name is kept)."""
    record["message"] = redact_text(record["message"])
    error = record["exception"]
    if error is None or error.value is None:
        return
    text = str(error.value)
    clean = redact_text(text)
    if clean != text:
        kind = type(error.type.__name__, (Exception,), {"__module__": error.type.__module__})
        value = kind(clean).with_traceback(error.traceback)
        record["exception"] = error._replace(type=kind, value=value)


#: The logger every module of the package uses (loguru's, sharing the host's sinks): a
#: URL password, an API key or a bearer token in a message never reaches a sink.
logger = _loguru.patch(_scrub)

_files: list[Path] = []
_level = ["WARNING"]


def configure_logging(level: str, file: Path | None = None) -> None:
    """Replace loguru's sinks: stderr at ``level``, and ``file`` at DEBUG if given.
    Raises ValueError naming the valid levels for an unknown one."""
    if level.upper() not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    _loguru.remove()
    _level[0] = level.upper()
    # no variable values in tracebacks: a local may hold a key
    _loguru.add(sys.stderr, level=level.upper(), diagnose=False)
    _files.clear()
    if file is not None:
        _add_file(file)


def _add_file(path: Path) -> None:
    # created (with its folder) at the first message: a command refused before it logs
    # anything leaves no empty debug.log, and no --out folder, behind
    _loguru.add(path, level="DEBUG", encoding="utf-8", diagnose=False, delay=True)
    _files.append(path)


def default_log_file(out: Path) -> Path:
    """``<out>/debug.log`` for a long job, unless a log file is already chosen."""
    if not _files:
        _add_file(out / "debug.log")
    return _files[0]


def logging_settings() -> tuple[str, Path | None]:
    """(stderr level, DEBUG file) of this process, for a worker process to log alike."""
    return _level[0], log_file()


def log_file() -> Path | None:
    """The DEBUG log file of this process, if any."""
    return _files[0] if _files else None
