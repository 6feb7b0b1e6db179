"""``report.html``: one self-contained page (inline CSS and SVG, no JS, no network).

Plots: evidence recall per provider and LoCoMo category (turn and session level), recall
along the timeline, retrieve latency distributions, and context tokens vs recall. Tables
carry the numbers; LLM-judged scores, when present, sit in their own section.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.charts import (
    CATEGORY_NAMES,
    CSS,
    box_plot,
    colors_for,
    curves,
    fmt,
    grouped_bars,
    legend,
    line_chart,
    scatter,
    table,
)
from nanobot_memory_adapters.harness.metrics import TIMING_KEY
from nanobot_memory_adapters.harness.report_intervals import ci, interval_sections


def comparison_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row per provider (also used by the CLI table)."""
    rows = []
    for name, m in results["providers"].items():
        t = m[TIMING_KEY]
        rec = m["recall"]
        rows.append(
            {
                "provider": name,
                "kind": m.get("condition_kind", ""),
                "asks": m["asks"],
                # categories 1-4; category 5 (adversarial) apart, never averaged in
                "turn_recall": rec["categories_1_4"]["turn"],
                "session_recall": rec["categories_1_4"]["session"],
                "provenance_recall": rec["categories_1_4"].get("provenance"),
                "provenance_coverage": (m.get("provenance") or {}).get("coverage"),
                "sources_per_item": (m.get("provenance") or {}).get("sources_per_item"),
                "answer_recall": rec["categories_1_4"].get("answer"),
                "memory_form": m.get("memory_form", ""),
                "turn_recall_cat5": (rec["by_category"].get("5") or {}).get("turn"),
                "final_turn_recall": m["final_point"]["categories_1_4"]["turn"],
                "by_category": {c: b["turn"] for c, b in rec["by_category"].items()},
                "tokens_mean": m["context_tokens"]["mean"],
                "tokens_max": m["context_tokens"]["max"],
                "over_budget": m["context_tokens"]["over_budget"],
                "retrieve_p50": t["retrieve_latency_ms"]["p50"],
                "retrieve_p95": t["retrieve_latency_ms"]["p95"],
                "record_p50": t["record_latency_per_event_ms"]["p50"],
                "record_p95": t["record_latency_per_event_ms"]["p95"],
                "ingest_s": t["ingest_s"],
                "readiness_wait_s": t["readiness_wait_s"]["total"],
                "failures": sum(v for v in m["failures"].values()),
            }
        )
    return rows


def _na(value: float | None) -> str:
    return "n/a" if value is None else fmt(value)


def _applicability(results: dict[str, Any]) -> str:
    """Which metric can see which provider, and why (turn recall of extracting providers)."""
    rows = [
        [escape(n), escape(m.get("memory_form", "")), *[
            escape((m.get("metrics_apply") or {}).get(k, "")) for k in
            ("turn", "session", "provenance", "answer")]]
        for n, m in results["providers"].items()
    ]
    return "<h3>Which metric sees which provider</h3>" + table(
        ["provider", "shows", "turn recall", "session recall", "provenance recall",
         "answer recall"], rows
    )


def budget_section(results: dict[str, Any], colors: dict[str, str]) -> list[str]:
    """A sweep's curves: per provider, recall against the context tokens it used at each
    budget (how many tokens a memory needs for a given recall)."""
    sweep = results.get("budgets")
    if not sweep:
        return []
    out = ["<h2>Recall against context tokens, across budgets</h2><div class='card'>",
           legend({n: c for n, c in colors.items() if n in sweep[0]["curve"]})]
    for metric, label in (("turn", "turn-level"), ("session", "session-level"),
                          ("provenance", "provenance"), ("answer", "answer")):
        series: dict[str, list[tuple[float, float, str]]] = {}
        for entry in sweep:
            for name, point in entry["curve"].items():
                if point["tokens_mean"] is None or point.get(metric) is None or name not in colors:
                    continue
                series.setdefault(name, []).append(
                    (point["tokens_mean"], point[metric], f"budget {entry['budget_tokens']}"))
        if series:
            out.append(curves(series, colors, f"Recall against context tokens ({label} recall)",
                              "mean context tokens at each budget ("
                              + ", ".join(str(e["budget_tokens"]) for e in sweep) + ")"))
    rows = [[escape(name), *[
        f"{fmt(e['curve'][name]['turn'])} / {fmt(e['curve'][name]['answer'])} @ "
        f"{fmt(e['curve'][name]['tokens_mean'], 0)}" for e in sweep]]
        for name in sweep[0]["curve"]]
    out.append(table(["provider (turn / answer recall @ mean tokens)",
                      *[f"{e['budget_tokens']} tokens" for e in sweep]], rows))
    out.append("<p class='note'>Every question was asked at each budget with a fresh native "
               "retrieve (ingest once per unit); the tables above show the headline budget, "
               f"{sweep[0]['budget_tokens']}.</p></div>")
    return out


