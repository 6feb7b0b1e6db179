"""Scope ids: who and which run a memory belongs to, and the ids a backend must never see.

Several backends treat some ids as wildcards (mem0 treats ``"*"`` as match-all), so an id
that reaches a backend must be a plain, non-empty token. Validation happens here, once,
before any adapter builds a native request.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# Characters that some backend query languages read as patterns or separators.
_WILDCARD_CHARS = re.compile(r"[*?%\x00]")
# Characters a rendered scope id keeps as they are; anything else makes it "escaped".
_UNPLAIN = re.compile(r"[^A-Za-z0-9_.@:-]+")
# Separates an escaped id from the hash of its raw text; never part of a plain id.
HASH_MARK = "~"
# Joiners some scripts need inside names (ZWNJ, ZWJ); every other format character is
# refused with the controls and line/paragraph separators.
_ALLOWED_FORMAT = {"\u200c", "\u200d"}


def _control_char(value: str) -> str | None:
    """The first control, format or line-separator character of ``value`` (an id shown in
    a memory section must never start a new line or hide text), or None."""
    for ch in value:
        category = unicodedata.category(ch)
        if category in ("Cc", "Zl", "Zp") or (category == "Cf" and ch not in _ALLOWED_FORMAT):
            return ch
    return None


def refuse_control_chars(value: str, *, field: str = "id") -> str:
    """``value`` unless it holds a control, format or line-separator character."""
    bad = _control_char(value)
    if bad is not None:
        raise ValueError(
            f"{field} {value!r} contains the control character U+{ord(bad):04X}; ids are "
            "single-line plain text, remove it"
        )
    return value


MAX_ID_CHARS = 200


def check_scope_id(value: str, *, field: str = "id") -> str:
    """Return ``value`` if it is safe to send to a backend as an id, else raise ValueError."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string")
    if not value.strip():
        raise ValueError(f"{field} is empty; give a non-empty id such as 'alice'")
    if value != value.strip():
        raise ValueError(f"{field} {value!r} has leading/trailing whitespace; strip it")
    refuse_control_chars(value, field=field)
    if _WILDCARD_CHARS.search(value):
        raise ValueError(
            f"{field} {value!r} contains a wildcard character (* ? % or NUL) that a backend "
            "could read as match-all; use a plain id"
        )
    if len(value) > MAX_ID_CHARS:
        raise ValueError(f"{field} is longer than {MAX_ID_CHARS} characters; use a shorter id")
    return value


def _scope_id(value: str) -> str:
    return check_scope_id(value)


ScopeId = Annotated[str, AfterValidator(_scope_id)]


class MemoryScope(BaseModel):
    """The isolation unit: one persona's memory within one run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: ScopeId
    persona_id: ScopeId
    agent_id: ScopeId | None = None

    @property
    def key(self) -> str:
        """A stable, readable, injective key: ``run/persona``.

        Ids may contain ``/``, so it is written as ``%2F`` inside a part; ``%`` can never
        appear in an id (see ``check_scope_id``), so two different scopes never share a key.
        A backend-side namespace is adapter configuration (e.g. ``memos.namespace``), not
        part of the scope: events do not carry one, so reads and writes could not agree.
        """
        return "/".join(p.replace("/", "%2F") for p in (self.run_id, self.persona_id))


class ScopeTemplates(BaseModel):
    """How nanobot identities map to scope ids (``{channel}``, ``{sender_id}``...)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(default="default", description="Template for the run id.")
    persona_id: str = Field(
        default="{channel}-{sender_id}", description="Template for the user/persona id."
    )
    agent_id: str = Field(default="nanobot", description="Template for the assistant id.")
    session_id: str = Field(default="{session_key}", description="Template for the session id.")

    def render(self, name: str, values: dict[str, str]) -> str:
        """The scope id for ``values``: the template's text made plain (``plain_id``)."""
        return check_scope_id(plain_id(self.fill(name, values)), field=f"scope.{name}")

    def fill(self, name: str, values: dict[str, str]) -> str:
        """The template filled in, before it is made a plain id."""
        template: str = getattr(self, name)
        try:
            return template.format(**values)
        except KeyError as exc:
            raise ValueError(
                f"scope.{name} template {template!r} uses unknown field {exc}; "
                f"available: {', '.join(sorted(values))}"
            ) from None


def legacy_id(raw: str) -> str:
    """What the plugin rendered for ``raw`` before ids were made injective: every run of
    characters outside ``[A-Za-z0-9_.@:-]`` became ``_``, and ``_`` was stripped from both
    ends. Not injective (``josé`` and ``jos`` met); kept to name the old scopes."""
    return _UNPLAIN.sub("_", raw).strip("_") or "anonymous"


def plain_id(raw: str) -> str:
    """A rendered template as a scope id, injectively: an id that is already plain (the
    legacy rendering leaves it unchanged) is kept exactly, so existing users keep their
    scope; any other id becomes its legacy rendering plus ``~`` and 16 hex digits of the
    SHA-256 of the raw text. ``~`` never occurs in a plain id, so an escaped id never
    equals a plain one, and two raw ids share an escaped id only on a 64-bit hash
    collision. A plain id longer than ``MAX_ID_CHARS`` (a long Matrix id) is escaped the
    same way, so it never fails validation and loses every turn."""
    legacy = legacy_id(raw)
    if legacy == raw and len(raw) <= MAX_ID_CHARS:
        return raw
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    # the readable part is cut so the id stays within MAX_ID_CHARS (the hash keeps it unique)
    readable = legacy[:MAX_ID_CHARS - len(HASH_MARK) - len(digest)]
    return f"{readable}{HASH_MARK}{digest}"
