"""static_profile: the same fixed profile text for every query; nothing is written."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from nanobot_memory_adapters.base import NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.provider import ProviderEnv

INFO = ProviderInfo(
    name="static_profile",
    condition_kind="control",
    consistency_model="immediate",
    stores_events=False,
    memory_form="none",
    item_fields=("native_id",),
    capabilities=(),
    description="A fixed profile text (per persona or shared); no writes.",
)


class StaticProfileConfig(BaseModel):
    """``profile`` for everyone, ``profiles`` per persona id, or ``profile_file``."""

    model_config = ConfigDict(extra="forbid")

    profile: str | None = None
    profiles: dict[str, str] = {}
    profile_file: str | None = None

    @model_validator(mode="after")
    def _load_file(self) -> StaticProfileConfig:
        if self.profile_file:
            path = Path(self.profile_file).expanduser()
            if not path.is_file():
                raise ValueError(f"profile_file {str(path)!r} does not exist; give a text file")
            object.__setattr__(self, "profile", path.read_text(encoding="utf-8"))
        return self


class StaticProfile:
    # retrieve ignores the query (provider.is_query_independent): the plugin may prepare
    # a turn's recall before the message is known
    query_independent = True
    config_model = StaticProfileConfig
    no_native_backend = "static_profile is configuration only"

    def __init__(
        self,
        profile: str | None = None,
        profiles: dict[str, str] | None = None,
    ) -> None:
        self.info = INFO
        self.profile = profile
        self.profiles = dict(profiles or {})

    @classmethod
    def from_config(cls, config: StaticProfileConfig, env: ProviderEnv) -> StaticProfile:
        return cls(config.profile, config.profiles)

    async def record(self, event: MemoryEvent) -> NativeWrite:
        return NativeWrite(status="ignored", native_ids=[], native_operation="none")

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        persona = request.scope.persona_id
        text = self.profiles.get(persona, self.profile)
        items = []
        if text and text.strip():
            key = persona if persona in self.profiles else "default"
            items.append(
                RetrievedItem(native_id=f"profile:{key}", text=text.strip(), native_type="profile")
            )
        return NativeRetrieval(items=items, raw={"profile_key": persona}, native_operation="static")

    async def reset(self, scope: MemoryScope) -> str | None:
        return "static_profile has no writable state; the profile is configuration"
