"""``nanobot-memory preferences generate | personamem | run`` (and ``bench --task
preferences``, which runs the same with bench's options)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from nanobot_memory_adapters.console import console, fail, wide_console
from nanobot_memory_adapters.stats import format_bounds, format_number

prefs_app = typer.Typer(
    help="Behavioural preference sessions: generate scenarios, import PersonaMem, run them.",
    no_args_is_help=True,
)

DEFAULT_PROVIDERS = "no_memory,full_history,simple_rag,oracle_ipas"


@prefs_app.command("generate")
def generate_command(
    out: Annotated[Path, typer.Option(help="Scenario JSON to write.")],
    personas: Annotated[int, typer.Option(
        help="How many personas (1-48; 12 behavioural tests each).")] = 17,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 0,
    later_sessions: Annotated[int, typer.Option(
        help="Chat-only sessions after the seventh, then a last test point that tests "
        "every value only memory can give again (reversion and contamination probes; "
        "0-20, default 0: the default set).")] = 0,
) -> None:
    """Write a generated, seeded scenario set (license-clean: this project's phrase bank)."""
    from nanobot_memory_adapters.harness.cli_options import check_out_dir
    from nanobot_memory_adapters.harness.preferences.format import dump_scenarios

    scenario = _generated(personas, seed, later_sessions)
    _check_scenario_target(out)
    check_out_dir(out.parent, "--out's folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_scenarios(scenario), encoding="utf-8")
    tests = sum(len(p.tests) for p in scenario.personas)
    console.print(f"wrote {out}: {personas} personas, {tests} test sessions (seed {seed})")


@prefs_app.command("personamem")
def personamem_command(
    questions: Annotated[Path, typer.Option(help="PersonaMem questions_*.csv")],
    contexts: Annotated[Path, typer.Option(help="PersonaMem shared_contexts_*.jsonl")],
    out: Annotated[Path, typer.Option(help="Scenario JSON to write.")],
    limit: Annotated[int | None, typer.Option(help="At most this many questions.")] = None,
    persona: Annotated[
        list[str] | None, typer.Option(help="Only these persona ids (repeatable).")
    ] = None,
) -> None:
    """Convert PersonaMem files you have into the scenario format (not shipped here)."""
    from nanobot_memory_adapters.harness.cli_options import check_out_dir
    from nanobot_memory_adapters.harness.preferences.format import ScenarioError, dump_scenarios
    from nanobot_memory_adapters.harness.preferences.personamem import load_personamem

    if limit is not None and limit < 1:  # before reading files that can be large
        raise fail(f"--limit {limit}: give 1 or more (at most this many questions)")
    _check_scenario_target(out)
    check_out_dir(out.parent, "--out's folder")
    try:
        scenario, stats = load_personamem(questions, contexts, limit=limit,
                                          personas=persona or None)
    except ScenarioError as exc:
        raise fail(str(exc)) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_scenarios(scenario), encoding="utf-8")
    console.print(f"wrote {out}: {stats}")


def _check_scenario_target(out: Path) -> None:
    """``--out`` may be written: not a folder, and not a file of the user's (only a
    scenario set, which these commands write, is replaced)."""
    from nanobot_memory_adapters.harness.preferences.format import FORMAT
    from nanobot_memory_adapters.json_files import MAX_BYTES, written_by_us

    if out.is_dir():
        raise fail(f"--out {out} is a directory; give a file name such as scenarios.json")
    # a converted PersonaMem set can be larger than a settings file
    if out.exists() and not written_by_us(out, lambda d: d.get("format") == FORMAT,
                                          max_bytes=MAX_BYTES):
        raise fail(f"--out {out}: the file there is not a scenario set and would be "
                   "overwritten; choose another path, or move that file away")


def _generated(personas: int, seed: int, later_sessions: int = 0) -> Any:
    from nanobot_memory_adapters.harness.preferences.generator import (
        MAX_LATER_SESSIONS,
        generate,
    )

    if not 0 <= later_sessions <= MAX_LATER_SESSIONS:
        raise fail(f"--later-sessions {later_sessions}: use 0 to {MAX_LATER_SESSIONS}")
    try:
        return generate(personas, seed, later_sessions)
    except ValueError as exc:
        raise fail(f"--personas: {exc}") from None


def load_scenario(dataset: Path | None, personas: int, seed: int,
                  later_sessions: int = 0) -> Any:
    from nanobot_memory_adapters.harness.preferences.format import ScenarioError, load_scenarios

    if dataset is None:
        return _generated(personas, seed, later_sessions)
    if later_sessions:
        raise fail("--later-sessions: shapes a generated set; a --dataset file has its own "
                   "sessions (generate it with --later-sessions instead)")
    try:
        return load_scenarios(dataset)
    except ScenarioError as exc:
        raise fail(str(exc)) from None


def _endpoint(base_url: str | None, model: str | None, key_env: str, what: str) -> Any:
    if not base_url:
        if model:  # else the run goes on without the model it was given
            raise fail(f"--{what}-model: give --{what}-base-url too (the endpoint serving it)")
        return None
    if not model:
        raise fail(f"--{what}-model is required with --{what}-base-url")
    from nanobot_memory_adapters.harness.cli_options import check_llm_options
    from nanobot_memory_adapters.harness.judge import LLMEndpoint

    check_llm_options(base_url, model, what, key_env=key_env)

    return LLMEndpoint(base_url=base_url, model=model, api_key_env=key_env)


def build_config(
    *, out: Path, providers: str, scenario: Any, budget_tokens: int, provider_config: Path | None,
    seed: int, fresh: bool, readiness_timeout: float, agent: Any, judge: Any,
    simulator: str, test_tags: str, placement: str, max_turns: int = 3,
    recognition: bool = True, agent_tools: str = "default",
    persona_cap: list[str] | None = None, run_last: list[str] | None = None,
) -> Any:
    from nanobot_memory_adapters.harness.cli_options import (
        check_budget,
        check_seconds,
        parse_persona_caps,
        provider_configs,
        provider_names,
    )
    from nanobot_memory_adapters.harness.judge import OpenAICompatibleClient
    from nanobot_memory_adapters.harness.preferences.agent import AgentLLM
    from nanobot_memory_adapters.harness.preferences.driver import (
        PreferenceBenchConfig,
        RubricJudge,
        split_group,
    )
    from nanobot_memory_adapters.harness.preferences.reader import (
        IdealReaderAgent,
        check_readable,
    )
    from nanobot_memory_adapters.harness.preferences.simulator import LLMUser, ScriptedUser

    names = provider_names(providers, base=lambda n: split_group(n)[0])
    caps = parse_persona_caps(persona_cap or [], names, len(scenario.personas))
    for name in run_last or []:
        if name not in names:
            raise fail(f"--run-last {name}: not among --providers ({', '.join(names)}); "
                       "name a provider of this run")
    check_budget(budget_tokens)
    check_seconds(readiness_timeout)
    if test_tags not in ("context", "all", "none"):
        raise fail(f"--test-tags {test_tags!r}: use context, all or none")
    if placement not in ("system_prompt", "user_message"):
        raise fail(f"--placement {placement!r}: use system_prompt or user_message")
    if simulator not in ("scripted", "llm"):
        raise fail(f"--simulator {simulator!r}: use scripted or llm")
    if not 1 <= max_turns <= 10:
        raise fail(f"--max-turns {max_turns}: use 1 to 10 (replies per test session)")
    reader = isinstance(agent, IdealReaderAgent)
    from nanobot_memory_adapters.harness.preferences.agent import AGENT_TOOLS

    if agent_tools not in AGENT_TOOLS:
        raise fail(f"--agent-tools {agent_tools!r}: use default or none")
    if agent_tools != "default" and (agent is None or reader):
        raise fail(f"--agent-tools {agent_tools}: sets the tools nanobot's model is offered; "
                   "give --agent-base-url and --agent-model (the ideal reader and a "
                   "retrieval-only run have no tools)")
    if reader:
        why = check_readable([t for p in scenario.personas for t in p.tests])
        if why:
            raise fail(f"--agent ideal-reader: {why}")
    if judge is not None and agent is None:  # no replies to judge, no user to simulate
        raise fail("--judge-base-url: judges the agent's replies, and a run without "
                   "--agent-base-url (retrieval only) has none; add --agent-base-url or "
                   "drop the judge")
    closers: list[Any] = []
    rubric = None
    if judge is not None:
        client = OpenAICompatibleClient(judge)
        closers.append(client.aclose)
        rubric = RubricJudge(client, judge.describe())
    sim: Any = ScriptedUser()
    if simulator == "llm":
        endpoint = judge or (None if reader else agent)
        if endpoint is None:
            raise fail("--simulator llm needs a model: give --judge-base-url or "
                        "--agent-base-url")
        client = OpenAICompatibleClient(endpoint)
        closers.append(client.aclose)
        sim = LLMUser(client, endpoint.describe())
    return PreferenceBenchConfig(
        out=out, providers=names, scenario=scenario, budget_tokens=budget_tokens,
        agent=agent if reader else
        AgentLLM(base_url=agent.base_url, model=agent.model, api_key_env=agent.api_key_env)
        if agent else None,
        agent_tools=agent_tools,  # type: ignore[arg-type]  # checked above
        simulator=sim, max_turns=max_turns, persona_caps=caps, recognition=recognition,
        run_last=list(dict.fromkeys(run_last or [])), judge=rubric,
        test_tags=test_tags,  # type: ignore[arg-type]
        placement=placement, provider_configs=provider_configs(provider_config),
        readiness_timeout_s=readiness_timeout, seed=seed, fresh=fresh, closers=closers,
    )


def results_table(results: dict[str, Any]) -> Table:
    from nanobot_memory_adapters.harness.preferences.format import DIMENSIONS
    from nanobot_memory_adapters.harness.preferences.report import headline_ci

    table = Table(title=f"Preference sessions at {results['budget_tokens']} tokens")
    for col in ("provider", "group", "behaviour [95% CI] n", *DIMENSIONS, "resolved",
                "recognition", "current exp. [95% CI] n", "stale exp.",
                "reversion [95% CI] n", "contamination [95% CI] n", "leaks", "failures"):
        table.add_column(col, justify="left" if col in ("provider", "group") else "right")

    def f(v: Any) -> str:
        return "–" if v is None else f"{v:.3f}"

    def ci(block: dict[str, Any], key: str) -> str:  # every score with its own n
        c = headline_ci(block, key)
        return "–" if c is None else (f"{format_number(c['value'], 3)} "
                                      f"{format_bounds(c['low'], c['high'])} n {c['n']}")

    def rate(block: dict[str, Any], key: str) -> str:  # over opportunities: n says how many
        return ci(block, key) if headline_ci(block, key) else (
            f"– n {block.get(f'{key}_opportunities', 0)}")

    for name, m in results["providers"].items():
        s = m["scores"]
        o = s["overall"]
        table.add_row(
            name, m["experiment_group"], ci(o, "behaviour"),
            *[ci(s["by_dimension"][d], "behaviour") for d in DIMENSIONS],
            f(o["resolved"]), f(o["accuracy"]), ci(o, "current_exposure"),
            f(o["stale_exposure"]), rate(o, "reversion"), rate(o, "contamination"),
            str(o["query_leaks"]), str(sum(m["failures"].values())),
        )
    table.caption = ("reversion: acted on at an earlier point, not any more; contamination: "
                     "another context's value acted on; both over their opportunities (n), "
                     "lower is better, '–' where an agent never acted on a remembered value")
    return table


def pairwise_table(results: dict[str, Any], score: str = "behaviour") -> Table | None:
    from nanobot_memory_adapters.harness.preferences.report import headline_pair
    from nanobot_memory_adapters.stats import format_p

    rows = (results.get("pairwise") or {}).get(score)
    if not rows:
        return None
    lower = score in ("reversion", "contamination")  # rates of failures
    table = Table(title=f"Paired differences ({score}, same "
                  f"{'opportunities; lower is better' if lower else 'tests'}; 95% CI by "
                  "attribute)")
    for col in ("a - b", "difference [95% CI]", "n", "McNemar p", "verdict"):
        table.add_column(col, justify="left" if col in ("a - b", "verdict") else "right")
    for r in rows:
        h = headline_pair(r)
        table.add_row(f"{r['a']} - {r['b']}",
                      f"{format_number(h['difference'], 3, signed=True)} "
                      f"{format_bounds(h['low'], h['high'], signed=True)}",
                      str(h["n"]), format_p(h["mcnemar_p"]), h["verdict"])
    return table


def run_and_report(cfg: Any, *, as_json: bool = False, narrow: bool = False) -> None:
    """Run and print the results; ``narrow``: the 80-column headline (the demo's)."""
    from nanobot_memory_adapters.harness.outcome_view import report_failures
    from nanobot_memory_adapters.harness.preferences.driver import run_preferences
    from nanobot_memory_adapters.harness.progress import run_resumable

    outcome = run_resumable(run_preferences, cfg, quiet=as_json)
    if as_json:
        print(json.dumps(outcome.results, indent=2))
    else:
        if narrow:
            from nanobot_memory_adapters.harness.preferences.narrow import (
                narrow_pairwise_table,
                narrow_results_table,
            )

            console.print(narrow_results_table(outcome.results))
            if (pairs := narrow_pairwise_table(outcome.results)) is not None:
                console.print(pairs)
        else:
            wide = wide_console()
            wide.print(results_table(outcome.results))
            for score in ("behaviour", "current_exposure", "reversion", "contamination"):
                pairs = pairwise_table(outcome.results, score)
                if pairs is not None:
                    wide.print(pairs)
        for s in outcome.skipped:
            console.print(f"[yellow]skipped[/yellow] {escape(str(s['name']))}: "
                          f"{escape(str(s['reason']))}", highlight=False, soft_wrap=True,
                          markup=True)
        agent = outcome.manifest["settings"]["agent_mode"]
        console.print(f"wall time {outcome.wall_s:.1f}s · {agent} · manifest "
                      f"{outcome.manifest['manifest_sha256'][:12]} · exposure metrics "
                      f"{outcome.results['metrics_sha256'][:12]}")
        console.print(f"outputs in {outcome.out}: scenarios.json manifest.json traces.jsonl "
                      "results.json report.html")
    code = report_failures(outcome.results)
    if code:
        raise typer.Exit(code)


@prefs_app.command("run")
def run_command(
    providers: Annotated[str, typer.Option(help="Comma-separated providers; '<name>+feedback' "
                                           "runs a provider with native feedback as its own "
                                           "experiment group.")] = DEFAULT_PROVIDERS,
    dataset: Annotated[Path | None, typer.Option(
        help="Scenario JSON (default: generate --personas with --seed).")] = None,
    personas: Annotated[int, typer.Option(
        help="Generated personas (without --dataset); 12 behavioural tests each.")] = 17,
    seed: Annotated[int, typer.Option()] = 0,
    later_sessions: Annotated[int, typer.Option(
        help="Generated set only: chat-only sessions after the seventh and a last test "
        "point (reversion and contamination probes); see preferences generate.")] = 0,
    budget_tokens: Annotated[int, typer.Option(help="Equal memory budget.")] = 800,
    out: Annotated[Path, typer.Option(help="Output directory (holds the checkpoint).")] = Path(
        "bench-out/preferences"),
    agent_base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible endpoint nanobot answers test sessions with (without one: "
        "retrieval-only, exposure metrics only).")] = None,
    agent_model: Annotated[str | None, typer.Option()] = None,
    agent: Annotated[str, typer.Option(
        help="Who answers the test sessions: nanobot (its AgentLoop with --agent-base-url; "
        "without one, retrieval only) or ideal-reader (a deterministic agent double that "
        "acts only on the memory section; no model needed).")] = "nanobot",
    max_turns: Annotated[int, typer.Option(
        help="Replies per behavioural test session (the simulated user's turns between).")
    ] = 3,
    recognition: Annotated[bool, typer.Option(
        help="Also run each option test's recognition session (options shown after recall);"
        " --no-recognition runs the behaviour sessions alone, half the model calls.")] = True,
    agent_tools: Annotated[str, typer.Option(
        help="Tools nanobot offers its model in the test turns: default (its own tools and "
        "memory_search) or none (no tool at all; recorded in the manifest).")] = "default",
    persona_cap: Annotated[list[str] | None, typer.Option(
        help="PROVIDER=N: that provider runs on the first N personas only (repeatable; a "
        "slow memory beside fast ones on one model; pairs compare over the tests both "
        "ran; recorded in the manifest).")] = None,
    run_last: Annotated[list[str] | None, typer.Option(
        help="PROVIDER: its units run after every other provider's (repeatable; e.g. a "
        "slow memory, so a working session that ends mid-run finishes fast units instead "
        "of cutting a slow one). Scheduling only: not in the manifest; the run resumes with "
        "or without it.")] = None,
    agent_api_key_env: Annotated[str, typer.Option()] = "OPENAI_API_KEY",
    judge_base_url: Annotated[str | None, typer.Option(
        help="Endpoint of the open-task rubric judge (default: none; open tasks unjudged).")
    ] = None,
    judge_model: Annotated[str | None, typer.Option()] = None,
    judge_api_key_env: Annotated[str, typer.Option()] = "OPENAI_API_KEY",
    simulator: Annotated[str, typer.Option(help="scripted | llm (the judge's endpoint).")
                         ] = "scripted",
    test_tags: Annotated[str, typer.Option(
        help="Which test tags reach RetrieveRequest: context | all | none.")] = "context",
    placement: Annotated[str, typer.Option(
        help="Plugin context placement: system_prompt | user_message.")] = "user_message",
    provider_config: Annotated[Path | None, typer.Option(
        help='JSON {"provider": {block}}; a block opts an LLM-needing provider in.')] = None,
    readiness_timeout: Annotated[float, typer.Option()] = 120.0,
    fresh: Annotated[bool, typer.Option(help="Discard a previous run in --out.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Accumulate each persona's sessions into every provider, then run the test sessions
    through a real nanobot AgentLoop with the memory plugin on that provider (read-only)
    and score CS / PET / IQI. Exit codes as for bench (4: failures)."""
    from nanobot_memory_adapters.harness.cli_options import check_out_dir
    from nanobot_memory_adapters.logs import default_log_file

    check_out_dir(out)
    default_log_file(out)
    if agent not in ("nanobot", "ideal-reader"):
        raise fail(f"--agent {agent!r}: use nanobot or ideal-reader")
    if agent == "ideal-reader" and agent_base_url:
        raise fail("--agent ideal-reader needs no model; drop --agent-base-url")
    from nanobot_memory_adapters.harness.preferences.reader import IdealReaderAgent

    cfg = build_config(
        out=out, providers=providers,
        scenario=load_scenario(dataset, personas, seed, later_sessions),
        budget_tokens=budget_tokens, provider_config=provider_config, seed=seed, fresh=fresh,
        readiness_timeout=readiness_timeout,
        agent=IdealReaderAgent() if agent == "ideal-reader" else
        _endpoint(agent_base_url, agent_model, agent_api_key_env, "agent"),
        judge=_endpoint(judge_base_url, judge_model, judge_api_key_env, "judge"),
        simulator=simulator, test_tags=test_tags, placement=placement, max_turns=max_turns,
        recognition=recognition, agent_tools=agent_tools, persona_cap=persona_cap,
        run_last=run_last,
    )
    run_and_report(cfg, as_json=as_json)
