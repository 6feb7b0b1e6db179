"""The behavioural preference benchmark: the design's test-session flow.

For each provider and persona (a *unit*), in a fresh scope:

1. the persona's accumulation sessions are recorded in order (one event per exchange,
   the session's context as its tag; bulk where the provider declares it);
2. at each test point (after session N): wait for readiness, switch the provider
   read-only (``reason="test_session"``), run that point's test sessions, switch back.
   A test session is one conversation with a real nanobot ``AgentLoop`` whose memory
   plugin is active on this provider (``agent.NanobotAgent``); nanobot retrieves with the
   user's message as the query and the test's tags and timeline time, chooses, and the
   choice is scored against the persona's current preference. Each test's turns are then
   offered to ``record_event`` as a gate probe (only ``skipped_read_only`` is right);
3. in the ``+feedback`` experiment group only (a provider named ``memos+feedback``), the
   user's reaction to each option choice goes to the provider's native ``apply_feedback``
   after the test point, read-write. Never part of the accumulation-only default.

Without an agent model (``agent=None``) the test sessions are retrieval-only: the
harness sends the request the plugin would send and scores exposure only.

Outputs (``out``): ``scenarios.json`` (the exact set used), ``manifest.json``,
``traces.jsonl``, ``results.json``, ``report.html``, ``checkpoint.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.contract import (
    MemoryScope,
    supports,
)
from nanobot_memory_adapters.harness import manifest as mf
from nanobot_memory_adapters.harness.checkpoint import Checkpoint, open_checkpoint
from nanobot_memory_adapters.harness.metrics import stored_nothing_summary
from nanobot_memory_adapters.harness.outcome import PARTIAL_RESULTS, RunOutcome
from nanobot_memory_adapters.harness.preferences.agent import AgentLLM
from nanobot_memory_adapters.harness.preferences.config import (
    PreferenceBenchConfig as PreferenceBenchConfig,  # its home is config.py; named here too
)
from nanobot_memory_adapters.harness.preferences.config import RubricJudge as RubricJudge
from nanobot_memory_adapters.harness.preferences.format import (
    ScenarioSet,
    dump_scenarios,
    scenario_sha256,
)
from nanobot_memory_adapters.harness.preferences.reader import default_rate
from nanobot_memory_adapters.harness.preferences.scoring import (
    exposure_sha256,
    pairwise,
    provider_scores,
)
from nanobot_memory_adapters.harness.preferences.unit import PreferenceUnit
from nanobot_memory_adapters.harness.prepared import Prepared, prepare_provider
from nanobot_memory_adapters.harness.safe_paths import remove_file
from nanobot_memory_adapters.harness.seeded_ids import SeededIds
from nanobot_memory_adapters.harness.trace_sink import error_text
from nanobot_memory_adapters.json_files import write_json_atomic
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.tracing import JsonlTraceWriter

RESULTS_SCHEMA = "nanobot-memory-preference-results/1"
PARTIAL = PARTIAL_RESULTS  # a stopped run's results over its finished units
OUTPUT_FILES = ("scenarios.json", "manifest.json", "traces.jsonl", "results.json",
                PARTIAL, "report.html", "checkpoint.json")
FEEDBACK_SUFFIX = "+feedback"


def split_group(name: str) -> tuple[str, str]:
    """``memos+feedback`` -> (``memos``, ``feedback``); plain names are ``accumulation``."""
    if name.endswith(FEEDBACK_SUFFIX):
        return name[: -len(FEEDBACK_SUFFIX)], "feedback"
    return name, "accumulation"


def _with_feedback_switch(base: str, block: dict[str, Any] | None) -> dict[str, Any] | None:
    """A provider whose block has a ``feedback`` switch (MemOS) gets it on in the feedback
    group, unless the user's block says otherwise."""
    from nanobot_memory_adapters.config import ConfigError
    from nanobot_memory_adapters.registry import available_providers, provider_class

    spec = available_providers().get(base)
    try:
        fields = provider_class(spec).config_model.model_fields if spec else {}
    except (ImportError, ConfigError):
        return block
    if "feedback" in fields and "feedback" not in (block or {}):
        return {**(block or {}), "feedback": True}
    return block


