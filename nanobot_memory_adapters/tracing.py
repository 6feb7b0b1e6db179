"""Traces: one record per native operation, appendable to a JSONL file.

Secrets never reach a trace: ``redact`` strips anything that looks like a credential
before a native request's arguments are stored.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any, Protocol

from nanobot_memory_adapters.contract import Trace
from nanobot_memory_adapters.redaction import REDACTED, redact

__all__ = ["REDACTED", "JsonlTraceWriter", "TraceSink", "new_trace_id", "redact"]



def new_trace_id() -> str:
    return uuid.uuid4().hex


class TraceSink(Protocol):
    def emit(self, trace: Trace, **extra: Any) -> None: ...


class JsonlTraceWriter:
    """Appends traces (plus optional context such as a question id) to a JSONL file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def emit(self, trace: Trace, **extra: Any) -> None:
        record = {"trace": trace.model_dump(mode="json"), **redact(extra)}
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")


def read_traces(path: str | Path) -> list[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
