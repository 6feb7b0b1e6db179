"""Credential scrubbing shared by traces, errors and logs.

A key that names a credential has its value replaced by ``***``; a ``user:password@``
inside a URL or DSN loses the password. Used wherever native diagnostics leave the
adapter: traces (``tracing``), ``AdapterError.raw``/message, the outbox and logs.
"""

from __future__ import annotations

import re
from typing import Any

_SECRET_KEY = re.compile(
    r"(^|[_-])(api[_-]?key|apikey|secret|secret[_-]?key|access[_-]?key|private[_-]?key|"
    r"password|passwd|token|authorization|credentials?)$",
    re.I,
)
# user:password@host inside URLs and DSNs.
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@/\s]+@", re.I)
REDACTED = "***"


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
