"""How much of the memory budget goes to labels, and how many retrieved items are shown.

Reads the ``ask`` traces of one or more bench/demo output directories (``traces.jsonl``)
and, per provider, reports: items retrieved and shown (means), label tokens per item and
memory text tokens per item (medians, cl100k), the share of item tokens spent on labels,
and shown/retrieved. A label is an item line's ``- [...] `` prefix; indented continuation
lines are memory text; the frame and group headings are counted apart.

    python benchmarks/bench_context_labels.py bench-out/demo/locomo [more dirs] [--json]
    python benchmarks/bench_context_labels.py OUT_DIR --format-blind [--budget 2000]
                                              [--bare-pack simple_rag]

The grammar mode reads the labels of before 2026-11-28 (``- [.57 Caroline #992] text``:
relevance, speaker and a short id in the bracket). Sections in today's grammar
(``Caroline: text``, no bullet, no id) would read wrongly (the speaker as text, or no
item at all), so it refuses them with one line: use ``--format-blind``, which needs no
grammar.

``--format-blind`` reads no label grammar: per ask, the share of the section's
cl100k tokens that are not the shown turns' own text (labels, headings, frame, speaker
names, escaping), from the section and the texts the bench recorded; per provider the
pooled share and the mean per-ask share with a 95 % interval (cluster bootstrap by
question), and that share split three ways: heading lines (``#``: days, groups), the
frame (the section's two tags), and what item lines add to their texts (the speaker's
``Name:``, a time, a bullet, the newline), with the heading and item lines per section.
``--bare-pack P`` also packs provider P's own ranking as bare text (one turn per line,
nothing else) into the same budget and compares turn recall with P's section, paired per
ask, with the interval of the difference. The ranking is the bundled MiniLM's cosine
over the turns P had stored at that ask (what simple_rag's mem0 search ranks by);
the agreement with P's recorded ranking is printed, so a different ranking shows.
"""

from __future__ import annotations

import json
import re
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


_SHORT_ID = re.compile(r"^- \[[^\]]*#\d{3,12}\] ", re.M)


def _old_grammar(out: Path) -> bool:
    """Whether any recorded section uses the bracket-with-id labels this mode reads."""
    with (out / "traces.jsonl").open(encoding="utf-8") as fh:
        for raw in fh:
            rec = json.loads(raw)
            if rec.get("kind") == "ask" and _SHORT_ID.search(rec.get("context") or ""):
                return True
    return False


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


def _asks_and_turns(out: Path, budget: int):  # type: ignore[no-untyped-def]
    """Yield (ask record, its context, {event id: text} stored in its unit so far)."""
    contexts: dict[str, str] = {}
    stored: dict[str, dict[str, str]] = defaultdict(dict)
    with (out / "traces.jsonl").open(encoding="utf-8") as fh:
        for raw in fh:
            rec = json.loads(raw)
            if rec.get("kind") == "record" and rec.get("status") == "committed":
                stored[rec["unit"]][rec["event_id"]] = (rec.get("content") or rec.get("text")
                                                        or "")
            if rec.get("kind") != "ask" or (rec.get("budget_tokens") or budget) != budget:
                continue
            if rec.get("context") is not None:
                contexts[rec["context_sha256"]] = rec["context"]
            context = contexts.get(rec.get("context_sha256") or "", "")
            yield rec, context, stored[rec["unit"]]


