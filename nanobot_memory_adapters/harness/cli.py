"""``nanobot-memory swap | bench | demo`` (mounted by the main CLI through ``register``)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from nanobot_memory_adapters.console import (
    console,
    err_console,
    fail,
    memory_config_source,
    wide_console,
)
from nanobot_memory_adapters.harness.cli_options import (
    check_budget,
    check_out_dir,
    provider_configs,
    provider_names,
)

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
    return Path(base) / "manifests" / f"swap-{spec.name}.json"


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
) -> None:
    """The swap flow (docs/design.md): health, setup, capabilities, isolation and write/read smoke,
    readiness gate, manifest. Exit 0 when every gate is green, 1 when one fails, 3 when
    the readiness gate is still pending; the failed gate is named."""
    from nanobot_memory_adapters.harness.swap import run_swap

    source = memory_config_source(config, backend, condition)
    path = manifest or swap_manifest_path(source, data_dir)

    def live(gate: Any) -> None:
        if not as_json:
            style = STATUS_STYLE.get(gate.status, "white")
            console.print(
                f"  [{style}]{gate.status:>14}[/{style}]  {gate.name}: {gate.detail[:110]}",
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
            f"[red]swap stopped at gate '{gate.name}'[/red] ({gate.status}): {gate.detail}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(report.exit_code)


# -- bench ---------------------------------------------------------------------------------


class RichProgress:
    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}

    def start(self, provider: str, total: int) -> None:
        self.tasks[provider] = self.progress.add_task(provider, total=total, note="")

    def advance(self, provider: str, steps: int, note: str) -> None:
        self.progress.update(self.tasks[provider], advance=steps, note=note)


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:<14}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("sessions"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[note]}"),
        console=err_console,
        transient=False,
    )


def comparison_table(results: dict[str, Any], title: str) -> Table:
    from nanobot_memory_adapters.harness.report import comparison_rows

    rows = comparison_rows(results)
    cats = sorted({c for r in rows for c in r["by_category"]}, key=int)
    table = Table(title=title)
    for col in (
        "provider",
        "kind",
        "asks",
        "turn recall",
        "session recall",
        "prov. recall",
        "answer recall",
        *[f"cat {c}" for c in cats],
        "tokens mean/max",
        "retrieve p50/p95 ms",
        "record ms/event",
        "ingest s",
        "failures",
    ):
        table.add_column(col, justify="left" if col in ("provider", "kind") else "right")

    def f(v: Any, d: int = 3) -> str:
        return "–" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))

    for r in rows:
        over = f" [red]({r['over_budget']} over)[/red]" if r["over_budget"] else ""
        table.add_row(
            r["provider"],
            r["kind"],
            str(r["asks"]),
            f(r["turn_recall"]) + ("*" if r["memory_form"] == "derived" else ""),
            f(r["session_recall"]),
            "n/a" if r["provenance_recall"] is None else f(r["provenance_recall"]),
            f(r["answer_recall"]),
            *[f(r["by_category"].get(c)) for c in cats],
            f"{f(r['tokens_mean'], 0)}/{f(r['tokens_max'])}{over}",
            f"{f(r['retrieve_p50'], 1)}/{f(r['retrieve_p95'], 1)}",
            f(r["record_p50"], 1),
            f(r["ingest_s"], 1),
            str(r["failures"]),
        )
    return table


def endpoint_or_none(base_url: str | None, model: str | None, key_env: str) -> Any:
    if not base_url:
        return None
    if not model:
        raise fail("--llm-model is required with --llm-base-url")
    from nanobot_memory_adapters.harness.judge import LLMEndpoint

    return LLMEndpoint(base_url=base_url, model=model, api_key_env=key_env)


def judge_setup(base_url: str | None, model: str | None, key_env: str) -> Any:
    if not base_url:
        return None
    from nanobot_memory_adapters.harness.judge import LLMEndpoint, llm_judge_setup

    if not model:
        raise fail("--llm-model is required with --llm-base-url")
    return llm_judge_setup(LLMEndpoint(base_url=base_url, model=model, api_key_env=key_env))


def run_resumable(runner: Any, cfg: Any, *, quiet: bool = False) -> Any:
    """``runner(cfg[, progress])`` to completion with a progress bar (none when ``quiet``);
    Ctrl-C says how to resume from the checkpoint and exits 130; a mismatched checkpoint
    or bad input is one line. The outcome gets its ``wall_s``."""
    from nanobot_memory_adapters.harness.checkpoint import CheckpointMismatch

    started = time.perf_counter()
    try:
        if quiet:
            outcome = asyncio.run(runner(cfg))
        else:
            with progress_bar() as progress:
                outcome = asyncio.run(runner(cfg, RichProgress(progress)))
    except KeyboardInterrupt:
        err_console.print(
            f"[yellow]interrupted[/yellow]: rerun the same command to resume "
            f"from {cfg.out / 'checkpoint.json'}"
        )
        raise typer.Exit(130) from None
    except CheckpointMismatch as exc:
        raise fail(str(exc)) from None
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc)) from None
    outcome.wall_s = time.perf_counter() - started
    return outcome


def run_bench_cli(cfg: Any, *, quiet: bool = False) -> Any:
    from nanobot_memory_adapters.harness.timeline import run_bench

    return run_resumable(run_bench, cfg, quiet=quiet)


EXIT_PENDING = 3  # a readiness wait timed out (results measured on pending memory)
EXIT_FAILURES = 4  # a record, retrieve, mode switch or reset failed, or a gate leaked


def failure_counts(results: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per provider, the failure counts that are not zero."""
    return {
        name: {k: v for k, v in m["failures"].items() if v}
        for name, m in results.get("providers", {}).items()
        if any(m["failures"].values())
    }


