"""Benchmark the per-turn latency the nanobot plugin adds, with mem0 as the provider.

    python benchmarks/bench_plugin.py [--turns 60] [--users 3] [--gap-ms 0] [--rounds 2]
                                      [--modes mem0,simple_rag] [--json out.json]

A real nanobot ``AgentLoop`` (built as ``nanobot agent -c`` builds it) answers
``--turns`` user turns from ``--users`` users (each in their own chat), its LLM being the
deterministic HTTP double from ``tests/llm_double`` (answers in about a millisecond, so
the figures are nanobot + plugin cost, not a model's).

For each mode the same conversation runs ``2 x --rounds`` times, in fresh homes,
alternating (baseline, plugin, baseline, plugin, ...) so load changes on the machine hit
both alike; turns of all rounds are pooled:

- ``baseline``: nanobot without the plugin (the ``nanobot.tools`` entry points are
  hidden from nanobot's ToolLoader);
- ``plugin``: nanobot with the plugin on mem0 — ``mem0`` is mem0 with extraction
  (``add(infer=True)``; its LLM is a second double), ``simple_rag`` is mem0 with
  ``infer=False``. Both use local Qdrant and the bundled MiniLM embedder. Mode
  ``full_history`` is the full-history condition instead (no embedder, no mem0), its
  recall prepared after each turn's writes land and served while the store is unchanged
  (``full_history_unprepared``: the same with ``prepare_recall: false``); mode
  ``graphiti`` is Graphiti on embedded Kuzu (its extraction LLM the second double, its
  embedder the bundled MiniLM).

Reported per mode: the reply latency (``process_direct`` wall time) p50/p95 of both runs
and their difference (what a user waits extra, including CPU contention from background
writes), and the plugin's own timings: recall (the retrieve on the reply path, or for a
turn served a prepared section the version check that replaces it),
enqueue (local SQLite outbox append on the reply path), their per-turn sum (the plugin's
work on the reply path) and record (the backend's write, in the background — not on the reply
path). The first
turn (mem0 loading its embedder) is reported separately as the cold start and excluded.
The chat double records its own time on each call (``handled_s``); the difference is
also printed less it, so a longer prompt's cost on the model side is not counted as
nanobot's or the plugin's. ``--skill-ab`` runs each round a third time with
``nanobot.install_skill: true`` (the memory-context skill listed among nanobot's skills, as
it was by default until 2026-12-02; the default offers the same guide as the
``memory_guide`` tool) and prints what the listed skill adds.
Turns follow each other with ``--gap-ms`` between them (0 = back to back, the worst
case for background writes competing with the next turn). Not a timed test.

``--embedding-runtime`` sets mem0's ``embedding_runtime`` (default: the config's default,
``onnx`` for the bundled MiniLM).

``--cold-processes N`` measures what every ``nanobot agent -m`` pays instead: N rounds of
fresh Python processes, interleaved (baseline, plugin on sentence-transformers, plugin on
ONNX), each building nanobot's ``AgentLoop`` and answering one turn; the figure is the
wall time from spawning the process to its first reply (imports, model loads, the
turn), and what the plugin adds over the baseline of the same round (mean, 95 %
bootstrap interval). A warm-up process of each kind runs first, untimed (it exports the
ONNX model once into a temporary cache, and reads the files into the page cache).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FACTS = [
    "I live in Lisbon near the river.", "I work as a data engineer.",
    "I have a dog named Pixel.", "My sister is a pilot.", "I am vegetarian.",
    "I play the violin on weekends.", "I am learning Japanese.",
    "I drink green tea every morning.", "I ride my bike to work.",
    "I am allergic to shellfish.", "My favourite author is Ursula Le Guin.",
    "I run a small book club.",
]
QUESTIONS = [
    "Where do I live?", "What is my job?", "What is my dog called?",
    "What should I cook for dinner tonight?", "Which hobby do I have?",
    "What language am I learning?", "What do I drink in the morning?",
    "How do I get to work?", "Any food I must avoid?", "Who is my favourite author?",
]


def conversation(turns: int, users: int) -> list[tuple[str, str]]:
    out = []
    for i in range(turns):
        who = f"user{i % users}"
        k = i // users
        text = FACTS[k % len(FACTS)] if k % 2 == 0 else QUESTIONS[k % len(QUESTIONS)]
        out.append((who, f"{text} (turn {i})"))
    return out


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": pct(values, 50), "p95": pct(values, 95),
            "mean": statistics.fmean(values) if values else float("nan")}


async def run_once(
    *, mode: str, plugin: bool, turns: list[tuple[str, str]], gap_s: float,
    chat_url: str, mem0_url: str, runtime: str | None = None,
    first_reply: Any = None, chat: Any = None, skill: bool = False,
) -> dict[str, Any]:
    from nanobot.agent.loop import AgentLoop
    from nanobot.agent.tools.loader import ToolLoader
    from nanobot.agent.tools.registry import ToolRegistry
    from nanobot.config.loader import load_config

    from nanobot_memory_adapters.nanobot import plugin_for

    root = Path(tempfile.mkdtemp(prefix=f"bench-plugin-{mode}-"))
    try:
        (root / "config.json").write_text(json.dumps({
            "agents": {"defaults": {"workspace": str(root / "workspace"), "model": "double",
                                    "provider": "custom"}},
            "providers": {"custom": {"apiKey": "bench", "apiBase": chat_url}},
        }))
        block: dict[str, Any] = {}
        llm = {"base_url": mem0_url, "model": "double", "api_key": "bench"}
        if mode in ("mem0", "graphiti"):
            block = {"llm": llm}
        if runtime is not None and mode == "graphiti":
            block["embedder"] = {"runtime": runtime}
        elif runtime is not None:
            block["embedding_runtime"] = runtime
        memory: dict[str, Any] = (
            {"condition": "full_history"} if mode.startswith("full_history")
            else {"backend": "graphiti", "graphiti": block} if mode == "graphiti"
            else {"backend": "mem0", "mem0": block})
        (root / "memory.json").write_text(json.dumps(
            {"memory": {**memory, "budget": {"max_tokens": 800}},
             "nanobot": {"prepare_recall": mode != "full_history_unprepared",
                         "install_skill": skill}}))
        original = ToolLoader._discover_plugins
        if not plugin:
            ToolLoader._discover_plugins = lambda self: {}  # type: ignore[method-assign]
        try:
            loop = AgentLoop.from_config(load_config(root / "config.json"),
                                         tool_registry=ToolRegistry())
        finally:
            ToolLoader._discover_plugins = original  # type: ignore[method-assign]
        memory_plugin = plugin_for(loop) if plugin else None
        latencies: list[float] = []
        model: list[float] = []
        cold = None
        for i, (who, text) in enumerate(turns):
            calls_before = len(chat.requests) if chat is not None else 0
            started = time.perf_counter()
            await loop.process_direct(text, session_key=f"bench:{who}", channel="bench",
                                      chat_id=who, sender_id=who)
            elapsed = (time.perf_counter() - started) * 1000
            if chat is not None and i:
                model.append(1000 * sum(r.get("handled_s", 0.0)
                                        for r in chat.requests[calls_before:]))
            if i == 0:
                cold = elapsed
                if first_reply is not None:
                    first_reply(elapsed)
                if memory_plugin is not None:  # let the cold start settle before timing
                    await memory_plugin.flush(timeout_s=300)
            else:
                latencies.append(elapsed)
            if gap_s:
                await asyncio.sleep(gap_s)
        result: dict[str, Any] = {"reply_list": latencies, "cold_start_ms": cold,
                                  "model_list": model}
        if memory_plugin is not None:
            pending = await memory_plugin.flush(timeout_s=300)
            stats = memory_plugin.outbox.stats(memory_plugin.provider)
            recall = list(memory_plugin.retrieve_stats.samples)[1:]
            enqueue = list(memory_plugin.enqueue_stats.samples)[1:]
            result.update(
                path_ms=[a + b for a, b in zip(recall, enqueue, strict=False)],
                recall_list=recall, enqueue_list=enqueue,
                record_list=list(memory_plugin.record_stats.samples)[1:],
                enqueue_ms=summary(list(memory_plugin.enqueue_stats.samples)),
                record_ms=summary(list(memory_plugin.record_stats.samples)),
                outbox={"pending": pending, "delivered": stats.delivered,
                        "failed": stats.failed},
                backend=memory_plugin.adapter.backend_name if memory_plugin.adapter else None,
                prepared_served=memory_plugin.prepared.served,
            )
        await loop.aclose()
        if memory_plugin is not None:
            await memory_plugin.aclose()
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


COLD_MARK = "COLD-START "
COLD_KINDS = (("baseline", False, "sentence_transformers"),
              ("plugin (sentence-transformers)", True, "sentence_transformers"),
              ("plugin (onnx)", True, "onnx"))


async def cold_child(spec: dict[str, Any]) -> None:
    """One fresh process: build the loop, answer one turn, print when the reply is there."""
    from loguru import logger

    logger.remove()

    def report(ms: float) -> None:
        print(COLD_MARK + json.dumps({"first_turn_ms": ms}), flush=True)

    await run_once(mode=spec["mode"], plugin=spec["plugin"], turns=conversation(1, 1),
                   gap_s=0, chat_url=spec["chat_url"], mem0_url=spec["mem0_url"],
                   runtime=spec["runtime"], first_reply=report)


def cold_process(spec: dict[str, Any], env: dict[str, str]) -> dict[str, float]:
    """Spawn a child; wall ms from spawn to its first reply, and the turn's own ms."""
    with tempfile.TemporaryFile("w+") as errors:  # a file: a chatty child never blocks
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, __file__, "--cold-child", json.dumps(spec)],
            stdout=subprocess.PIPE, stderr=errors, text=True, env=env,
        )
        assert proc.stdout is not None
        wall, result = 0.0, None
        for line in proc.stdout:  # the marked line, whatever else the child prints
            if line.startswith(COLD_MARK):
                wall = (time.perf_counter() - started) * 1000
                result = json.loads(line[len(COLD_MARK):])
                break
        proc.stdout.read()
        proc.wait(timeout=600)
        errors.seek(0)
        if proc.returncode != 0 or result is None:
            raise SystemExit(f"cold-start child failed ({proc.returncode}): "
                             f"{errors.read()[-2000:]}")
    return {"process_to_reply_ms": wall, "first_turn_ms": result["first_turn_ms"]}


