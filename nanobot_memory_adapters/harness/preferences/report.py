"""``report.html`` of a preference run: behaviour by dimension, exposure, failures."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.charts import (
    CSS,
    colors_for,
    fmt,
    grouped_bars,
    legend,
    table,
)
from nanobot_memory_adapters.harness.preferences.format import DIMENSIONS
from nanobot_memory_adapters.stats import format_bounds, format_number, format_p

DIMENSION_NAMES = {
    "CS": "context sensitivity",
    "PET": "preference evolution",
    "IQI": "implicit preferences",
}


def headline_ci(block: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The interval that generalises: clustered by attribute (``ci_by_attribute``), else
    by persona (``ci``: results written before the attribute was recorded)."""
    c = (block.get("ci_by_attribute") or {}).get(key)
    return c if c is not None else (block.get("ci") or {}).get(key)


def headline_pair(r: dict[str, Any]) -> dict[str, Any]:
    """A pairwise row's headline difference: by attribute when there is one."""
    return r.get("by_attribute") or r


def _ci(block: dict[str, Any], key: str) -> str:
    c = headline_ci(block, key)
    if c is None:
        return "–"
    return (f"{fmt(c['value'])} <span class='note'>{format_bounds(c['low'], c['high'])} "
            f"n {c['n']}</span>")


def _rate(block: dict[str, Any], key: str) -> str:
    """A score over its opportunities: its n is theirs (none: "–", n 0)."""
    if headline_ci(block, key) is not None:
        return _ci(block, key)
    return f"– <span class='note'>n {block.get(f'{key}_opportunities', 0)}</span>"


def _row(name: str, m: dict[str, Any], colors: dict[str, str]) -> list[str]:
    s = m["scores"]
    o = s["overall"]
    fails = sum(m["failures"].values())
    return [
        f'<i class="sw" style="background:{colors[name]}"></i>{escape(name)}',
        escape(m.get("condition_kind", "")),
        escape(m.get("experiment_group", "")),
        _ci(o, "behaviour"),
        *[_ci(s["by_dimension"][d], "behaviour") for d in DIMENSIONS],
        _ci(o, "resolved"),
        fmt(o["mean_corrections_when_resolved"]),
        _ci(o, "recognition"),
        _ci(o, "current_exposure"),
        fmt(o["stale_exposure"]),
        _rate(o, "reversion"),
        _rate(o, "contamination"),
        str(o["query_leaks"]),
        f"{fmt(o['judged_behaviour'])} / {fmt(o['judge_agreement'])}",
        f'<span class="bad">{fails}</span>' if fails else "0",
    ]


def _pairs(results: dict[str, Any], score: str) -> str:
    rows = (results.get("pairwise") or {}).get(score) or []
    if not rows:
        return ("<p>fewer than two providers</p>" if len(results["providers"]) < 2 else
                "<p>no test the providers share</p>")
    def verdict(d: dict[str, Any]) -> str:
        v = escape(d["verdict"])
        return v if d["distinguishable"] else f"<span class='note'>{v}</span>"

    body = []
    for r in rows:
        h = headline_pair(r)
        body.append([escape(f"{r['a']} − {r['b']}"),
                     f"{format_number(h['difference'], 3, signed=True)} "
                     f"{format_bounds(h['low'], h['high'], signed=True)}",
                     str(h["n"]), escape(format_p(h["mcnemar_p"])), verdict(h),
                     f"{format_bounds(r['low'], r['high'], signed=True)} {verdict(r)}"])
    return table(["a − b", "paired difference [95% CI]", "n", "McNemar p", "verdict",
                  "by persona (clustered from 5 personas)"], body)


