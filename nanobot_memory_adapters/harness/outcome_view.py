"""How a harness run's outcome reaches the terminal: the comparison tables, the failure
counts on stderr, and the exit code those counts decide."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table

from nanobot_memory_adapters.console import EXIT_FAILURES, EXIT_PENDING, console, err_console
from nanobot_memory_adapters.harness.estimates import ci_cell
from nanobot_memory_adapters.harness.pair_table import pair_table, verdict_word


def _cell(e: dict[str, Any] | None, signed: bool = False) -> str:
    """A value over its 95 % interval, two short lines (the table stays 80 columns)."""
    return ci_cell(e, 3, signed=signed, sep="\n")


def comparison_table(results: dict[str, Any], title: str) -> Table:
    """The headline: turn recall, provenance recall and answer lift over the no-evidence
    baseline, each with its 95 % interval (everything else: results.json, report.html)."""
    iv = results.get("intervals") or {}
    per = iv.get("providers") or {}
    table = Table(title=title, box=box.SIMPLE_HEAD)
    for col in ("provider", "turn recall", "prov. recall", "answer lift", "tokens"):
        table.add_column(col, justify="left" if col == "provider" else "right")
    counts = set()
    for name, m in results["providers"].items():
        e = per.get(name) or {}
        counts.add((e.get("turn") or {}).get("n", m["asks"]))
        over = m["context_tokens"]["over_budget"]
        mean = m["context_tokens"]["mean"]
        table.add_row(
            name,
            _cell(e.get("turn")) + ("*" if m.get("memory_form") == "derived" else ""),
            _cell(e.get("provenance")),
            _cell(e.get("answer_lift"), signed=True),
            ("–" if mean is None else f"{mean:.0f}")
            + (f"\n{over} over" if over else ""),
        )
    asks = "/".join(str(c) for c in sorted(counts))
    table.caption = (f"mean over {asks} asks of categories 1-4 (category 5, adversarial: "
                     "apart, in results.json); \\[low, high] = 95 % bootstrap interval "
                     f"(resampling by {iv.get('cluster', 'question')}); answer lift = answer "
                     "recall minus its no-evidence baseline; detail in report.html")
    return table


def pairwise_table(results: dict[str, Any]) -> Table | None:
    """Each pair of providers: the paired difference A - B per headline metric, its 95 %
    interval, and whether it separates them."""
    pairwise = (results.get("intervals") or {}).get("pairwise") or {}
    metrics = [("turn", "turn recall"), ("provenance", "prov. recall"),
               ("answer_lift", "answer lift")]
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for metric, _ in metrics:
        for d in pairwise.get(metric, []):
            cells.setdefault((d["a"], d["b"]), {})[metric] = (
                f"{d['value']:+.3f}\n[{d['low']:+.2f}, {d['high']:+.2f}]\n"
                f"{verdict_word(d['distinguishable'], d['value'])}")
    return pair_table("pairwise: A - B on the same questions", metrics, cells,
                      "not dist. = not distinguishable: the 95 % interval of the difference "
                      "covers 0 or, for 0/1 outcomes, McNemar's exact p >= 0.05")


def cost_table(results: dict[str, Any]) -> Table:
    """What each provider cost: context tokens, latencies, ingest time, failures."""
    from nanobot_memory_adapters.harness.report import comparison_rows

    table = Table(title="cost", box=box.SIMPLE_HEAD)
    table.caption = ("tokens: mean/max; retrieve ms: p50/p95; record ms: p50 per event; "
                     "failed: failed writes, reads, mode switches, resets, gate leaks and "
                     "judge calls")
    for col in ("provider", "tokens", "retrieve ms", "record ms", "ingest s", "failed"):
        table.add_column(col, justify="left" if col == "provider" else "right")

    def f(v: Any, d: int = 3) -> str:
        return "–" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))

    for r in comparison_rows(results):
        table.add_row(r["provider"], f"{f(r['tokens_mean'], 0)}/{f(r['tokens_max'])}",
                      f"{f(r['retrieve_p50'], 1)}/{f(r['retrieve_p95'], 1)}",
                      f(r["record_p50"], 1), f(r["ingest_s"], 1), str(r["failures"]))
    return table


def failure_counts(results: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per provider, the failure counts that are not zero."""
    return {
        name: {k: v for k, v in m["failures"].items() if v}
        for name, m in results.get("providers", {}).items()
        if any(m["failures"].values())
    }


def outcome_exit_code(results: dict[str, Any]) -> int:
    counts = failure_counts(results)
    if results.get("skipped") or any(
            k != "readiness_pending" for c in counts.values() for k in c):
        return EXIT_FAILURES
    return EXIT_PENDING if counts else 0