def format_blind(out: Path, budget: int, bare_pack: str | None) -> dict[str, object]:
    from nanobot_memory_adapters.formatting import opens_item
    from nanobot_memory_adapters.harness.metrics import normalize_text, turn_hits
    from nanobot_memory_adapters.stats import mean_ci, paired_difference

    share: dict[str, list[float]] = defaultdict(list)
    # the non-text share split: headings (``#`` lines), the frame (the two tags), and
    # what each item line adds to its text (speaker, time, bullet, newline)
    parts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    pooled: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    qids: dict[str, list[str]] = defaultdict(list)
    own_recall: list[float] = []
    bare_recall: list[float] = []
    bare_own_recall: list[float] = []
    bare_qids: list[str] = []
    bare_shown: list[int] = []
    overlap: list[float] = []
    embed = _minilm() if bare_pack else None
    vectors: dict[str, object] = {}
    for rec, context, stored in _asks_and_turns(out, budget):
        if not context:
            continue
        total = count_tokens(context)
        text = sum(count_tokens(stored.get(e, "")) for item in rec.get("shown_sources") or []
                   for e in item[:1])
        provider = rec["provider"]
        share[provider].append(max(0.0, 1 - text / total) if total else 0.0)
        if total:
            lines = context.split("\n")
            headings = sum(count_tokens(line + "\n") for line in lines if line.startswith("#"))
            frame = count_tokens(lines[0] + "\n") + count_tokens(lines[-1]) if lines else 0
            parts[provider]["headings"].append(headings / total)
            parts[provider]["frame"].append(frame / total)
            parts[provider]["per item"].append(max(0, total - text - headings - frame) / total)
            inner = lines[1:-1]
            counts[provider]["headings"].append(float(sum(1 for x in inner if x.startswith("#"))))
            counts[provider]["items"].append(float(sum(1 for x in inner if opens_item(x))))
        pooled[provider][0] += max(0, total - text)
        pooled[provider][1] += total
        qids[provider].append(rec["question_id"])
        if provider != bare_pack or embed is None:
            continue
        ev = rec["evidence_text"]
        own_recall.append(turn_hits(ev, normalize_text(context)) / len(ev))
        ids = list(stored)
        missing = [e for e in ids if e not in vectors]
        if missing:
            for e, v in zip(missing, embed([stored[e] for e in missing]), strict=True):
                vectors[e] = v
        import numpy as np

        q = embed([rec["question"]])[0]
        sims = np.stack([vectors[e] for e in ids]) @ q  # type: ignore[arg-type]
        ranked = [ids[i] for i in np.argsort(-sims, kind="stable")]
        recorded = [item[0] for item in rec.get("ranked_sources") or [] if item]
        if recorded:
            overlap.append(len(set(ranked[:len(recorded)]) & set(recorded)) / len(recorded))
        lines = _bare_pack([stored[e] for e in ranked], budget)
        bare_shown.append(len(lines))
        bare_recall.append(turn_hits(ev, normalize_text("\n".join(lines))) / len(ev))
        own_lines = _bare_pack([stored[e] for e in recorded if e in stored], budget)
        bare_own_recall.append(turn_hits(ev, normalize_text("\n".join(own_lines))) / len(ev))
        bare_qids.append(rec["question_id"])
    result: dict[str, object] = {"budget": budget, "providers": {}}
    for provider, values in sorted(share.items()):
        est = mean_ci(values, clusters=qids[provider])
        non_text, total = pooled[provider]
        row = {"asks": len(values), "pooled_share": round(non_text / total, 4),
               "mean_share": round(est.value, 4), "ci95": [round(est.low, 4), round(est.high, 4)]}
        result["providers"][provider] = row  # type: ignore[index]
        print(f"{provider:14} non-text share of the section: pooled {row['pooled_share']:.3f}, "
              f"per ask {est.value:.3f} [{est.low:.3f}, {est.high:.3f}] (n={est.n}, "
              f"{est.n_clusters} questions)")
        split = {}
        for part, values in parts[provider].items():
            e = mean_ci(values, clusters=qids[provider])
            split[part] = [round(e.value, 4), round(e.low, 4), round(e.high, 4)]
        row["of_which"] = split
        print("  of which, per ask: " + ", ".join(
            f"{part} {v:.3f} [{lo:.3f}, {hi:.3f}]" for part, (v, lo, hi) in split.items()))
        lines_per_ask = {}
        for what, values in counts[provider].items():
            e = mean_ci(values, clusters=qids[provider])
            lines_per_ask[what] = [round(e.value, 2), round(e.low, 2), round(e.high, 2)]
        row["lines_per_ask"] = lines_per_ask
        print("  per section: " + ", ".join(
            f"{what} {v:.1f} [{lo:.1f}, {hi:.1f}]" for what, (v, lo, hi) in lines_per_ask.items()))
    if bare_pack and bare_recall:
        d = paired_difference(own_recall, bare_recall, clusters=bare_qids,
                              names=(bare_pack, "bare text"))
        d_own = paired_difference(own_recall, bare_own_recall, clusters=bare_qids,
                                  names=(bare_pack, "bare text"))
        own = mean_ci(own_recall, clusters=bare_qids)
        bare = mean_ci(bare_recall, clusters=bare_qids)
        result["bare_pack"] = {
            "provider": bare_pack, "asks": len(bare_recall),
            "turn_recall": [own.value, own.low, own.high],
            "bare_turn_recall": [bare.value, bare.low, bare.high],
            "difference": [d.value, d.low, d.high], "verdict": d.verdict,
            "bare_items_shown_mean": statistics.fmean(bare_shown),
            "retrieved_only_difference": [d_own.value, d_own.low, d_own.high],
            "ranking_overlap_mean": statistics.fmean(overlap) if overlap else None}
        print(f"turn recall at {budget} tokens: {bare_pack} {own.value:.3f} [{own.low:.3f}, "
              f"{own.high:.3f}], bare text of its ranking {bare.value:.3f} [{bare.low:.3f}, "
              f"{bare.high:.3f}] ({statistics.fmean(bare_shown):.1f} turns shown); difference "
              f"{d.value:+.3f} [{d.low:+.3f}, {d.high:+.3f}], {d.verdict} (n={d.n})")
        print(f"  bare text of only what {bare_pack} retrieved (its top_k, its order): "
              f"difference {d_own.value:+.3f} [{d_own.low:+.3f}, {d_own.high:+.3f}], "
              f"{d_own.verdict}; the MiniLM ranking's top holds "
              f"{statistics.fmean(overlap) if overlap else float('nan'):.3f} of what "
              f"{bare_pack} retrieved (mean per ask)")
    return result


