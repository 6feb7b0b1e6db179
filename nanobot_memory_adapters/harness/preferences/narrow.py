"""The preference results in an 80-column terminal (the demo's section 4): the headline
scores with their 95 % intervals as two-line cells, and the pairwise verdicts; every
dimension, recognition and resolved rate stay in results.json and report.html."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from nanobot_memory_adapters.harness.pair_table import pair_table, verdict_word
from nanobot_memory_adapters.harness.preferences.report import headline_ci, headline_pair
from nanobot_memory_adapters.stats import format_bounds, format_number

HEADLINE = (("behaviour", "behaviour"), ("current_exposure", "current exp."))


def _cell(c: dict[str, Any] | None, value_key: str = "value", signed: bool = False) -> str:
    if c is None:
        return "–"
    return (f"{format_number(c[value_key], 3, signed=signed)} n {c['n']}\n"
            f"{format_bounds(c['low'], c['high'], signed=signed)}")


def narrow_results_table(results: dict[str, Any]) -> Table:
    table = Table(title=f"Preference sessions at {results['budget_tokens']} tokens",
                  box=box.SIMPLE_HEAD)
    for col in ("provider", *(label for _, label in HEADLINE), "stale exp.", "leaks",
                "failed"):
        table.add_column(col, justify="left" if col == "provider" else "right")
    for name, m in results["providers"].items():
        o = m["scores"]["overall"]
        stale = o.get("stale_exposure")
        table.add_row(name, *(_cell(headline_ci(o, key)) for key, _ in HEADLINE),
                      "–" if stale is None else f"{stale:.3f}", str(o["query_leaks"]),
                      str(sum(m["failures"].values())))
    table.caption = ("n tests scored; \\[low, high] = 95 % interval (clustered by attribute "
                     "from 5 attributes, else by test); every dimension, recognition and "
                     "resolved rate: results.json, report.html")
    return table


def narrow_pairwise_table(results: dict[str, Any]) -> Table | None:
    pairwise = results.get("pairwise") or {}
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for key, _ in HEADLINE:
        for r in pairwise.get(key) or []:
            h = headline_pair(r)
            verdict = verdict_word(h["verdict"] != "not distinguishable", h["difference"])
            cells.setdefault((r["a"], r["b"]), {})[key] = (
                f"{_cell(h, 'difference', signed=True)}\n{verdict}")
    return pair_table("pairwise: A - B on the same tests", HEADLINE, cells,
                      "not dist. = not distinguishable: the 95 % interval of the difference "
                      "(by attribute) covers 0, or McNemar's p >= 0.05")
