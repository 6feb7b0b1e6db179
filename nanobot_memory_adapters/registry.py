"""Config -> provider, through the ``nanobot_memory_adapters.backends`` entry points.

Built-in providers are registered in this package's ``pyproject.toml`` exactly like a
third party registers its own (``provider.py`` is the page for provider authors).
Providers are imported only when selected, so a missing optional extra costs nothing until
someone asks for that provider, and then it says which extra to install.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ValidationError

from nanobot_memory_adapters.config import (
    ConfigError,
    MemoryConfig,
    _suggest,
    check_endpoint_fields,
    expand_env,
    parse_memory_config,
    read_config_source,
    validation_to_config_error,
)
from nanobot_memory_adapters.contract import MemoryAdapter
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.provider import (
    ENTRY_POINT_GROUP,
    ProviderClass,
    ProviderEnv,
)
from nanobot_memory_adapters.store import as_provider
from nanobot_memory_adapters.tracing import JsonlTraceWriter, TraceSink

ProviderKind = Literal["backend", "condition"]
PACKAGE = "nanobot-memory-adapters"
CONDITION_PREFIX = "condition."


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    kind: ProviderKind
    target: str  # "module:attribute"
    extra: str | None = None  # the optional extra to install for it
    origin: str = PACKAGE  # the distribution that registered it


def available_providers() -> dict[str, ProviderSpec]:
    """Every registered provider: this package's own first, then third parties (which
    may not shadow a name already registered)."""
    try:
        distribution(PACKAGE)
    except PackageNotFoundError:
        raise ConfigError(
            "providers", f"{PACKAGE} is not installed, so its providers are not registered "
            "(they are entry points)", "pip install -e . (or the package with its extras)",
        ) from None
    found = list(entry_points(group=ENTRY_POINT_GROUP))
    found.sort(key=lambda ep: (ep.dist is None or ep.dist.name != PACKAGE))  # stable
    specs: dict[str, ProviderSpec] = {}
    for ep in found:
        kind: ProviderKind = "condition" if ep.name.startswith(CONDITION_PREFIX) else "backend"
        name = ep.name.removeprefix(CONDITION_PREFIX)
        origin = ep.dist.name if ep.dist is not None else "?"
        if name in specs:
            logger.warning("provider {!r} of {} is already registered by {}; ignored", name,
                           origin, specs[name].origin)
            continue
        extras = list(getattr(ep, "extras", []) or [])
        target = f"{ep.module}:{ep.attr}" if getattr(ep, "attr", None) else ep.value
        specs[name] = ProviderSpec(name, kind, target, extras[0] if extras else None, origin)
    return specs


def provider_class(spec: ProviderSpec) -> ProviderClass:
    """Import a provider lazily; a missing extra, or a registration that names no provider
    class, becomes an actionable ConfigError."""
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
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and isinstance(getattr(cls, "config_model", None), type)
            and callable(getattr(cls, "from_config", None))):
        raise ConfigError(
            f"memory.{spec.kind}",
            f"'{spec.name}' is registered by {spec.origin} as {spec.target}, which is not a "
            "provider class (it needs config_model and from_config)",
            "fix the entry point or the class (see nanobot_memory_adapters/provider.py)",
        )
    return cast(ProviderClass, cls)


def class_spec(target: str) -> ProviderSpec:
    """A provider class named by import path (``module:Class``), not registered: how
    ``nanobot-memory conformance --provider-class`` checks a class in development before
    its distribution declares the entry point."""
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr.isidentifier():
        raise ConfigError("--provider-class", f"{target!r} is not module:Class",
                          "e.g. --provider-class my_memory.adapter:MyAdapter")
    return ProviderSpec(name=target, kind="backend", target=target, origin="--provider-class")


def resolve_config(
    source: dict[str, Any] | str | Path | MemoryConfig,
    also: ProviderSpec | None = None,
) -> tuple[MemoryConfig, ProviderSpec]:
    """The config and its provider's registration (``also``: one more, unregistered)."""
    specs = available_providers()
    if also is not None:
        specs[also.name] = also
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
    also: ProviderSpec | None = None,
) -> MemoryAdapter:
    """Build exactly one provider from a memory config (dict, JSON file path, or model)."""
    config, spec = resolve_config(source, also)
    cls = provider_class(spec)
    block_model: type[BaseModel] = cls.config_model
    # ``${NAME}`` references (how ``setup`` stores secrets) are read here, in memory only;
    # endpoints are checked on what the provider will actually use
    raw_block = expand_env(config.provider_block(), f"memory.{spec.name}")
    check_endpoint_fields(raw_block, f"memory.{spec.name}")
    try:
        block = block_model.model_validate(raw_block)
    except ValidationError as exc:
        raise validation_to_config_error(exc, prefix=f"memory.{spec.name}") from None
    base = Path(data_dir).expanduser() if data_dir else config.resolved_data_dir()
    if trace_sink is None and config.trace_file:
        trace_sink = JsonlTraceWriter(Path(config.trace_file).expanduser())
    env = ProviderEnv(data_dir=base, memory=config, trace_sink=trace_sink)
    # a registered native store (store.py) gets the one provider wrapper
    return as_provider(cls.from_config(block, env), trace_sink=trace_sink)