def outcome_exit_code(results: dict[str, Any]) -> int:
    counts = failure_counts(results)
    if any(k != "readiness_pending" for c in counts.values() for k in c):
        return EXIT_FAILURES
    return EXIT_PENDING if counts else 0


def report_failures(results: dict[str, Any]) -> int:
    """Print what failed (stderr) and return the exit code the run ends with."""
    code = outcome_exit_code(results)
    for name, counts in failure_counts(results).items():
        err_console.print(
            f"[red]{name}[/red]: " + ", ".join(f"{k}={v}" for k, v in counts.items()),
            highlight=False, soft_wrap=True,
        )
    if code == EXIT_FAILURES:
        err_console.print(f"[red]failures above[/red]: exit {code} (results are written, but "
                          "they include failed writes or reads)", highlight=False)
    elif code == EXIT_PENDING:
        err_console.print(f"[yellow]readiness pending[/yellow]: exit {code}", highlight=False)
    return code


def judged_table(results: dict[str, Any]) -> Table | None:
    """The LLM judge's accuracy (the headline when a judge ran), and how each judge-free
    metric ranks the providers against it."""
    judged = results.get("judged")
    if not judged or not judged.get("providers"):
        return None
    table = Table(title="LLM-judged answers at the final test point (headline)")
    for col in ("provider", "accuracy", "n", "accuracy cat 1-4 by category"):
        table.add_column(col, justify="left" if col == "provider" else "right")
    for name, j in judged["providers"].items():
        acc = j["overall"]["accuracy"]
        cats = ", ".join(f"{c}:{b['accuracy']:.2f}" for c, b in j["by_category"].items()
                         if b.get("accuracy") is not None)
        table.add_row(name, "–" if acc is None else f"{acc:.3f}", str(j["overall"]["count"]),
                      cats)
    tau = (judged.get("agreement") or {}).get("rank_tau") or {}
    if tau:
        table.caption = "judge-free ranking vs judge (Kendall tau): " + ", ".join(
            f"{k} {'–' if v is None else f'{v:+.2f}'}" for k, v in tau.items())
    return table


