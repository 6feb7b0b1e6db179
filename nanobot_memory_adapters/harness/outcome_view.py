"""How a harness run's outcome reaches the terminal: the comparison tables, the failure
counts on stderr, and the exit code those counts decide."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from nanobot_memory_adapters.console import console, err_console, wide_console


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


def budget_table(sweep: list[dict[str, Any]]) -> Table:
    """Recall against the context tokens used, per provider, at every budget of a sweep."""
    table = Table(title="recall vs budget (turn / session / answer recall @ mean tokens)")
    table.add_column("provider", justify="left")
    for entry in sweep:
        table.add_column(f"{entry['budget_tokens']} tok", justify="right")
    names = list(sweep[0]["curve"])

    def cell(point: dict[str, Any]) -> str:
        def f(v: Any) -> str:
            return "–" if v is None else f"{v:.3f}"

        tokens = point["tokens_mean"]
        return (f"{f(point['turn'])} / {f(point['session'])} / {f(point['answer'])} "
                f"@ {'–' if tokens is None else round(tokens)}")

    for name in names:
        table.add_row(name, *[cell(e["curve"][name]) for e in sweep])
    return table


def _dropped_questions(results: dict[str, Any]) -> str:
    """The summary's note of questions the dataset gave but the run could not ask."""
    parsing = results.get("evidence_parsing") or {}
    malformed = parsing.get("malformed_questions") or 0
    unplaced = parsing.get("skipped_questions") or 0
    if not malformed and not unplaced:
        return ""
    return (f" · questions dropped: {malformed} malformed, {unplaced} without usable "
            "evidence (results.json evidence_parsing)")


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
    sweep = outcome.results.get("budgets")
    if sweep:
        wide.print(budget_table(sweep))
    for s in outcome.skipped:
        console.print(
            f"[yellow]skipped[/yellow] {s['name']}: {s['reason']}", highlight=False, soft_wrap=True
        )
    console.print(
        f"wall time {outcome.wall_s:.1f}s"
        + (f" ({outcome.resumed_units} units from the checkpoint)" if outcome.resumed_units else "")
        + (f" ({outcome.resumed_mid_unit} resumed after their last finished session)"
           if outcome.resumed_mid_unit else "")
        + f" · manifest {outcome.manifest['manifest_sha256'][:12]}"
        + f" · metrics {outcome.results['metrics_sha256'][:12]}"
        + _dropped_questions(outcome.results)
    )
    cut = (outcome.results.get("timing") or {}).get("replayed_cut_sessions")
    if cut:
        console.print(f"[yellow]note[/yellow]: {len(cut)} unit(s) resumed in the middle of a "
                      "session: its contexts and the metrics hash can differ from an "
                      "uninterrupted run's (results.json notes.resume)", highlight=False,
                      soft_wrap=True)
    console.print(f"outputs in {outcome.out}: manifest.json traces.jsonl results.json report.html")