def oracle_block(scenario: ScenarioSet) -> dict[str, Any]:
    """oracle_ipas is the dataset's own ground truth (with validity, answered as of the
    test's time); a user-given block wins."""
    return {"preferences": {
        p.persona_id: [
            {"attribute": f.attribute, "value": f.value, "context": f.context,
             "scenario": f.scenario, "valid_from": f.valid_from.isoformat(),
             "valid_until": f.valid_until.isoformat() if f.valid_until else None}
            for f in p.preferences
        ]
        for p in scenario.personas
    }}


def names_block(scenario: ScenarioSet) -> dict[str, Any]:
    """no_memory_named is told each persona's name (the dataset's), nothing else; a
    user-given block wins. A persona whose "name" is its id (PersonaMem has no names) is
    left out: an id is not a name (with none left the provider is skipped, one line)."""
    return {"names": {p.persona_id: p.name for p in scenario.personas
                      if p.name and p.name != p.persona_id}}


# Controls whose block is the dataset's own: the harness fills it when the user gave none.
DATASET_BLOCKS: dict[str, Callable[[ScenarioSet], dict[str, Any]]] = {
    "oracle_ipas": oracle_block, "no_memory_named": names_block}


class PreferenceOutcome(RunOutcome):
    """A preference run's outcome (results.json holds the scores)."""


#: what a preference run writes into its folder (and may delete or overwrite there)
RUN_NAMES = (*OUTPUT_FILES, "stores", "agents")


def clear_outputs(out: Path) -> None:
    from nanobot_memory_adapters.harness.safe_paths import remove_file, remove_tree

    for name in OUTPUT_FILES:
        remove_file(out, out / name)
    for sub in ("stores", "agents"):
        remove_tree(out, out / sub)


async def run_preferences(cfg: PreferenceBenchConfig, progress: Any = None
                          ) -> PreferenceOutcome:
    ids = SeededIds(cfg.seed)
    with ids, _sigterm_stops() as stopped:
        try:
            return await _run(cfg, progress, ids)
        except asyncio.CancelledError:
            if stopped():  # SIGTERM: said and exited as Ctrl-C is (130, resume hint)
                raise KeyboardInterrupt from None
            raise
        finally:
            for close in cfg.closers:
                with contextlib.suppress(Exception):
                    await close()


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[Callable[[], bool]]:
    """SIGTERM (how a background run is stopped) cancels the run as Ctrl-C does inside
    ``asyncio.run``: at its next await, so the partial results are written from a
    consistent checkpoint. Yields whether it came. Without a loop signal handler (not the
    main thread, not Unix) the signal keeps its default."""
    task, loop = asyncio.current_task(), asyncio.get_running_loop()
    came = False

    def stop() -> None:
        nonlocal came
        came = True
        if task is not None:
            task.cancel()

    previous = signal.getsignal(signal.SIGTERM)
    try:
        loop.add_signal_handler(signal.SIGTERM, stop)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False
    try:
        yield lambda: came
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGTERM)
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGTERM, previous)


