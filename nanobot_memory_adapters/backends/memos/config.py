"""``memory.memos``: the config block, the id mapping into MemOS ids, the ProviderInfo."""

from __future__ import annotations

import hashlib
import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nanobot_memory_adapters.contract import (
    ProviderInfo,
)

DEFAULT_PORT = 8765  # the launcher's default port and the adapter's default URL
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
MEMOS_GROUPS = ("text_mem", "pref_mem", "tool_mem", "skill_mem", "act_mem", "para_mem")
TERMINAL = {"completed", "failed", "cancelled"}
SAFE = re.compile(r"[^A-Za-z0-9_.@-]")
TAG_KEYS = ("scenario", "context", "attribute")
# Filter keys that would reach across scopes (the cube is the scope).
SCOPE_KEYS = {"user_name", "user_id", "cube_id", "mem_cube_id"}

NATIVE_TYPES = (
    "LongTermMemory", "UserMemory", "WorkingMemory", "PreferenceMemory",
    "ToolSchemaMemory", "ToolTrajectoryMemory", "SkillMemory", "RawFileMemory",
)  # fmt: skip


# MemOS 2.0.33 sets ``use_multi_db`` in its server's graph store config, never per request:
# ``APIConfig.get_postgres_config`` fixes it to False and ``PostgresGraphDB`` keys every row
# by ``user_name`` (the cube) in one database and schema. The product API has no field for it.
MULTI_DB_REFUSED = (
    "physical isolation (a database per cube) is not available: MemOS's server fixes "
    "use_multi_db=False for its postgres graph store (the launcher's), and its product API "
    "takes no such setting, so each cube is isolated logically in one shared database; "
    "set use_multi_db: false"
)
ISOLATION = "logical: one cube per persona and run, rows keyed by cube in one shared database"


class MemOSConfig(BaseModel):
    """The ``memos`` block."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(
        default=None, description=f"MemOS server (default $MEMOS_URL, else {DEFAULT_URL})."
    )
    api_key: str | None = Field(default=None, description="Sent as 'Authorization: Bearer'.")
    timeout_s: float = Field(default=60.0, gt=0)
    namespace: str = Field(default="nbm", min_length=1, description="Cube namespace prefix.")
    user_id_template: str = "{run_id}__{persona_id}"
    cube_id_template: str = "{namespace}__{run_id}__{persona_id}"
    async_mode: Literal["async", "sync"] = "async"
    add_mode: Literal["fast", "fine"] | None = Field(
        default=None, description="MemOS add mode for sync adds (None = MemOS default, fine)."
    )
    search_mode: Literal["fast", "fine", "mixture"] = "fast"
    relativity: float = Field(
        default=0.1,
        ge=0,
        description="MemOS relevance threshold. Its default 0.45 drops good hits with MiniLM "
        "(question vs. statement scores ~0.2); 0.1 matches the mem0 adapter's threshold.",
    )
    dedup: Literal["no", "sim", "mmr"] | None = "mmr"
    rerank: bool = True
    include_preference: bool = False
    pref_top_k: int = Field(default=6, ge=0)
    search_tool_memory: bool = False
    tool_mem_top_k: int = Field(default=6, ge=0)
    include_skill_memory: bool = False
    skill_mem_top_k: int = Field(default=3, ge=0)
    tag_mapping: Literal["filter", "metadata"] = "filter"
    item_text_tokens: int = Field(
        default=35, gt=0, description="Mean tokens of one memory's text (budget -> top_k); "
        "an estimate, not yet measured on a real model (docs/gaps.md).",
    )
    top_k_ceiling: int = Field(default=50, gt=0)
    readiness_poll_s: float = Field(default=0.25, gt=0)
    feedback: bool = Field(
        default=False, description="Declare the feedback capability (/product/feedback)."
    )
    feedback_async_mode: Literal["async", "sync"] = "sync"
    use_multi_db: bool = Field(
        default=False,
        description="MemOS's isolation mode (recorded in run manifests). False: logical "
        "isolation, one cube per scope in one shared database. True (physical, a database "
        "per user) is refused: the MemOS server mode the launcher runs cannot honour it.",
    )

    @field_validator("use_multi_db")
    @classmethod
    def _physical_isolation(cls, value: bool) -> bool:
        if value:
            raise ValueError(MULTI_DB_REFUSED)
        return value

    def resolved_url(self) -> str:
        return (self.base_url or os.environ.get("MEMOS_URL") or DEFAULT_URL).rstrip("/")


def provider_info(config: MemOSConfig) -> ProviderInfo:
    asynchronous = config.async_mode == "async"
    return ProviderInfo(
        name="memos",
        condition_kind="architecture",
        consistency_model="async_derived" if asynchronous else "immediate",
        stores_events=True,
        tag_mapping=config.tag_mapping,
        memory_form="derived",
        item_fields=("native_id", "native_type", "group", "score", "created_at"),
        native_memory_types=NATIVE_TYPES,
        native_ingest_modes=("add(async)", "add(sync, fast)", "add(sync, fine)"),
        requires_llm=True,
        capabilities=("feedback", "readiness", "native_query") if config.feedback
        else ("readiness", "native_query"),
        description="MemOS product API: MemCube per persona, LLM extraction by the "
        "scheduler, grouped textual/preference/tool/skill memories.",
    )


def safe_id(value: str) -> str:
    """An id MemOS can use as cube/user id and inside ``:``-separated stream keys."""
    clean = SAFE.sub("_", value)
    if clean == value:
        return value
    return f"{clean}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"


def id_part(value: str) -> str:
    """A scope id as one part of a ``__``-joined MemOS id. Parts that contain ``__`` or
    start/end with ``_`` would make ``(a__b, c)`` and ``(a, b__c)`` the same cube, so they
    lose their ``_`` and get a hash suffix; every other id is kept as it is."""
    if "__" in value or value.startswith("_") or value.endswith("_"):
        return f"{value.replace('_', '-')}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"
    return value


