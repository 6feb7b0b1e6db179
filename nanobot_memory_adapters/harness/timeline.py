"""The timeline driver: LoCoMo conversations replayed into each provider, tested over time.

For each provider and conversation (a *unit*), in a fresh scope:

1. record the sessions in order, one event per turn (``record_events`` in one call per
   session where the provider declares ``SupportsBulkIngest``);
2. at each test point (default: after every session) wait for readiness (when declared),
   switch the provider read-only (``reason="test_session"``), ask every question whose
   evidence lies at or before that point — the question is the retrieve query and every
   provider gets the same ``ContextBudget`` — then switch back to read-write.

Memory is never reset between test points. While read-only, each question is also offered
to ``record_event`` as the user turn a live agent would record (a *gate probe*): anything
but ``skipped_read_only`` is counted as a gate violation.

Ids are deterministic (``locomo-<sample>-D3-7``), so replays are idempotent and runs
repeatable; turn timestamps come from the session date strings (one second apart).
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nanobot_memory_adapters.contract import (
    ContextBudget,
)
from nanobot_memory_adapters.harness import manifest as mf
from nanobot_memory_adapters.harness.checkpoint import open_checkpoint
from nanobot_memory_adapters.harness.datasets.locomo import (
    EvidenceStats,
    load_locomo,
)
from nanobot_memory_adapters.harness.judge import (
    BehaviouralSession,
    JudgeSetup,
    verdict_summary,
)
from nanobot_memory_adapters.harness.locomo_mapping import (
    SpeakerProtocol,
    turn_event,
)
from nanobot_memory_adapters.harness.locomo_unit import UnitRunner, unit_scope
from nanobot_memory_adapters.harness.metrics import (
    APPLICABILITY,
    kendall_tau,
    metrics_sha256,
    provider_metrics,
)
from nanobot_memory_adapters.harness.outcome import RunOutcome
from nanobot_memory_adapters.harness.prepared import Prepared, prepare_provider
from nanobot_memory_adapters.harness.seeded_ids import SeededIds
from nanobot_memory_adapters.tracing import JsonlTraceWriter

__all__ = ["BenchConfig", "BenchOutcome", "Progress", "SeededIds", "UnitRunner", "run_bench",
           "turn_event", "unit_scope"]

RESULTS_SCHEMA = "nanobot-memory-results/1"
OUTPUT_FILES = ("manifest.json", "traces.jsonl", "results.json", "report.html", "checkpoint.json")


# -- configuration -----------------------------------------------------------------------


@dataclass
class BenchConfig:
    dataset: Path
    out: Path
    providers: list[str]
    conversations: list[str] | None = None
    budget_tokens: int = 2000
    test_points: str = "every"
    run_id: str = "locomo"
    agent_id: str = "nanobot"
    seed: int = 0
    readiness_timeout_s: float = 120.0
    provider_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    gate_probe: bool = True
    fresh: bool = False
    deterministic_ids: bool = True
    judge: JudgeSetup | None = None
    sessions: list[BehaviouralSession] = field(default_factory=list)
    speakers: SpeakerProtocol = "single"
    max_sessions: int | None = None  # only each conversation's first N sessions

    @property
    def budget(self) -> ContextBudget:
        return ContextBudget(max_tokens=self.budget_tokens)


class Progress(Protocol):
    def start(self, provider: str, total: int) -> None: ...
    def advance(self, provider: str, steps: int, note: str) -> None: ...


def resolve_test_points(spec: str, sessions: Sequence[int]) -> list[int]:
    """``every`` | ``last`` | ``every:N`` | ``3,7,19`` (session numbers) -> sorted points."""
    numbers = sorted(sessions)
    if not numbers:
        return []
    spec = (spec or "every").strip().lower()
    if spec == "every":
        return numbers
    if spec == "last":
        return [numbers[-1]]
    if spec.startswith("every:"):
        step = int(spec.split(":", 1)[1])
        if step < 1:
            raise ValueError("test points every:N needs N >= 1")
        points = numbers[step - 1 :: step]
        return sorted({*points, numbers[-1]})
    try:
        wanted = {int(x) for x in spec.split(",") if x.strip()}
    except ValueError:
        raise ValueError(
            f"test points {spec!r}: use every, last, every:N or session numbers like 3,7,19"
        ) from None
    points = sorted(wanted & set(numbers))
    if not points:
        raise ValueError(f"test points {spec!r} name no session of {numbers}")
    return points


# -- the run -----------------------------------------------------------------------------


class BenchOutcome(RunOutcome):
    @property
    def paths(self) -> dict[str, Path]:
        return {name: self.out / name for name in OUTPUT_FILES}


def clear_outputs(out: Path) -> None:
    """Remove what a bench run writes into ``out`` (and nothing else)."""
    for name in OUTPUT_FILES:
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "stores", ignore_errors=True)


async def run_bench(cfg: BenchConfig, progress: Progress | None = None) -> BenchOutcome:
    """Run (or resume) a bench; see the module docstring."""
    ids = SeededIds(cfg.seed) if cfg.deterministic_ids else None
    with ids or contextlib.nullcontext():
        return await _run_bench(cfg, progress, ids)


async def _run_bench(
    cfg: BenchConfig, progress: Progress | None, ids: SeededIds | None
) -> BenchOutcome:
    random.seed(cfg.seed)
    cfg.out.mkdir(parents=True, exist_ok=True)
    if cfg.fresh:
        clear_outputs(cfg.out)
    elif (cfg.out / "checkpoint.json").exists():
        # A resume: the interrupted unit left part of its writes in the embedded stores,
        # and mem0's history keeps rows keyed by the run's seeded ids even after
        # delete_all, so a re-run unit would collide with its own earlier attempt. Finished
        # units need nothing from the stores (their results are in the checkpoint, and
        # every unit has its own scope): start the stores empty.
        shutil.rmtree(cfg.out / "stores", ignore_errors=True)
    convs = load_locomo(cfg.dataset, cfg.conversations)
    if not convs:
        raise ValueError(f"{cfg.dataset} holds no conversations")
    if cfg.max_sessions is not None:
        convs = [c.first_sessions(cfg.max_sessions) for c in convs]
    points = {
        c.sample_id: resolve_test_points(cfg.test_points, [s.number for s in c.sessions])
        for c in convs
    }
    evidence = EvidenceStats()
    for c in convs:
        evidence.add(c.evidence_stats)

    traces_path = cfg.out / "traces.jsonl"
    writer = JsonlTraceWriter(traces_path)
    prepared: list[Prepared] = []
    skipped: list[dict[str, str]] = []
    try:
        for name in cfg.providers:
            p, reason = await prepare_provider(name, cfg, writer)
            if p is None:
                skipped.append({"name": name, "reason": reason or "unknown"})
            else:
                prepared.append(p)
        manifest = mf.finalize(mf.bench_manifest(cfg, convs, points, prepared, skipped, evidence))
        cp = open_checkpoint(cfg.out, manifest["manifest_sha256"], traces_path)
        mf.write_manifest(manifest, cfg.out / "manifest.json")

        resumed = 0
        for p in prepared:
            if progress:
                progress.start(p.name, sum(len(c.sessions) for c in convs))
            for conv in convs:
                if cp.done(p.name, conv.sample_id) is not None:
                    resumed += 1
                    if progress:
                        progress.advance(
                            p.name, len(conv.sessions), f"{conv.sample_id} (checkpoint)"
                        )
                    continue
                if ids is not None:
                    ids.reseed(f"{p.name}/{conv.sample_id}")
                unit = await UnitRunner(p, conv, points[conv.sample_id], cfg, progress).run()
                cp.save_unit(unit, traces_path.stat().st_size if traces_path.exists() else 0)

        results = build_results(cfg, manifest, prepared, skipped, evidence, cp.units)
        (cfg.out / "results.json").write_text(
            json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        from nanobot_memory_adapters.harness.report import write_report

        names = {p.name for p in prepared}
        write_report(
            cfg.out / "report.html",
            manifest,
            results,
            [u for u in cp.units.values() if u["provider"] in names],
        )
        cp.complete = True
        cp.save()
        return BenchOutcome(cfg.out, manifest, results, skipped, resumed)
    finally:
        for p in prepared:
            with contextlib.suppress(Exception):
                await p.adapter.aclose()
        if cfg.judge is not None:
            with contextlib.suppress(Exception):
                await cfg.judge.aclose()


def judge_agreement(
    providers: dict[str, Any], judged: dict[str, Any], units: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """How each judge-free metric ranks the providers against the judge's accuracy
    (Kendall's tau-b over providers, final point, categories 1-4), and per question how
    often "the metric saw some evidence" agrees with "the judge said correct"."""
    names = [n for n in providers if (judged.get(n) or {}).get("overall", {}).get("accuracy")
             is not None]
    out: dict[str, Any] = {"providers": names, "rank_tau": {}, "per_question": {}}
    accuracy = [judged[n]["overall"]["accuracy"] for n in names]
    for metric in ("turn", "session", "provenance", "answer"):
        values = [providers[n]["final_point"]["categories_1_4"].get(metric) for n in names]
        pairs = [(v, a) for v, a in zip(values, accuracy, strict=True) if v is not None]
        out["rank_tau"][metric] = kendall_tau([v for v, _ in pairs], [a for _, a in pairs]) \
            if len(pairs) >= 2 else None
    field_of = {"turn": "turn_hits", "session": "session_hits", "provenance": "prov_hits",
                "answer": "answer_hit"}
    for metric, key in field_of.items():
        agree = total = 0
        for unit in units.values():
            if unit["provider"] not in names:
                continue
            final = {a["qid"]: a for a in unit["asks"] if a.get("is_final")}
            for j in unit["judged"]:
                ask = final.get(j["qid"])
                score = j["verdict"].get("score")
                if ask is None or score is None or not 1 <= int(j["category"]) <= 4:
                    continue
                seen = ask.get(key)
                if seen is None:
                    continue
                total += 1
                agree += (bool(seen) == (score >= 1.0))
        out["per_question"][metric] = {"agree": round(agree / total, 6) if total else None,
                                       "n": total}
    return out


def build_results(
    cfg: BenchConfig,
    manifest: dict[str, Any],
    prepared: list[Prepared],
    skipped: list[dict[str, str]],
    evidence: EvidenceStats,
    units: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    providers: dict[str, Any] = {}
    judged: dict[str, Any] = {}
    behavioural: dict[str, Any] = {}
    for p in prepared:
        mine = [u for u in units.values() if u["provider"] == p.name]
        order = {c: i for i, c in enumerate(manifest["dataset"]["conversations"])}
        mine.sort(key=lambda u: order.get(u["conversation"], 0))
        m = provider_metrics(p.name, mine, cfg.budget_tokens)
        m["kind"] = p.kind
        m["condition_kind"] = p.adapter.info.condition_kind
        m["memory_form"] = p.adapter.info.memory_form
        m["metrics_apply"] = APPLICABILITY[p.adapter.info.memory_form]
        providers[p.name] = m
        verdicts = [j for u in mine for j in u["judged"]]
        if verdicts:
            by_cat: dict[str, list[dict[str, Any]]] = {}
            for j in verdicts:
                by_cat.setdefault(str(j["category"]), []).append(j["verdict"])
            judged[p.name] = {
                "overall": verdict_summary([j["verdict"] for j in verdicts]),
                "by_category": {c: verdict_summary(v) for c, v in sorted(by_cat.items())},
            }
        sessions = [b for u in mine for b in u["behavioural"]]
        if sessions:
            behavioural[p.name] = sessions
    results: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        "manifest_sha256": manifest["manifest_sha256"],
        "budget_tokens": cfg.budget_tokens,
        "providers": providers,
        "skipped": skipped,
        "evidence_parsing": evidence.to_dict(),
        "metrics_sha256": metrics_sha256(providers),
        "notes": {
            "recall": "mean over asks (question x test point); final_point = last test point",
            "timing": "everything under 'timing' is excluded from metrics_sha256",
        },
    }
    if cfg.judge is not None:
        results["judged"] = {
            "note": "LLM answer + LLM judge at each conversation's final test point; "
            "separate from the judge-free metrics and not in metrics_sha256",
            "judge": cfg.judge.description,
            "providers": judged,
            "agreement": judge_agreement(providers, judged, units),
        }
    if cfg.sessions:
        results["behavioural"] = behavioural
    return results
