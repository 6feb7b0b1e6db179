"""The timeline driver: LoCoMo conversations replayed into each provider, tested over time.

For each provider and conversation (a *unit*), in a fresh scope:

1. record the sessions in order, one event per turn (``record_events`` in one call per
   session where the provider declares ``SupportsBulkIngest``; inside its
   ``ingest_lookahead`` over the coming sessions where it declares that);
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
from dataclasses import replace
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness import manifest as mf
from nanobot_memory_adapters.harness.bench_config import (
    BenchConfig,
    ExecutionPlan,
    Progress,
    unit_scope,
)
from nanobot_memory_adapters.harness.bench_manifest import bench_manifest
from nanobot_memory_adapters.harness.checkpoint import open_checkpoint
from nanobot_memory_adapters.harness.datasets.gold_corrections import apply_corrections
from nanobot_memory_adapters.harness.datasets.locomo import (
    EvidenceStats,
    load_locomo,
)
from nanobot_memory_adapters.harness.executors import (
    NoDisplay,
    UnitDisplay,
    execute,
)
from nanobot_memory_adapters.harness.judge import (
    HEADLINE_NOTE,
    split_headline,
    verdict_summary,
)
from nanobot_memory_adapters.harness.locomo_mapping import (
    names_block,
    turn_event,
)
from nanobot_memory_adapters.harness.locomo_stats import SATURATED, locomo_intervals
from nanobot_memory_adapters.harness.locomo_unit import UnitRunner
from nanobot_memory_adapters.harness.metrics import (
    APPLICABILITY,
    asks_at,
    canonical_sha256,
    kendall_tau,
    metrics_sha256,
    provider_metrics,
)
from nanobot_memory_adapters.harness.outcome import RunOutcome
from nanobot_memory_adapters.harness.prepared import Prepared, prepare_provider
from nanobot_memory_adapters.harness.progress import token_sizes
from nanobot_memory_adapters.harness.safe_paths import (
    PROBE_DIR,
    claim_run_folder,
    remove_file,
    remove_tree,
    safe_name,
)
from nanobot_memory_adapters.harness.seeded_ids import SeededIds
from nanobot_memory_adapters.harness.unit_progress import (
    discard_progress,
    keeps_store,
    load_progress,
    progress_path,
)
from nanobot_memory_adapters.harness.units import UnitJob, part_name, unit_key
from nanobot_memory_adapters.provider import max_concurrent_units, replays_checked_writes
from nanobot_memory_adapters.tracing import JsonlTraceWriter

__all__ = ["BenchConfig", "BenchOutcome", "Progress", "SeededIds", "UnitRunner", "run_bench",
           "turn_event", "unit_scope"]

RESULTS_SCHEMA = "nanobot-memory-results/1"
OUTPUT_FILES = ("manifest.json", "traces.jsonl", "results.json", "report.html", "checkpoint.json")
PARTS_DIR = "units"  # each unit's traces until the run joins them into traces.jsonl
#: what a bench run writes into its folder (and may delete or overwrite there)
RUN_NAMES = (*OUTPUT_FILES, "stores", PARTS_DIR)
REPLAY_NOTE = (
    "units in timing.replayed_cut_sessions resumed in the middle of a session: that session "
    "was recorded again under ids of its own, so contexts, token statistics and "
    "metrics_sha256 can differ from an uninterrupted run's (recall usually does not)")


# -- configuration -----------------------------------------------------------------------


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
        try:
            step = int(spec.split(":", 1)[1])
        except ValueError:
            step = 0
        if step < 1:
            raise ValueError(f"test points {spec!r}: every:N needs a whole number N >= 1 "
                             "(every:3 tests after every third session)")
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
        remove_file(out, out / name)
    remove_tree(out, out / "stores")
    remove_tree(out, out / PARTS_DIR)


def store_dir(out: Path, provider: str, sample_id: str) -> Path:
    """Where a unit's embedded store lives: ``<out>/stores/<provider>/<sample id>``, each
    part a ``safe_name`` (an id never climbs out of ``out`` or shares a folder)."""
    return out / "stores" / safe_name(provider) / safe_name(sample_id)


async def run_bench(cfg: BenchConfig, progress: UnitDisplay | None = None) -> BenchOutcome:
    """Run (or resume) a bench; see the module docstring."""
    random.seed(cfg.seed)
    convs = load_units(cfg)  # bad input is refused before anything in --out is touched
    if not convs:
        raise ValueError(f"{cfg.dataset} holds no conversations")
    corrected: dict[str, Any] | None = None
    if cfg.gold_corrections is not None:
        convs, corrected = apply_corrections(convs, cfg.gold_corrections)
    if cfg.max_sessions is not None:
        convs = [c.first_sessions(cfg.max_sessions) for c in convs]
    if (cfg.task == "locomo" and "no_memory_named" in cfg.providers
            and "no_memory_named" not in cfg.provider_configs):  # the dataset's names
        named = names_block(convs, cfg.speakers, cfg.run_id, cfg.agent_id)
        cfg = replace(cfg, provider_configs={**cfg.provider_configs, "no_memory_named": named})
    points = {
        c.sample_id: resolve_test_points(cfg.test_points, [s.number for s in c.sessions])
        for c in convs
    }
    claim_run_folder(cfg.out, RUN_NAMES)
    if cfg.fresh:
        clear_outputs(cfg.out)
    evidence = EvidenceStats()
    for c in convs:
        evidence.add(c.evidence_stats)

    traces_path = cfg.out / "traces.jsonl"
    parts = cfg.out / PARTS_DIR
    prepared: list[Prepared] = []
    skipped: list[dict[str, str]] = []
    try:
        # Each provider is built once here (health, skip reason, manifest entry) in a
        # store of its own, then closed: every unit builds its own where it runs.
        ids = SeededIds(cfg.seed) if cfg.deterministic_ids else None
        with ids or contextlib.nullcontext():
            for name in cfg.providers:
                p, reason = await prepare_provider(
                    name, cfg, JsonlTraceWriter(cfg.out / "stores" / f"{PROBE_DIR}-traces.jsonl"),
                    data_dir=cfg.out / "stores" / safe_name(name) / PROBE_DIR,
                )
                if p is None:
                    skipped.append({"name": name, "reason": reason or "unknown"})
                else:
                    prepared.append(p)
        manifest = bench_manifest(cfg, convs, points, prepared, skipped, evidence)
        if corrected is not None:  # in the hash: another corrections file, another run
            manifest["dataset"]["gold_corrections"] = corrected
        manifest = mf.finalize(manifest)
        for p in prepared:
            with contextlib.suppress(Exception):
                await p.adapter.aclose()
        cp = open_checkpoint(cfg.out, manifest["manifest_sha256"])
        mf.write_manifest(manifest, cfg.out / "manifest.json")
        prepared = leave_out(prepared, skipped, cfg.leave_out)

        jobs: list[UnitJob] = []
        resumed = partly = 0
        for p in prepared:
            for conv in convs:
                key = unit_key(p.name, conv.sample_id)
                part = parts / part_name(key)
                if cp.done(p.name, conv.sample_id) is not None and part.exists():
                    remove_file(cfg.out, progress_path(part))
                    resumed += 1
                    continue
                store = store_dir(cfg.out, p.name, conv.sample_id)
                # Ray: a worker-local temporary store (the worker may be another machine)
                local = cfg.execution.executor == "local"
                # a unit that finished sessions in a store that kept them goes on from there
                resumable = local and replays_checked_writes(p.adapter) and keeps_store(store)
                sha = manifest["manifest_sha256"]
                partial = load_progress(part, sha, cfg.out) if resumable else None
                if partial is None:
                    # an unfinished (or never started) unit starts over in an empty store
                    discard_progress(part, cfg.out)
                    remove_tree(cfg.out, store)
                else:
                    partly += 1
                jobs.append(UnitJob(cfg, p.name, conv, points[conv.sample_id],
                                    store if local else None, resume=partial,
                                    manifest_sha256=sha))
        plan = cfg.execution
        limits = {p.name: n for p in prepared if (n := max_concurrent_units(p.adapter))}
        # A block that names its own store path puts every unit in that one store:
        # its units run one at a time (they would share an embedded store's lock).
        limits.update({p.name: 1 for p in prepared if _pins_a_store(p.block)})
        plan = ExecutionPlan(plan.executor, plan.workers, plan.ray_address,
                             {**limits, **plan.limits})
        if progress is not None:
            progress.planned(len(jobs) + resumed, resumed)
            sizes = getattr(progress, "sizes", None)  # a units display: ETA, tokens/s
            if sizes is not None:
                sizes(token_sizes(jobs))

        def done(job: UnitJob, unit: dict[str, Any]) -> None:
            cp.save_unit(unit)
            remove_file(cfg.out, progress_path(parts / part_name(job.key)))

        await execute(plan, jobs, parts, progress or NoDisplay(), done)

        join_traces(traces_path, [parts / part_name(unit_key(p.name, c.sample_id))
                                  for p in prepared for c in convs])
        results = build_results(cfg, manifest, prepared, skipped, evidence, cp.units)
        results["timing"] = {"execution": plan.describe()}
        names = {p.name for p in prepared}
        cut = {unit_key(u["provider"], u["conversation"]): u["replayed_cut_sessions"]
               for u in cp.units.values()
               if u.get("replayed_cut_sessions") and u["provider"] in names}
        if cut:  # ids of a replayed session differ: the metrics may too (docs/harness.md)
            results["timing"]["replayed_cut_sessions"] = cut
            results["notes"]["resume"] = REPLAY_NOTE
        (cfg.out / "results.json").write_text(
            json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        from nanobot_memory_adapters.harness.report import write_report

        write_report(
            cfg.out / "report.html",
            manifest,
            results,
            [u for u in cp.units.values() if u["provider"] in names],
        )
        cp.complete = not cfg.leave_out  # a left-out provider's units are still to run
        cp.save()
        return BenchOutcome(cfg.out, manifest, results, skipped, resumed, resumed_mid_unit=partly)
    finally:
        for p in prepared:
            with contextlib.suppress(Exception):
                await p.adapter.aclose()
        if cfg.judge is not None:
            with contextlib.suppress(Exception):
                await cfg.judge.aclose()


LEFT_OUT = ("left out of this run (--leave-out); its finished units are kept, and a "
            "run without the option resumes it")


def leave_out(prepared: list[Prepared], skipped: list[dict[str, str]],
              names: list[str]) -> list[Prepared]:
    """The providers that run now; those in ``names`` join ``skipped`` with the reason
    (after the manifest, whose hash they stay in: the run is the same run)."""
    for p in prepared:
        if p.name in names:
            skipped.append({"name": p.name, "reason": LEFT_OUT})
    return [p for p in prepared if p.name not in names]


def load_units(cfg: BenchConfig) -> list[Any]:
    """The run's units: LoCoMo conversations, or one LongMemEval question each."""
    if cfg.task == "longmemeval":
        from nanobot_memory_adapters.harness.datasets.longmemeval import load_longmemeval

        return list(load_longmemeval(cfg.dataset, cfg.conversations))
    if cfg.task == "beam":
        from nanobot_memory_adapters.harness.datasets.beam import load_beam

        return load_beam(cfg.dataset, cfg.conversations)
    return list(load_locomo(cfg.dataset, cfg.conversations))