def cold_starts(mode: str, rounds: int, chat_url: str, mem0_url: str) -> dict[str, Any]:
    from nanobot_memory_adapters.stats import mean_ci, paired_difference

    cache = tempfile.mkdtemp(prefix="bench-plugin-onnx-cache-")
    env = {**os.environ, "NANOBOT_MEMORY_CACHE_DIR": cache}
    kinds = COLD_KINDS if mode != "full_history" else (  # no embedder: one plugin kind
        ("baseline", False, None), ("plugin", True, None))
    specs = {name: {"mode": mode, "plugin": plugin, "runtime": runtime,
                    "chat_url": chat_url, "mem0_url": mem0_url}
             for name, plugin, runtime in kinds}
    try:
        for spec in specs.values():  # warm-up: the ONNX export, the page cache
            cold_process(spec, env)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in specs}
        for _ in range(rounds):
            for name, spec in specs.items():
                runs[name].append(cold_process(spec, env))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    base = [r["process_to_reply_ms"] / 1000 for r in runs["baseline"]]
    out: dict[str, Any] = {"rounds": rounds, "kinds": {}}
    print(f"\n== cold start, {mode}: spawn to first reply, {rounds} fresh processes each")
    for name, values in runs.items():
        wall = [r["process_to_reply_ms"] / 1000 for r in values]
        est = mean_ci(wall)
        entry: dict[str, Any] = {"process_to_reply_s": wall, "mean_s": est.value,
                                 "ci95_s": [est.low, est.high],
                                 "first_turn_ms": [r["first_turn_ms"] for r in values]}
        line = f"{name:31}: {est.value:5.2f} s [{est.low:.2f}, {est.high:.2f}]"
        if name != "baseline":
            d = paired_difference(wall, base, names=(name, "baseline"))
            entry["added_s"] = {"mean": d.value, "ci95": [d.low, d.high], "n": d.n}
            line += f"  added {d.value:+5.2f} s [{d.low:+.2f}, {d.high:+.2f}]"
        out["kinds"][name] = entry
        print(line)
    return out


