"""Writing a provider: the one page for provider authors (beside ``contract.py``).

A provider is a class, registered under the ``nanobot_memory_adapters.backends`` entry
point group of its distribution — built-ins exactly like third parties::

    [project.entry-points."nanobot_memory_adapters.backends"]
    acme = "acme_memory.adapter:AcmeAdapter"              # a backend
    "condition.acme_control" = "acme_memory:AcmeControl"  # a labelled control
    mem0 = "nanobot_memory_adapters.backends.mem0:Mem0Store [mem0]"  # [extra] to install

The registry validates the provider's own config block with ``config_model`` and calls
``from_config(block, env)``. The simplest answer is a native store (``store.NativeStore``:
record, retrieve, reset, health; optional capabilities as attributes), which the registry
wraps in ``store.StoreProvider``, the one wrapper that owns the read-only gate, traces,
errors and rendering. A class may instead return a whole ``contract.MemoryAdapter`` (the
built-in backends subclass ``base.BaseAdapter``, which ``StoreProvider`` is built on).
Optional capabilities are declared in ``ProviderInfo.capabilities`` (from config
if they depend on it; their method signatures are the ``contract.Supports*`` protocols)
and asked with ``contract.supports``.
Optional hooks are declared below, read through the accessor functions (never ``getattr``
scattered through callers). ``testing/reference.py`` is a whole store to copy. Prove
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
    "failing_variant",
    "is_host_native",
    "is_query_independent",
    "max_concurrent_units",
    "native_scope",
    "no_native_backend",
    "readiness_floor_s",
    "replays_checked_writes",
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
    def from_config(cls, config: Any, env: ProviderEnv) -> MemoryAdapter | Any:
        """A provider, or a ``store.NativeStore`` the registry wraps."""
        ...


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


def is_host_native(cls: ProviderClass | type) -> bool:
    """``host_native = True`` (class level): the provider *is* the host's own memory
    (rolling_summary is nanobot's MEMORY.md and Dream). Inside nanobot the plugin then
    leaves nanobot's memory in charge instead of serving it through the slot."""
    return getattr(cls, "host_native", False) is True


def is_query_independent(adapter: object) -> bool:
    """``query_independent = True``: retrieve's result does not depend on the request's
    query (full_history, static_profile, no_memory, rolling_summary), so the nanobot plugin
    may prepare a turn's recall before the message is known (with ``store_version``;
    contract item 13 checks both)."""
    return getattr(adapter, "query_independent", False) is True


def max_concurrent_units(adapter: object) -> int | None:
    """``max_concurrent_units``: how many harness units (each with its own scope and, for
    embedded stores, its own store) may run against this provider at once; None: any."""
    value = getattr(adapter, "max_concurrent_units", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 \
        else None


def replays_checked_writes(adapter: object) -> bool:
    """``replay_checked_writes = True``: record_event and record_events look a replayed
    event_id up in the store and do not store it twice, and the store outlives the
    process, so a harness unit interrupted mid-way resumes after its last finished
    session instead of starting over."""
    return getattr(adapter, "replay_checked_writes", False) is True
