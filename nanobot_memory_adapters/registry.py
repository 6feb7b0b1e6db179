"""Config -> provider. Built-in names plus the ``nanobot_memory_adapters.backends`` entry points.

Backends are imported only when selected, so a missing optional extra costs nothing until
someone asks for that backend, and then it says which extra to install.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from loguru import logger
from pydantic import BaseModel, ValidationError

from nanobot_memory_adapters.config import (
    ConfigError,
    MemoryConfig,
    _suggest,
    parse_memory_config,
    read_config_source,
    validation_to_config_error,
)
from nanobot_memory_adapters.contract import MemoryAdapter
from nanobot_memory_adapters.tracing import JsonlTraceWriter, TraceSink

ENTRY_POINT_GROUP = "nanobot_memory_adapters.backends"
ProviderKind = Literal["backend", "condition"]


@dataclass(frozen=True)
class ProviderEnv:
    """What every provider gets besides its own block."""

    data_dir: Path
    memory: MemoryConfig
    trace_sink: TraceSink | None = None


class ProviderFactory(Protocol):
    """A provider class: validates its block with ``config_model`` and builds itself.

    Optional class attributes used by ``nanobot-memory conformance``:
    ``no_native_backend`` (a reason string, for providers with no native layer to fail)
    and ``failing_variant(block) -> adapter`` (an instance whose native backend fails,
    e.g. pointed at an unreachable URL). Without either, item 7 runs the provider on a
    data dir that cannot exist.
    """

    config_model: ClassVar[type[BaseModel]]

    @classmethod
    def from_config(cls, config: Any, env: ProviderEnv) -> MemoryAdapter: ...


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    kind: ProviderKind
    target: str  # "module:attribute"
    extra: str | None = None
    summary: str = ""
    origin: str = "builtin"


BUILTIN_PROVIDERS: tuple[ProviderSpec, ...] = (
    ProviderSpec("mem0", "backend", "nanobot_memory_adapters.backends.mem0:Mem0Adapter", "mem0",
                 "mem0 (AsyncMemory) on embedded Qdrant with local embeddings"),
    ProviderSpec("graphiti", "backend",
                 "nanobot_memory_adapters.backends.graphiti:GraphitiAdapter", "graphiti",
                 "Graphiti temporal knowledge graph on embedded Kuzu"),
    ProviderSpec("honcho", "backend", "nanobot_memory_adapters.backends.honcho:HonchoAdapter",
                 "honcho", "Honcho v3 server (peers, sessions, derived representations)"),
    ProviderSpec("memos", "backend", "nanobot_memory_adapters.backends.memos:MemOSAdapter",
                 "memos", "MemOS product API server (MemCubes, grouped memories)"),
    ProviderSpec("no_memory", "condition",
                 "nanobot_memory_adapters.conditions.no_memory:NoMemory", None,
                 "control: retrieve always returns an empty context"),
    ProviderSpec("full_history", "condition",
                 "nanobot_memory_adapters.conditions.full_history:FullHistory", None,
                 "control: prior transcripts packed chronologically into the budget"),
    ProviderSpec("rolling_summary", "condition",
                 "nanobot_memory_adapters.conditions.rolling_summary:RollingSummary", None,
                 "control: nanobot's own file memory (MEMORY.md, history.jsonl, Dream)"),
    ProviderSpec("simple_rag", "condition",
                 "nanobot_memory_adapters.backends.mem0:SimpleRagAdapter", "mem0",
                 "control: mem0 with infer=False (an ablation of mem0, not an architecture)"),
    ProviderSpec("static_profile", "condition",
                 "nanobot_memory_adapters.conditions.static_profile:StaticProfile", None,
                 "control: a fixed profile text, no writes"),
    ProviderSpec("oracle_ipas", "condition",
                 "nanobot_memory_adapters.conditions.oracle_ipas:OracleIPAS", None,
                 "control: fixed ground-truth preferences, no writes"),
)


def available_providers() -> dict[str, ProviderSpec]:
    """Built-ins, then third-party entry points (which may not shadow a built-in)."""
    specs = {s.name: s for s in BUILTIN_PROVIDERS}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in specs:
            logger.warning("entry point {!r} shadows a built-in provider; ignored", ep.name)
            continue
        kind: ProviderKind = "condition" if ep.name.startswith("condition.") else "backend"
        name = ep.name.removeprefix("condition.")
        dist = ep.dist.name if ep.dist else "?"
        specs[name] = ProviderSpec(name, kind, ep.value, None, f"third-party ({dist})", dist)
    return specs


def provider_class(spec: ProviderSpec) -> type:
    """Import a provider lazily; a missing extra becomes an actionable ConfigError."""
    module_name, _, attr = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if spec.extra:
            raise ConfigError(
                f"memory.{spec.kind}",
                f"'{spec.name}' needs packages that are not installed ({exc.name or exc})",
                f"pip install 'nanobot-memory-adapters[{spec.extra}]'",
            ) from exc
        raise
    return getattr(module, attr)


def resolve_config(
    source: dict[str, Any] | str | Path | MemoryConfig,
) -> tuple[MemoryConfig, ProviderSpec]:
    specs = available_providers()
    if isinstance(source, MemoryConfig):
        config = source
    else:
        config = parse_memory_config(read_config_source(source), list(specs))
    kind: ProviderKind = "backend" if config.backend else "condition"
    name = config.provider_name
    wanted = [n for n, s in specs.items() if s.kind == kind]
    if name not in specs:
        raise ConfigError(f"memory.{kind}", f"unknown {kind} '{name}'", _suggest(name, wanted))
    spec = specs[name]
    if spec.kind != kind:
        raise ConfigError(
            f"memory.{kind}",
            f"'{name}' is a {spec.kind}, not a {kind}",
            f'use "{spec.kind}": "{name}"',
        )
    return config, spec


def load_provider(
    source: dict[str, Any] | str | Path | MemoryConfig,
    *,
    data_dir: str | Path | None = None,
    trace_sink: TraceSink | None = None,
) -> MemoryAdapter:
    """Build exactly one provider from a memory config (dict, JSON file path, or model)."""
    config, spec = resolve_config(source)
    cls = provider_class(spec)
    block_model: type[BaseModel] = cls.config_model
    try:
        block = block_model.model_validate(config.provider_block())
    except ValidationError as exc:
        raise validation_to_config_error(exc, prefix=f"memory.{spec.name}") from None
    base = Path(data_dir).expanduser() if data_dir else config.resolved_data_dir()
    if trace_sink is None and config.trace_file:
        trace_sink = JsonlTraceWriter(Path(config.trace_file).expanduser())
    env = ProviderEnv(data_dir=base, memory=config, trace_sink=trace_sink)
    return cls.from_config(block, env)
