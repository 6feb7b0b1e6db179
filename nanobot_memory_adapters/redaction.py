"""Credential scrubbing: the one redaction every string leaving the package goes through.

- a key that names a credential (``api_key``, ``password``, ``token``...) has its value
  replaced by ``***``;
- in any text: a ``user:password@`` inside a URL or DSN loses the password, a credential
  parameter (``?api_key=…``, ``&token=…``, ``password=…``) loses its value, and an
  ``Authorization: Bearer …`` token is replaced.

Used by traces (``tracing``), ``AdapterError``, health reports and receipts (the contract's
models apply it to their free-text fields), command replies, CLI output and the package's
log lines (``logs.logger``).
"""

from __future__ import annotations

import re
from typing import Any

_SECRET_WORDS = (
    r"api[_-]?key|apikey|secret|secret[_-]?key|access[_-]?key|private[_-]?key|"
    r"password|passwd|pwd|token|access[_-]?token|auth[_-]?token|authorization|credentials?"
)
_SECRET_KEY = re.compile(rf"(^|[_-])({_SECRET_WORDS})$", re.I)
# user:password@host inside URLs and DSNs.
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@/\s]+@", re.I)
# name=value where the name is a credential: query strings, DSN parameters, plain text.
_PARAM = re.compile(
    rf"(?P<name>\b(?:[a-z0-9]+[_-])*(?:{_SECRET_WORDS}))(?P<sep>['\"]?\s*[=:]\s*)"
    r"(?P<quote>['\"]?)(?P<value>[^\s&'\",;)}\]]+)",
    re.I,
)
_BEARER = re.compile(r"\b(?P<kind>Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{4,}", re.I)
REDACTED = "***"


def redact_text(text: str) -> str:
    """``text`` with URL passwords, credential parameters and bearer tokens replaced."""
    if not text:
        return text
    text = _URL_PASSWORD.sub(rf"\g<scheme>\g<user>:{REDACTED}@", text)
    text = _BEARER.sub(rf"\g<kind> {REDACTED}", text)
    return _PARAM.sub(
        lambda m: m.group(0) if m.group("value") == REDACTED
        else f"{m.group('name')}{m.group('sep')}{m.group('quote')}{REDACTED}",
        text,
    )


def redact(value: Any) -> Any:
    """A copy of ``value`` with credential-looking keys replaced by ``***`` and every string
    scrubbed by ``redact_text``."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) and v else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