def _bare_pack(texts: list[str], budget: int) -> list[str]:
    """Whole texts in order, one per line, while they fit the budget (a longer one is
    skipped and later, shorter ones may still fit, as the section packer does)."""
    lines, used = [], 0
    for text in texts:
        cost = count_tokens(text + "\n")
        if used + cost <= budget:
            lines.append(text)
            used += cost
    return lines


def _minilm():  # type: ignore[no-untyped-def]
    from nanobot_memory_adapters.local_models import bundled_minilm_path
    from nanobot_memory_adapters.onnx_embedder import load_onnx_embedder

    model = load_onnx_embedder(bundled_minilm_path(extra="mem0", setting="embedder path"))
    return model.encode


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:  # not a directory called --help
        print(__doc__)
        return 0
    if "--format-blind" in argv:
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("out", type=Path)
        parser.add_argument("--format-blind", action="store_true")
        parser.add_argument("--budget", type=int, default=2000)
        parser.add_argument("--bare-pack", default=None)
        parser.add_argument("--json", type=Path)
        args = parser.parse_args(argv)
        if not (args.out / "traces.jsonl").is_file():
            print(f"error: no traces.jsonl in {args.out}; give a bench or demo --out "
                  "directory", file=sys.stderr)
            return 2
        result = format_blind(args.out, args.budget, args.bare_pack)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0
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
    if not any(_old_grammar(out) for out in dirs):
        print("error: these sections carry no short ids (`#992]`): they use the labels of "
              "2026-11-28, which this grammar mode cannot read; run with --format-blind",
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
