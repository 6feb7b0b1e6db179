"""The bench against its floor, in one process, interleaved: is the harness worth its cost?

    python benchmarks/bench_floor.py [--data PATH] [--sample conv-26] [--rounds 1]
    python benchmarks/bench_floor.py --task longmemeval --data lme-s.json [--sample ID]

Four ways to do the same job on one LoCoMo conversation or one LongMemEval haystack
(``--task longmemeval``: e.g. one made by ``longmemeval_gen.py --questions 1 --sessions
50 --turns 10 --turn-words 200``, S-sized; ingest every turn, then ask every question
once with a 2,000-token budget), run in turn in every round so machine load hits them
alike; wall seconds each, and the ratios:

- ``unit``: the bench unit, ``simple_rag`` (mem0 ``add(infer=False)``, MiniLM, embedded
  Qdrant) through the harness's own ``run_unit`` (test point: the last session; traces
  written), the provider built inside as in a bench;
- ``mem0``: mem0's ``AsyncMemory`` called directly (one ``add`` per turn, one ``search``
  per question, the unit's top_k), without the adapter, harness or query cache;
- ``mem0held`` (with ``--mem0-held``): the same, but the conversation's turns embedded
  first in one batch of mem0's own embedder (``embed_cache.hold``), each ``add`` served
  from it: the least any adapter on mem0 can cost for this job;
- ``loop``: the 30 lines a user would write instead: embedded Qdrant +
  sentence-transformers batch encode, one upsert, the unit's top_k per question, cl100k
  packing up to the budget;
- ``unit1`` (with ``--single-embed``): the bench unit with each turn embedded on its
  own, as before bulk ingest embedded a session's turns in one batch (and no lookahead);
- ``unitpad`` (with ``--padded-batches``): the bench unit with the ONNX embedder batching
  up to 32 texts whatever their lengths (before 2026-11-27: a session's turns ran at the
  longest turn's width; no lookahead, so one session per batch call, as then);
- ``floor``: the embedding work alone: one batch encode of the turns, one encode per
  question, a dot product (model already loaded).

The model load is inside ``unit``, ``mem0`` and ``loop`` (each builds what it needs, as
its user would) and outside ``floor``. Every round starts each contender as a fresh
process would, after the libraries are imported: before round 1 every contender's
imports are done (sentence-transformers and torch for the loop and floor; mem0, Qdrant,
the harness and the cl100k tokenizer for the unit), so whichever runs first does not pay
the others' share; and before each unit the process's query vectors, token counts and
ONNX session are dropped (a unit on its own embeds its questions once and loads its
model; the loop loads its model in every round too). Before 2026-11-28 they were kept, so
the unit's later rounds reused round 1's query vectors.

``--commands K`` also runs whole commands, K times each, interleaved: a fresh process per
run, imports and model loads included (what a user waits for at the shell): ``bench``
(``nanobot-memory bench --providers simple_rag --test-points last`` on the conversation:
the CLI, its manifest, results and report included), ``unit`` (this script running the
unit alone) and ``loop`` (this script running the loop alone).

Each line also shows the process CPU seconds (all threads) of the contender: on a
shared machine the wall ratios move with the load, the CPU ratios much less. Not a
timed test: run it by hand, niced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from _datasets import load_or_refuse  # noqa: E402
from _ratios import ratio_line  # noqa: E402

from nanobot_memory_adapters.backends.mem0.config import (  # noqa: E402
    VERBATIM_ITEM_TOKENS,
    SimpleRagConfig,
)
from nanobot_memory_adapters.contract import ContextBudget  # noqa: E402
from nanobot_memory_adapters.harness.datasets.locomo import Conversation  # noqa: E402
from nanobot_memory_adapters.local_models import bundled_minilm_path  # noqa: E402
from nanobot_memory_adapters.sizing import top_k  # noqa: E402
from nanobot_memory_adapters.store import StoreProvider  # noqa: E402
from nanobot_memory_adapters.tokens import encoding  # noqa: E402

BUDGET = 2000
# what the unit's simple_rag asks mem0 for at this budget (sized as its store sizes it:
# the median verbatim turn, its default ceiling; 60 at 2,000 tokens); the loop and
# mem0-direct ask for as many, so all three rank alike
TOP_K = top_k(ContextBudget(max_tokens=BUDGET), VERBATIM_ITEM_TOKENS,
              SimpleRagConfig.model_fields["top_k_ceiling"].default)


def _texts(conv: Conversation) -> list[str]:
    return [f"{t.speaker}: {t.content}" for t in conv.turns]


def import_every_contender() -> float:
    """Seconds to import what the unit needs beyond the loop (which needs torch and
    sentence-transformers, imported by ``main`` for the floor): done once before the
    rounds, so no round pays another contender's imports."""
    t = time.perf_counter()
    from nanobot_memory_adapters.backends.mem0 import simple_rag_store  # noqa: F401
    from nanobot_memory_adapters.harness.timeline import BenchConfig  # noqa: F401
    from nanobot_memory_adapters.harness.units import run_unit  # noqa: F401
    from nanobot_memory_adapters.telemetry import quiet_mem0

    quiet_mem0()
    import onnxruntime  # noqa: F401
    import qdrant_client  # noqa: F401

    encoding()
    return time.perf_counter() - t


