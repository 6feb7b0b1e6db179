"""The manifest of a LoCoMo-format bench run (LoCoMo, LongMemEval, BEAM): the dataset
(file hash, known release, what was placed), the run's settings and each provider's entry.
Kept apart from ``manifest.py`` (what every manifest has) because it reads the bench's
prepared providers, and preparing a provider writes manifest fields."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.harness import manifest as mf
from nanobot_memory_adapters.harness.bench_config import unit_scope

if TYPE_CHECKING:
    from nanobot_memory_adapters.harness.bench_config import BenchConfig
    from nanobot_memory_adapters.harness.datasets.locomo import Conversation, EvidenceStats
    from nanobot_memory_adapters.harness.prepared import Prepared


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
            mf.provider_entry(p.name, p.kind, p.block, p.adapter, example) for p in prepared
        ],
        "skipped": skipped,
        "judge": cfg.judge.description if cfg.judge else None,
        "behavioural_sessions": [s.describe() for s in cfg.sessions],
        "paths": {"out": str(cfg.out), "dataset": str(cfg.dataset)},
    }


