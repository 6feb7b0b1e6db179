"""oracle_ipas: a fixed, structured ground-truth preference provider (the ceiling).

Preferences are configuration, keyed by persona; scenario/context/attribute select them
exactly (a hard filter), which is what "oracle" means. A preference with ``valid_from`` /
``valid_until`` is shown only while it holds at the request's ``as_of`` (now when the
request does not say): a changed preference shows its current value, never the old one.
Nothing is ever written.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nanobot_memory_adapters.base import NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
    utcnow,
)
from nanobot_memory_adapters.json_files import SETTINGS_BYTES, JsonFileError, load_json_file
from nanobot_memory_adapters.provider import ProviderEnv

INFO = ProviderInfo(
    name="oracle_ipas",
    condition_kind="control",
    consistency_model="immediate",
    stores_events=False,
    tag_mapping="filter",
    memory_form="none",
    item_fields=("native_id",),
    capabilities=(),
    description="Ground-truth preferences selected exactly by scenario/context/attribute.",
)


class Preference(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    attribute: str = Field(min_length=1)
    value: str = Field(min_length=1)
    context: str | None = None
    scenario: str | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None

    def holds_at(self, at: datetime) -> bool:
        start, end = self.valid_from, self.valid_until
        return (start is None or _comparable(start) <= at) and (
            end is None or at < _comparable(end))


def _comparable(value: datetime) -> datetime:
    """Naive times in a preferences file are read as UTC."""
    from datetime import UTC

    return value if value.tzinfo else value.replace(tzinfo=UTC)


class OracleConfig(BaseModel):
    """``preferences``: {persona_id: [Preference...]}, inline or from ``preferences_file``."""

    model_config = ConfigDict(extra="forbid")

    preferences: dict[str, list[Preference]] = {}
    preferences_file: str | None = None

    @model_validator(mode="after")
    def _load_file(self) -> OracleConfig:
        if self.preferences_file:
            path = Path(self.preferences_file).expanduser()
            try:
                data = load_json_file(path, what="preferences_file",
                                      max_bytes=SETTINGS_BYTES)
            except JsonFileError as exc:
                raise ValueError(f"preferences_file {exc.path!r}: {exc.problem}") from None
            loaded = {k: [Preference.model_validate(p) for p in v] for k, v in data.items()}
            object.__setattr__(self, "preferences", {**loaded, **self.preferences})
        return self


class OracleIPAS:
    config_model = OracleConfig
    no_native_backend = "oracle_ipas is configuration only"

    def __init__(
        self, preferences: dict[str, list[Preference]]
    ) -> None:
        self.info = INFO
        self.preferences = preferences

    @classmethod
    def from_config(cls, config: OracleConfig, env: ProviderEnv) -> OracleIPAS:
        return cls(config.preferences)

    async def record(self, event: MemoryEvent) -> NativeWrite:
        return NativeWrite(status="ignored", native_ids=[], native_operation="none")

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        persona = request.scope.persona_id
        wanted = request.tags()
        at = _comparable(request.as_of) if request.as_of else utcnow()
        items = []
        for index, pref in enumerate(self.preferences.get(persona, [])):
            fields = pref.model_dump(include={"attribute", "value", "context", "scenario"})
            # A preference without a tag applies everywhere; a tagged one only where it matches.
            if any(fields.get(k) not in (None, v) for k, v in wanted.items()):
                continue
            if not pref.holds_at(at):
                continue
            items.append(
                RetrievedItem(
                    native_id=f"{persona}:{index}",
                    text=f"{pref.attribute}: {pref.value}",
                    native_type="preference",
                    metadata={k: v for k, v in fields.items() if v is not None},
                )
            )
        return NativeRetrieval(
            items=items,
            raw={"persona": persona, "filter": wanted, "as_of": at.isoformat()},
            native_operation="oracle.lookup",
            native_request={"filter": wanted, "as_of": at.isoformat()},
        )

    async def reset(self, scope: MemoryScope) -> str | None:
        return "oracle_ipas has no writable state; preferences are configuration"
