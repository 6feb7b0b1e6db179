"""Writing a provider: the one page for provider authors (beside ``contract.py``).

A provider is a class, registered under the ``nanobot_memory_adapters.backends`` entry
point group of its distribution — built-ins exactly like third parties::

    [project.entry-points."nanobot_memory_adapters.backends"]
    acme = "acme_memory.adapter:AcmeAdapter"              # a backend
    "condition.acme_control" = "acme_memory:AcmeControl"  # a labelled control
    mem0 = "nanobot_memory_adapters.backends.mem0:Mem0Adapter [mem0]"  # [extra] to install

The registry validates the provider's own config block with ``config_model`` and calls
``from_config(block, env)``; the instance must satisfy ``contract.MemoryAdapter``
(subclass ``base.BaseAdapter`` for the read-only gate, traces, errors and failed-write
accounting; for bulk ingest build a ``base.BulkIngest`` and delegate ``record_events``
to it). Optional capabilities are declared in ``ProviderInfo.capabilities`` (from config
if they depend on it; their method signatures are the ``contract.Supports*`` protocols)
and asked with ``contract.supports``.
Optional hooks are declared below, read through the accessor functions (never ``getattr``
scattered through callers). ``testing/reference.py`` is a whole provider to copy. Prove
the contract with
``nanobot_memory_adapters.testing.ContractSuite``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from nanobot_memory_adapters.contract import (
    ACCEPTED_WRITE_STATUSES,
    STORED_WRITE_STATUSES,
    MemoryAdapter,
    MemoryScope,
    ProviderInfo,
    WriteStatus,
)
from nanobot_memory_adapters.tracing import TraceSink

if TYPE_CHECKING:
    from nanobot_memory_adapters.config import MemoryConfig

__all__ = [
    "ACCEPTED_WRITE_STATUSES",
    "ENTRY_POINT_GROUP",
    "STORED_WRITE_STATUSES",
    "DescribesNativeScope",
    "HasFailingVariant",
    "ProviderClass",
    "ProviderEnv",
    "WriteStatus",
    "default_info",
    "failing_variant",
    "is_host_native",
    "native_scope",
    "no_native_backend",
    "readiness_floor_s",
]

ENTRY_POINT_GROUP = "nanobot_memory_adapters.backends"


@dataclass(frozen=True)
class ProviderEnv:
    """What every provider gets besides its own block."""

    data_dir: Path  # where embedded stores live (the provider's own subdirectory is its own)
    memory: MemoryConfig  # the whole memory config (budget, scope templates, ...)
    trace_sink: TraceSink | None = None  # where traces go (None: nowhere)


class ProviderClass(Protocol):
    """What the registry needs of a registered class."""

    config_model: ClassVar[type[BaseModel]]

    @classmethod
    def from_config(cls, config: Any, env: ProviderEnv) -> MemoryAdapter: ...


# -- optional hooks ------------------------------------------------------------------------
# Class attributes and methods a provider may define; each has one accessor below.


@runtime_checkable
class HasFailingVariant(Protocol):
    """Contract item 7 (native errors become AdapterError) needs an instance whose native
    backend fails, e.g. pointed at an unreachable URL. Without it the conformance command
    runs the provider on a data dir that cannot exist."""

    @classmethod
    def failing_variant(cls, block: Any) -> MemoryAdapter: ...


@runtime_checkable
class DescribesNativeScope(Protocol):
    """What a scope is called natively (workspace, group id, cube); run manifests show it."""

    def native_scope(self, scope: MemoryScope) -> dict[str, Any]: ...


def failing_variant(cls: ProviderClass | type) -> Any | None:
    """The provider's ``failing_variant`` classmethod, or None."""
    hook = getattr(cls, "failing_variant", None)
    return hook if callable(hook) else None


def no_native_backend(cls: ProviderClass | type) -> str | None:
    """``no_native_backend``: why a provider has no native layer to fail (configuration-
    only controls), which makes contract item 7 not applicable."""
    reason = getattr(cls, "no_native_backend", None)
    return reason if isinstance(reason, str) and reason else None


def readiness_floor_s(adapter: object, default: float = 0.0) -> float:
    """``readiness_timeout_s``: the shortest readiness wait that makes sense for this
    provider (a deriver that needs minutes says so); callers wait at least this long."""
    value = getattr(adapter, "readiness_timeout_s", None)
    return float(value) if isinstance(value, int | float) else default


def native_scope(adapter: object, scope: MemoryScope) -> dict[str, Any] | None:
    return adapter.native_scope(scope) if isinstance(adapter, DescribesNativeScope) else None


def default_info(cls: ProviderClass | type) -> ProviderInfo | None:
    """``default_info``: the provider's ProviderInfo before any config (class level), for
    decisions taken before an instance exists (the nanobot plugin's, below)."""
    info = getattr(cls, "default_info", None)
    return info if isinstance(info, ProviderInfo) else None


def is_host_native(cls: ProviderClass | type) -> bool:
    """Whether the provider *is* the host's own memory (``ProviderInfo.host_native``:
    rolling_summary is nanobot's MEMORY.md and Dream). Inside nanobot the plugin then
    leaves nanobot's memory in charge instead of serving it through the slot."""
    info = default_info(cls)
    return bool(info and info.host_native)