async def _run(cfg: PreferenceBenchConfig, progress: Any, ids: SeededIds) -> PreferenceOutcome:
    from nanobot_memory_adapters.harness.safe_paths import claim_run_folder

    random.seed(cfg.seed)
    claim_run_folder(cfg.out, RUN_NAMES)  # never a folder of the user's files
    if cfg.fresh:
        clear_outputs(cfg.out)
    (cfg.out / "scenarios.json").write_text(dump_scenarios(cfg.scenario), encoding="utf-8")
    traces_path = cfg.out / "traces.jsonl"
    writer = JsonlTraceWriter(traces_path)
    prepared: list[tuple[Prepared, str]] = []
    skipped: list[dict[str, str]] = []
    from nanobot_memory_adapters.harness.bench_config import BenchConfig

    try:
        shim = BenchConfig(dataset=cfg.out, out=cfg.out, providers=list(cfg.providers),
                           provider_configs=cfg.provider_configs)
        for name in cfg.providers:
            base, group = split_group(name)
            block = cfg.provider_configs.get(name, cfg.provider_configs.get(base))
            if block is None and base in DATASET_BLOCKS:
                block = DATASET_BLOCKS[base](cfg.scenario)
            if group == "feedback":
                block = _with_feedback_switch(base, block)
            p, reason = await prepare_provider(base, shim, writer, label=name, block=block)
            if p is None:
                skipped.append({"name": name, "reason": reason or "unknown"})
                continue
            if group == "feedback" and not supports(p.adapter, "feedback"):
                await p.adapter.aclose()
                skipped.append({"name": name, "reason": f"{base} has no native feedback "
                                "(SupportsFeedback); the feedback group needs it"})
                continue
            prepared.append((p, group))
        manifest = mf.finalize(_manifest(cfg, prepared, skipped))
        cp = open_checkpoint(cfg.out, manifest["manifest_sha256"], traces_path)
        mf.write_manifest(manifest, cfg.out / "manifest.json")
        if progress:
            for p, _ in prepared:
                progress.start(p.name, len(_personas_for(cfg, p.name)))
        personas_of = {p.name: {x.persona_id for x in _personas_for(cfg, p.name)}
                       for p, _ in prepared}
        # persona-major: a run stopped midway (a slow real model) has every provider on
        # the same personas, so its partial results compare like with like
        try:
            resumed = await _units(cfg, prepared, personas_of, cp, traces_path, ids, progress)
        except BaseException:  # stopped, or a unit that failed the run: what it finished
            _write_partial(cfg, manifest, prepared, skipped, cp.units)
            raise
        results = build_results(cfg, manifest, prepared, skipped, cp.units)
        write_json_atomic(cfg.out / "results.json", results, indent=2)
        remove_file(cfg.out, cfg.out / PARTIAL)  # after: a stop between keeps one
        from nanobot_memory_adapters.harness.preferences.report import write_report

        write_report(cfg.out / "report.html", manifest, results)
        cp.complete = True
        cp.save()
        return PreferenceOutcome(cfg.out, manifest, results, skipped, resumed)
    finally:
        for p, _ in prepared:
            with contextlib.suppress(Exception):
                await p.adapter.aclose()


def _write_partial(cfg: PreferenceBenchConfig, manifest: dict[str, Any],
                   prepared: list[tuple[Prepared, str]], skipped: list[dict[str, str]],
                   units: dict[str, dict[str, Any]]) -> None:
    """A stopped run's results over the units it finished (``complete`` false; each
    provider lists its personas): what a slow model's run can report before it resumes."""
    try:
        results = build_results(cfg, manifest, prepared, skipped, units)
        results["complete"] = False
        write_json_atomic(cfg.out / PARTIAL, results, indent=2)
    except Exception as exc:  # never mask why the run stopped; say why there is none
        logger.warning("no {} written: {}", PARTIAL, error_text(exc))


async def _units(cfg: PreferenceBenchConfig, prepared: list[tuple[Prepared, str]],
                 personas_of: dict[str, set[str]], cp: Checkpoint, traces_path: Path,
                 ids: SeededIds, progress: Any) -> int:
    """Every unit not in the checkpoint, persona by persona (``run_last`` providers' after
    all the others'); returns how many were."""
    resumed = 0
    order = [(persona, p, group) for last in (False, True)
             for persona in cfg.scenario.personas for p, group in prepared
             if (p.name in cfg.run_last) == last]
    for persona, p, group in order:
        if persona.persona_id not in personas_of[p.name]:
            continue
        if cp.done(p.name, persona.persona_id) is not None:
            resumed += 1
            if progress:
                progress.advance(p.name, 1, f"{persona.persona_id} (checkpoint)")
            continue
        # a unit started over writes to the store its earlier attempt wrote to:
        # mem0 keeps that attempt's history rows, so it must not draw its ids again
        attempt = cp.start(p.name, persona.persona_id)
        key = f"{p.name}/{persona.persona_id}"
        ids.reseed(key if attempt == 1 else f"{key}#{attempt}")
        unit = await PreferenceUnit(p, group, persona, cfg).run()
        cp.save_unit(unit, traces_path.stat().st_size if traces_path.exists() else 0)
        if progress:
            progress.advance(p.name, 1, persona.persona_id)
    return resumed


