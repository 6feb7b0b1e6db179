"""A LongMemEval-M-shaped run through ``bench --workers``: CPU-hours, extrapolated.

    python benchmarks/bench_lme_m.py [--haystacks 6] [--sessions 500] [--turns 10]
        [--turn-words 200] [--providers simple_rag,bm25] [--workers 2] [--full-set 500]
        [--out FILE]

LongMemEval-M gives each of its 500 questions a haystack of ~500 sessions (~1.5M tokens).
This generates haystacks of that shape (``benchmarks/longmemeval_gen.py``: synthetic
content, the benchmark's layout; ``--sessions 500 --turns 10 --turn-words 200`` is ~5,000
turns and ~1.3M tokens per haystack), runs ``nanobot-memory bench --task longmemeval`` on
them with ``--workers``, and reads each unit's process CPU from the results
(``timing.unit_cpu_s``: one haystack's ingest and question, after its provider is built).
Per provider: the mean CPU per haystack with its 95 % interval (n = haystacks), that times
``--full-set`` haystacks in CPU-hours (the interval scaled alike), the run's wall time
and the quality figures bench printed. The JSON (default
``benchmarks/results/lme_m_shape-<UTC time>.json``) holds the command, commit, machine and
date. Not a timed test: run it by hand on an idle machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nanobot_memory_adapters.stats import mean_ci  # noqa: E402


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=False).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--haystacks", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--turn-words", type=int, default=200)
    parser.add_argument("--providers", default="simple_rag,bm25")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--full-set", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.haystacks < 2:
        parser.error("--haystacks: at least 2 (an interval needs two)")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or REPO / "benchmarks" / "results" / f"lme_m_shape-{stamp}.json"
    with tempfile.TemporaryDirectory(prefix="lme-m-") as tmp:
        dataset, run_dir = Path(tmp) / "lme-m.json", Path(tmp) / "run"
        gen = subprocess.run([sys.executable, str(REPO / "benchmarks" / "longmemeval_gen.py"),
                        str(dataset), "--questions", str(args.haystacks), "--sessions",
                        str(args.sessions), "--turns", str(args.turns), "--turn-words",
                        str(args.turn_words), "--seed", str(args.seed)],
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if gen.returncode:  # its one usage line, not a CalledProcessError traceback
            parser.error(gen.stderr.strip().splitlines()[-1] if gen.stderr.strip()
                         else f"longmemeval_gen.py exited {gen.returncode}")
        haystacks = json.loads(dataset.read_text())
        turns = [sum(len(s) for s in h["haystack_sessions"]) for h in haystacks]
        bench = [sys.executable, "-m", "nanobot_memory_adapters.cli", "bench", "--task",
                 "longmemeval", "--dataset", str(dataset), "--providers", args.providers,
                 "--workers", str(args.workers), "--out", str(run_dir)]
        print(f"[lme-m] {len(haystacks)} haystacks of {args.sessions} sessions "
              f"({min(turns)}-{max(turns)} turns each); bench with {args.workers} workers",
              flush=True)
        started = time.monotonic()
        rc = subprocess.run(bench, cwd=REPO, check=False).returncode
        wall = time.monotonic() - started
        if rc != 0:
            print(f"[lme-m] bench exited {rc}; nothing recorded", file=sys.stderr)
            return rc
        results = json.loads((run_dir / "results.json").read_text())
    providers: dict[str, Any] = {}
    for name, block in results["providers"].items():
        cpu = block["timing"].get("unit_cpu_s", [])
        if len(cpu) < 2:
            providers[name] = {"skipped": "fewer than two units with a CPU figure"}
            continue
        est = mean_ci(cpu, method="bootstrap")
        scale = args.full_set / 3600
        providers[name] = {
            "cpu_s_per_haystack": {"value": round(est.value, 2), "low": round(est.low, 2),
                                   "high": round(est.high, 2), "n": est.n},
            "cpu_hours_full_set": {"value": round(est.value * scale, 2),
                                   "low": round(est.low * scale, 2),
                                   "high": round(est.high * scale, 2),
                                   "haystacks": args.full_set},
            "unit_cpu_s": cpu,
            "ingest_tokens_per_s": block["timing"].get("ingest_tokens_per_s"),
            "retrieve_latency_ms": block["timing"].get("retrieve_latency_ms"),
        }
        line = providers[name]
        print(f"[lme-m] {name}: {line['cpu_s_per_haystack']['value']} CPU-s per haystack "
              f"[{line['cpu_s_per_haystack']['low']}, {line['cpu_s_per_haystack']['high']}] "
              f"(n={est.n}); {args.full_set} haystacks: "
              f"{line['cpu_hours_full_set']['value']} CPU-hours "
              f"[{line['cpu_hours_full_set']['low']}, {line['cpu_hours_full_set']['high']}]")
    doc = {
        "benchmark": "bench_lme_m",
        "command": "python benchmarks/bench_lme_m.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:])),
        "commit": _git("rev-parse", "HEAD"), "dirty": bool(_git("status", "--porcelain")),
        "machine": {"platform": platform.platform(), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "settings": {"haystacks": len(haystacks), "sessions": args.sessions,
                     "turns_per_session": args.turns, "turn_words": args.turn_words,
                     "turns_per_haystack": turns, "workers": args.workers,
                     "full_set": args.full_set, "seed": args.seed},
        "wall_s": round(wall, 1), "load_end": list(os.getloadavg()),
        "providers": providers,
        "longmemeval": results.get("longmemeval"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"[lme-m] wall {wall / 60:.1f} min; wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
