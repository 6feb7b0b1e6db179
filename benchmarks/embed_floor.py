"""The embedding floor of a LongMemEval-shaped set: what MiniLM alone costs for its turns.

    python benchmarks/embed_floor.py SET.json [--batch 32] [--runtime both]

Batch-encodes every haystack's turns (``--batch`` at a time) and each question once, with
the bundled MiniLM that ``simple_rag`` uses, model loaded first, one thread; prints the
process CPU and wall seconds. ``--runtime`` picks sentence-transformers, ONNX Runtime
(simple_rag's default, ``nanobot_memory_adapters.onnx_embedder``) or both, interleaved
haystack by haystack, with their ratio. Divide a bench run's CPU on the same set by it (docs/
harness.md, "LongMemEval-S cost"). Not a timed test: run it by hand, on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from nanobot_memory_adapters.local_models import bundled_minilm_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--runtime", choices=("sentence_transformers", "onnx", "onnx_int8",
                                              "both", "all"),
                        default="sentence_transformers",
                        help="both: sentence-transformers and onnx; all: the three")
    args = parser.parse_args()
    questions = json.loads(args.set.read_text(encoding="utf-8"))
    path = bundled_minilm_path(extra="mem0", setting="bench")
    encoders = {}
    if args.runtime in ("sentence_transformers", "both", "all"):
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(path, device="cpu")
        encoders["sentence_transformers"] = (
            lambda texts, model=model: model.encode(texts, batch_size=args.batch))
    if args.runtime in ("onnx", "both", "all"):
        from nanobot_memory_adapters.onnx_embedder import load_onnx_embedder

        onnx = load_onnx_embedder(path, threads=1)
        encoders["onnx"] = onnx.encode  # batches of 32, as sentence-transformers' default
    if args.runtime in ("onnx_int8", "all"):
        from nanobot_memory_adapters.onnx_embedder import load_onnx_embedder

        int8 = load_onnx_embedder(path, threads=1, runtime="onnx_int8")
        encoders["onnx_int8"] = int8.encode
    spent = {name: [0.0, 0.0] for name in encoders}
    for encode in encoders.values():
        encode(["warm up"])
    turns = 0
    for q in questions:
        texts = [t["content"] for s in q["haystack_sessions"] for t in s]
        turns += len(texts)
        for name, encode in encoders.items():
            cpu, wall = time.process_time(), time.perf_counter()
            encode(texts)
            encode([q["question"]])
            spent[name][0] += time.process_time() - cpu
            spent[name][1] += time.perf_counter() - wall
    for name, (cpu, wall) in spent.items():
        print(f"{name}: {len(questions)} haystacks, {turns} turns: "
              f"CPU {cpu:.1f} s, wall {wall:.1f} s")
    names = list(spent)
    for other in names[1:]:  # each against the first, measured interleaved
        (cpu_a, wall_a), (cpu_b, wall_b) = spent[names[0]], spent[other]
        print(f"{other} / {names[0]}: CPU {cpu_b / cpu_a:.2f}, wall {wall_b / wall_a:.2f}")


if __name__ == "__main__":
    main()