def _manifest(cfg: PreferenceBenchConfig, prepared: list[tuple[Prepared, str]],
              skipped: list[dict[str, str]]) -> dict[str, Any]:
    example = MemoryScope(run_id=cfg.run_id, persona_id=cfg.scenario.personas[0].persona_id,
                          agent_id="nanobot")
    providers = []
    for p, group in prepared:
        entry = mf.provider_entry(p.name, p.kind, p.block, p.adapter, example)
        entry["experiment_group"] = group
        providers.append(entry)
    return {
        "kind": "preferences",
        "dataset": {
            "format": cfg.scenario.format, "name": cfg.scenario.name,
            "source": cfg.scenario.source, "sha256": scenario_sha256(cfg.scenario),
            "personas": [p.persona_id for p in cfg.scenario.personas],
            "tests": sum(len(p.tests) for p in cfg.scenario.personas),
            "option_tasks": sum(1 for p in cfg.scenario.personas for t in p.tests
                                if t.options),
            "behaviour_tasks": sum(1 for p in cfg.scenario.personas for t in p.tests
                                   if t.acts is not None),
        },
        "settings": {
            "budget": {"max_tokens": cfg.budget_tokens},
            "run_id": cfg.run_id,
            "test_tags": cfg.test_tags,
            "test_tags_meaning": {
                "context": "the test's context tag reaches RetrieveRequest (what a live "
                "nanobot knows from its channel); scenario and attribute are the "
                "benchmark's labels, not something an agent knows",
                "all": "scenario, context and attribute reach RetrieveRequest",
                "none": "no tags"}[cfg.test_tags],
            "agent": cfg.agent.describe() if cfg.agent else None,
            "agent_mode": "nanobot AgentLoop + memory plugin (read-only, provided adapter; "
            "no memory guide: neither the memory_guide tool nor the memory-context skill; "
            + ("no tools: the test turns offer the model no tool at all, memory_search "
               "included)" if cfg.agent_tools == "none" else
               "nanobot's default tools and memory_search)")
            if isinstance(cfg.agent, AgentLLM) else
            "ideal reader (deterministic agent double; recalls as the plugin does, acts on "
            "the newest valid statement in the memory section, else the default)"
            if cfg.agent else "retrieval only (no model): exposure metrics only",
            # what the test turns offer the model (nanobot only; the reader has no tools)
            "agent_tools": cfg.agent_tools if isinstance(cfg.agent, AgentLLM) else None,
            "context_placement": cfg.placement,
            "retrieval_query": "the user's turn alone (the opening; options are added to "
            "the prompt only after recall, in a separate recognition session)",
            "behaviour": "the first reply to the normal request, classified by the test's "
            "value phrases: current / other / both / none",
            "choice": "recognition: parsed from the reply: (x), x), option x, or one option's "
            "text",
            "simulator": cfg.simulator.describe(),
            "max_turns": cfg.max_turns,
            # provider -> the first N personas it ran on (the others ran on all); only
            # when given, so a run without caps keeps its manifest (and its checkpoint)
            **({"persona_caps": dict(sorted(cfg.persona_caps.items()))}
               if cfg.persona_caps else {}),
            "recognition": cfg.recognition,
            "open_task_judge": cfg.judge.description if cfg.judge else None,
            "gate_probe": cfg.gate_probe,
            "readiness_timeout_s": cfg.readiness_timeout_s,
            "event": "one event per exchange (user + assistant), the session's context as tag",
        },
        "seed": cfg.seed,
        "providers": providers,
        "skipped": skipped,
        "paths": {"out": str(cfg.out)},
    }


def _personas_for(cfg: PreferenceBenchConfig, name: str) -> list[Any]:
    """The personas a provider runs on: the first N with a cap (``--persona-cap``)."""
    cap = cfg.persona_caps.get(name)
    return cfg.scenario.personas if cap is None else cfg.scenario.personas[:cap]


