"""The providers' trace sink in a bench: the unit's labels on every line, and traces held
during a driver call so the driver writes the primary one with its annotations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from nanobot_memory_adapters.contract import (
    AdapterError,
    AdapterMode,
    MemoryAdapter,
    MemoryEvent,
    Trace,
    WriteReceipt,
)
from nanobot_memory_adapters.redaction import redact_text
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
    """An error as one line for results and traces, scrubbed of credentials."""
    text = str(exc) if isinstance(exc, AdapterError) else f"{type(exc).__name__}: {exc}"
    return redact_text(text)




def note_trace(name: str, adapter: MemoryAdapter, operation: str) -> Trace:
    return Trace(
        trace_id=new_trace_id(),
        backend_name=name,
        condition_kind=adapter.info.condition_kind,
        operation=operation,
    )


async def probe_read_only_gate(
    adapter: MemoryAdapter, sink: AnnotatingSink, event: MemoryEvent, about: str,
) -> tuple[WriteReceipt | None, bool]:
    """Offer a test-session turn to ``record_event`` while the provider is read-only: only
    ``skipped_read_only`` is right (nothing of a test session may become memory). The
    receipt, and whether the gate held (the caller counts a violation when not)."""
    with sink.capture() as held:
        try:
            receipt: WriteReceipt | None = await adapter.record_event(event)
            status = receipt.status if receipt else "none"
        except Exception as exc:
            receipt, status = None, f"failed: {error_text(exc)}"
    if receipt is not None:
        sink.write(receipt.trace, kind="gate_probe", about=about, status=status)
        sink.flush(held, {receipt.trace.trace_id})
    else:
        sink.flush(held, set())
    return receipt, status == "skipped_read_only"


async def switch_mode(
    adapter: MemoryAdapter, sink: AnnotatingSink, provider: str, read_only: bool, reason: str,
) -> bool:
    """``set_mode`` with its trace written (kind ``mode``); a failure is traced and answered
    False (the caller counts it under ``mode_failures`` and skips the session)."""
    try:
        with sink.capture() as held:
            receipt = await adapter.set_mode(AdapterMode(read_only=read_only, reason=reason))
        written: set[str] = set()
        if receipt.trace is not None:
            sink.write(receipt.trace, kind="mode", reason=reason)
            written.add(receipt.trace.trace_id)
        sink.flush(held, written)
        return True
    except Exception as exc:
        sink.write(failure_trace(provider, adapter, "set_mode", error_text(exc)),
                   kind="mode", reason=reason)
        return False
