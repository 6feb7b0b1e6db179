"""Self-contained HTML pieces of the reports: a palette, CSS, tables and inline SVG charts
(grouped bars, lines, box plots, scatter; no JavaScript, no network)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

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


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def colors_for(names: list[str]) -> dict[str, str]:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def legend(colors: dict[str, str]) -> str:
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


def _frame_0_to_1(w: int, h: int, left: int, title: str, py: Callable[[float], float]
                  ) -> list[str]:
    """An SVG's opening, its title and a 0-1 y axis with grid lines every 0.2."""
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
    return parts


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

    parts = _frame_0_to_1(w, h, left, title, py)
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
    plot = _XYPlot(max([budget] + [p[0] for pts in points.values() for p in pts]) * 1.05)
    px, py, top = plot.px, plot.py, plot.top
    parts = plot.opening(title)
    bx = px(budget)
    parts.append(
        f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{top}" y2="{top + plot.plot_h}" '
        f'stroke="#c0392b" stroke-dasharray="4 3"/><text x="{bx - 4:.1f}" y="{top + 10}" '
        f'text-anchor="end" fill="#c0392b">budget {budget}</text>'
    )
    parts.append(plot.xlabel(
        "mean context tokens (one dot per provider × conversation; ring = overall)"))
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


@dataclass(frozen=True)
class _XYPlot:
    """The scatter's and the curves' frame: x from 0 to ``xmax``, y from 0 to 1."""

    xmax: float
    w: int = 1040
    h: int = 300
    left: int = 50
    bottom: int = 40
    top: int = 24

    @property
    def plot_w(self) -> int:
        return self.w - self.left - 20

    @property
    def plot_h(self) -> int:
        return self.h - self.bottom - self.top

    def px(self, x: float) -> float:
        return self.left + self.plot_w * x / self.xmax

    def py(self, v: float) -> float:
        return self.top + self.plot_h - self.plot_h * v

    def opening(self, title: str) -> list[str]:
        """The SVG's opening, title, 0-1 grid and x ticks."""
        return (_frame_0_to_1(self.w, self.h, self.left, title, self.py)
                + _x_ticks(self.xmax, self.px, self.h - self.bottom + 16))

    def xlabel(self, text: str) -> str:
        """The x axis's label (``text`` is inserted as is: escape it first)."""
        return (f'<text x="{self.left + self.plot_w / 2:.1f}" y="{self.h - 6}" '
                f'text-anchor="middle">{text}</text>')


def _x_ticks(xmax: float, px: Callable[[float], float], y: float) -> list[str]:
    """Six x-axis tick labels from 0 to ``xmax``."""
    return [f'<text x="{px(xmax * i / 5):.1f}" y="{y}" text-anchor="middle">'
            f"{xmax * i / 5:.0f}</text>" for i in range(6)]


def curves(
    series: dict[str, list[tuple[float, float, str]]],
    colors: dict[str, str],
    title: str,
    xlabel: str,
) -> str:
    """One line per name through its (x, y, label) points, sorted by x; y from 0 to 1."""
    xs = [p[0] for pts in series.values() for p in pts]
    if not xs:
        return ""
    plot = _XYPlot(max(xs) * 1.05 or 1.0)
    px, py = plot.px, plot.py
    parts = plot.opening(title)
    parts.append(plot.xlabel(escape(xlabel)))
    for name, pts in series.items():
        pts = sorted(pts)
        c = colors[name]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in pts)
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{path}"/>')
        for x, y, label in pts:
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{c}">'
                f"<title>{escape(name)} · {escape(label)}: {x:.0f} tokens, "
                f"recall {y:.3f}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