def join_traces(path: Path, parts: list[Path]) -> None:
    """traces.jsonl: the units' trace files in the run's order (providers as listed,
    conversations as in the dataset), whatever order they finished in."""
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        for part in parts:
            if part.exists():
                with part.open("rb") as f:
                    shutil.copyfileobj(f, out)
    tmp.replace(path)


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


def budget_curve(providers: dict[str, Any]) -> dict[str, Any]:
    """Per provider at one budget: the mean context tokens it used and its recall."""
    return {
        name: {
            "tokens_mean": m["context_tokens"]["mean"],
            "turn": m["recall"]["overall"]["turn"],
            "session": m["recall"]["overall"]["session"],
            "provenance": m["recall"]["overall"].get("provenance"),
            "answer": m["recall"]["overall"].get("answer"),
        }
        for name, m in providers.items()
    }


def build_results(
    cfg: BenchConfig,
    manifest: dict[str, Any],
    prepared: list[Prepared],
    skipped: list[dict[str, str]],
    evidence: EvidenceStats,
    units: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    judged: dict[str, Any] = {}
    behavioural: dict[str, Any] = {}
    order = {c: i for i, c in enumerate(manifest["dataset"]["conversations"])}
    by_provider: dict[str, list[dict[str, Any]]] = {}
    for p in prepared:
        mine = [u for u in units.values() if u["provider"] == p.name]
        mine.sort(key=lambda u: order.get(u["conversation"], 0))
        by_provider[p.name] = mine

    def metrics_at(budget: int) -> dict[str, Any]:
        block: dict[str, Any] = {}
        for p in prepared:
            m = provider_metrics(p.name, asks_at(by_provider[p.name], budget,
                                                 cfg.budget_tokens), budget)
            m["kind"] = p.kind
            m["condition_kind"] = p.adapter.info.condition_kind
            m["memory_form"] = p.adapter.info.memory_form
            m["metrics_apply"] = APPLICABILITY[p.adapter.info.memory_form]
            block[p.name] = m
        return block

    sweep = [{"budget_tokens": b, "providers": metrics_at(b)} for b in cfg.all_budgets]
    for entry in sweep:
        entry["metrics_sha256"] = metrics_sha256(entry["providers"])
    providers = sweep[0]["providers"]
    for p in prepared:
        mine = by_provider[p.name]
        verdicts = [j for u in mine for j in u["judged"]]
        if verdicts:
            by_cat: dict[str, list[dict[str, Any]]] = {}
            for j in verdicts:
                by_cat.setdefault(str(j["category"]), []).append(j["verdict"])
            # the headline over answerable questions; what is not (LoCoMo's category 5,
            # LongMemEval's _abs, BEAM's abstention ability) apart, never averaged in
            head, (apart_name, apart) = split_headline(cfg.task, verdicts)
            judged[p.name] = {
                "overall": verdict_summary([j["verdict"] for j in head]),
                "by_category": {c: verdict_summary(v) for c, v in sorted(by_cat.items())},
                apart_name: verdict_summary([j["verdict"] for j in apart]),
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
        # one budget: the providers' hash; a sweep: the hash of every budget's hash
        "metrics_sha256": metrics_sha256(providers) if len(sweep) == 1
        else canonical_sha256([e["metrics_sha256"] for e in sweep]),
        "notes": {
            "recall": "mean over asks (question x test point); final_point = last test point",
            "timing": "everything under 'timing' is excluded from metrics_sha256",
        },
    }
    # intervals and pairwise verdicts: outside 'providers', so outside metrics_sha256.
    # LoCoMo's (categories 1-4, category 5 adversarial apart) for LoCoMo only: the other
    # benchmarks' category codes mean something else; their blocks carry their own.
    if cfg.task == "locomo":
        results["intervals"] = locomo_intervals(
            cfg.out / "traces.jsonl", [p.name for p in prepared],
            cfg.budget_tokens if len(sweep) > 1 else None)
    results["notes"]["session_recall"] = SATURATED
    if len(sweep) > 1:
        results["budgets"] = [
            {**e, "curve": budget_curve(e["providers"])} for e in sweep
        ]
        results["notes"]["budgets"] = (
            "a recall-vs-budget sweep: every question asked at each budget (a fresh native "
            "retrieve, ingest once); 'providers' above is the headline budget, the first")
    if cfg.judge is not None:
        results["judged"] = {
            "note": "LLM answer + LLM judge at each conversation's final test point; "
            "separate from the judge-free metrics and not in metrics_sha256; "
            + HEADLINE_NOTE[cfg.task],
            "judge": cfg.judge.description,
            "providers": judged,
        }
        if cfg.task == "locomo":  # ranks over LoCoMo's categories 1-4
            results["judged"]["agreement"] = judge_agreement(providers, judged, units)
    if cfg.sessions:
        results["behavioural"] = behavioural
    if cfg.task == "longmemeval":
        from nanobot_memory_adapters.harness.lme_task import longmemeval_block

        results["longmemeval"] = longmemeval_block(cfg, by_provider)
    elif cfg.task == "beam":
        from nanobot_memory_adapters.harness.beam_task import beam_block

        results["beam"] = beam_block(by_provider, cfg.judge is not None, cfg.budget_tokens)
    else:
        from nanobot_memory_adapters.harness.ranked_k import ranked_block

        results["ranked_at_k"] = ranked_block(by_provider, cfg.budget_tokens, cfg.budget_tokens)
    return results


def _pins_a_store(block: Any) -> bool:
    """True when a provider block (at any depth) names a store file or folder of its own
    (``path``, ``*_db_path``) instead of the run's per-unit data dir."""
    if isinstance(block, dict):
        return any(((k == "path" or k.endswith("_db_path")) and v) or _pins_a_store(v)
                   for k, v in block.items())
    if isinstance(block, list):
        return any(_pins_a_store(v) for v in block)
    return False
