"""Traces: one record per native operation, appendable to a JSONL file.

Secrets never reach a trace: ``redact`` strips anything that looks like a credential
before a native request's arguments are stored.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from pathlib import Path
from typing import Any, Protocol

from nanobot_memory_adapters.contract import Trace

_SECRET_KEY = re.compile(
    r"(^|[_-])(api[_-]?key|apikey|secret|secret[_-]?key|access[_-]?key|private[_-]?key|"
    r"password|passwd|token|authorization|credentials?)$",
    re.I,
)
# user:password@host inside URLs and DSNs.
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@/\s]+@", re.I)
REDACTED = "***"


def new_trace_id() -> str:
    return uuid.uuid4().hex


def redact(value: Any) -> Any:
    """A copy of ``value`` with credential-looking keys replaced by ``***``."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) and v else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str) and "@" in value:
        return _URL_PASSWORD.sub(r"\g<scheme>\g<user>:***@", value)
    return value


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
