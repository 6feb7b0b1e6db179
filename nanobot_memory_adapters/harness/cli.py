"""``nanobot-memory swap | bench | demo`` (mounted by the main CLI through ``register``)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from nanobot_memory_adapters.console import (
    NanobotConfigOpt,
    console,
    err_console,
    fail,
    memory_config_source,
)
from nanobot_memory_adapters.harness.cli_options import (
    check_llm_options,
    check_out_dir,
    check_run_id,
    check_seconds,
    check_workers,
    parse_budgets,
    provider_configs,
    provider_names,
)
from nanobot_memory_adapters.harness.outcome_view import print_outcome, report_failures
from nanobot_memory_adapters.harness.progress import run_resumable

DEFAULT_DATASET = "../shared/data/locomo/locomo7.json"
DATASET_ENV = "NANOBOT_MEMORY_LOCOMO"
DEMO_PROVIDERS = ("no_memory", "full_history", "simple_rag")
DEMO_PREFERENCE_PROVIDERS = ("no_memory", "full_history", "simple_rag", "oracle_ipas")
STATUS_MARK = {
    "passed": "✓",
    "not_applicable": "(n/a)",
    "pending": "(PENDING)",
    "skipped": "(skipped)",
    "failed": "(FAILED)",
}
STATUS_STYLE = {
    "passed": "green",
    "not_applicable": "cyan",
    "pending": "yellow",
    "skipped": "dim",
    "failed": "red",
}


def default_dataset() -> Path:
    return Path(os.environ.get(DATASET_ENV) or DEFAULT_DATASET)


# -- swap ----------------------------------------------------------------------------------


def swap_manifest_path(source: Any, data_dir: Path | None) -> Path | None:
    from nanobot_memory_adapters.config import ConfigError
    from nanobot_memory_adapters.registry import resolve_config

    try:
        config, spec = resolve_config(source)
    except ConfigError:
        return None  # the instantiate gate reports it
    base = data_dir or config.resolved_data_dir()
    from nanobot_memory_adapters.harness.safe_paths import safe_name

    return Path(base) / "manifests" / f"swap-{safe_name(spec.name)}.json"


def check_manifest_path(path: Path, option: str) -> None:
    """The manifest can be written at ``path`` with nothing lost, checked before any gate
    runs: not a folder, a folder that exists or can be made, and no file there but a swap
    manifest (a user's own file is never overwritten by one)."""
    if path.is_dir():
        raise fail(f"{option} {path}: is a directory; give a file path, e.g. "
                   f"{path / 'swap.json'}")
    check_out_dir(path.parent, f"{option} {path}: its folder")
    if path.exists() and not _is_swap_manifest(path):
        raise fail(f"{option} {path}: the file there is not a swap manifest and would be "
                   "overwritten; choose another path, or move that file away")
    if path.exists() and not os.access(path, os.W_OK):
        raise fail(f"{option} {path}: not writable; choose another path")


def _is_swap_manifest(path: Path) -> bool:
    """A manifest an earlier swap wrote: the manifest schema and ``"kind": "swap"`` (what
    ``run_swap`` writes); anything else is the user's."""
    from nanobot_memory_adapters.harness.manifest import MANIFEST_SCHEMA
    from nanobot_memory_adapters.json_files import written_by_us

    family = MANIFEST_SCHEMA.split("/", 1)[0]
    return written_by_us(path, lambda d: d.get("kind") == "swap" and str(
        d.get("schema", "")).split("/", 1)[0] == family)


def swap_command(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Memory config JSON.")
    ] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", help="A backend (built-in defaults).")
    ] = None,
    condition: Annotated[
        str | None, typer.Option("--condition", help="A control condition.")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where embedded stores live.")
    ] = None,
    manifest: Annotated[
        Path | None,
        typer.Option(
            "--manifest", help="Where to store the run manifest (default: <data-dir>/manifests/)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for the smoke facts and run id.")] = 0,
    readiness_timeout: Annotated[
        float | None,
        typer.Option(
            "--readiness-timeout", help="Seconds to wait for async backends (default: config)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    nanobot_config: NanobotConfigOpt = None,
) -> None:
    """The swap flow (docs/design.md): health, setup, capabilities, isolation and write/read smoke,
    readiness gate, manifest. Exit 0 when every gate is green, 1 when one fails, 3 when
    the readiness gate is still pending; the failed gate is named."""
    from nanobot_memory_adapters.harness.swap import run_swap
    from nanobot_memory_adapters.nanobot_llm import cli_source

    check_seconds(readiness_timeout)
    if data_dir is not None:  # before the gates: else a raw OS error at the last one
        check_out_dir(data_dir, "--data-dir")
    source = cli_source(memory_config_source(config, backend, condition), nanobot_config)
    path = manifest or swap_manifest_path(source, data_dir)
    if path is not None:
        check_manifest_path(path, "--manifest" if manifest else "the manifest (--manifest)")

    def live(gate: Any) -> None:
        if not as_json:
            style = STATUS_STYLE.get(gate.status, "white")
            console.print(
                f"  [{style}]{gate.status:>14}[/{style}]  {escape(gate.name)}: "
                f"{escape(gate.detail[:110])}", markup=True,
                highlight=False,
            )

    report = asyncio.run(
        run_swap(
            source,
            data_dir=data_dir,
            seed=seed,
            readiness_timeout_s=readiness_timeout,
            manifest_path=path,
            on_gate=live,
        )
    )
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    elif report.manifest_path:
        console.print(f"manifest: {report.manifest_path}")
    gate = report.failed_gate
    if gate is not None:
        err_console.print(
            f"[red]swap stopped at gate '{escape(gate.name)}'[/red] ({gate.status}): "
            f"{escape(gate.detail)}", markup=True,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(report.exit_code)


# -- bench ---------------------------------------------------------------------------------


def endpoint_or_none(base_url: str | None, model: str | None, key_env: str) -> Any:
    if not base_url:
        return None
    if not model:
        raise fail("--llm-model is required with --llm-base-url")
    from nanobot_memory_adapters.harness.judge import LLMEndpoint

    return LLMEndpoint(base_url=base_url, model=model, api_key_env=key_env)


def judge_setup(base_url: str | None, model: str | None, key_env: str,
                task: str = "locomo") -> Any:
    if not base_url:
        return None
    from nanobot_memory_adapters.harness.beam_judge import beam_judge_setup
    from nanobot_memory_adapters.harness.judge import LLMEndpoint, llm_judge_setup
    from nanobot_memory_adapters.harness.lme_judge import lme_judge_setup

    if not model:
        raise fail("--llm-model is required with --llm-base-url")
    setup = {"longmemeval": lme_judge_setup, "beam": beam_judge_setup}.get(
        task, llm_judge_setup)
    return setup(LLMEndpoint(base_url=base_url, model=model, api_key_env=key_env))


def run_bench_cli(cfg: Any, *, quiet: bool = False) -> Any:
    from nanobot_memory_adapters.harness.timeline import run_bench

    return run_resumable(run_bench, cfg, quiet=quiet, units=True)


def bench_command(
    dataset: Annotated[
        Path | None,
        typer.Option(help=f"LoCoMo-format JSON (default: ${DATASET_ENV} or {DEFAULT_DATASET})."),
    ] = None,
    conversations: Annotated[
        str | None, typer.Option(help="Comma-separated sample ids (default: all).")
    ] = None,
    providers: Annotated[str, typer.Option(help="Comma-separated providers.")] = ",".join(
        DEMO_PROVIDERS
    ),
    budget_tokens: Annotated[
        str, typer.Option(help="The same context budget for every provider; a list "
                          "(500,1000,2000,4000) asks every question at each (a recall-vs-"
                          "budget sweep; the first is the headline).")
    ] = "2000",
    out: Annotated[Path, typer.Option(help="Output directory (also holds the checkpoint).")] = Path(
        "bench-out/run"
    ),
    workers: Annotated[
        int, typer.Option(help="Units (provider x conversation) run at once, each in a "
                          "worker process of its own; results do not depend on it.")
    ] = 1,
    executor: Annotated[
        str, typer.Option(help="local (this machine) or ray (Ray tasks; extra \\[ray]).")
    ] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="A running Ray cluster (ray://host:10001 or host:6379); "
                                 "default: a local Ray instance for the run.")
    ] = None,
    test_points: Annotated[
        str, typer.Option(help="every | last | every:N | session numbers like 5,10,19.")
    ] = "every",
    provider_config: Annotated[
        Path | None,
        typer.Option(
            help='JSON {"provider": {block}}; a block also opts a provider that needs an LLM in.'
        ),
    ] = None,
    run_id: Annotated[str, typer.Option(help="Run id of the bench scopes.")] = "locomo",
    seed: Annotated[int, typer.Option()] = 0,
    readiness_timeout: Annotated[float, typer.Option(help="Seconds per readiness wait.")] = 120.0,
    fresh: Annotated[
        bool, typer.Option(help="Discard a previous run in --out instead of resuming.")
    ] = False,
    llm_base_url: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible endpoint for optional answer generation + LLM judge."),
    ] = None,
    llm_model: Annotated[str | None, typer.Option()] = None,
    llm_api_key_env: Annotated[
        str, typer.Option(help="Env var holding the API key.")
    ] = "OPENAI_API_KEY",
    deterministic_ids: Annotated[
        bool,
        typer.Option(help="Seed uuid4 per unit so backends' random ids repeat (see docs)."),
    ] = True,
    speakers: Annotated[
        str,
        typer.Option(help="single: one persona per conversation (default); dual: one per "
                     "speaker, as mem0's and MemOS's own LoCoMo scripts record it."),
    ] = "single",
    max_sessions: Annotated[
        int | None,
        typer.Option(min=1, help="Only each conversation's first N sessions (and the "
                     "questions whose evidence lies in them)."),
    ] = None,
    task: Annotated[
        str,
        typer.Option(help="locomo: evidence recall on LoCoMo (default). longmemeval: "
                     "one unit per question of a LongMemEval file (--dataset; "
                     "--conversations selects question ids). beam: one unit per BEAM "
                     "conversation folder (--dataset). preferences: "
                     "behavioural test sessions through nanobot (--dataset is a scenario "
                     "JSON, or generated from --seed; --llm-* is nanobot's model and the "
                     "open-task judge). Also: nanobot-memory preferences run."),
    ] = "locomo",
    verify: Annotated[
        bool, typer.Option(help="Recompute recall from traces.jsonl and compare.")
    ] = False,
    gold_corrections: Annotated[
        Path | None,
        typer.Option(help="Audited LoCoMo: a corrections file in the locomo-audit layout "
                     "(its errors.json; not shipped: see docs/harness.md). Fixes gold "
                     "answers and evidence; the manifest records it; entries that match "
                     "no question are counted and named."),
    ] = None,
    leave_out: Annotated[
        str | None,
        typer.Option(help="Providers of the run (comma-separated) not run this time: "
                     "results list them as skipped, their finished units are kept, and "
                     "the same command without this option resumes them. Not part of the "
                     "run's settings, like --workers."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results.json.")] = False,
    nanobot_config: NanobotConfigOpt = None,
) -> None:
    """Replay LoCoMo conversations into each provider and test recall over time, at one
    token budget. Writes manifest.json, traces.jsonl, results.json and report.html;
    an interrupted run resumes when the same command is run again. Exit codes: 0 clean,
    1 --verify mismatch, 2 bad arguments, 3 a readiness wait timed out, 4 a record,
    retrieve, mode switch or reset failed, the read-only gate leaked, or a provider asked
    for was skipped (counts and reasons on stderr), 130 interrupted."""
    from nanobot_memory_adapters.harness.executors import ExecutionPlan
    from nanobot_memory_adapters.harness.locomo_mapping import SPEAKER_PROTOCOLS
    from nanobot_memory_adapters.harness.timeline import BenchConfig
    from nanobot_memory_adapters.logs import default_log_file

    check_run_id(run_id)  # before --out is claimed (stores/, the run marker)
    check_out_dir(out)
    check_llm_options(llm_base_url, llm_model, key_env=llm_api_key_env)
    budgets = parse_budgets(budget_tokens)
    check_workers(workers, executor, ray_address)
    left_out = [n.strip() for n in (leave_out or "").split(",") if n.strip()]
    default_log_file(out)
    if gold_corrections is not None and task != "locomo":
        raise fail(f"--gold-corrections: corrects LoCoMo gold answers; --task {task} has "
                   "none to correct (drop the option or use --task locomo)")
    if task == "preferences":
        if left_out:
            raise fail("--leave-out: for LoCoMo, LongMemEval and BEAM runs; a preferences "
                       "run's units are its personas (drop the option)")
        if nanobot_config is not None:
            raise fail("--nanobot-config: used by --task locomo (provider blocks); a "
                       "preferences run takes its model from --llm-base-url/--llm-model")
        if len(budgets) > 1:
            raise fail("--budget-tokens: a sweep runs with --task locomo; give one budget")
        from nanobot_memory_adapters.harness.preferences import cli as prefs

        endpoint = endpoint_or_none(llm_base_url, llm_model, llm_api_key_env)
        cfg = prefs.build_config(
            out=out, providers=providers, scenario=prefs.load_scenario(dataset, 3, seed),
            budget_tokens=budgets[0], provider_config=provider_config, seed=seed,
            fresh=fresh, readiness_timeout=readiness_timeout, agent=endpoint, judge=endpoint,
            simulator="scripted", test_tags="context", placement="user_message",
        )
        prefs.run_and_report(cfg, as_json=as_json)
        return
    if task not in ("locomo", "longmemeval", "beam"):
        raise fail(f"--task {task!r}: use locomo, longmemeval, beam or preferences")
    lme = task in ("longmemeval", "beam")  # one question time, after the last session
    if lme and max_sessions is not None:
        raise fail(f"--max-sessions: cuts LoCoMo conversations; a {task} question is asked "
                   "after its last session, so cutting sessions drops its evidence (drop "
                   "the option or use --task locomo)")
    if lme and speakers != "single":
        raise fail(f"--speakers: a {task} conversation is user/assistant; use single")
    if task == "longmemeval" and dataset is None:
        raise fail("--task longmemeval needs --dataset FILE (longmemeval_s.json, _m or "
                   "_oracle; not shipped: see docs/harness.md)")
    if task == "beam" and dataset is None:
        raise fail("--task beam needs --dataset FOLDER (a BEAM conversation folder such as "
                   "chats/100K/1, or chats/100K; not shipped: see docs/harness.md)")
    names = provider_names(providers)
    if unknown := [n for n in left_out if n not in names]:
        raise fail(f"--leave-out {','.join(unknown)}: not among --providers "
                   f"({','.join(names)}); name providers of this run")
    check_seconds(readiness_timeout)
    if speakers not in SPEAKER_PROTOCOLS:
        raise fail(f"--speakers {speakers!r}: use one of {', '.join(SPEAKER_PROTOCOLS)}")
    cfg = BenchConfig(
        dataset=dataset or default_dataset(),
        out=out,
        providers=names,
        conversations=[c.strip() for c in conversations.split(",")] if conversations else None,
        budget_tokens=budgets[0],
        budgets=budgets,
        test_points="last" if lme else test_points,  # LongMemEval: once, at question_date
        run_id=task if lme and run_id == "locomo" else run_id,
        seed=seed,
        readiness_timeout_s=readiness_timeout,
        provider_configs=provider_configs(provider_config, nanobot_config),
        fresh=fresh,
        deterministic_ids=deterministic_ids,
        judge=judge_setup(llm_base_url, llm_model, llm_api_key_env, task),
        judge_endpoint=endpoint_or_none(llm_base_url, llm_model, llm_api_key_env),
        speakers=speakers,  # type: ignore[arg-type]
        max_sessions=max_sessions,
        execution=ExecutionPlan(executor, workers, ray_address),  # type: ignore[arg-type]
        task=task,
        gold_corrections=gold_corrections,
        leave_out=left_out,
    )
    outcome = run_bench_cli(cfg, quiet=as_json)
    if corrected := outcome.manifest["dataset"].get("gold_corrections"):
        from nanobot_memory_adapters.harness.datasets.gold_corrections import summary_line

        err_console.print(summary_line(corrected), highlight=False, soft_wrap=True,
                          style="yellow" if corrected["not_matched"] else None)
    if as_json:
        print(json.dumps(outcome.results, indent=2))
    else:
        print_outcome(outcome, f"LoCoMo-style evidence recall at {budgets[0]} tokens")
        if task == "longmemeval":
            from nanobot_memory_adapters.harness.lme_task import print_table

            print_table(outcome.results, f"LongMemEval at {budgets[0]} tokens")
        elif task == "beam":
            from nanobot_memory_adapters.harness.beam_task import print_table as beam_table

            beam_table(outcome.results, f"BEAM at {budgets[0]} tokens")
    code = report_failures(outcome.results)  # said even when --verify then fails (exit 1)
    if verify:
        verify_recall(outcome)
    if code:
        raise typer.Exit(code)


def verify_recall(outcome: Any) -> None:
    from nanobot_memory_adapters.harness.locomo_stats import locomo_intervals
    from nanobot_memory_adapters.harness.metrics import recompute_from_traces

    # The whole recall block (turn, session, provenance and answer recall; overall,
    # categories 1-4, per category), as the tests compare it; in a sweep, every budget.
    sweep = outcome.results.get("budgets")
    blocks = [(b["budget_tokens"], b["providers"]) for b in sweep] if sweep else [
        (None, outcome.results["providers"])]
    bad = []
    for budget, providers in blocks:
        again = recompute_from_traces(outcome.out / "traces.jsonl", budget)
        bad += [n + (f"@{budget}" if budget else "") for n, m in providers.items()
                if again.get(n) != m["recall"]]
    from nanobot_memory_adapters.harness.lme_task import verify as verify_lme

    bad += verify_lme(outcome)
    if "intervals" in outcome.results:  # LoCoMo runs only
        again_intervals = locomo_intervals(outcome.out / "traces.jsonl",
                                           list(outcome.results["providers"]),
                                           outcome.results["budget_tokens"] if sweep else None)
        if again_intervals != outcome.results["intervals"]:
            bad.append("intervals")
    if bad:
        raise fail(f"recall recomputed from traces differs for: {', '.join(bad)}", 1)
    err_console.print("[green]verified[/green]: every recall metric, interval, answer "
                      "baseline and the task's retrieval block (ranked@k, LongMemEval, "
                      "BEAM evidence) recomputed from traces.jsonl matches", markup=True)
