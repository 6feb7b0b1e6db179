"""The providers' trace sink in a bench: the unit's labels on every line, and traces held
during a driver call so the driver writes the primary one with its annotations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryAdapter,
    Trace,
)
from nanobot_memory_adapters.tracing import JsonlTraceWriter, new_trace_id


class AnnotatingSink:
    """The providers' trace sink: adds the unit's labels, holds traces during a driver call
    so the driver can write the primary one (a receipt's or a result's) with annotations."""

    def __init__(self, writer: JsonlTraceWriter) -> None:
        self.writer = writer
        self.base: dict[str, Any] = {}
        self._held: list[Trace] | None = None

    def emit(self, trace: Trace, **extra: Any) -> None:
        if self._held is not None:
            self._held.append(trace)
            return
        self.writer.emit(trace, **{**self.base, **extra})

    @contextlib.contextmanager
    def capture(self) -> Iterator[list[Trace]]:
        held: list[Trace] = []
        self._held = held
        try:
            yield held
        finally:
            self._held = None

    def write(self, trace: Trace, **extra: Any) -> None:
        self.writer.emit(trace, **{**self.base, **extra})

    def flush(self, held: list[Trace], written: set[str]) -> None:
        for trace in held:
            if trace.trace_id not in written:
                self.writer.emit(trace, **self.base)


def failure_trace(
    name: str,
    adapter: MemoryAdapter,
    operation: str,
    error: str,
    event_id: str | None = None,
    scope: str | None = None,
) -> Trace:
    return Trace(
        trace_id=new_trace_id(),
        backend_name=name,
        condition_kind=adapter.info.condition_kind,
        operation=operation,
        scope=scope,
        event_id=event_id,
        status="failed",
        warnings=[error[:1000]],
    )


def error_text(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, AdapterError) else f"{type(exc).__name__}: {exc}"




def note_trace(name: str, adapter: MemoryAdapter, operation: str) -> Trace:
    return Trace(
        trace_id=new_trace_id(),
        backend_name=name,
        condition_kind=adapter.info.condition_kind,
        operation=operation,
    )
