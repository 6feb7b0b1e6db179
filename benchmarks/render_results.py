"""Render docs/results.md from the side-by-side result files (benchmarks/results/*.json,
written by benchmarks/side_by_side.py): one table per file, each with the command, commit,
machine, date and model that produced it, and its label.

    python benchmarks/render_results.py [--results-dir benchmarks/results] [--out docs/results.md]
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "nanobot-memory-side-by-side/1"
REPRODUCE = """    python benchmarks/side_by_side.py run --llm-base-url URL --llm-model MODEL \\
        [--llm-api-key-env VAR] --honcho-url URL [--workers N] \\
        --label "WHAT THE MODEL AND MACHINE ARE; not comparable with published results"
    python benchmarks/render_results.py"""
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
        n = next((c["n"] for k, _ in quality if (c := q.get(k))), p.get("asks"))
        cells = [f"`{name}`", str(q.get("memory_form") or "–"), str(n),
                 *[_ci(q.get(k), signed=k == "answer_lift") for k, _ in quality],
                 *([_ci(q.get("judged_accuracy"))] if judged else []),
                 *_cost_cells(p["cost"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


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
        text = "; ".join(f"{r['verdict']} ({_num(r['difference'], signed=True)} "
                         f"[{_num(r['low'], 2, True)}, {_num(r['high'], 2, True)}], n "
                         f"{r['n']})" for r in real)
        out.append(f"- {PAIR_NAMES.get(metric, metric)}: {len(real)} of {len(rows)} pairs "
                   f"distinguishable{': ' + text if text else ''}.")
    return out


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
        notes = [f"`{n}`: {p['cost']['llm_note']}" for n, p in doc["providers"].items()
                 if p["cost"].get("llm_note")]
        if notes:
            lines += ["", "LLM cost unknown for " + "; ".join(notes) + "."]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def load(results_dir: Path) -> list[dict[str, Any]]:
    docs = []
    for path in sorted(results_dir.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("schema") == SCHEMA:
            docs.append(doc)
    return sorted(docs, key=lambda d: (d["task"] != "locomo", d["date"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--results-dir", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results.md")
    args = parser.parse_args(argv)
    args.out.write_text(render(load(args.results_dir)), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