def build_results(cfg: PreferenceBenchConfig, manifest: dict[str, Any],
                  prepared: list[tuple[Prepared, str]], skipped: list[dict[str, str]],
                  units: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from nanobot_memory_adapters.harness.metrics import TIMING_KEY, _dist

    providers: dict[str, Any] = {}
    order = {p.persona_id: i for i, p in enumerate(cfg.scenario.personas)}
    for p, group in prepared:
        mine = sorted((u for u in units.values() if u["provider"] == p.name),
                      key=lambda u: order.get(u["conversation"], 0))
        records = [r for u in mine for r in u["tests"]]
        providers[p.name] = {
            "kind": p.kind,
            "condition_kind": p.adapter.info.condition_kind,
            "memory_form": p.adapter.info.memory_form,
            "tag_mapping": p.adapter.info.tag_mapping,
            "experiment_group": group,
            "personas": [u["conversation"] for u in mine],
            "events_recorded": sum(u["events"] for u in mine),
            **stored_nothing_summary(mine),
            "scores": provider_scores(records),
            "failures": {
                "record": sum(u["record_failures"] for u in mine),
                "retrieve": sum(u["retrieve_failures"] for u in mine),
                "agent": sum(u["agent_failures"] for u in mine),
                "set_mode": sum(u["mode_failures"] for u in mine),
                "gate_violations": sum(u["gate_violations"] for u in mine),
                "readiness_pending": sum(1 for u in mine for w in u["readiness"]
                                         if w["status"] == "pending"),
                "reset": sum(1 for u in mine if u.get("reset_status") == "failed"),
                "feedback": sum(u["feedback"]["failed"] for u in mine),
                # a judge call that raised (only with a judge, as bench's tasks count it)
                **({"judge": sum(1 for r in records if (r.get("verdict") or {}).get("label")
                                 == "error")} if cfg.judge is not None else {}),
            },
            "gate_probes": sum(u["gate_probes"] for u in mine),
            "feedback_sent": sum(u["feedback"]["sent"] for u in mine),
            TIMING_KEY: {
                "record_latency_per_event_ms": _dist(
                    [x for u in mine for x in u["record_latency_per_event_ms"]]),
                "test_session_ms": _dist([x for u in mine for x in u["retrieve_latency_ms"]]),
                "ingest_s": round(sum(u["ingest_s"] for u in mine), 6),
                "unit_wall_s": round(sum(u.get("wall_s", 0.0) for u in mine), 6),
            },
        }
    scores = {n: m["scores"] for n, m in providers.items()}
    records = {p.name: [r for u in units.values() if u["provider"] == p.name
                        for r in u["tests"]] for p, _ in prepared}
    return {
        "schema": RESULTS_SCHEMA,
        "manifest_sha256": manifest["manifest_sha256"],
        "budget_tokens": cfg.budget_tokens,
        "providers": providers,
        "pairwise": pairwise(records),
        "default_rate": default_rate(cfg.scenario),
        "skipped": skipped,
        "metrics_sha256": exposure_sha256(scores),
        "notes": {
            "metrics_sha256": "covers the judge-free, model-free exposure metrics only",
            "behaviour": "headline: the first reply to a normal request (no options) acts on "
            "the current value, by the test's value phrases (judge-free); 'resolved': acting "
            "on it within max_turns of the simulated user; depends on the agent",
            "accuracy": "recognition: the option task (options shown after recall), scored "
            "exactly against the current preference; secondary",
            "ci": "95 % intervals (stats.mean_ci), never narrower than Wilson on n: 'ci' "
            "clustered by persona, 'ci_by_attribute' by the tested attribute (the headline: "
            "it generalises), each from stats.MIN_CLUSTERS clusters up",
            "pairwise": "paired differences over the same tests (bootstrap by persona; "
            "'by_attribute' by attribute, the headline; McNemar's exact p); 'not "
            "distinguishable' when the interval covers 0 or McNemar's p >= 0.05",
            "default_rate": "share of behavioural tests whose current value is the "
            "attribute's default: what the ideal reader scores with no memory",
            "open_tasks": "LLM judge against each test's rubric; reported apart",
            "IQI": "this project's definition: acting on a preference the user never "
            "stated, only implied by details (docs/preferences.md)",
        },
    }
