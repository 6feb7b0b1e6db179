"""report.html's interval sections: the headline with 95 % intervals, the answer-recall
baseline and lift (split by gold length), and the pairwise verdicts."""

from __future__ import annotations

from html import escape
from typing import Any

from nanobot_memory_adapters.harness.charts import table
from nanobot_memory_adapters.stats import format_bounds, format_number, format_p


def ci(e: dict[str, Any] | None, signed: bool = False) -> str:
    """``0.571 [0.55, 0.59]`` as HTML (the interval smaller), or n/a."""
    if e is None:
        return "n/a"
    return (f"{format_number(e['value'], 3, signed=signed)} <span class='note'>"
            f"{format_bounds(e['low'], e['high'], signed=signed)}</span>")


def _verdict(d: dict[str, Any]) -> str:
    text = escape(d["verdict"])
    return f"<b>{text}</b>" if d["distinguishable"] else f"<span class='note'>{text}</span>"


def interval_sections(results: dict[str, Any]) -> list[str]:
    iv = results.get("intervals")
    if not iv:
        return []
    per = iv["providers"]
    head_rows = [[escape(n), ci(e.get("turn")), ci(e.get("provenance")),
                  ci(e.get("answer_lift"), signed=True), str((e.get("turn") or {}).get("n", 0))]
                 for n, e in per.items()]
    answer_rows = []
    for n, e in per.items():
        for label, part in (("all", e), ("short gold (≤ 2 words)", e.get("short_gold") or {}),
                            ("longer gold", e.get("long_gold") or {})):
            a = part.get("answer")
            answer_rows.append([escape(n), escape(label), ci(a), ci(part.get("answer_baseline")),
                                ci(part.get("answer_lift"), signed=True),
                                str(a["n"] if a else 0)])
    detail_rows = [[escape(n), ci(e.get("session")), ci(e.get("answer"))]
                   for n, e in per.items()]
    pair_rows = [[escape(metric), escape(d["a"]), escape(d["b"]),
                  ci(d, signed=True), format_p(d["p_value"]),
                  str(d["n"]), _verdict(d)]
                 for metric, rows in iv["pairwise"].items() for d in rows]
    how = (f"{iv['level']:.0%} percentile bootstrap, {iv['n_boot']} resamples, seed "
           f"{iv['seed']}, asks resampled by <b>{escape(iv['cluster'])}</b>; 0/1 "
           "figures never narrower than Wilson's interval, 0/1 differences never narrower "
           "than Newcombe's, and a 0/1 verdict also needs McNemar's p &lt; 0.05")
    return [
        "<h2>Headline with 95 % intervals (judge-free)</h2><div class='card'>",
        table(["provider", "turn recall", "provenance recall", "answer lift over baseline",
               "n asks"], head_rows),
        f"<p class='note'>{how}. Turn recall ranks verbatim memories, provenance recall "
        "ranks memories that keep where an item came from, answer lift ranks what any memory "
        "shows beyond what text of the same length without evidence would show.</p></div>",
        "<h2>Answer recall beside its no-evidence baseline</h2><div class='card'>",
        table(["provider", "golds", "answer recall", "no-evidence baseline", "lift", "n"],
              answer_rows),
        "<p class='note'>Baseline: the same test on the conversation's turns up to the test "
        "point without the question's evidence, in a seeded order, as many tokens as the "
        "provider's context. Short golds (one or two words) match unrelated text by "
        "accident more often: read their lift, not their recall.</p></div>",
        "<h2>Pairwise differences (A − B on the same asks)</h2><div class='card'>",
        table(["metric", "A", "B", "A − B [95 %]", "McNemar p", "n", "verdict"], pair_rows),
        "<p class='note'><i>not distinguishable</i>: the 95 % interval of the difference "
        "covers 0; the run cannot tell the two apart on this metric. McNemar's exact p "
        "(0/1 outcomes only) ignores clustering; the verdict comes from the interval.</p>"
        "</div>",
        "<h2>Detail metrics</h2><div class='card'>",
        table(["provider", "session recall (saturated)", "answer recall (categories 1-4)"],
              detail_rows),
        f"<p class='note'>{escape(iv['saturated']['session'])}.</p></div>",
    ]
