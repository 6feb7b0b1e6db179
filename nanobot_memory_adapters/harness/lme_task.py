"""``bench --task longmemeval``: the LongMemEval block of results.json, its table, and
``--verify`` for it. The run itself is the timeline driver's (harness/timeline.py): one
unit per question (fresh scope), sessions in date order, the question asked read-only
once, after the last session, at ``question_date``, with the same budget, readiness
waits, gate probes, manifest and traces as LoCoMo."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.harness.lme_metrics import KS, accuracy, asks_from_units, summarize
from nanobot_memory_adapters.harness.metrics import asks_at

if TYPE_CHECKING:
    from nanobot_memory_adapters.harness.bench_config import BenchConfig

NOTE = (
    "LongMemEval's retrieval metrics (recall_any, recall_all, ndcg) at session level "
    "(answer_session_ids) and turn level (has_answer turns), from the sources of the items "
    "each provider returned: *_shown = the items in the section at the equal token budget "
    "(k = all shown); *@k = the provider's own ranking before the budget cut. Abstention "
    "questions are left out of retrieval, as the benchmark does. Each figure: mean, 95 % "
    "interval (Wilson for 0/1, bootstrap for ndcg), n. 'qa': the LLM judge with the "
    "benchmark's per-type rules (harness/lme_judge.py), not in metrics_sha256; "
    "'qa.overall' is over the answerable questions, 'qa.abstention' (_abs) apart."
)


def longmemeval_block(cfg: BenchConfig, by_provider: dict[str, list[dict[str, Any]]]
                      ) -> dict[str, Any]:
    """Per provider: the retrieval summary at the headline budget, and the judged accuracy
    when a judge ran."""
    providers: dict[str, Any] = {}
    for name, units in by_provider.items():
        asks = asks_from_units(asks_at(units, cfg.budget_tokens, cfg.budget_tokens))
        entry: dict[str, Any] = {"retrieval": summarize(asks)}
        judged = [j for u in units for j in u["judged"]]
        if judged:
            entry["qa"] = accuracy(judged)
        providers[name] = entry
    return {"note": NOTE, "ks": list(KS), "providers": providers}


def table_rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    """(provider, session any@5, session any shown, turn all shown, QA accuracy over the
    answerable questions, QA on the abstention questions) per provider: the headline
    figures, each with its interval (QA with its n)."""
    from nanobot_memory_adapters.harness.estimates import ci_cell

    rows = []
    for name, entry in results["longmemeval"]["providers"].items():
        o = entry["retrieval"]["overall"]
        qa = entry.get("qa") or {}
        rows.append((name, ci_cell(o.get("session_any@5")), ci_cell(o.get("session_any_shown")),
                     ci_cell(o.get("turn_all_shown")),
                     ci_cell((qa.get("overall") or {}).get("accuracy"), n=True),
                     ci_cell((qa.get("abstention") or {}).get("accuracy"), n=True)))
    return rows


def print_table(results: dict[str, Any], title: str) -> None:
    from rich.table import Table

    from nanobot_memory_adapters.console import console

    t = Table(title=title, title_justify="left")
    for head in ("provider", "sess any@5", "sess any shown", "turn all shown", "QA acc.",
                 "QA abstention"):
        t.add_column(head, overflow="fold")
    for row in table_rows(results):
        t.add_row(*row)
    console.print(t)
    console.print("n and every metric per question type: results.json 'longmemeval'; "
                  "docs/harness.md (LongMemEval)", highlight=False)


def verify(outcome: Any) -> list[str]:
    """Providers whose LongMemEval retrieval block (BEAM: evidence block, naming each
    figure that differs; LoCoMo: ranked@k block) differs when recomputed from traces."""
    from nanobot_memory_adapters.harness.lme_metrics import recompute_from_traces

    budget = outcome.results["budget_tokens"] if outcome.results.get("budgets") else None
    traces = outcome.out / "traces.jsonl"
    if "beam" in outcome.results:
        from nanobot_memory_adapters.harness.beam_task import verify as verify_beam

        return verify_beam(outcome.results, traces)
    block = outcome.results.get("longmemeval")
    if block is None:
        from nanobot_memory_adapters.harness.ranked_k import (
            recompute_from_traces as ranked_again,
        )

        ranked = outcome.results.get("ranked_at_k") or {"providers": {}}
        again = ranked_again(traces, budget)
        return [f"{n} (ranked@k)" for n, e in ranked["providers"].items() if again.get(n) != e]
    again = recompute_from_traces(traces, budget)
    return [f"{n} (longmemeval)" for n, e in block["providers"].items()
            if again.get(n) != e["retrieval"]]

