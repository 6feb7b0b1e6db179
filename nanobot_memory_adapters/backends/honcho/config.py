"""Honcho: the config block, the id mapping into Honcho's names, and per-scope state."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from nanobot_memory_adapters.contract import (
    ProviderInfo,
)

T = TypeVar("T")
BACKEND = "honcho"
EPOCH_KEY = "nma_reset_epoch"
MAX_BATCH = 100  # server limit for add_messages (1..100, else 422)
PET_WARNING = (
    "pet_observability=weak: Honcho's context exposes no representation version or "
    "derivation time; observation timestamps are the source messages' times"
)

INFO = ProviderInfo(
    name=BACKEND,
    condition_kind="architecture",
    consistency_model="async_derived",
    stores_events=True,
    tag_mapping="metadata",
    memory_form="mixed",
    item_fields=("native_type",),
    native_memory_types=("peer_representation", "peer_card", "session_summary", "message"),
    native_ingest_modes=("session.add_messages",),
    requires_llm=True,
    capabilities=("bulk_ingest", "readiness", "native_query"),
    description="Honcho v3: peers, sessions and the deriver's peer representations; "
    "session.context(summary, tokens, peer_target, search_query) is the one read.",
)

_SAFE = re.compile(r"[A-Za-z0-9-]")


def reset_epoch(metadata: Mapping[str, object] | None) -> int:
    """The scope's reset epoch kept in the user peer's metadata (0 before any reset)."""
    value = (metadata or {}).get(EPOCH_KEY)
    if isinstance(value, int | str) and str(value).isdigit():
        return int(value)
    return 0


def native_name(value: str) -> str:
    """An id in Honcho's name alphabet, injectively: ``-``/alphanumerics kept, every other
    character (``_`` included) becomes ``_xx`` (``_uxxxx`` beyond Latin-1). ``__`` therefore
    never occurs inside an escaped id and can separate the parts of a composite name.
    (Not shared with graphiti's group-id encoder, which escapes non-ASCII as UTF-8 bytes:
    unifying them would rename existing workspaces, peers and sessions.)"""
    out = []
    for ch in value:
        if _SAFE.fullmatch(ch):
            out.append(ch)
        elif ord(ch) < 256:
            out.append(f"_{ord(ch):02x}")
        else:
            out.append(f"_u{ord(ch):04x}" if ord(ch) < 0x10000 else f"_U{ord(ch):08x}")
    return "".join(out)


class HonchoConfig(BaseModel):
    """``memory.honcho`` block."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(
        default=None,
        description="Honcho server URL. Falls back to HONCHO_URL; never the SDK's cloud "
        "default unless you configure it here.",
    )
    api_key: str | None = Field(default=None, description="Falls back to HONCHO_API_KEY.")
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    search_top_k: int | None = Field(
        default=None, ge=1, le=100,
        description="Conclusions retrieved by semantic search; default derives from the "
        "budget (ContextBudget.top_k), capped at 100.",
    )
    include_summary: bool = True
    observe_assistant: bool = Field(
        default=False,
        description="Let Honcho derive a representation of the assistant peer too "
        "(extra LLM work; never read by retrieve).",
    )
    dream_on_session_end: bool = Field(
        default=False,
        description="When a chat session ends (nanobot archives or compacts it: /new, "
        "/compact, idle compaction), ask Honcho to schedule a dream for the user peer "
        "(POST /schedule_dream: consolidation of the user's representation, extra LLM "
        "work on the server). The server must have dreams enabled.",
    )
    readiness_poll_s: float = Field(default=0.5, gt=0)
    readiness_settle_s: float = Field(
        default=2.0, ge=0,
        description="After a write, an empty queue counts as done only once work was "
        "seen or this long has passed (the server enqueues after its response).",
    )


def provider_info(config: HonchoConfig) -> ProviderInfo:
    """``INFO``, with ``session_end`` declared when the config asks for dreams."""
    if not config.dream_on_session_end:
        return INFO
    return INFO.model_copy(update={"capabilities": (*(INFO.capabilities or ()), "session_end")})


@dataclass
class ScopeState:
    workspace: str
    user_peer: str
    assistant_peer: str
    epoch: int
    sessions: set[str] = field(default_factory=set)  # native sessions known to exist


@dataclass
class Dirty:
    last_write: float
    seen_work: bool = False
    deleted_sessions: set[str] = field(default_factory=set)