def report_failures(results: dict[str, Any]) -> int:
    """Print what failed (stderr) and return the exit code the run ends with."""
    code = outcome_exit_code(results)
    for name, counts in failure_counts(results).items():
        err_console.print(
            f"[red]{escape(name)}[/red]: "
            + escape(", ".join(f"{k}={v}" for k, v in counts.items())),
            highlight=False, soft_wrap=True, markup=True,
        )
    for name, m in (results.get("providers") or {}).items():
        empty = m.get("events_stored_nothing") if isinstance(m, dict) else None
        if empty:  # not a failure: the backend took the events and kept nothing from them
            err_console.print(
                f"[yellow]{escape(name)}[/yellow]: {empty} of {m.get('events_recorded')} "
                "recorded events stored nothing new (the backend kept nothing from them, "
                "e.g. mem0's extraction found no fact)",
                highlight=False, soft_wrap=True, markup=True)
    skipped = [str(s.get("name")) for s in results.get("skipped") or []]
    if skipped:
        ran = len(results.get("providers") or {})
        err_console.print(
            f"[red]skipped[/red]: {escape(', '.join(skipped))} (reasons above); "
            + (f"results hold the other {ran}" if ran else "no provider ran"),
            highlight=False, soft_wrap=True, markup=True)
    if code == EXIT_FAILURES:
        err_console.print(f"[red]failures above[/red]: exit {code} (results are written, but "
                          "they include failed writes, reads or judge calls, or lack a "
                          "skipped provider)", highlight=False, markup=True)
    elif code == EXIT_PENDING:
        err_console.print(f"[yellow]readiness pending[/yellow]: exit {code}", highlight=False,
                          markup=True)
    return code


def judged_table(results: dict[str, Any]) -> Table | None:
    """The LLM judge's accuracy (the headline when a judge ran), and how each judge-free
    metric ranks the providers against it."""
    judged = results.get("judged")
    if not judged or not judged.get("providers"):
        return None
    table = Table(title="LLM-judged answers at the final test point (headline)")
    for col in ("provider", "accuracy 1-4", "n", "cat 5", "by category"):
        table.add_column(col, justify="left" if col == "provider" else "right")
    for name, j in judged["providers"].items():
        cats = ", ".join(f"{c}:{b['accuracy']:.2f}" for c, b in j["by_category"].items()
                         if b.get("accuracy") is not None)
        adv = (j.get("category_5") or {}).get("interval")
        table.add_row(name, _cell(j["overall"].get("interval")), str(j["overall"]["count"]),
                      _cell(adv), cats)
    tau = (judged.get("agreement") or {}).get("rank_tau") or {}
    if tau:
        table.caption = "judge-free ranking vs judge (Kendall tau): " + ", ".join(
            f"{k} {'–' if v is None else f'{v:+.2f}'}" for k, v in tau.items())
    return table


def budget_table(sweep: list[dict[str, Any]]) -> Table:
    """Turn recall against the context tokens used, per provider, at every budget."""
    table = Table(title="turn recall @ mean tokens, per budget", box=box.SIMPLE_HEAD)
    table.add_column("provider", justify="left")
    for entry in sweep:
        table.add_column(f"{entry['budget_tokens']} tok", justify="right")
    names = list(sweep[0]["curve"])

    def cell(point: dict[str, Any]) -> str:
        turn, tokens = point["turn"], point["tokens_mean"]
        return (f"{'–' if turn is None else f'{turn:.3f}'} @ "
                f"{'–' if tokens is None else round(tokens)}")

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
    """The run's tables, each within 80 columns (the full detail is in report.html). The
    LoCoMo tables (categories 1-4, category 5 apart) for a LoCoMo run only: LongMemEval
    and BEAM print their own headline (harness/lme_task.py, beam_task.py)."""
    locomo = "intervals" in outcome.results
    headline = judged_table(outcome.results) if locomo else None
    if headline is not None:
        console.print(headline)
    if locomo:
        console.print(comparison_table(outcome.results, title))
    derived = any(m.get("memory_form") == "derived"
                  for m in outcome.results["providers"].values())
    if locomo and derived:
        console.print(
            "* turn recall counts verbatim turn text: a provider that shows what it derived "
            "(extracted facts) reads ~0 by construction; read provenance and answer recall "
            "for it (docs/harness.md, Metrics)", highlight=False)
    pairs = pairwise_table(outcome.results)
    if pairs is not None:
        console.print(pairs)
    console.print(cost_table(outcome.results))
    sweep = outcome.results.get("budgets")
    if sweep:
        console.print(budget_table(sweep))
    for s in outcome.skipped:
        console.print(f"[yellow]skipped[/yellow] {escape(str(s['name']))}: "
                      f"{escape(str(s['reason']))}", highlight=False, markup=True)
    console.print(
        f"wall time {outcome.wall_s:.1f}s"
        + (f" ({outcome.resumed_units} units from the checkpoint)" if outcome.resumed_units else "")
        + (f" ({outcome.resumed_mid_unit} resumed after their last finished session)"
           if outcome.resumed_mid_unit else "")
        + f" · manifest {outcome.manifest['manifest_sha256'][:12]}"
        + f" · metrics {outcome.results['metrics_sha256'][:12]}"
        + _dropped_questions(outcome.results), highlight=False
    )
    cut = (outcome.results.get("timing") or {}).get("replayed_cut_sessions")
    if cut:
        console.print(f"[yellow]note[/yellow]: {len(cut)} unit(s) resumed in the middle of a "
                      "session: its contexts and the metrics hash can differ from an "
                      "uninterrupted run's (results.json notes.resume)", highlight=False,
                      soft_wrap=True, markup=True)
    console.print(f"outputs in {outcome.out}: manifest.json traces.jsonl results.json "
                  "report.html", highlight=False)