async def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--cold-child":
        await cold_child(json.loads(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--gap-ms", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default="mem0,simple_rag")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--embedding-runtime",
                        choices=("sentence_transformers", "onnx", "onnx_int8"), default=None,
                        help="mem0's embedding_runtime (default: the config's)")
    parser.add_argument("--skill-ab", action="store_true",
                        help="each round also runs the plugin with nanobot.install_skill "
                        "true, and reports what the listed memory-context skill adds per turn")
    parser.add_argument("--cold-processes", type=int, default=0, metavar="N",
                        help="measure first-turn cold start in N rounds of fresh processes "
                        "instead of the per-turn latency")
    args = parser.parse_args()

    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    from tests.llm_double import LLMDouble

    turns = conversation(args.turns + 1, args.users)
    report: dict[str, Any] = {"turns": args.turns, "users": args.users, "gap_ms": args.gap_ms,
                              "rounds": args.rounds, "cpus": os.cpu_count(),
                              "skill_ab": args.skill_ab,
                              "loadavg_start": os.getloadavg(), "modes": {}}
    with LLMDouble() as chat, LLMDouble() as mem0_llm:
        if args.cold_processes:
            report["cold_start"] = {
                mode: cold_starts(mode, args.cold_processes, chat.base_url, mem0_llm.base_url)
                for mode in [m.strip() for m in args.modes.split(",") if m.strip()]}
            args.modes = ""
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            kinds = ("baseline", "plugin", "skill") if args.skill_ab else ("baseline", "plugin")
            runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
            for _ in range(args.rounds):
                for kind in kinds:
                    runs[kind].append(await run_once(
                        mode=mode, plugin=kind != "baseline", turns=turns,
                        gap_s=args.gap_ms / 1000, chat_url=chat.base_url,
                        mem0_url=mem0_llm.base_url, runtime=args.embedding_runtime,
                        chat=chat, skill=kind == "skill"))

            def pooled(kind: str, key: str, runs: dict[str, Any] = runs) -> list[float]:
                return [v for run in runs[kind] for v in run.get(key, [])]

            b = summary(pooled("baseline", "reply_list"))
            p = summary(pooled("plugin", "reply_list"))
            added = {k: p[k] - b[k] for k in ("p50", "p95", "mean")}
            from nanobot_memory_adapters.stats import median_difference

            p50_ci = median_difference(pooled("plugin", "reply_list"),
                                       pooled("baseline", "reply_list"))
            added["p50_ci95"] = [p50_ci.low, p50_ci.high]
            # The same turns less the chat double's own time on them: what nanobot and the
            # plugin add, without the model side reading a longer prompt.
            def less_model(kind: str, runs: dict[str, Any] = runs) -> list[float]:
                return [r - m for run in runs[kind]
                        for r, m in zip(run["reply_list"], run["model_list"], strict=True)]

            beyond = median_difference(less_model("plugin"), less_model("baseline"))
            model_b = summary(pooled("baseline", "model_list"))
            model_p = summary(pooled("plugin", "model_list"))
            parts = {key: summary(pooled("plugin", f"{key}_list"))
                     for key in ("recall", "enqueue", "record")}
            parts["path"] = summary(pooled("plugin", "path_ms"))
            last = runs["plugin"][-1]
            report["modes"][mode] = {
                "baseline_reply_ms": b, "plugin_reply_ms": p, "added_reply_ms": added,
                "plugin_parts_ms": parts, "backend": last.get("backend"),
                "model_ms": {"baseline": model_b, "plugin": model_p},
                "added_less_model_p50_ms": [beyond.value, beyond.low, beyond.high],
                "cold_start_ms": {"plugin": [r["cold_start_ms"] for r in runs["plugin"]],
                                  "baseline": [r["cold_start_ms"] for r in runs["baseline"]]},
                "outbox": [r["outbox"] for r in runs["plugin"]],
                "prepared_served": sum(r.get("prepared_served", 0) for r in runs["plugin"]),
                "plugin_reply_list": pooled("plugin", "reply_list"),
            }
            print(f"\n== {mode} (backend label: {last.get('backend')}), {args.turns} turns x "
                  f"{args.rounds} rounds, {args.users} users, gap {args.gap_ms:.0f} ms")
            print(f"reply latency without plugin : p50 {b['p50']:7.1f} ms  p95 {b['p95']:7.1f} ms")
            print(f"reply latency with plugin    : p50 {p['p50']:7.1f} ms  p95 {p['p95']:7.1f} ms")
            print(f"difference                   : p50 {added['p50']:7.1f} ms  "
                  f"p95 {added['p95']:7.1f} ms  (p50 95 % interval "
                  f"[{p50_ci.low:.1f}, {p50_ci.high:.1f}], bootstrap, n={p50_ci.n})")
            print(f"the chat double's own time   : p50 {model_b['p50']:7.1f} ms without, "
                  f"{model_p['p50']:7.1f} ms with the plugin (its longer prompt)")
            print(f"difference less the double's : p50 {beyond.value:7.1f} ms  (95 % interval "
                  f"[{beyond.low:.1f}, {beyond.high:.1f}]): nanobot + plugin, no model side")
            for key, label in (("path", "plugin work on reply path"),
                               ("recall", "  recall (retrieve)"),
                               ("enqueue", "  outbox append"),
                               ("record", "backend write (background)")):
                s_ = parts[key]
                print(f"{label:29}: p50 {s_['p50']:7.1f} ms  p95 {s_['p95']:7.1f} ms "
                      f"(n={s_['n']})")
            cold = report["modes"][mode]["cold_start_ms"]
            print(f"cold start (first turn)      : plugin {[round(c) for c in cold['plugin']]} ms, "
                  f"baseline {[round(c) for c in cold['baseline']]} ms")
            print(f"outbox after flush           : {report['modes'][mode]['outbox']}")
            if args.skill_ab:
                listed = median_difference(pooled("skill", "reply_list"),
                                           pooled("baseline", "reply_list"))
                skill_cost = median_difference(pooled("skill", "reply_list"),
                                               pooled("plugin", "reply_list"))
                report["modes"][mode]["added_with_skill_p50_ms"] = [
                    listed.value, listed.low, listed.high]
                report["modes"][mode]["skill_p50_ms"] = [
                    skill_cost.value, skill_cost.low, skill_cost.high]
                print(f"difference with the skill    : p50 {listed.value:7.1f} ms  (95 % interval "
                      f"[{listed.low:.1f}, {listed.high:.1f}], install_skill true)")
                print(f"the memory-context skill     : p50 {skill_cost.value:+7.1f} ms  (95 % "
                      f"interval [{skill_cost.low:.1f}, {skill_cost.high:.1f}], listed - the "
                      "default)")
            print(f"served a prepared recall     : {report['modes'][mode]['prepared_served']} "
                  f"of {p['n']} timed turns (+ {args.rounds} cold)")
    modes = report["modes"]
    if {"full_history", "full_history_unprepared"} <= modes.keys():
        from nanobot_memory_adapters.stats import median_difference

        gap = median_difference(modes["full_history"]["plugin_reply_list"],
                                modes["full_history_unprepared"]["plugin_reply_list"])
        report["prepared_minus_unprepared_p50_ms"] = [gap.value, gap.low, gap.high]
        print(f"\nfull_history reply p50, prepared - unprepared: {gap.value:+.1f} ms "
              f"[{gap.low:.1f}, {gap.high:.1f}] (bootstrap, n={gap.n})")
    report["loadavg_end"] = os.getloadavg()
    print(f"\nload average start {report['loadavg_start']}, end {report['loadavg_end']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
