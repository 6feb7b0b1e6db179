"""``nanobot-memory demo``: the main job on the embedded defaults (no LLM, no server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from nanobot_memory_adapters.console import console, fail
from nanobot_memory_adapters.harness.cli import (
    DATASET_ENV,
    DEFAULT_DATASET,
    DEMO_PREFERENCE_PROVIDERS,
    DEMO_PROVIDERS,
    STATUS_MARK,
    STATUS_STYLE,
    default_dataset,
    run_bench_cli,
)
from nanobot_memory_adapters.harness.cli_options import check_out_dir, parse_budgets
from nanobot_memory_adapters.harness.outcome_view import print_outcome, report_failures


async def _probe_others(skip: set[str]) -> list[dict[str, str]]:
    """Why each other registered provider is not in the demo (built in a throwaway dir)."""
    from nanobot_memory_adapters.harness.manifest import provider_source
    from nanobot_memory_adapters.registry import available_providers, load_provider

    out = []
    with tempfile.TemporaryDirectory(prefix="nanobot-memory-probe-") as tmp:
        for name in available_providers():
            if name in skip:
                continue
            adapter = None
            try:
                adapter = load_provider(provider_source(name), data_dir=Path(tmp) / name)
                info = adapter.info
                if info.requires_llm:
                    reason = "needs an LLM (extraction/derivation); configure one to include it"
                elif info.name != name:
                    reason = (
                        f"without an LLM it runs as '{info.name}' (see that row); configure an "
                        f"LLM in its block to run {name} itself"
                    )
                else:
                    health = await asyncio.wait_for(adapter.health(), timeout=15)
                    if health.status == "unavailable":
                        err = health.details.get("error", {})
                        msg = err.get("message") if isinstance(err, dict) else err
                        reason = f"unavailable: {str(msg or health.details)[:140]}"
                    elif health.status == "degraded" and health.warnings:
                        reason = f"degraded without an LLM: {health.warnings[0][:160]}"
                    else:
                        reason = f"not in the demo set (try: bench --providers {name})"
            except Exception as exc:
                reason = f"{type(exc).__name__}: {str(exc)[:240]}"
            finally:
                if adapter is not None:
                    with contextlib.suppress(Exception):
                        await adapter.aclose()
            out.append({"name": name, "reason": reason})
    return out


def demo_command(
    dataset: Annotated[
        Path | None,
        typer.Option(help=f"LoCoMo-format JSON (default: ${DATASET_ENV} or {DEFAULT_DATASET})."),
    ] = None,
    conversation: Annotated[str, typer.Option(help="One sample id.")] = "conv-26",
    budget_tokens: Annotated[
        str, typer.Option(help="Budgets, the headline first: every question is asked at "
                          "each (a recall-vs-budget curve in the report).")
    ] = "2000,500",
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("bench-out/demo"),
    resume: Annotated[
        bool, typer.Option(help="Resume a previous demo instead of starting fresh.")
    ] = False,
    probe: Annotated[
        bool, typer.Option(help="Say why the other providers are not in the demo.")
    ] = True,
    preferences: Annotated[
        bool, typer.Option(help="Also run a small generated preference set (controls).")
    ] = True,
) -> None:
    """The main job on embedded defaults, no LLM: the swap flow for no_memory, full_history
    and simple_rag (mem0 without extraction), then the LoCoMo timeline on one conversation
    at two budgets (a recall-vs-budget curve), and the comparison table."""
    from nanobot_memory_adapters.harness.bench_config import BenchConfig
    from nanobot_memory_adapters.harness.datasets.locomo import DatasetError, load_locomo
    from nanobot_memory_adapters.harness.manifest import provider_source
    from nanobot_memory_adapters.harness.safe_paths import NotARunFolder, claim_run_folder
    from nanobot_memory_adapters.harness.swap import run_swap
    from nanobot_memory_adapters.harness.timeline import RUN_NAMES, clear_outputs
    from nanobot_memory_adapters.logs import default_log_file

    started = time.perf_counter()
    data = dataset or default_dataset()
    if data.is_dir():
        raise fail(f"LoCoMo file {data} is a directory; pass the JSON file in it")
    if not data.is_file():
        raise fail(f"LoCoMo file {data} not found; pass --dataset or set ${DATASET_ENV}")
    check_out_dir(out)
    budgets = parse_budgets(budget_tokens)
    try:  # bad input is refused before anything in --out is touched
        load_locomo(data, [conversation])
        claim_run_folder(out, (*RUN_NAMES, "swap", "preferences"))
    except (DatasetError, NotARunFolder) as exc:
        raise fail(str(exc)) from None
    if not resume:
        clear_outputs(out)
    default_log_file(out)
    console.rule("1. swap flow for each provider")
    ready: list[str] = []
    skipped: list[dict[str, str]] = []
    failed: list[dict[str, str]] = []
    for name in DEMO_PROVIDERS:
        swap_dir = out / "swap" / name
        report = asyncio.run(
            run_swap(
                provider_source(name), data_dir=swap_dir, manifest_path=swap_dir / "manifest.json"
            )
        )
        gates = " ".join(
            f"[{STATUS_STYLE.get(g.status, 'white')}]{escape(g.name)}"
            f"{STATUS_MARK.get(g.status, '?')}[/]"
            for g in report.gates
        )
        console.print(f"{escape(name):>13}: {gates}", highlight=False, markup=True)
        gate = report.failed_gate
        if gate is None:
            ready.append(name)
        else:
            entry = {
                "name": name,
                "reason": f"swap gate '{gate.name}' {gate.status}: {gate.detail[:200]}",
            }
            skipped.append(entry)
            if not gate.data.get("not_installed"):  # installed, yet it failed: a failure
                failed.append(entry)
    console.rule(f"2. LoCoMo timeline on {conversation} at "
                 f"{' and '.join(map(str, budgets))} tokens")
    cfg = BenchConfig(
        dataset=data,
        out=out,
        providers=ready,
        conversations=[conversation],
        budget_tokens=budgets[0],
        budgets=budgets,
    )
    outcome = run_bench_cli(cfg)
    outcome.skipped = skipped + outcome.skipped
    if failed:  # in results.json and the exit code, as a skipped provider is in bench's
        outcome.results["skipped"] = [*failed, *(outcome.results.get("skipped") or [])]
        (out / "results.json").write_text(
            json.dumps(outcome.results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    if probe:
        outcome.skipped += asyncio.run(_probe_others(set(DEMO_PROVIDERS)))
    outcome.wall_s = time.perf_counter() - started
    console.rule("3. comparison")
    print_outcome(
        outcome, f"{conversation}: evidence recall at {budgets[0]} tokens (judge-free)"
    )
    console.print(f"open {out / 'report.html'} for the plots")
    code = report_failures(outcome.results)
    if preferences:
        console.rule("4. preference sessions (generated, 1 persona; retrieval only, no LLM)")
        from nanobot_memory_adapters.harness.preferences import cli as prefs

        # the demo runs what is installed: a provider its swap step could not run (mem0's
        # extra missing) is reported there, not asked for again
        left_out = {s["name"] for s in skipped}
        cfg = prefs.build_config(
            out=out / "preferences",
            providers=",".join(p for p in DEMO_PREFERENCE_PROVIDERS if p not in left_out),
            scenario=prefs.load_scenario(None, 1, 0), budget_tokens=800,
            provider_config=None, seed=0, fresh=not resume, readiness_timeout=120.0,
            agent=None, judge=None, simulator="scripted", test_tags="context",
            placement="user_message",
        )
        try:
            prefs.run_and_report(cfg, narrow=True)  # 80 columns, like the rest
        except typer.Exit as exc:
            code = code or exc.exit_code
        console.print(f"open {out / 'preferences' / 'report.html'}; with a model, "
                      "nanobot-memory preferences run --agent-base-url URL --agent-model M "
                      "runs the test sessions through nanobot")
    if code:
        raise typer.Exit(code)


