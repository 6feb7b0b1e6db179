"""Wall time of an LLM-bound bench at N = 1, 2, 4, 8 workers, and that the metrics hash
does not move with N.

mem0 with extraction and Graphiti, both on the deterministic LLM double (a separate
process, 127.0.0.1) answering every chat call after ``--latency-ms`` (default 300, the
order of a real hosted endpoint), over the first 3 sessions of the 7 LoCoMo
conversations. Each N runs ``nanobot-memory bench --workers N`` from scratch. Reports
wall time, speedup over N = 1 and the metrics hash of each run (a benchmark, not a
timed test).

    python benchmarks/bench_workers.py [--workers 1,2,4,8] [--latency-ms 300]
        [--providers graphiti,mem0] [--max-sessions 3] [--out bench-out/workers] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_double(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.llm_double", "--port", str(port),
         "--latency-ms", str(latency_ms)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()  # printed once it listens
    if not url:
        raise SystemExit("the LLM double did not start")
    return proc, url


def run(n: int, args: argparse.Namespace, url: str) -> dict[str, object]:
    out = Path(args.out) / f"workers-{n}"
    blocks = {name: {"llm": {"base_url": url, "model": "double", "api_key": "k"}}
              for name in args.providers.split(",")}
    config = Path(args.out) / "providers.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(blocks))
    cmd = [sys.executable, "-m", "nanobot_memory_adapters.cli", "bench",
           "--providers", args.providers, "--provider-config", str(config),
           "--max-sessions", str(args.max_sessions), "--out", str(out), "--fresh",
           "--workers", str(n), "--json"]
    if args.conversations:
        cmd += ["--conversations", args.conversations]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
        raise SystemExit(f"bench --workers {n} exited {done.returncode}")
    results = json.loads(done.stdout)
    units = sum(len(m["conversations"]) for m in results["providers"].values())
    return {"workers": n, "wall_s": round(wall, 1), "units": units,
            "metrics_sha256": results["metrics_sha256"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--providers", default="graphiti,mem0")  # slowest first
    parser.add_argument("--max-sessions", type=int, default=3)
    parser.add_argument("--conversations", default=None, help="sample ids (default: all 7)")
    parser.add_argument("--out", default="bench-out/workers")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    double, url = start_double(args.latency_ms)
    rows = []
    try:
        for n in [int(x) for x in args.workers.split(",")]:
            rows.append(run(n, args, url))
            print(f"workers={rows[-1]['workers']} wall {rows[-1]['wall_s']}s", file=sys.stderr)
    finally:
        double.terminate()
        double.wait(10)
    base = float(rows[0]["wall_s"])  # type: ignore[arg-type]
    for row in rows:
        row["speedup"] = round(base / float(row["wall_s"]), 2)  # type: ignore[arg-type]
    same = len({row["metrics_sha256"] for row in rows}) == 1
    if args.json:
        print(json.dumps({"latency_ms": args.latency_ms, "rows": rows,
                          "same_metrics_hash": same}, indent=2))
        return
    print(f"LLM double at {args.latency_ms:.0f} ms per chat call; providers {args.providers}; "
          f"first {args.max_sessions} sessions of each conversation")
    print(f"{'workers':>8} {'units':>6} {'wall s':>8} {'speedup':>8}  metrics")
    for row in rows:
        print(f"{row['workers']:>8} {row['units']:>6} {row['wall_s']:>8} {row['speedup']:>8}  "
              f"{str(row['metrics_sha256'])[:12]}")
    print("metrics hash identical for every N" if same else "METRICS HASH DIFFERS ACROSS N")


if __name__ == "__main__":
    main()
