"""Render docs/results.md from the result files in benchmarks/results/: the side-by-side
tables (``benchmarks/side_by_side.py``), behaviour on a real model
(``benchmarks/preferences_result.py``), recall at scale (``benchmarks/bench_recall_scale.py``)
and the canary privacy fuzzer (``tests/privacy/fuzz.py``). Every table names the command,
commit, machine and date that produced it.

    python benchmarks/render_results.py [--results-dir benchmarks/results] [--out docs/results.md]
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.stats import format_p

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "nanobot-memory-side-by-side/1"
REPRODUCE = """    python benchmarks/side_by_side.py run --llm-base-url URL --llm-model MODEL \\
        [--llm-api-key-env VAR] [--honcho-url URL] [--workers N] [--leave-out P] \\
        --label "WHAT THE MODEL AND MACHINE ARE; not comparable with published results"
    python benchmarks/render_results.py

(Without `--honcho-url` Honcho is skipped with that reason. Every step resumes: rerun the
same command. `--leave-out P` finishes the tables without
a provider too slow for the time at hand; the same command without it resumes that
provider.)"""
QUALITY = {
    "locomo": (("turn_recall", "turn recall"), ("provenance_recall", "prov. recall"),
               ("answer_lift", "answer lift")),
    "lme": (("session_any_shown", "session any (shown)"),
            ("turn_all_shown", "turn all (shown)"), ("session_any@5", "session any@5"),
            ("answer_recall", "answer recall")),
}
PAIR_NAMES = {"turn": "turn recall", "provenance": "provenance recall",
              "answer_lift": "answer lift", "session_any_shown": "session any (shown)",
              "turn_all_shown": "turn all (shown)", "answer_recall": "answer recall"}
HEADLINE_PAIR = {"locomo": "answer_lift", "lme": "session_any_shown"}


def _num(x: float | None, digits: int = 3, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _ci(c: dict[str, Any] | None, signed: bool = False) -> str:
    if not c or c.get("value") is None:
        return "–"
    return (f"{_num(c['value'], signed=signed)} [{_num(c['low'], 2, signed)}, "
            f"{_num(c['high'], 2, signed)}]")


def _cost_cells(c: dict[str, Any]) -> list[str]:
    llm = c.get("llm")
    if llm is None:
        calls = tokens = "unknown"
    else:
        calls = (f"{_num(llm.get('chat_calls_per_turn'), 2)}"
                 + (f" (+{_num(llm['embedding_calls_per_turn'], 2)} emb.)"
                    if llm.get("embedding_calls_per_turn") else ""))
        per_turn = llm.get("chat_tokens_per_turn")
        tokens = _num(per_turn, 0 if per_turn is None or per_turn >= 10 else 1)
        if llm.get("calls_without_usage"):
            tokens += f" (≥; {llm['calls_without_usage']} calls without usage)"
    wait = c.get("readiness_wait_s") or {}
    rt = c.get("retrieve_ms") or {}
    return [calls, tokens, _num(c.get("ingest_s"), 1),
            f"{_num(rt.get('p50'), 1)} / {_num(rt.get('p95'), 1)}",
            f"{_num(wait.get('total'), 1)} / {_num(wait.get('max'), 1)}"
            if wait.get("waits") else "–",
            str(c.get("failures", 0))]


def _table(doc: dict[str, Any]) -> list[str]:
    task = doc["task"]
    quality = QUALITY[task]
    judged = any((p["quality"].get("judged_accuracy") or {}).get("value") is not None
                 for p in doc["providers"].values())
    heads = ["provider", "memory", "n", *[f"{label} [95 % CI]" for _, label in quality],
             *(["judged accuracy [95 % CI]"] if judged else []),
             "LLM calls / turn", "LLM tokens / turn", "ingest s", "retrieve ms p50 / p95",
             "readiness wait s total / max", "failed"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for name, p in doc["providers"].items():
        q = p["quality"]
        ns = [c["n"] for k, _ in quality if (c := q.get(k)) and c.get("n") is not None]
        n = max(ns) if ns else p.get("asks")
        cells = [f"`{name}`", str(q.get("memory_form") or "–"), str(n),
                 *[_cell(q.get(k), n, signed=k == "answer_lift") for k, _ in quality],
                 *([_ci(q.get("judged_accuracy"))] if judged else []),
                 *_cost_cells(p["cost"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _cell(c: dict[str, Any] | None, n: int | None, signed: bool) -> str:
    """An interval; one over fewer questions than its row's n says its own."""
    text = _ci(c, signed=signed)
    if c and c.get("value") is not None and c.get("n") not in (None, n):
        text += f" (n {c['n']})"
    return text