def render_report(manifest: dict[str, Any], results: dict[str, Any]) -> str:
    providers = results["providers"]
    colors = colors_for(list(providers))
    ds, settings = manifest.get("dataset", {}), manifest.get("settings", {})
    labels = [f"{d} ({DIMENSION_NAMES[d]})" for d in DIMENSIONS]
    accuracy = {n: [m["scores"]["overall"]["behaviour"],
                    *[m["scores"]["by_dimension"][d]["behaviour"] for d in DIMENSIONS]]
                for n, m in providers.items()}
    exposed = {n: [m["scores"]["overall"]["current_exposure"],
                   *[m["scores"]["by_dimension"][d]["current_exposure"] for d in DIMENSIONS]]
               for n, m in providers.items()}
    stale = {n: [m["scores"]["overall"]["stale_exposure"]] for n, m in providers.items()}
    points = sorted({p for m in providers.values() for p in m["scores"]["by_point"]}, key=int)
    point_rows = [
        [escape(n), *[
            f'{fmt(m["scores"]["by_point"].get(p, {}).get("behaviour"))} / '
            f'{fmt(m["scores"]["by_point"].get(p, {}).get("current_exposure"))}'
            for p in points]]
        for n, m in providers.items()
    ]
    error_kinds = sorted({k for m in providers.values() for k in m["scores"]["overall"]["errors"]})
    error_rows = [[escape(n), *[str(m["scores"]["overall"]["errors"].get(k, 0))
                                for k in error_kinds]] for n, m in providers.items()]
    fail_heads = ["provider", *next(iter(providers.values()))["failures"]] if providers else []
    fail_rows = [[escape(n), *[str(v) for v in m["failures"].values()], str(m["gate_probes"])]
                 for n, m in providers.items()]
    agent = settings.get("agent")
    html = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>Preference behaviour — {escape(str(ds.get('name')))}</title>",
        f"<style>{CSS}</style></head><body><main>",
        "<h1>Does nanobot act on the user's current preferences?</h1>",
        f"<div class='meta'>scenarios <code>{escape(str(ds.get('name')))}</code> "
        f"({len(ds.get('personas', []))} personas, {ds.get('behaviour_tasks')} behavioural "
        f"tests, {ds.get('option_tasks')} with options, "
        f"source {escape(str(ds.get('source')))}) · budget <b>{results['budget_tokens']}</b> "
        f"tokens · agent <code>{escape(str(agent['model'] if agent else 'none'))}</code> · "
        f"tags <code>{escape(str(settings.get('test_tags')))}</code> · manifest "
        f"<code>{manifest.get('manifest_sha256', '')[:16]}</code> · exposure metrics "
        f"<code>{results.get('metrics_sha256', '')[:16]}</code></div>",
        "<div class='card'>" + legend(colors) + "</div>",
        "<h2>Summary</h2><div class='card'>",
        f"<p>agent: <b>{escape(str(settings.get('agent_mode')))}</b></p>",
        table(["provider", "kind", "group", "behaviour [95% CI]", *DIMENSIONS,
                "resolved [95% CI]", "corrections", "recognition [95% CI]",
                "current exposure [95% CI]", "stale exposure", "reversion [95% CI]",
                "contamination [95% CI]", "query leaks", "judged / agreement", "failures"],
               [_row(n, m, colors) for n, m in providers.items()]),
        f"<p class='note'>Behaviour (the headline): the first reply to a normal request (no "
        f"options) acts on the value that holds at that point of the timeline, read by the "
        f"test's value phrases (judge-free). CS: the right value for this context; PET: the "
        f"latest value, not a superseded one; IQI: a preference the user only implied "
        f"(this project's definition). Resolved: acting on it within "
        f"{escape(str(settings.get('max_turns')))} replies of the simulated user (it "
        f"accepts, corrects or answers, never volunteers); corrections: mean corrections "
        f"before that. Recognition: the multiple-choice task, options shown only after "
        f"recall. Current exposure: the memory section names the current value; stale "
        f"exposure: it shows a superseded value with no end-of-validity mark (no model "
        f"needed). Reversion: of the tests whose value the agent acted on at an earlier "
        f"test point (values an agent without memory would not pick), the share it no "
        f"longer acts on; contamination: of the requests in one context whose attribute "
        f"has another context's value the agent acted on there (a value only memory can "
        f"give), the share that acts on that other value. Both are rates over those "
        f"opportunities (n), lower is better; an agent that never acted on a remembered "
        f"value has no opportunity ('–'), not a clean 0. "
        f"Query leaks: first-turn retrieval queries holding a cue of any value "
        f"(must be 0). Default rate (the ideal reader with no memory): "
        f"{fmt(results.get('default_rate'))}. Intervals: 95 %, bootstrap clustered by "
        f"the tested attribute (the one that generalises: every persona has the same "
        f"design), never narrower than Wilson on n; results.json also has them by "
        f"persona (<code>ci</code>).</p></div>",
        "<h2>Which differences are real</h2><div class='card'>",
        "<h3>Behaviour</h3>", _pairs(results, "behaviour"),
        "<h3>Current-preference exposure</h3>", _pairs(results, "current_exposure"),
        "<h3>Reversion (over the opportunities both had; lower is better)</h3>",
        _pairs(results, "reversion"),
        "<h3>Cross-context contamination (over the opportunities both had; lower is "
        "better)</h3>",
        _pairs(results, "contamination"),
        "<p class='note'>Paired over the same tests (a − b), bootstrap clustered by "
        "attribute (by persona: the last column); 'not distinguishable' when the 95 % "
        "interval covers 0 or McNemar's exact p is not below 0.05.</p></div>",
        "<h2>Behaviour by dimension</h2><div class='card'>",
        grouped_bars(["overall", *DIMENSIONS], accuracy, colors, "Behaviour (first reply)",
                     ymax=1.0, labels=["overall", *labels]),
        grouped_bars(["overall", *DIMENSIONS], exposed, colors,
                     "Current-preference exposure", ymax=1.0, labels=["overall", *labels]),
        grouped_bars(["stale"], stale, colors, "Stale exposure (lower is better)", ymax=1.0),
        "</div>",
        "<h2>Along the timeline</h2><div class='card'>",
        table(["provider", *[f"after session {p} (behaviour / exposure)" for p in points]],
               point_rows),
        "</div>",
        "<h2>Wrong choices (recognition)</h2><div class='card'>",
        table(["provider", *error_kinds], error_rows) if error_kinds else "<p>none</p>",
        "<p class='note'>stale: chose a superseded value; wrong_context: the value of "
        "another context; violates: an option against the preference; neutral: an option "
        "unrelated to it; unparsed: no option could be read from the reply.</p></div>",
        "<h2>Failures and gates</h2><div class='card'>",
        table([*fail_heads, "gate probes"], fail_rows),
        "<p class='note'>Each test session's turns are offered to record_event while the "
        "provider is read-only: anything but skipped_read_only is a gate violation.</p></div>",
        "<h2>Run</h2><div class='card'>",
        table(["", ""], [
            ["skipped", escape("; ".join(f"{s['name']}: {s['reason']}"
                                         for s in results.get("skipped", [])) or "none")],
            ["agent", escape(str(settings.get("agent_mode")))],
            ["choice", escape(str(settings.get("choice")))],
            ["simulator", escape(str(settings.get("simulator")))],
            ["versions", escape(", ".join(f"{k} {v}" for k, v in
                                          manifest.get("versions", {}).items()))],
        ]),
        "</div></main></body></html>",
    ]
    return "\n".join(html)


def write_report(path: str | Path, manifest: dict[str, Any], results: dict[str, Any]) -> Path:
    p = Path(path)
    p.write_text(render_report(manifest, results), encoding="utf-8")
    return p
