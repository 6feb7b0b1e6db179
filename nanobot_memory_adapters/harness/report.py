"""``report.html``: one self-contained page (inline CSS and SVG, no JS, no network).

Plots: evidence recall per provider and LoCoMo category (turn and session level), recall
along the timeline, retrieve latency distributions, and context tokens vs recall. Tables
carry the numbers; LLM-judged scores, when present, sit in their own section.
"""

from __future__ import annotations

import math
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.metrics import TIMING_KEY
from nanobot_memory_adapters.stats import percentile

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
CATEGORY_NAMES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;
padding-bottom:4px}
.meta{color:#666;font-size:12px}.card{background:#fff;border:1px solid #e3e3e3;border-radius:6px;
padding:12px 16px;margin:12px 0}
table{border-collapse:collapse;font-size:13px;width:100%}th,td{padding:4px 8px;text-align:right;
border-bottom:1px solid #eee}th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3;font-weight:600}.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px;
vertical-align:-1px}.note{color:#555;font-size:12px}.bad{color:#c0392b;font-weight:600}
svg text{font:11px system-ui,sans-serif;fill:#333}.grid{stroke:#e6e6e6}.axis{stroke:#999}
code{background:#f0f0f0;padding:1px 4px;border-radius:3px}
"""


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _colors(names: list[str]) -> dict[str, str]:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def _legend(colors: dict[str, str]) -> str:
    return (
        '<div class="legend">'
        + "".join(
            f'<span><i class="sw" style="background:{c}"></i>{escape(n)}</span>'
            for n, c in colors.items()
        )
        + "</div>"
    )


def grouped_bars(
    groups: list[str],
    series: dict[str, list[float | None]],
    colors: dict[str, str],
    title: str,
    ymax: float | None = None,
    labels: list[str] | None = None,
) -> str:
    if ymax is None:  # zoom in on small recalls, in steps of 0.1, never above 1
        top_value = max([v for vs in series.values() for v in vs if v is not None] or [0.0])
        ymax = min(1.0, max(0.1, math.ceil(top_value * 11) / 10))
    w, h, left, bottom, top = 1040, 260, 44, 40, 24
    plot_w, plot_h = w - left - 10, h - bottom - top
    n_series = max(1, len(series))
    gw = plot_w / max(1, len(groups))
    bw = min(34.0, gw * 0.8 / n_series)
    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="14" font-weight="600">{escape(title)}</text>',
    ]
    for i in range(6):
        v = ymax * i / 5
        y = top + plot_h - plot_h * i / 5
        parts.append(
            f'<line class="grid" x1="{left}" x2="{w - 10}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.2f}</text>'
        )
    for gi, g in enumerate(groups):
        x0 = left + gi * gw + (gw - bw * n_series) / 2
        for si, (name, values) in enumerate(series.items()):
            v = values[gi]
            x = x0 + si * bw
            if v is None:
                continue
            bh = plot_h * min(v, ymax) / ymax
            y = top + plot_h - bh
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" '
                f'fill="{colors[name]}"><title>{escape(name)} · {escape(g)}: '
                f"{v:.3f}</title></rect>"
            )
            if bw >= 22:
                parts.append(
                    f'<text x="{x + (bw - 2) / 2:.1f}" y="{y - 3:.1f}" '
                    f'text-anchor="middle" font-size="9">{v:.2f}</text>'
                )
        label = (labels or groups)[gi]
        parts.append(
            f'<text x="{left + gi * gw + gw / 2:.1f}" y="{h - bottom + 16}" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{left}" x2="{w - 10}" y1="{top + plot_h}" '
        f'y2="{top + plot_h}"/></svg>'
    )
    return "".join(parts)


def line_chart(
    xs: list[int],
    series: dict[str, dict[int, float]],
    colors: dict[str, str],
    title: str,
    xlabel: str,
) -> str:
    w, h, left, bottom, top = 1040, 260, 44, 40, 24
    plot_w, plot_h = w - left - 20, h - bottom - top
    if not xs:
        return ""
    lo, hi = min(xs), max(xs)
    span = max(1, hi - lo)

    def px(x: int) -> float:
        return left + plot_w * (x - lo) / span

    def py(v: float) -> float:
        return top + plot_h - plot_h * v

    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="14" font-weight="600">{escape(title)}</text>',
    ]
    for i in range(6):
        v = i / 5
        parts.append(
            f'<line class="grid" x1="{left}" x2="{w - 20}" y1="{py(v):.1f}" '
            f'y2="{py(v):.1f}"/><text x="{left - 6}" y="{py(v) + 4:.1f}" '
            f'text-anchor="end">{v:.1f}</text>'
        )
    step = max(1, math.ceil(len(xs) / 20))
    for x in xs[::step]:
        parts.append(f'<text x="{px(x):.1f}" y="{h - bottom + 16}" text-anchor="middle">{x}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{h - 6}" text-anchor="middle">'
        f"{escape(xlabel)}</text>"
    )
    for name, values in series.items():
        pts = [(px(x), py(values[x])) for x in xs if values.get(x) is not None]
        if not pts:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        parts.append(
            f'<polyline fill="none" stroke="{colors[name]}" stroke-width="2" points="{path}"/>'
        )
        for (x, y), xv in zip(pts, [x for x in xs if values.get(x) is not None], strict=True):
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colors[name]}">'
                f"<title>{escape(name)} · point {xv}: {values[xv]:.3f}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def box_plot(
    data: dict[str, list[float]], colors: dict[str, str], title: str, unit: str = "ms"
) -> str:
    data = {k: v for k, v in data.items() if v}
    if not data:
        return ""
    row_h, left, right, top = 30, 150, 30, 28
    w = 1040
    h = top + row_h * len(data) + 34
    lo = max(1e-3, min(min(v) for v in data.values()))
    hi = max(max(v) for v in data.values())
    llo, lhi = math.log10(lo), math.log10(max(hi, lo * 10))
    plot_w = w - left - right

    def px(v: float) -> float:
        return left + plot_w * (math.log10(max(v, lo)) - llo) / (lhi - llo)

    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{escape(title)}">',
        f'<text x="10" y="14" font-weight="600">{escape(title)} (log scale)</text>',
    ]
    tick = 10 ** math.floor(llo)
    while tick <= 10 ** math.ceil(lhi):
        if lo <= tick <= hi * 1.5:
            x = px(tick)
            parts.append(
                f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" '
                f'y2="{h - 30}"/><text x="{x:.1f}" y="{h - 16}" text-anchor="middle">'
                f"{tick:g} {unit}</text>"
            )
        tick *= 10
    for i, (name, values) in enumerate(data.items()):
        y = top + i * row_h + row_h / 2
        q = {p: percentile(values, p) or 0.0 for p in (5, 25, 50, 75, 95)}
        c = colors.get(name, "#888")
        parts.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(name)}</text>'
            f'<line x1="{px(q[5]):.1f}" x2="{px(q[95]):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{c}" stroke-width="1.5"/>'
            f'<rect x="{px(q[25]):.1f}" y="{y - 8:.1f}" '
            f'width="{max(1.5, px(q[75]) - px(q[25])):.1f}" '
            f'height="16" fill="{c}" fill-opacity="0.35" stroke="{c}"><title>{escape(name)}: '
            f"p5 {q[5]:.2f}, p25 {q[25]:.2f}, p50 {q[50]:.2f}, p75 {q[75]:.2f}, p95 {q[95]:.2f} "
            f"{unit} (n={len(values)})</title></rect>"
            f'<line x1="{px(q[50]):.1f}" x2="{px(q[50]):.1f}" y1="{y - 8:.1f}" y2="{y + 8:.1f}" '
            f'stroke="{c}" stroke-width="2.5"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def scatter(
    points: dict[str, list[tuple[float, float, str]]],
    colors: dict[str, str],
    title: str,
    budget: int,
) -> str:
    w, h, left, bottom, top = 1040, 300, 50, 40, 24
    plot_w, plot_h = w - left - 20, h - bottom - top
    xmax = max([budget] + [p[0] for pts in points.values() for p in pts]) * 1.05

    def px(x: float) -> float:
        return left + plot_w * x / xmax

    def py(v: float) -> float:
        return top + plot_h - plot_h * v

    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="14" font-weight="600">{escape(title)}</text>',
    ]
    for i in range(6):
        v = i / 5
        parts.append(
            f'<line class="grid" x1="{left}" x2="{w - 20}" y1="{py(v):.1f}" '
            f'y2="{py(v):.1f}"/><text x="{left - 6}" y="{py(v) + 4:.1f}" '
            f'text-anchor="end">{v:.1f}</text>'
        )
    for i in range(6):
        x = xmax * i / 5
        parts.append(
            f'<text x="{px(x):.1f}" y="{h - bottom + 16}" text-anchor="middle">{x:.0f}</text>'
        )
    bx = px(budget)
    parts.append(
        f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{top}" y2="{top + plot_h}" '
        f'stroke="#c0392b" stroke-dasharray="4 3"/><text x="{bx - 4:.1f}" y="{top + 10}" '
        f'text-anchor="end" fill="#c0392b">budget {budget}</text>'
    )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{h - 6}" text-anchor="middle">'
        "mean context tokens (one dot per provider × conversation; ring = overall)</text>"
    )
    for name, pts in points.items():
        c = colors[name]
        for x, y, label in pts:
            r, extra = (
                (7, f'fill="none" stroke="{c}" stroke-width="2.5"')
                if label == "overall"
                else (4, f'fill="{c}" fill-opacity="0.7"')
            )
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{r}" {extra}>'
                f"<title>{escape(name)} · {escape(label)}: {x:.0f} tokens, "
                f"recall {y:.3f}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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
                "turn_recall": rec["overall"]["turn"],
                "session_recall": rec["overall"]["session"],
                "provenance_recall": rec["overall"].get("provenance"),
                "provenance_coverage": (m.get("provenance") or {}).get("coverage"),
                "sources_per_item": (m.get("provenance") or {}).get("sources_per_item"),
                "answer_recall": rec["categories_1_4"].get("answer"),
                "memory_form": m.get("memory_form", ""),
                "turn_recall_1_4": rec["categories_1_4"]["turn"],
                "final_turn_recall": m["final_point"]["overall"]["turn"],
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
    return "n/a" if value is None else _fmt(value)


def _applicability(results: dict[str, Any]) -> str:
    """Which metric can see which provider, and why (turn recall of extracting providers)."""
    rows = [
        [escape(n), escape(m.get("memory_form", "")), *[
            escape((m.get("metrics_apply") or {}).get(k, "")) for k in
            ("turn", "provenance", "answer")]]
        for n, m in results["providers"].items()
    ]
    return "<h3>Which metric sees which provider</h3>" + _table(
        ["provider", "shows", "turn recall", "provenance recall", "answer recall"], rows
    )


def render_report(
    manifest: dict[str, Any], results: dict[str, Any], units: list[dict[str, Any]] | None = None
) -> str:
    providers = list(results["providers"])
    colors = _colors(providers)
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
            _fmt(r["turn_recall"]),
            _fmt(r["session_recall"]),
            _na(r["provenance_recall"]) + (
                f' <span class="note">cov {_fmt(r["provenance_coverage"], 2)}, '
                f'{_fmt(r["sources_per_item"], 1)}/item</span>'
                if r["provenance_coverage"] is not None else ""),
            _fmt(r["answer_recall"]),
            _fmt(r["turn_recall_1_4"]),
            _fmt(r["final_turn_recall"]),
            _fmt(r["tokens_mean"], 0),
            _fmt(r["tokens_max"]),
            (f'<span class="bad">{r["over_budget"]}</span>' if r["over_budget"] else "0"),
            _fmt(r["retrieve_p50"], 1),
            _fmt(r["retrieve_p95"], 1),
            _fmt(r["record_p50"], 1),
            _fmt(r["record_p95"], 1),
            _fmt(r["ingest_s"], 1),
            (f'<span class="bad">{r["failures"]}</span>' if r["failures"] else "0"),
        ]
        for r in rows
    ]
    cat_rows = []
    for name, m in results["providers"].items():
        cells = [escape(name)]
        for c in cats:
            b = m["recall"]["by_category"].get(c)
            cells.append(
                f'{_fmt(b["turn"])} / {_fmt(b["session"])} <span class="note">'
                f"(n={b['count']})</span>"
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
        "<div class='card'>" + _legend(colors) + "</div>",
        "<h2>Summary (judge-free)</h2><div class='card'>",
        _table(
            [
                "provider",
                "kind",
                "asks",
                "shows",
                "turn recall",
                "session recall",
                "provenance recall",
                "answer recall (1-4)",
                "turn 1-4",
                "turn @final",
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
        _table(
            ["provider", *[f"{c} {CATEGORY_NAMES.get(c, '')} (turn / session)" for c in cats]],
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
        "<h2>Failures and gates</h2><div class='card'>",
        _table(fail_heads, fail_rows),
        "<p class='note'>Gate probes: each question is also offered to record_event while the "
        "provider is read-only; anything but skipped_read_only is a gate violation.</p></div>",
    ]
    judged = results.get("judged")
    if judged:
        jrows = [
            [
                escape(n),
                _fmt(j["overall"]["accuracy"]),
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
            _table(["provider", "accuracy", "n", "labels"], jrows),
            "<h3>Do the judge-free metrics rank providers like the judge?</h3>",
            _table(["metric", "Kendall tau vs judge (providers)",
                    "per question: saw evidence == judged correct", "n"], arows),
            f"<p class='note'>{escape(judged['note'])}. Judge: "
            f"{escape(str(judged.get('judge')))}</p></div>",
        ]
    html += [
        "<h2>Run</h2><div class='card'>",
        _table(
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