def _pairs(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    names = list(doc["providers"])
    head = HEADLINE_PAIR[doc["task"]]
    rows = doc["pairwise"].get(head) or []
    if doc["task"] == "lme" and not all(  # a memory the retrieval metrics cannot read
            (p["quality"].get(head) or {}).get("value") is not None
            for p in doc["providers"].values()):
        head, rows = "answer_recall", doc["pairwise"].get("answer_recall") or []
    if rows:
        verdict = {}
        for r in rows:
            if r["verdict"] == "not distinguishable":
                verdict[(r["a"], r["b"])] = verdict[(r["b"], r["a"])] = "·"
            else:
                winner = r["verdict"].split(" > ")[0]
                loser = r["b"] if winner == r["a"] else r["a"]
                verdict[(winner, loser)], verdict[(loser, winner)] = "▲", "▼"
        out += [f"Pairwise verdicts on {PAIR_NAMES[head]} (row vs column over the same "
                "questions: ▲ row higher, ▼ row lower, · not distinguishable):", "",
                "| | " + " | ".join(f"`{n}`" for n in names) + " |",
                "|" + "---|" * (len(names) + 1)]
        for a in names:
            out.append(f"| `{a}` | " + " | ".join(
                "" if a == b else verdict.get((a, b), "–") for b in names) + " |")
        out.append("")
    for metric, rows in doc["pairwise"].items():
        real = [r for r in rows if r["verdict"] != "not distinguishable"]
        if not rows:
            continue
        text = "; ".join(f"{r['verdict']} ({_winner_minus_loser(r)}, n {r['n']})"
                         for r in real)
        out.append(f"- {PAIR_NAMES.get(metric, metric)}: {len(real)} of {len(rows)} pairs "
                   f"distinguishable{': ' + text if text else ''}.")
    return out


def _winner_minus_loser(r: dict[str, Any]) -> str:
    """A pair's difference read as its verdict: the winner's score minus the loser's
    (the stored difference is ``a - b`` whichever won)."""
    diff, low, high = r["difference"], r["low"], r["high"]
    if r["verdict"].split(" > ")[0] != r["a"]:
        diff, low, high = -diff, -high, -low
    return f"{_num(diff, signed=True)} [{_num(low, 2, True)}, {_num(high, 2, True)}]"


def _para(text: str) -> str:
    return textwrap.fill(text, 90, break_long_words=False, break_on_hyphens=False)


def render(docs: list[dict[str, Any]]) -> str:
    lines = [
        "# Results: the memory architectures side by side",
        "",
        _para("Generated by `python benchmarks/render_results.py` from the result files in "
        "`benchmarks/results/` (written by `benchmarks/side_by_side.py`); do not edit by "
        "hand. Every provider gets the same conversations, the same model and a 2,000-token "
        "context; every figure has n and a 95 % interval, every pair a verdict "
        "(docs/harness.md says how each is computed and which metric ranks what: turn "
        "recall sees verbatim memories only, provenance recall those whose items name "
        "their source turns, answer lift any memory)."),
        "",
        _para("Cost columns: **LLM calls / turn** and **LLM tokens / turn** are the memory's own "
        "model calls (chat; embeddings over HTTP in brackets) counted at the HTTP boundary "
        "(`harness/llm_meter.py`) over the whole run (ingest, derivation, consolidation, "
        "retrieval) and divided by the turns recorded; tokens are the endpoint's `usage`. "
        "**ingest s**: time spent recording; **readiness wait**: the time the harness "
        "waited for derived memory before asking (total and longest wait); **retrieve ms**: "
        "per question. A provider without a model reads 0 calls."),
        "",
        "To reproduce on any OpenAI-compatible endpoint:",
        "",
        REPRODUCE,
        "",
    ]
    if not docs:
        lines += [_para(
            "No run is recorded yet: `benchmarks/results/` holds no result file. The run "
            "covers no_memory, full_history, simple_rag, bm25, rolling_summary (nanobot's "
            "Dream on the model), mem0 (extraction), Graphiti (embedded Kuzu), MemOS (its "
            "local server) and Honcho (a real server): LoCoMo conv-26's first five sessions "
            "(92 turns) with the 55 questions whose evidence lies there (39 in categories "
            "1-4, asked at every test point from their evidence on), and the "
            "LongMemEval-shaped set: 8 questions, each over a haystack of its own of 14 "
            "two-turn sessions (224 turns in all)."), ""]
    for doc in docs:
        m = doc["machine"]
        lines += [
            f"## {doc['title']}",
            "",
            f"**{doc['label']}**",
            "",
            f"- model: `{doc['model']['model']}` at `{doc['model']['base_url']}`; "
            f"{doc['budget_tokens']} tokens per context",
            f"- command: `{doc['command']}`",
            f"- commit `{doc['commit'][:12]}`{' (uncommitted changes)' if doc['dirty'] else ''}"
            f", {doc['date']}, {m['cpus']} CPUs, {m['memory_gb']} GB, {m['platform']}, "
            f"Python {m['python']}; wall time {_duration(doc['wall_s'])}; bench exit "
            f"{doc['bench_exit']}; manifest `{(doc['manifest_sha256'] or '')[:12]}`",
            "",
            *_table(doc),
            "",
            *_pairs(doc),
        ]
        if doc["skipped"]:
            lines += ["", "Skipped: " + "; ".join(f"`{s['name']}`: {s['reason']}"
                                                 for s in doc["skipped"]) + "."]
        lines += [f"- `{n}`: {note}." for n, note in (doc.get("notes") or {}).items()]
        notes = [f"`{n}`: {p['cost']['llm_note']}" for n, p in doc["providers"].items()
                 if p["cost"].get("llm_note")]
        if notes:
            lines += ["", "LLM cost unknown for " + "; ".join(notes) + "."]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _ms(c: list[float] | None) -> str:
    """A [value, low, high] triple of milliseconds."""
    return "–" if not c else f"{c[0]:.1f} [{c[1]:.1f}, {c[2]:.1f}]"


def _recall_scale(doc: dict[str, Any]) -> list[str]:
    m = doc["machine"]
    lines = [
        f"### Run of {doc['date'][:10]}",
        "",
        f"- command: `{doc['command']}`",
        f"- commit `{doc['commit'][:12]}`, {doc['date'][:16]} UTC, {m['cores']} cores, "
        f"{m['mem_mib'] // 1024} GiB, {m['platform']}, Python {m['python']}; "
        f"{doc['settings']['queries']} timed retrieves per figure at "
        f"{doc['settings']['budget_tokens']} tokens; load average at start "
        f"{doc['load_start'][0]}",
        "",
    ]
    sizes = sorted({int(k) for r in doc["results"].values() for k in r.get("own", {})})
    if sizes:
        lines += [
            "One person's store, growing (p50 ms [95 % CI]; n = "
            f"{doc['settings']['queries']} each; ingest in turns/s):",
            "",
            "| provider | " + " | ".join(f"{n:,} own turns" for n in sizes) + " |",
            "|---|" + "--:|" * len(sizes),
        ]
        for name, r in doc["results"].items():
            own = {int(k): v for k, v in r.get("own", {}).items()}
            if not own:
                continue
            cells = []
            for n in sizes:
                step = own.get(n)
                cells.append("skipped" if step is None or "retrieve" not in step else
                             f"{_ms(step['retrieve']['p50_ms'])} "
                             f"({step['ingest']['turns_per_s']:.0f}/s)")
            lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
        lines.append("")
    crowds = sorted({k for r in doc["results"].values()
                     for k in r.get("others", {}) if "x" in k and k[0].isdigit()},
                    key=lambda c: tuple(int(n) for n in c.split("x")))
    if crowds:
        lines += [
            f"The same person ({doc['settings']['alone_own']} turns) beside other users "
            "(p50 ms [95 % CI], and its ratio of medians to the person alone):",
            "",
            "| provider | alone | " + " | ".join(
                f"{c.split('x')[0]} others, {int(c.split('x')[1]):,} turns" for c in crowds)
            + " |",
            "|---|--:|" + "--:|" * len(crowds),
        ]
        for name, r in doc["results"].items():
            others = r.get("others", {})
            if "alone" not in others:
                continue
            cells = []
            for c in crowds:
                step = others.get(c)
                ratio = (step or {}).get("ratio_to_alone")
                cells.append("skipped" if step is None else
                             f"{_ms(step['retrieve']['p50_ms'])} "
                             f"(x{ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}])"
                             if ratio else _ms(step["retrieve"]["p50_ms"]))
            lines.append(f"| `{name}` | {_ms(others['alone']['retrieve']['p50_ms'])} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    lines += ["Targets:", ""]
    ran = set(doc.get("results", {}))
    for t in doc.get("targets", []):
        if t["met"] is None and t["provider"] not in ran:
            continue  # a provider this run left out: nothing to say
        met = {True: "met", False: "**not met**", None: "not measured"}[t["met"]]
        value = "" if t["value"] is None else f" ({t['value']})"
        lines.append(f"- `{t['provider']}`: {t['target']}: {met}{value}")
    return [*lines, ""]


def _privacy(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| seed | provider | group recall | episodes | requests checked | replies checked "
        "| canaries | leaks | commit | date |",
        "|--:|---|---|--:|--:|--:|--:|--:|---|---|",
    ]
    for r in runs:
        done = "" if r.get("complete") else " (stopped early)"
        lines.append(
            f"| {r['seed']} | `{r['provider']}` | {r['group_recall']} | {r['episodes']:,}{done} "
            f"| {r['requests_checked']:,} | {r['replies_checked']:,} | {r['canaries']:,} "
            f"| {len(r['leaks'])} | `{r['commit'][:9]}` | {r['date'][:10]} |")
    total = {k: sum(r[k] for r in runs) for k in
             ("episodes", "requests_checked", "replies_checked", "canaries")}
    leaks = sum(len(r["leaks"]) for r in runs)
    lines.append(f"| all | | | {total['episodes']:,} | {total['requests_checked']:,} "
                 f"| {total['replies_checked']:,} | {total['canaries']:,} | {leaks} | | |")
    notes = [f"- seed {r['seed']}: {r['note']}" for r in runs if r.get("note")]
    return [*lines, "", *notes, *([""] if notes else [])]


def _lme_m(doc: dict[str, Any]) -> list[str]:
    st, m = doc["settings"], doc["machine"]
    turns = st["turns_per_haystack"]
    lines = [
        f"- command: `{doc['command']}`",
        f"- commit `{doc['commit'][:12]}`, {doc['date'][:16]} UTC, {m['cores']} cores, "
        f"{m['platform']}, Python {m['python']}; {st['haystacks']} haystacks of "
        f"{st['sessions']} sessions ({min(turns):,}-{max(turns):,} turns each), "
        f"{st['workers']} workers, wall time {doc['wall_s'] / 60:.1f} min",
        "",
        f"| provider | CPU-s per haystack [95 % CI] (n) | CPU-hours for {st['full_set']} "
        "haystacks |",
        "|---|--:|--:|",
    ]
    for name, p in doc["providers"].items():
        if "skipped" in p:
            lines.append(f"| `{name}` | {p['skipped']} | |")
            continue
        c, h = p["cpu_s_per_haystack"], p["cpu_hours_full_set"]
        lines.append(f"| `{name}` | {c['value']} [{c['low']}, {c['high']}] ({c['n']}) "
                     f"| {h['value']} [{h['low']}, {h['high']}] |")
    return [*lines, ""]


SCALE_INTRO = (
    "`python benchmarks/bench_recall_scale.py` (docs/harness.md, Recall at scale): one "
    "person's retrieve through the public API as their own history grows, and beside other "
    "users' histories. Read the ratios, not the milliseconds, on a shared machine: the load "
    "average is recorded before and after every step in the result file.")
LME_M_INTRO = (
    "`python benchmarks/bench_lme_m.py`: generated haystacks of LongMemEval-M's shape "
    "through `bench --task longmemeval --workers`; each unit's process CPU (one haystack "
    "ingested and asked, after its provider is built), its mean with a 95 % interval, and "
    "that times the full set's haystacks.")
PRIVACY_INTRO = (
    "`python -m tests.privacy.fuzz --episodes N --seed S` (docs/nanobot-plugin.md, Users "
    "and scopes): seeded random interleavings of a shared gateway through a real nanobot "
    "`AgentLoop`; every request the model receives and every reply is checked for a canary "
    "its audience must not see. An episode is one interleaving (canaries told in direct "
    "chats, then 4-12 operations). A leak fails the run, so a row with 0 leaks is a run "
    "that found none.")


PREFS_SCHEMA = "nanobot-memory-preferences-result/1"
PREFS_INTRO = (
    "`nanobot-memory preferences run` (docs/preferences.md), summarized by `python "
    "benchmarks/preferences_result.py`: a real nanobot `AgentLoop` on the model named "
    "(or, where the title says so, the ideal reader: a deterministic agent double) "
    "answers normal requests with each memory behind it. **behaviour** is the share of "
    "tests whose first reply acts on the user's current preference (judge-free, by the "
    "test's value phrases), its n the tests scored (a failed test is out of n, not scored "
    "0; **failed** counts it), its 95 % interval clustered by the tested attribute when "
    "there are enough attributes (`method` in the result file); **by persona** is the "
    "same score clustered by persona (one persona's tests share one memory), \"not "
    "estimable\" from fewer than 5 personas; **memory** is what the memory shows of "
    "recorded turns (`none`: no recorded turn, e.g. no_memory, or oracle_ipas, which shows "
    "the scenario's current preferences); "
    "**acts** counts what the first replies did (current value / another value / both / "
    "none of the values: a reply that names no value, e.g. a question back or a tool call "
    "printed as text); **current when named** is, of the first replies that named a "
    "value, the share that named only the current one (whether memory steered the value "
    "when one was named; Wilson, not clustered, its own n; a memory that shows nothing "
    "reads what the model names by default, so no_memory's row is its floor, not 0); "
    "**current exposure** is the "
    "share of tests whose memory section showed the current value (a whole-word match of "
    "the value's cues: for a derived memory that paraphrases, a lower bound); **memory "
    "empty** counts the scored tests whose memory section was empty; **failed** counts "
    "what failed, by kind, as the run's exit code counts it (`record`: a session's write, "
    "`retrieve`/`agent`: a test's recall or reply, `gate_violations`: a test turn the "
    "read-only gate let into memory, `reset`: a unit's emptying, `readiness_pending`: a "
    "wait that timed out). Under each table, what that run "
    "can and cannot separate, read from its own pairwise verdicts.")


def _prefs(doc: dict[str, Any]) -> list[str]:
    st, m, agent = doc["settings"], doc["machine"], doc["agent"]
    caps = st.get("persona_caps") or {}
    if agent["kind"] == "ideal-reader":
        who = "the ideal reader (no model)"
    else:
        who = (f"`{agent['model']}`" + (f" at `{agent['base_url']}`" if agent.get("base_url")
                                        else "")
               + f"; nanobot's tools {'off' if st.get('agent_tools') == 'none' else 'on'}")
    turns = st.get("max_turns")
    lines = [
        f"### {doc['title']}", "", f"**{doc['label']}**", "",
        *([] if doc.get("complete", True) else [
            "**Partial**: the run was stopped; these are the units it had finished (each "
            "row's personas and n say how many). Its command resumes it.", ""]),
        f"- agent: {who}, {turns} repl{'y' if turns == 1 else 'ies'} per test, "
        f"recognition {'on' if st.get('recognition') else 'off'}, "
        f"{st.get('budget_tokens')} tokens of memory"
        + ("; " + ", ".join(f"`{k}` on the first {v} personas" for k, v in caps.items())
           if caps else ""),
        f"- command: `{doc['command']}`",
        *([f"- the current value is the attribute's default in {doc['default_rate']:.3f} "
           "of the scenario's tests: a reply that always acts on the default scores that "
           "with no memory"] if doc.get("default_rate") is not None else []),
        f"- summarized at commit `{doc['commit'][:12]}`"
        f"{' (edited checkout)' if doc.get('dirty') else ''}; manifest "
        f"`{doc['manifest_sha256'][:12]}` written {doc['date']} (when the run last started "
        f"or resumed); {m['cpus']} CPUs, {m['platform']}, Python {m['python']}",
        *_run_code(doc.get("run_code")),
        "",
        "| provider | memory | personas | n | behaviour [95 % CI] | by persona [95 % CI] "
        "| acts: current / other / both / none | current when named [95 % CI] "
        "| current exposure [95 % CI] | memory empty | failed |",
        "|---|---|--:|--:|---|---|---|---|---|---|---|",
    ]
    for name, p in doc["providers"].items():
        a = p.get("acts") or {}
        acts = " / ".join(str(a.get(k, 0)) for k in ("current", "other", "both", "none"))
        failed = ", ".join(f"{k} {v}" for k, v in (p.get("failures") or {}).items()) or "0"
        n = (p["behaviour"] or {}).get("n")
        lines.append(f"| `{name}` | {p.get('memory_form') or '–'} | {p['personas']} "
                     f"| {n if n is not None else '–'} | {_ci(p['behaviour'])} "
                     f"| {_by_persona(p)} "
                     f"| {acts} | {_cell(p.get('current_when_named'), None, False)} "
                     f"| {_cell(p['current_exposure'], n, False)} | {_empty(p)} "
                     f"| {failed} |")
    lines += ["", *_empty_rows(doc)]
    pairs = doc.get("pairwise") or []
    if pairs:
        lines += ["Pairwise verdicts on behaviour (over the tests both ran; the winner's "
                  "score minus the loser's, or the first minus the second when not "
                  "distinguishable; clustered by attribute, and apart only when the "
                  "difference clustered by persona is apart too, unclustered under 5 "
                  "personas; McNemar's exact p):", ""]
        for r in pairs:
            p_text = f"; p {format_p(r.get('mcnemar_p'))}" if "mcnemar_p" in r else ""
            if " > " in r["verdict"]:
                lines.append(f"- {r['verdict']} ({_winner_minus_loser(r)}, n {r['n']}"
                             f"{p_text})")
            else:
                lines.append(f"- {r['a']} vs {r['b']}: not distinguishable "
                             f"({_num(r['difference'], signed=True)} "
                             f"[{_num(r['low'], 2, True)}, {_num(r['high'], 2, True)}], "
                             f"n {r['n']}{p_text}{_why_not_apart(r)})")
    for s in doc.get("skipped") or []:
        lines.append(f"- skipped `{s['name']}`: {s['reason']}")
    return [*lines, "", *_separates(doc)]


def _run_code(rc: dict[str, Any] | None) -> list[str]:
    """The code that ran the units: as the checkpoint recorded it, and what was stated for
    units it did not record."""
    if not rc:
        return []
    parts = []
    if rc.get("units_recorded"):
        parts.append(f"{rc['units_recorded']} of {rc['units']} units recorded their code: "
                     + ", ".join(f"`{r}`" for r in rc["revisions"])
                     + f" on {'; '.join(rc['machines'])}, finished "
                     f"{rc['first_finished']} to {rc['last_finished']}")
    rest = rc.get("units", 0) - rc.get("units_recorded", 0)
    if rest:
        stated = rc.get("stated_revisions") or []
        parts.append(f"{rest} unit{'s' if rest != 1 else ''} ran before units recorded "
                     "their code" + (", at commits (as stated when summarized) "
                                     + ", ".join(f"`{c}`" for c in stated)
                                     if stated else ": not recorded"))
    return [f"- the run's code: {'; '.join(parts)}"] if parts else []


def _by_persona(p: dict[str, Any]) -> str:
    """Behaviour clustered by persona (the tests of one persona share one memory); from
    fewer personas than the statistics module clusters from, the spread between personas
    cannot be estimated and the cell says so rather than show an unclustered interval."""
    c = p.get("behaviour_by_persona")
    if c is None or c.get("value") is None:
        return "–"
    if not c.get("n_clusters"):
        return f"not estimable ({p['personas']} personas)"
    return _ci(c)


def _empty(p: dict[str, Any]) -> str:
    if p.get("empty_memory") is None or not p.get("scored_tests"):
        return "–"
    return f"{p['empty_memory']} of {p['scored_tests']}"


def _empty_rows(doc: dict[str, Any]) -> list[str]:
    """A memory whose section was empty in every scored test produced nothing on this
    model: its row reads like a weak memory, and is the model without memory."""
    out = [f"- `{name}`: its memory section was empty in all {p['scored_tests']} scored "
           "tests: the memory produced nothing in this run, so its row measures the model "
           "without memory, not how well that memory works."
           for name, p in doc["providers"].items()
           if p.get("memory_form") not in (None, "none") and p.get("scored_tests")
           and p.get("empty_memory") == p["scored_tests"]]
    return [*out, ""] if out else []


def _why_not_apart(r: dict[str, Any]) -> str:
    """Why a pair whose headline interval leaves out 0 still reads not distinguishable."""
    if not (r["low"] > 0 or r["high"] < 0):
        return ""
    if r.get("mcnemar_p") is not None and r["mcnemar_p"] >= 0.05:
        return ": the interval leaves out 0 but McNemar's p does not reach 0.05"
    persona = r.get("by_persona") or {}
    if persona.get("verdict") == "not distinguishable":
        return (": apart by attribute, not by persona" if persona.get("n_clusters")
                else ": apart by attribute, not over the tests unclustered")
    return ""


def _apart(rows: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """A pair list's verdicts read as text, and the pairs it could not separate."""
    real = [f"{r['verdict']} ({_winner_minus_loser(r)})" for r in rows
            if " > " in r["verdict"]]
    return real, [r for r in rows if " > " not in r["verdict"]]


def _separates(doc: dict[str, Any]) -> list[str]:
    """What the run can and cannot separate, read from its own figures: whether the
    memories showed different things, whether the replies differed, and why not."""
    out = ["What this run can and cannot separate (from its own figures):", ""]
    exposure = doc.get("exposure_pairwise") or []
    if exposure:
        real, _ = _apart(exposure)
        out.append(f"- what memory showed (current exposure): {len(real)} of {len(exposure)} "
                   "pairs apart" + (": " + "; ".join(real) if real else "") + ".")
    behaviour = doc.get("pairwise") or []
    if behaviour:
        real, same = _apart(behaviour)
        line = (f"- what the replies did (behaviour): {len(real)} of {len(behaviour)} pairs "
                "apart" + (": " + "; ".join(real) if real else ""))
        if same:
            # the median width, not the narrowest: two memories that showed the same
            # (nothing) give the same replies, and their interval is narrow by construction
            widths = sorted(r["high"] - r["low"] for r in same)
            half = widths[len(widths) // 2] / 2
            line += (f"; the intervals of the pairs not apart are a median ±{half:.2f} wide "
                     f"(n {min(r['n'] for r in same)} to {max(r['n'] for r in same)}): a "
                     "difference in behaviour smaller than about that reads not "
                     "distinguishable at this n")
        out.append(line + ".")
    acts = [p.get("acts") or {} for p in doc["providers"].values()]
    none = sum(a.get("none", 0) for a in acts)
    total = sum(sum(a.get(k, 0) for k in ("current", "other", "both", "none")) for a in acts)
    if total:
        out.append(f"- first replies that named none of the attribute's values: {none} of "
                   f"{total} ({none / total:.2f}) over all rows. Such a reply scores 0 "
                   "whatever memory showed, so where most replies name no value, behaviour "
                   "mostly measures whether the model names one; **current when named** "
                   "(of the replies that named a value, the share that named only the "
                   "current one; Wilson, not clustered) shows whether memory steered the "
                   "value when one was named.")
    return [*out, ""]


def _section(title: str, intro: str, body: list[str]) -> list[str]:
    return [f"## {title}", "", _para(intro), "", *body]


def render_other(scale: list[dict[str, Any]], privacy: list[dict[str, Any]],
                 lme_m: list[dict[str, Any]] | None = None,
                 prefs: list[dict[str, Any]] | None = None) -> list[str]:
    """The sections for behaviour on a real model, recall at scale, LongMemEval-M's cost
    and the privacy fuzzer (each left out when it has no file)."""
    lines: list[str] = []
    if prefs:
        lines += _section("Behaviour in preference sessions", PREFS_INTRO,
                          [line for doc in prefs for line in _prefs(doc)])
    if scale:
        lines += _section("Recall at scale", SCALE_INTRO,
                          [line for doc in scale for line in _recall_scale(doc)])
    if lme_m:
        lines += _section("LongMemEval-M-shaped cost", LME_M_INTRO,
                          [line for doc in lme_m for line in _lme_m(doc)])
    if privacy:
        lines += _section("Privacy: the canary leak fuzzer", PRIVACY_INTRO, _privacy(privacy))
    return lines


class ResultsError(ValueError):
    """A results directory or file that cannot be rendered: one line naming it and the
    fix (a typo must not overwrite docs/results.md with an empty page)."""


def _documents(results_dir: Path) -> list[dict[str, Any]]:
    """Every result file of ``results_dir``, each a JSON object, in name order."""
    if not results_dir.is_dir():
        problem = "is not a directory" if results_dir.exists() else "does not exist"
        raise ResultsError(f"--results-dir {results_dir} {problem}; give the folder of "
                           "result files (default benchmarks/results)")
    docs = []
    for path in sorted(results_dir.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:  # UnicodeDecodeError too
            raise ResultsError(f"{path}: not a readable JSON result file ({exc}); fix it "
                               "or move it out of the results directory") from None
        if not isinstance(doc, dict):
            raise ResultsError(f"{path}: a result file holds one JSON object, not a "
                               f"{type(doc).__name__}; fix it or move it out of the "
                               "results directory")
        docs.append(doc)
    return docs


def load(results_dir: Path) -> list[dict[str, Any]]:
    docs = []
    for doc in _documents(results_dir):
        if doc.get("schema") == SCHEMA:
            docs.append(doc)
    return sorted(docs, key=lambda d: (d["task"] != "locomo", d["date"]))


def load_other(results_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                           list[dict[str, Any]], list[dict[str, Any]]]:
    """Recall-scale result files (newest first), privacy fuzz runs (by date),
    LongMemEval-M-shaped cost runs (newest first) and real-model preference runs (by
    date)."""
    scale, privacy, lme_m, prefs = [], [], [], []
    for doc in _documents(results_dir):
        if doc.get("benchmark") == "bench_recall_scale":
            scale.append(doc)
        elif doc.get("benchmark") == "bench_lme_m":
            lme_m.append(doc)
        elif doc.get("schema") == PREFS_SCHEMA:
            prefs.append(doc)
        elif "requests_checked" in doc and "leaks" in doc:
            privacy.append(doc)
    return (sorted(scale, key=lambda d: d["date"], reverse=True),
            sorted(privacy, key=lambda d: (d["date"], d["seed"])),
            sorted(lme_m, key=lambda d: d["date"], reverse=True),
            sorted(prefs, key=lambda d: d["date"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--results-dir", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results.md")
    args = parser.parse_args(argv)
    try:
        text = render(load(args.results_dir))
        other = render_other(*load_other(args.results_dir))
    except ResultsError as exc:
        parser.error(str(exc))
    if args.out.is_dir():
        parser.error(f"--out {args.out} is a directory; give a file such as "
                     f"{args.out / 'results.md'}")
    if other:
        text = text.rstrip() + "\n\n" + "\n".join(other).rstrip() + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
