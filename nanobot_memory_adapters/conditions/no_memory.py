"""no_memory: the floor every memory system must beat, in the seed's two variants.

- ``no_memory`` (anonymized): retrieve is always empty; the agent does not know who it
  talks to.
- ``no_memory_named``: the agent is told the user's name and nothing else; retrieve
  shows one line, ``The user's name is <name>.``, for a persona whose name is configured.

Both store nothing. The name enters through the memory section, the one prompt slot
every condition uses, so neither the plugin nor the harness has a per-condition prompt
path; the harness fills ``names`` from the dataset (a persona's name, a LoCoMo speaker).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from nanobot_memory_adapters.base import NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.scope import check_scope_id, refuse_control_chars

INFO = ProviderInfo(
    name="no_memory",
    condition_kind="control",
    consistency_model="immediate",
    stores_events=False,
    memory_form="none",
    capabilities=(),
    description="Retrieve returns an empty context; nothing is stored (anonymized).",
)
NAMED_INFO = ProviderInfo(
    name="no_memory_named",
    condition_kind="control",
    consistency_model="immediate",
    stores_events=False,
    memory_form="none",
    item_fields=("native_id",),
    capabilities=(),
    description="Retrieve shows the user's name and nothing else; nothing is stored.",
)
NAME_LINE = "The user's name is {name}."


class NoMemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoMemory:
    config_model = NoMemoryConfig
    # retrieve ignores the query (provider.is_query_independent): the plugin may prepare
    # a turn's recall before the message is known
    query_independent = True
    no_native_backend = "no_memory has no native store"

    def __init__(self) -> None:
        self.info = INFO

    @classmethod
    def from_config(cls, config: NoMemoryConfig, env: ProviderEnv) -> NoMemory:
        return cls()

    async def record(self, event: MemoryEvent) -> NativeWrite:
        return NativeWrite(status="ignored", native_ids=[], native_operation="none")

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        return NativeRetrieval(items=[], raw=None, native_operation="none")

    async def reset(self, scope: MemoryScope) -> str | None:
        return "no_memory stores nothing"


def _check_name(value: str, field: str) -> str:
    if not value.strip():
        raise ValueError(f"{field} is empty; give the user's name, e.g. 'Alice'")
    return refuse_control_chars(value.strip(), field=field)


class NoMemoryNamedConfig(BaseModel):
    """``name`` for every persona, ``names`` per persona id (wins); at least one."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    names: dict[str, str] = {}

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else _check_name(value, "name")

    @field_validator("names")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        return {check_scope_id(pid, field="names key"): _check_name(name, f"names[{pid!r}]")
                for pid, name in value.items()}

    @model_validator(mode="after")
    def _some_name(self) -> NoMemoryNamedConfig:
        if self.name is None and not self.names:
            raise ValueError(
                "no_memory_named needs the user's name: give 'name' (everyone) or 'names' "
                "({persona_id: name}); `preferences run` and the LoCoMo bench fill it from the "
                "dataset"
            )
        return self


class NoMemoryNamed:
    """The named variant: one line with the persona's name, nothing it could learn."""

    # retrieve ignores the query (provider.is_query_independent): the plugin may prepare
    # a turn's recall before the message is known
    query_independent = True

    config_model = NoMemoryNamedConfig
    no_native_backend = "no_memory_named is configuration only"

    def __init__(self, name: str | None = None, names: dict[str, str] | None = None) -> None:
        self.info = NAMED_INFO
        self.name = name
        self.names = dict(names or {})

    @classmethod
    def from_config(cls, config: NoMemoryNamedConfig, env: ProviderEnv) -> NoMemoryNamed:
        return cls(config.name, config.names)

    async def record(self, event: MemoryEvent) -> NativeWrite:
        return NativeWrite(status="ignored", native_ids=[], native_operation="none")

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        persona = request.scope.persona_id
        name = self.names.get(persona, self.name)
        if name is None:
            return NativeRetrieval(
                items=[], raw={"persona": persona}, native_operation="name",
                warnings=[f"no name configured for persona {persona!r}; add it to 'names'"])
        key = persona if persona in self.names else "default"
        item = RetrievedItem(native_id=f"name:{key}", text=NAME_LINE.format(name=name),
                             native_type="name")
        return NativeRetrieval(items=[item], raw={"persona": persona},
                               native_operation="name")

    async def reset(self, scope: MemoryScope) -> str | None:
        return "no_memory_named stores nothing; the name is configuration"
