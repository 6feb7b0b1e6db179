"""Run manifests: what was compared, with which versions, settings and config.

A manifest names the provider(s), the installed versions, a hash of each provider's
native config block (validated, defaults filled in, secrets removed), its capability
flags, the scope mapping and the seed. ``manifest_sha256`` covers everything except
``created_at`` and local ``paths``, so the same command gives the same hash.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.contract import MemoryAdapter, MemoryScope, capabilities_of
from nanobot_memory_adapters.harness.metrics import canonical_sha256
from nanobot_memory_adapters.tracing import redact
from nanobot_memory_adapters.versions import installed_versions

MANIFEST_SCHEMA = "nanobot-memory-manifest/1"
VOLATILE_KEYS = ("created_at", "manifest_sha256", "paths")


def provider_source(name: str, block: dict[str, Any] | None = None) -> dict[str, Any]:
    """A memory config selecting ``name`` (backend or condition) with its block."""
    from nanobot_memory_adapters.registry import available_providers

    specs = available_providers()
    kind = specs[name].kind if name in specs else "backend"
    source: dict[str, Any] = {kind: name}
    if block:
        source[name] = block
    return source


def native_config(source: Any) -> tuple[str, str, dict[str, Any]]:
    """(provider name, kind, validated block with defaults and secrets removed)."""
    from nanobot_memory_adapters.registry import provider_class, resolve_config

    config, spec = resolve_config(source)
    cls = provider_class(spec)
    block = cls.config_model.model_validate(config.provider_block())
    return spec.name, spec.kind, redact(block.model_dump(mode="json"))


def config_sha256(name: str, block: dict[str, Any]) -> str:
    return canonical_sha256({"provider": name, "config": redact(block)})


def scope_mapping(adapter: MemoryAdapter, scope: MemoryScope) -> dict[str, Any]:
    """The nanobot ids and how the provider says it uses them (when it says)."""
    mapping: dict[str, Any] = {
        "run_id": scope.run_id,
        "persona_id": scope.persona_id,
        "agent_id": scope.agent_id,
        "scope_key": scope.key,
    }
    from nanobot_memory_adapters.provider import native_scope

    try:
        native = native_scope(adapter, scope)
    except Exception as exc:  # a diagnostic, never a reason to fail a manifest
        mapping["native_error"] = f"{type(exc).__name__}: {exc}"
    else:
        if native is not None:
            mapping["native"] = redact(native)
    return mapping


def provider_entry(
    name: str,
    kind: str,
    block: dict[str, Any],
    adapter: MemoryAdapter,
    scope: MemoryScope,
) -> dict[str, Any]:
    info = adapter.info
    return {
        "name": name,
        "kind": kind,
        "condition_kind": info.condition_kind,
        "consistency_model": info.consistency_model,
        "stores_events": info.stores_events,
        "tag_mapping": info.tag_mapping,
        "native_memory_types": list(info.native_memory_types),
        "native_ingest_modes": list(info.native_ingest_modes),
        "requires_llm": info.requires_llm,
        "capabilities": capabilities_of(adapter),
        "config": block,
        "config_sha256": config_sha256(name, block),
        "scope_mapping": scope_mapping(adapter, scope),
    }


def finalize(manifest: dict[str, Any]) -> dict[str, Any]:
    """Add ``schema``, ``versions`` (if absent), ``created_at`` and ``manifest_sha256``."""
    manifest.setdefault("schema", MANIFEST_SCHEMA)
    manifest.setdefault("versions", installed_versions())
    stable = {k: v for k, v in manifest.items() if k not in VOLATILE_KEYS}
    manifest["manifest_sha256"] = canonical_sha256(stable)
    manifest["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return manifest


def write_manifest(manifest: dict[str, Any], path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n")
    return p
