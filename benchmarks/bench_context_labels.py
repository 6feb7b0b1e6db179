"""How much of the memory budget goes to labels, and how many retrieved items are shown.

Reads the ``ask`` traces of one or more bench/demo output directories (``traces.jsonl``)
and, per provider, reports: items retrieved and shown (means), label tokens per item and
memory text tokens per item (medians, cl100k), the share of item tokens spent on labels,
and shown/retrieved. A label is an item line's ``- [...] `` prefix; indented continuation
lines are memory text; the frame and group headings are counted apart.

    python benchmarks/bench_context_labels.py bench-out/demo/locomo [more dirs] [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from nanobot_memory_adapters.tokens import count_tokens


def measure(context: str) -> tuple[list[float], list[int], int]:
    """(label tokens per item, text tokens per item, frame+group-title tokens) of a section.

    A line splits where cl100k splits it: ``- [...]`` is label and `` text`` (its leading
    space starts the text's first token) is memory text, so label plus text is the line's
    count. A ``### DATE TIME`` day heading is label too (it carries the items' day and
    time): its tokens are shared equally among the items under it."""
    labels: list[float] = []
    texts: list[int] = []
    other = 0
    day: tuple[int, list[int]] | None = None  # (heading tokens, indexes of its items)
    days: list[tuple[int, list[int]]] = []
    for line in context.split("\n"):
        if line.startswith("### "):
            day = (count_tokens(line + "\n"), [])
            days.append(day)
            continue
        if line.startswith("- [") and "] " in line:
            label, text = line.split("] ", 1)
            labels.append(float(count_tokens(label + "]")))
            texts.append(count_tokens(" " + text))
        elif line.startswith("- "):
            labels.append(float(count_tokens("-")))
            texts.append(count_tokens(line[1:]))
        elif line.startswith("  ") and texts:
            texts[-1] += count_tokens(line)
            continue
        else:
            other += count_tokens(line)
            day = None  # a group title or the frame ends the day's run
            continue
        if day is not None:
            day[1].append(len(labels) - 1)
    for tokens, members in days:
        for i in members:
            labels[i] += tokens / len(members)
        if not members:
            other += tokens
    return labels, texts, other


def collect(out_dirs: list[Path]) -> dict[str, dict[str, float]]:
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for out in out_dirs:
        contexts: dict[str, str] = {}
        with (out / "traces.jsonl").open(encoding="utf-8") as fh:
            for raw in fh:
                rec = json.loads(raw)
                if rec.get("kind") != "ask":
                    continue
                sha = rec.get("context_sha256")
                context = rec.get("context")
                if context is not None and sha:
                    contexts[sha] = context
                context = context if context is not None else contexts.get(sha or "", "")
                if not context:
                    continue
                trace = rec.get("trace") or {}
                labels, texts, other = measure(context)
                p = per[rec["provider"]]
                p["retrieved"].append(float(trace.get("retrieved_count") or 0))
                p["shown"].append(float(len(labels)))
                p["label"].extend(labels)
                p["text"].extend(texts)
                p["label_sum"].append(sum(labels))
                p["text_sum"].append(float(sum(texts)))
                p["other_sum"].append(float(other))
    table: dict[str, dict[str, float]] = {}
    for name, p in sorted(per.items()):
        label_sum, text_sum = sum(p["label_sum"]), sum(p["text_sum"])
        retrieved = statistics.mean(p["retrieved"])
        shown = statistics.mean(p["shown"])
        table[name] = {
            "asks": len(p["shown"]),
            "items_retrieved_mean": round(retrieved, 1),
            "items_shown_mean": round(shown, 1),
            "shown_of_retrieved": round(shown / retrieved, 3) if retrieved else 0.0,
            "label_tokens_per_item_median": round(statistics.median(p["label"]), 1)
            if p["label"] else 0,
            "text_tokens_per_item_median": statistics.median(p["text"]) if p["text"] else 0,
            "label_share": round(label_sum / (label_sum + text_sum), 3)
            if label_sum + text_sum else 0.0,
            "frame_and_headings_tokens_mean": round(statistics.mean(p["other_sum"]), 1),
        }
    return table


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    dirs = [Path(a) for a in argv if a != "--json"]
    if not dirs:
        print("usage: bench_context_labels.py OUT_DIR [OUT_DIR ...] [--json]", file=sys.stderr)
        return 2
    missing = [d for d in dirs if not (d / "traces.jsonl").is_file()]
    if missing:
        print(f"error: no traces.jsonl in {missing[0]}; give a bench or demo --out directory",
              file=sys.stderr)
        return 2
    table = collect(dirs)
    if as_json:
        print(json.dumps(table, indent=2))
        return 0
    cols = ["asks", "items_retrieved_mean", "items_shown_mean", "shown_of_retrieved",
            "label_tokens_per_item_median", "text_tokens_per_item_median", "label_share"]
    print("provider | " + " | ".join(cols))
    for name, row in table.items():
        print(f"{name} | " + " | ".join(str(row[c]) for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
