"""Traces: one record per native operation, appendable to a JSONL file.

Secrets never reach a trace: ``redact`` strips anything that looks like a credential
before a native request's arguments are stored.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import IO, Any, Protocol

from nanobot_memory_adapters.contract import Trace
from nanobot_memory_adapters.redaction import REDACTED, redact

__all__ = ["REDACTED", "JsonlTraceWriter", "TraceSink", "new_trace_id", "redact"]



def new_trace_id() -> str:
    return uuid.uuid4().hex


class TraceSink(Protocol):
    def emit(self, trace: Trace, **extra: Any) -> None: ...


class JsonlTraceWriter:
    """Appends traces (plus optional context such as a question id) to a JSONL file.

    The file is opened once and kept open. Unbuffered (the default, e.g. the plugin's
    ``trace_file``), every line reaches the file when ``emit`` returns. ``buffered=True``
    (the bench) holds lines in memory until ``flush`` (the harness flushes at the end of
    every session and test point, before it records its progress) or ``close``: a
    process killed in between loses the lines of the session or test point it was in
    (the resume replays that session and cuts the file back to the recorded size, so a
    half-written line never survives)."""

    def __init__(self, path: str | Path, *, buffered: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.buffered = buffered
        self._lock = threading.Lock()
        self._file: IO[str] | None = None

    def emit(self, trace: Trace, **extra: Any) -> None:
        record = {"trace": trace.model_dump(mode="json"), **redact(extra)}
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock:
            if self._file is None or self._file.closed:
                self._file = self.path.open("a", encoding="utf-8", buffering=1 << 16)
            self._file.write(line + "\n")
            if not self.buffered:
                self._file.flush()

    def flush(self) -> None:
        """Every line emitted so far is in the file (the OS's, not yet the disk's)."""
        with self._lock:
            if self._file is not None and not self._file.closed:
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_traces(path: str | Path) -> list[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