def as_a_new_process() -> None:
    """Drop what the process kept from an earlier unit: query vectors, token counts and
    the ONNX session (a unit run on its own has none of them)."""
    from nanobot_memory_adapters.backends.mem0 import embed_cache
    from nanobot_memory_adapters.onnx_embedder import forget_sessions
    from nanobot_memory_adapters.tokens import clear_token_count_cache

    embed_cache.clear()
    forget_sessions()
    clear_token_count_cache()


async def run_bench_unit(data: Path, conv: Conversation, tmp: Path) -> float:
    from nanobot_memory_adapters.harness.datasets.longmemeval import LmeConversation
    from nanobot_memory_adapters.harness.timeline import BenchConfig
    from nanobot_memory_adapters.harness.units import UnitJob, run_unit

    as_a_new_process()
    t = time.perf_counter()
    task = "longmemeval" if isinstance(conv, LmeConversation) else "locomo"
    cfg = BenchConfig(dataset=data, out=tmp / "out", providers=["simple_rag"],
                      conversations=[conv.sample_id], budget_tokens=BUDGET,
                      test_points="last", task=task)
    job = UnitJob(cfg, "simple_rag", conv, [conv.sessions[-1].number], store_dir=tmp / "store")
    await run_unit(job, tmp / "traces.jsonl")
    return time.perf_counter() - t


@contextlib.contextmanager
def lookahead_off() -> Iterator[None]:
    """The harness with no provider offering ``ingest_lookahead``: each session's turns
    are embedded in their own batch (a bench unit before 2026-11-29)."""
    from nanobot_memory_adapters.harness import locomo_ingest

    # the harness asks ``supports(adapter, "ingest_lookahead")`` (contract.supports) once
    # per session: answering no there is a provider that does not offer it
    kept = locomo_ingest.supports

    def no_lookahead(adapter: object, capability: Any) -> bool:
        return capability != "ingest_lookahead" and kept(adapter, capability)

    locomo_ingest.supports = no_lookahead  # type: ignore[assignment]
    try:
        yield
    finally:
        locomo_ingest.supports = kept


async def run_bench_unit_single_embed(data: Path, conv: Conversation, tmp: Path) -> float:
    from nanobot_memory_adapters.backends.mem0 import Mem0Store

    async def no_batch(self: Mem0Store, events: object) -> tuple[None, list[str]]:
        return None, []  # each add embeds its own turns: no batched vectors

    held = Mem0Store._hold
    Mem0Store._hold = no_batch  # type: ignore[method-assign,assignment]
    try:
        with lookahead_off():  # no batch ahead either
            return await run_bench_unit(data, conv, tmp)
    finally:
        Mem0Store._hold = held  # type: ignore[method-assign]


async def run_bench_unit_padded(data: Path, conv: Conversation, tmp: Path) -> float:
    from nanobot_memory_adapters import onnx_embedder

    kept = onnx_embedder.MIN_FILL, onnx_embedder.BATCH_TOKENS
    # every batch up to BATCH_SIZE texts, however uneven and however long
    onnx_embedder.MIN_FILL, onnx_embedder.BATCH_TOKENS = 0.0, 1 << 30
    try:
        with lookahead_off():  # a session per batch call, as then
            return await run_bench_unit(data, conv, tmp)
    finally:
        onnx_embedder.MIN_FILL, onnx_embedder.BATCH_TOKENS = kept


class _HeldAddsOnly:
    """mem0's embedder with the held batch serving its adds and no query cache (a
    unit run on its own embeds each question once)."""

    def __init__(self, cached: Any) -> None:
        self._cached = cached

    def embed(self, text: Any, memory_action: Any = None) -> Any:
        if memory_action == "add":
            return self._cached.embed(text, memory_action)
        return self._cached._embedder.embed(text, memory_action)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cached, name)