def render_report(
    manifest: dict[str, Any], results: dict[str, Any], units: list[dict[str, Any]] | None = None
) -> str:
    providers = list(results["providers"])
    colors = colors_for(providers)
    units = units or []
    cats = sorted(
        {c for m in results["providers"].values() for c in m["recall"]["by_category"]}, key=int
    )
    groups = ["overall", "1-4", *cats]
    labels = ["overall", "cat 1-4", *[f"{c} {CATEGORY_NAMES.get(c, '')}".strip() for c in cats]]

    def series(level: str, block: str = "recall") -> dict[str, list[float | None]]:
        out = {}
        for name, m in results["providers"].items():
            r = m[block]
            out[name] = [
                r["overall"][level],
                r["categories_1_4"][level],
                *[r["by_category"].get(c, {}).get(level) for c in cats],
            ]
        return out

    xs = sorted({int(p) for m in results["providers"].values() for p in m["by_point"]})
    timeline = {
        n: {int(p): b["turn"] for p, b in m["by_point"].items()}
        for n, m in results["providers"].items()
    }
    lat: dict[str, list[float]] = defaultdict(list)
    rec_lat: dict[str, list[float]] = defaultdict(list)
    pts: dict[str, list[tuple[float, float, str]]] = {n: [] for n in providers}
    for u in units:
        if u["provider"] not in pts:
            continue
        asks = u["asks"]
        lat[u["provider"]].extend(a["latency_ms"] for a in asks if a.get("latency_ms") is not None)
        rec_lat[u["provider"]].extend(u.get("record_latency_per_event_ms", []))
        if asks:
            pts[u["provider"]].append(
                (
                    sum(a["tokens"] for a in asks) / len(asks),
                    sum(a["turn_recall"] for a in asks) / len(asks),
                    u["conversation"],
                )
            )
    for name, m in results["providers"].items():
        if m["context_tokens"]["mean"] is not None:
            pts[name].append(
                (m["context_tokens"]["mean"], m["recall"]["overall"]["turn"] or 0.0, "overall")
            )

    rows = comparison_rows(results)
    main_rows = [
        [
            f'<i class="sw" style="background:{colors[r["provider"]]}"></i>{escape(r["provider"])}',
            escape(r["kind"]),
            str(r["asks"]),
            escape(r["memory_form"]),
            fmt(r["turn_recall"]),
            fmt(r["session_recall"]),
            _na(r["provenance_recall"]) + (
                f' <span class="note">cov {fmt(r["provenance_coverage"], 2)}, '
                f'{fmt(r["sources_per_item"], 1)}/item</span>'
                if r["provenance_coverage"] is not None else ""),
            fmt(r["answer_recall"]),
            _na(r["turn_recall_cat5"]),
            fmt(r["final_turn_recall"]),
            fmt(r["tokens_mean"], 0),
            fmt(r["tokens_max"]),
            (f'<span class="bad">{r["over_budget"]}</span>' if r["over_budget"] else "0"),
            fmt(r["retrieve_p50"], 1),
            fmt(r["retrieve_p95"], 1),
            fmt(r["record_p50"], 1),
            fmt(r["record_p95"], 1),
            fmt(r["ingest_s"], 1),
            (f'<span class="bad">{r["failures"]}</span>' if r["failures"] else "0"),
        ]
        for r in rows
    ]
    cat_rows = []
    per_ci = (results.get("intervals") or {}).get("providers") or {}
    for name, m in results["providers"].items():
        cells = [escape(name)]
        for c in cats:
            b = m["recall"]["by_category"].get(c)
            turn_ci = ((per_ci.get(name) or {}).get("by_category") or {}).get(c, {}).get("turn")
            cells.append(
                f'{ci(turn_ci) if turn_ci else fmt(b["turn"])} / {fmt(b["session"])} '
                f'<span class="note">(n={b["count"]})</span>'
                if b
                else "–"
            )
        cat_rows.append(cells)
    fail_rows = [
        [escape(n), *[str(v) for v in m["failures"].values()], str(m["gate_probes"])]
        for n, m in results["providers"].items()
    ]
    fail_heads = (
        ["provider", *next(iter(results["providers"].values()))["failures"].keys(), "gate probes"]
        if results["providers"]
        else ["provider"]
    )
    ds = manifest.get("dataset", {})
    ev = results.get("evidence_parsing", {})
    settings = manifest.get("settings", {})
    skipped = results.get("skipped", [])

    html = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>Memory comparison — {escape(ds.get('file', ''))}</title>",
        f"<style>{CSS}</style></head><body><main>",
        "<h1>Long-term memory comparison at an equal token budget</h1>",
        f"<div class='meta'>dataset <code>{escape(str(ds.get('file')))}</code> "
        f"({escape(', '.join(ds.get('conversations', [])))}) · budget "
        f"<b>{results['budget_tokens']}</b> tokens · test points "
        f"<code>{escape(str(settings.get('test_points')))}</code> · manifest "
        f"<code>{manifest.get('manifest_sha256', '')[:16]}</code> · metrics "
        f"<code>{results.get('metrics_sha256', '')[:16]}</code></div>",
        "<div class='card'>" + legend(colors) + "</div>",
        *interval_sections(results),
        "<h2>Every figure (judge-free, point values)</h2><div class='card'>",
        table(
            [
                "provider",
                "kind",
                "asks",
                "shows",
                "turn recall (1-4)",
                "session recall (1-4, saturated)",
                "provenance recall (1-4)",
                "answer recall (1-4)",
                "turn cat 5 (apart)",
                "turn @final (1-4)",
                "tokens mean",
                "tokens max",
                "over budget",
                "retrieve p50 ms",
                "p95",
                "record ms/event p50",
                "p95",
                "ingest s",
                "failures",
            ],
            main_rows,
        ),
        "<p class='note'>Evidence recall: share of a question's evidence turns whose text is "
        "in the returned memory context, averaged over every ask (question × test point); "
        "<i>@final</i> = the last test point only. Session recall credits an evidence "
        "session when the context shows one of its evidence or distinctive turns. "
        "<b>Provenance recall</b> credits an evidence turn when an item shown whole derives "
        "from it by the backend's own provenance (n/a: the provider cannot say; cov = share "
        "of shown items that could say, /item = events one item claims). <b>Answer "
        "recall</b>: the gold answer's words are in the context (categories 1-4).</p>"
        + _applicability(results) + "</div>",
        "<h2>Recall by LoCoMo category</h2><div class='card'>",
        grouped_bars(groups, series("turn"), colors, "Turn-level evidence recall", labels=labels),
        grouped_bars(
            groups, series("session"), colors, "Session-level evidence recall", labels=labels
        ),
        table(
            ["provider", *[f"{c} {CATEGORY_NAMES.get(c, '')} (turn [95 %] / session)"
                           for c in cats]],
            cat_rows,
        ),
        "<p class='note'>Category ids follow LoCoMo's evaluation code; papers disagree on "
        "their names, so ids and counts are always shown.</p></div>",
        "<h2>Recall along the timeline</h2><div class='card'>",
        line_chart(
            xs,
            timeline,
            colors,
            "Turn-level recall at each test point",
            "test point (after session N)",
        ),
        "<p class='note'>Memory is never reset between test points; later points ask more "
        "questions over a longer history.</p></div>",
        "<h2>Latency</h2><div class='card'>",
        box_plot(dict(lat), colors, "Retrieve latency per question"),
        box_plot(dict(rec_lat), colors, "Record latency per event"),
        "</div>",
        "<h2>Context tokens vs recall</h2><div class='card'>",
        scatter(pts, colors, "Mean context tokens vs turn-level recall", results["budget_tokens"]),
        "</div>",
        *budget_section(results, colors),
        "<h2>Failures and gates</h2><div class='card'>",
        table(fail_heads, fail_rows),
        "<p class='note'>Gate probes: each question is also offered to record_event while the "
        "provider is read-only; anything but skipped_read_only is a gate violation.</p></div>",
    ]
    judged = results.get("judged")
    if judged:
        jrows = [
            [
                escape(n),
                fmt(j["overall"]["accuracy"]),
                str(j["overall"]["count"]),
                escape(", ".join(f"{k}={v}" for k, v in j["overall"]["labels"].items())),
            ]
            for n, j in judged["providers"].items()
        ]
        agreement = judged.get("agreement") or {}
        arows = [
            [escape(metric), _na((agreement.get("rank_tau") or {}).get(metric)),
             _na(((agreement.get("per_question") or {}).get(metric) or {}).get("agree")),
             str(((agreement.get("per_question") or {}).get(metric) or {}).get("n", 0))]
            for metric in ("turn", "session", "provenance", "answer")
        ]
        html += [
            "<h2>LLM-judged answers (optional, separate from the metrics above)</h2>",
            "<div class='card'>",
            table(["provider", "accuracy", "n", "labels"], jrows),
            "<h3>Do the judge-free metrics rank providers like the judge?</h3>",
            table(["metric", "Kendall tau vs judge (providers)",
                    "per question: saw evidence == judged correct", "n"], arows),
            f"<p class='note'>{escape(judged['note'])}. Judge: "
            f"{escape(str(judged.get('judge')))}</p></div>",
        ]
    html += [
        "<h2>Run</h2><div class='card'>",
        table(
            ["", ""],
            [
                ["providers run", escape(", ".join(providers))],
                [
                    "skipped",
                    escape("; ".join(f"{s['name']}: {s['reason']}" for s in skipped) or "none"),
                ],
                ["questions placed", str(ds.get("questions_placed"))],
                [
                    "evidence parsing",
                    escape(", ".join(f"{k}={v}" for k, v in ev.items() if k != "examples")),
                ],
                ["evidence examples", escape("; ".join(ev.get("examples", [])[:8]))],
                [
                    "versions",
                    escape(", ".join(f"{k} {v}" for k, v in manifest.get("versions", {}).items())),
                ],
            ],
        ),
        "</div></main></body></html>",
    ]
    return "\n".join(html)


def write_report(
    path: str | Path,
    manifest: dict[str, Any],
    results: dict[str, Any],
    units: list[dict[str, Any]] | None = None,
) -> Path:
    p = Path(path)
    p.write_text(render_report(manifest, results, units), encoding="utf-8")
    return p
