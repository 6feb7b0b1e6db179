"""LongMemEval-S cost, extrapolated: the bench unit against its embedding floor,
haystack by haystack, in one process.

    python benchmarks/longmemeval_gen.py lme-s.json --questions 19 --sessions 50 \
        --turns 10 --turn-words 200
    python benchmarks/bench_lme_cost.py lme-s.json [--haystacks 20] [--extrapolate 500]

Per haystack, in an order that alternates:

- ``unit``: the bench unit, ``simple_rag`` on its default embedder (MiniLM on ONNX
  Runtime), through the harness's own ``run_unit`` (every turn ingested, the question
  asked at the last session, traces written), as a fresh process would run it (no query
  vectors, token counts or ONNX session kept from the haystack before);
- ``unit0`` (with ``--without-lookahead``): the same unit with the harness's
  ``ingest_lookahead`` off (each session's turns embedded in their own batch, the code
  before 2026-11-29);
- ``floor``: what no bench on that embedder can skip: the haystack's turns batch-encoded
  by the same embedder, and the question once (model already loaded).

Printed: process CPU of each per haystack; the mean CPU per haystack of each with its
95 % bootstrap interval and that times ``--extrapolate`` haystacks in CPU-hours; and the
mean of the per-haystack ratios unit / floor with its interval. Not a timed test: run it
by hand on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

from bench_floor import (  # the same unit, the same reset
    as_a_new_process,
    lookahead_off,
    run_bench_unit,
)

from nanobot_memory_adapters.harness.datasets.locomo import DatasetError
from nanobot_memory_adapters.harness.datasets.longmemeval import load_longmemeval
from nanobot_memory_adapters.local_models import bundled_minilm_path
from nanobot_memory_adapters.onnx_embedder import load_onnx_embedder
from nanobot_memory_adapters.stats import mean_ci


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("--haystacks", type=int, default=20)
    parser.add_argument("--extrapolate", type=int, default=500, metavar="N")
    parser.add_argument("--without-lookahead", action="store_true",
                        help="also run the unit without ingest_lookahead (unit0)")
    args = parser.parse_args()
    if not args.set.is_file():
        print(f"error: no such set {args.set}; make one with benchmarks/longmemeval_gen.py",
              file=sys.stderr)
        return 2
    if args.haystacks < 1 or args.extrapolate < 1:
        parser.error("--haystacks and --extrapolate: give 1 or more")
    try:
        haystacks = load_longmemeval(args.set)[: args.haystacks]
    except DatasetError as exc:
        parser.error(str(exc))
    model = load_onnx_embedder(bundled_minilm_path(extra="mem0", setting="bench"))
    model.encode(["warm up"])
    names = ["unit", "floor"] + (["unit0"] if args.without_lookahead else [])
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for i, conv in enumerate(haystacks):
        for name in names[i % len(names):] + names[:i % len(names)]:
            started = time.process_time()
            if name in ("unit", "unit0"):
                ahead = contextlib.nullcontext() if name == "unit" else lookahead_off()
                with tempfile.TemporaryDirectory() as tmp, ahead:
                    await run_bench_unit(args.set, conv, Path(tmp))
                as_a_new_process()
            else:
                model.encode([t.content for t in conv.turns])
                for q in conv.questions:
                    model.encode([q.question])
            cpu[name].append(time.process_time() - started)
        print(f"{conv.sample_id}: {len(conv.turns)} turns; " + ", ".join(
            f"{name} {cpu[name][-1]:.1f} s CPU" for name in names), flush=True)
    if len(haystacks) < 2:
        print("one haystack: no interval")
        return 0
    hours = args.extrapolate / 3600
    for name, values in cpu.items():
        est = mean_ci(values)
        print(f"{name}: {est.value:.1f} s CPU per haystack [{est.low:.1f}, {est.high:.1f}] "
              f"(n={est.n}); x {args.extrapolate}: {est.value * hours:.2f} CPU-hours "
              f"[{est.low * hours:.2f}, {est.high * hours:.2f}]")
    for a, b in (("unit", "floor"), ("unit0", "floor"), ("unit", "unit0")):
        if a in cpu and b in cpu:
            ratio = mean_ci([x / y for x, y in zip(cpu[a], cpu[b], strict=True)])
            print(f"{a} / {b}, CPU: {ratio.value:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] "
                  f"(mean of {ratio.n} haystacks, 95 % bootstrap)")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