async def run_mem0_direct(conv: Conversation, tmp: Path, held: bool = False) -> float:
    from nanobot_memory_adapters.backends.mem0 import simple_rag_store

    as_a_new_process()
    t = time.perf_counter()
    # only to build mem0's AsyncMemory with its config
    store = simple_rag_store(tmp)
    adapter = StoreProvider(store)
    memory = await store._native()
    if held:  # every turn in one batch first; queries are still embedded one by one
        memory.embedding_model.hold([turn.content for turn in conv.turns])
        memory.embedding_model = _HeldAddsOnly(memory.embedding_model)
    else:
        memory.embedding_model = getattr(memory.embedding_model, "_embedder",
                                         memory.embedding_model)  # mem0's own embedder
    try:
        ids = {"user_id": "p", "run_id": "r"}
        for turn in conv.turns:
            await memory.add([{"role": "user", "content": turn.content, "name": turn.speaker}],
                             **ids, metadata={"event_id": turn.dia_id}, infer=False)
        for q in conv.questions:
            await memory.search(q.question, top_k=TOP_K, filters=ids, threshold=0.1)
    finally:
        await adapter.aclose()
    return time.perf_counter() - t


def run_loop(conv: Conversation, tmp: Path) -> float:
    from qdrant_client import QdrantClient, models
    from sentence_transformers import SentenceTransformer

    t = time.perf_counter()
    model = SentenceTransformer(bundled_minilm_path(extra="mem0", setting="bench"), device="cpu")
    client = QdrantClient(path=str(tmp / "loop-qdrant"))
    client.create_collection("turns", vectors_config=models.VectorParams(
        size=384, distance=models.Distance.COSINE))
    texts = _texts(conv)
    vectors = model.encode(texts, batch_size=64)
    client.upsert("turns", [models.PointStruct(id=str(uuid.uuid4()), vector=v.tolist(),
                                               payload={"text": s})
                            for s, v in zip(texts, vectors, strict=True)])
    enc = encoding()
    for q in conv.questions:
        hits = client.query_points("turns", query=model.encode(q.question).tolist(),
                                   limit=TOP_K).points
        used, section = 0, []
        for hit in hits:
            line = (hit.payload or {})["text"]
            n = len(enc.encode(line))
            if used + n > BUDGET:
                break
            used += n
            section.append(line)
    client.close()
    return time.perf_counter() - t


def run_floor(conv: Conversation, model: object) -> float:
    t = time.perf_counter()
    vectors = model.encode(_texts(conv), batch_size=64, normalize_embeddings=True)  # type: ignore[attr-defined]
    for q in conv.questions:
        query = model.encode(q.question, normalize_embeddings=True)  # type: ignore[attr-defined]
        np.argsort(-(vectors @ query))[:TOP_K]
    return time.perf_counter() - t


def _command(name: str, task: str, data: Path, sample: str, tmp: Path) -> list[str]:
    if name == "bench":
        cli = Path(sys.executable).with_name("nanobot-memory")
        return [str(cli), "bench", "--task", task, "--dataset", str(data), "--conversations",
                sample, "--providers", "simple_rag", "--test-points", "last",
                "--budget-tokens", str(BUDGET), "--out", str(tmp / "out")]
    return [sys.executable, __file__, "--only", name, "--task", task, "--data", str(data),
            "--sample", sample]


def whole_commands(k: int, task: str, data: Path, sample: str) -> None:
    """The bench, the unit and the loop as whole commands, rotating which goes first: a
    fresh process each, imports and model loads included."""
    import resource

    names = ["bench", "unit", "loop"]
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(k):
        for name in names[r % 3:] + names[:r % 3]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                done = subprocess.run(_command(name, task, data, sample, Path(tmp)),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True, check=False)
            if done.returncode:  # a failed command has no time worth comparing
                sys.exit(f"{name} exited {done.returncode}: {done.stderr[-2000:]}")
            wall[name].append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime
                             - before.ru_utime - before.ru_stime)
            print(f"command {r + 1}: {name:<7} {wall[name][-1]:7.1f} s wall "
                  f"{cpu[name][-1]:7.1f} s CPU", flush=True)
    for a in ("bench", "unit"):
        for kind, per in (("wall", wall), ("CPU", cpu)):
            print(ratio_line(f"{a}/loop as whole commands, {kind}",
                             [u / lo for u, lo in zip(per[a], per["loop"], strict=True)],
                             of="runs"))


