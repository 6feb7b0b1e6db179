"""Where the command line's logs go: stderr at the chosen level, plus one DEBUG file.

The console stays readable (WARNING by default) while the file keeps everything the
package, nanobot and the backends' SDKs log (``sdk_output`` routes the SDKs' own
chatter to loguru at DEBUG). Long jobs (bench, demo, preferences run) write
``<out>/debug.log`` unless ``--log-file`` chose another file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from loguru import logger

__all__ = ["configure_logging", "default_log_file", "log_file"]

_files: list[Path] = []


def configure_logging(level: str, file: Path | None = None) -> None:
    """Replace loguru's sinks: stderr at ``level``, and ``file`` at DEBUG if given."""
    logger.remove()
    logger.add(sys.stderr, level=level.upper())
    _files.clear()
    if file is not None:
        _add_file(file)


def _add_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    logger.add(path, level="DEBUG", encoding="utf-8")
    _files.append(path)


def default_log_file(out: Path) -> Path:
    """``<out>/debug.log`` for a long job, unless a log file is already chosen."""
    if not _files:
        _add_file(out / "debug.log")
    return _files[0]


def log_file() -> Path | None:
    """The DEBUG log file of this process, if any."""
    return _files[0] if _files else None
