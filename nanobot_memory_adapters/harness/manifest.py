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
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import MemoryAdapter, MemoryScope, capabilities_of
from nanobot_memory_adapters.harness.metrics import canonical_sha256
from nanobot_memory_adapters.tracing import redact
from nanobot_memory_adapters.versions import installed_versions

if TYPE_CHECKING:
    from nanobot_memory_adapters.harness.datasets.locomo import Conversation, EvidenceStats
    from nanobot_memory_adapters.harness.prepared import Prepared
    from nanobot_memory_adapters.harness.timeline import BenchConfig

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


def bench_manifest(
    cfg: BenchConfig,
    convs: list[Conversation],
    points: dict[str, list[int]],
    prepared: list[Prepared],
    skipped: list[dict[str, str]],
    evidence: EvidenceStats,
) -> dict[str, Any]:
    """The manifest of a LoCoMo bench run (before ``finalize``)."""
    from nanobot_memory_adapters.harness.datasets.locomo import file_sha256
    from nanobot_memory_adapters.harness.datasets.releases import folder_sha256, known_release
    from nanobot_memory_adapters.harness.locomo_mapping import describe as describe_speakers
    from nanobot_memory_adapters.harness.locomo_unit import unit_scope

    example = (
        unit_scope(cfg, convs[0]) if convs else MemoryScope(run_id=cfg.run_id, persona_id="none")
    )
    return {
        "kind": "bench",
        "dataset": {
            "format": cfg.task,
            "file": cfg.dataset.name,
            "sha256": (sha := file_sha256(cfg.dataset) if cfg.dataset.is_file()
                       else folder_sha256(cfg.dataset)),
            "release": known_release(sha),
            "conversations": [c.sample_id for c in convs],
            "sessions": {c.sample_id: len(c.sessions) for c in convs},
            "turns": sum(len(c.turns) for c in convs),
            "questions_placed": sum(len(c.questions) for c in convs),
            "evidence_parsing": evidence.to_dict(),
        },
        "settings": {
            "budget": cfg.budget.model_dump(),
            **({"budget_sweep": list(cfg.budgets)} if cfg.budgets else {}),
            "test_points": cfg.test_points,
            "test_points_resolved": points,
            "ask_rule": "at each test point, every question whose evidence lies at or before it",
            "run_id": cfg.run_id,
            "agent_id": cfg.agent_id,
            "persona_id": "<sample_id>",
            "speakers": cfg.speakers,
            "max_sessions": cfg.max_sessions,
            "turn_event": "one event per turn; " + describe_speakers(cfg.speakers)
            + "; image turns append '[shares a photo: caption]'",
            "gate_probe": cfg.gate_probe,
            "deterministic_ids": cfg.deterministic_ids,
            "readiness_timeout_s": cfg.readiness_timeout_s,
        },
        "seed": cfg.seed,
        "providers": [
            provider_entry(p.name, p.kind, p.block, p.adapter, example) for p in prepared
        ],
        "skipped": skipped,
        "judge": cfg.judge.description if cfg.judge else None,
        "behavioural_sessions": [s.describe() for s in cfg.sessions],
        "paths": {"out": str(cfg.out), "dataset": str(cfg.dataset)},
    }


