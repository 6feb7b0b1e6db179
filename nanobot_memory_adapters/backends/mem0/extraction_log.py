"""What mem0 swallows: extraction answers it could not parse, failed embeddings/inserts.

mem0 2.2.1 catches a model answer it cannot parse (cut at max_tokens, not JSON) and a
failed embedding or insert, logs an error and returns a partial or empty result without
raising. Only its log says so. The tap collects those log records for the add call that
produced them (a context variable, so concurrent adds never mix); the adapter turns them
into a failed, retryable write instead of a receipt that says "committed" for a turn that
stored nothing. mem0's own detection, not ours.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, Sequence

_ADD_PROBLEMS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "nanobot_memory_mem0_add_problems", default=None
)
# Log messages (prefixes) that mean the add did not store what the model extracted.
WRITE_FAILURE_MARKERS = (
    "Error parsing extraction response",
    "Failed to embed memory text",
    "Failed to insert memory",
)


class _AddProblemTap(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        sink = _ADD_PROBLEMS.get()
        if sink is not None and record.levelno >= logging.WARNING:
            try:
                sink.append(record.getMessage()[:2000])
            except Exception:  # a log record that cannot be formatted is not our failure
                sink.append(str(record.msg)[:2000])


_TAP = _AddProblemTap(level=logging.WARNING)


def install_tap() -> None:
    native = logging.getLogger("mem0.memory.main")
    if _TAP not in native.handlers:
        native.addHandler(_TAP)


def write_failures(problems: Sequence[str]) -> list[str]:
    """The logged problems that mean an add stored less than mem0 extracted."""
    return [p for p in problems if p.startswith(WRITE_FAILURE_MARKERS)]




@contextlib.contextmanager
def problems_of_this_add() -> Iterator[list[str]]:
    """The warnings and errors mem0 logs inside the block (this task's add only)."""
    install_tap()
    problems: list[str] = []
    token = _ADD_PROBLEMS.set(problems)
    try:
        yield problems
    finally:
        _ADD_PROBLEMS.reset(token)