async def main() -> None:
    parser = argparse.ArgumentParser()
    shared = Path(__file__).resolve().parents[2] / "shared"
    parser.add_argument("--data", type=Path,
                        default=shared / "data" / "locomo" / "locomo7.json")
    parser.add_argument("--task", choices=["locomo", "longmemeval"], default="locomo")
    parser.add_argument("--sample", default=None,
                        help="conversation or haystack id (default: conv-26, or the first)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--single-embed", action="store_true",
                        help="also run the unit with one embedding call per turn (unit1)")
    parser.add_argument("--mem0-held", action="store_true",
                        help="also run mem0 direct with the turns embedded in one batch first")
    parser.add_argument("--padded-batches", action="store_true",
                        help="also run the unit with length-blind ONNX batches (unitpad)")
    parser.add_argument("--commands", type=int, default=0, metavar="K",
                        help="also run the bench, the unit and the loop as whole commands, "
                             "K each")
    parser.add_argument("--only", choices=["unit", "loop"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    data = args.data
    if args.rounds < 1 or args.commands < 0:
        parser.error("--rounds: give 1 or more; --commands: 0 or more")
    conv = load_or_refuse(parser, args.task, data, args.sample)
    if args.only:  # one whole command, timed by the parent
        with tempfile.TemporaryDirectory() as tmp:
            if args.only == "unit":
                await run_bench_unit(data, conv, Path(tmp))
            else:
                run_loop(conv, Path(tmp))
        return
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(bundled_minilm_path(extra="mem0", setting="bench"), device="cpu")
    names = (["unit", "mem0", "loop", "floor"] + (["mem0held"] if args.mem0_held else [])
             + (["unit1"] if args.single_embed else [])
             + (["unitpad"] if args.padded_batches else []))
    times: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    print(f"{conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions")
    print(f"imports the unit needs beyond the loop's, before the rounds: "
          f"{import_every_contender():.1f} s", flush=True)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            c = time.process_time()
            with tempfile.TemporaryDirectory() as tmp:
                if name == "unit":
                    s = await run_bench_unit(data, conv, Path(tmp))
                elif name == "unitpad":
                    s = await run_bench_unit_padded(data, conv, Path(tmp))
                elif name == "unit1":
                    s = await run_bench_unit_single_embed(data, conv, Path(tmp))
                elif name == "mem0":
                    s = await run_mem0_direct(conv, Path(tmp))
                elif name == "mem0held":
                    s = await run_mem0_direct(conv, Path(tmp), held=True)
                elif name == "loop":
                    s = run_loop(conv, Path(tmp))
                else:
                    s = run_floor(conv, model)
            times[name].append(s)
            cpu[name].append(time.process_time() - c)
            print(f"round {r + 1}: {name:<7} {s:7.1f} s wall {cpu[name][-1]:7.1f} s CPU",
                  flush=True)
    if args.rounds >= 2:  # each round's own ratio: the interval says how steady it is
        for a, b in (("unit", "loop"), ("unit", "floor"), ("unit", "unitpad"),
                     ("mem0", "loop"), ("mem0held", "loop"), ("unit", "mem0"),
                     ("unit", "mem0held")):
            if a in cpu and b in cpu:
                for kind, per in (("CPU", cpu), ("wall", times)):
                    print(ratio_line(f"{a}/{b} {kind}",
                                     [x / y for x, y in zip(per[a], per[b], strict=True)]))
    if args.commands:
        whole_commands(args.commands, args.task, data, conv.sample_id)
    best = {k: min(v) for k, v in times.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    print("CPU: " + "  ".join(f"{a}/{b} = {best_cpu[a] / best_cpu[b]:.2f}" for a, b in (
        ("unit", "loop"), ("unit", "mem0"), ("unit", "floor"), ("unit", "unit1"))
        if a in best_cpu and b in best_cpu))
    print("wall:")
    print(f"unit / loop  = {best['unit'] / best['loop']:.2f}")
    print(f"unit / mem0  = {best['unit'] / best['mem0']:.2f}")
    print(f"mem0 / loop  = {best['mem0'] / best['loop']:.2f}")
    print(f"unit / floor = {best['unit'] / best['floor']:.2f}")
    print(f"loop / floor = {best['loop'] / best['floor']:.2f}")
    if "unit1" in best:
        print(f"unit / unit1 = {best['unit'] / best['unit1']:.2f}  (batched / single embed)")
        print(f"unit1 / loop = {best['unit1'] / best['loop']:.2f}")
        print(f"unit1 / floor = {best['unit1'] / best['floor']:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