def print_outcome(outcome: Any, title: str) -> None:
    wide = wide_console()
    headline = judged_table(outcome.results)
    if headline is not None:
        wide.print(headline)
    wide.print(comparison_table(outcome.results, title))
    if any(m.get("memory_form") == "derived" for m in outcome.results["providers"].values()):
        console.print(
            "* turn recall counts verbatim turn text: a provider that shows what it derived "
            "(extracted facts) reads ~0 by construction; read provenance and answer recall "
            "for it (docs/harness.md, Metrics)", highlight=False, soft_wrap=True)
    for s in outcome.skipped:
        console.print(
            f"[yellow]skipped[/yellow] {s['name']}: {s['reason']}", highlight=False, soft_wrap=True
        )
    console.print(
        f"wall time {outcome.wall_s:.1f}s"
        + (f" ({outcome.resumed_units} units from the checkpoint)" if outcome.resumed_units else "")
        + f" · manifest {outcome.manifest['manifest_sha256'][:12]}"
        + f" · metrics {outcome.results['metrics_sha256'][:12]}"
    )
    console.print(f"outputs in {outcome.out}: manifest.json traces.jsonl results.json report.html")


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
        int, typer.Option(help="The same context budget for every provider.")
    ] = 2000,
    out: Annotated[Path, typer.Option(help="Output directory (also holds the checkpoint).")] = Path(
        "bench-out/run"
    ),
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
        typer.Option(help="locomo: evidence recall on LoCoMo (default). preferences: "
                     "behavioural test sessions through nanobot (--dataset is a scenario "
                     "JSON, or generated from --seed; --llm-* is nanobot's model and the "
                     "open-task judge). Also: nanobot-memory preferences run."),
    ] = "locomo",
    verify: Annotated[
        bool, typer.Option(help="Recompute recall from traces.jsonl and compare.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print results.json.")] = False,
) -> None:
    """Replay LoCoMo conversations into each provider and test recall over time, at one
    token budget. Writes manifest.json, traces.jsonl, results.json and report.html;
    an interrupted run resumes when the same command is run again. Exit codes: 0 clean,
    1 --verify mismatch, 2 bad arguments, 3 a readiness wait timed out, 4 a record,
    retrieve, mode switch or reset failed or the read-only gate leaked (counts on
    stderr), 130 interrupted."""
    from nanobot_memory_adapters.harness.locomo_mapping import SPEAKER_PROTOCOLS
    from nanobot_memory_adapters.harness.timeline import BenchConfig
    from nanobot_memory_adapters.logs import default_log_file

    check_out_dir(out)
    check_budget(budget_tokens)
    default_log_file(out)
    if task == "preferences":
        from nanobot_memory_adapters.harness.preferences import cli as prefs

        endpoint = endpoint_or_none(llm_base_url, llm_model, llm_api_key_env)
        cfg = prefs.build_config(
            out=out, providers=providers, scenario=prefs.load_scenario(dataset, 3, seed),
            budget_tokens=budget_tokens, provider_config=provider_config, seed=seed,
            fresh=fresh, readiness_timeout=readiness_timeout, agent=endpoint, judge=endpoint,
            simulator="scripted", test_tags="context", placement="user_message",
        )
        prefs.run_and_report(cfg, as_json=as_json)
        return
    if task != "locomo":
        raise fail(f"--task {task!r}: use locomo or preferences")
    names = provider_names(providers)
    if speakers not in SPEAKER_PROTOCOLS:
        raise fail(f"--speakers {speakers!r}: use one of {', '.join(SPEAKER_PROTOCOLS)}")
    cfg = BenchConfig(
        dataset=dataset or default_dataset(),
        out=out,
        providers=names,
        conversations=[c.strip() for c in conversations.split(",")] if conversations else None,
        budget_tokens=budget_tokens,
        test_points=test_points,
        run_id=run_id,
        seed=seed,
        readiness_timeout_s=readiness_timeout,
        provider_configs=provider_configs(provider_config),
        fresh=fresh,
        deterministic_ids=deterministic_ids,
        judge=judge_setup(llm_base_url, llm_model, llm_api_key_env),
        speakers=speakers,  # type: ignore[arg-type]
        max_sessions=max_sessions,
    )
    outcome = run_bench_cli(cfg, quiet=as_json)
    if as_json:
        print(json.dumps(outcome.results, indent=2))
    else:
        print_outcome(outcome, f"LoCoMo evidence recall at {budget_tokens} tokens")
    if verify:
        verify_recall(outcome)
    code = report_failures(outcome.results)
    if code:
        raise typer.Exit(code)


def verify_recall(outcome: Any) -> None:
    from nanobot_memory_adapters.harness.metrics import recompute_from_traces

    again = recompute_from_traces(outcome.out / "traces.jsonl")
    # The whole recall block (turn, session, provenance and answer recall; overall,
    # categories 1-4, per category), as the tests compare it.
    bad = [n for n, m in outcome.results["providers"].items() if again.get(n) != m["recall"]]
    if bad:
        raise fail(f"recall recomputed from traces differs for: {', '.join(bad)}", 1)
    err_console.print("[green]verified[/green]: every recall metric recomputed from "
                      "traces.jsonl matches")


# -- demo ----------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    from nanobot_memory_adapters.harness.preferences.cli import prefs_app

    app.command("swap")(swap_command)
    app.command("bench")(bench_command)
    from nanobot_memory_adapters.harness.demo import demo_command

    app.command("demo")(demo_command)
    app.add_typer(prefs_app, name="preferences")
