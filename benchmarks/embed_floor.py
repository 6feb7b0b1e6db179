"""The embedding floor of a LongMemEval-shaped set: what MiniLM alone costs for its turns.

    python benchmarks/embed_floor.py SET.json [--batch 32]

Batch-encodes every haystack's turns (``--batch`` at a time) and each question once, with
the bundled MiniLM that ``simple_rag`` uses, model loaded first, one thread; prints the
process CPU and wall seconds. Divide a bench run's CPU on the same set by it (docs/
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

from sentence_transformers import SentenceTransformer

from nanobot_memory_adapters.local_models import bundled_minilm_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    questions = json.loads(args.set.read_text(encoding="utf-8"))
    model = SentenceTransformer(bundled_minilm_path(extra="mem0", setting="bench"),
                                device="cpu")
    model.encode(["warm up"])
    cpu, wall, turns = time.process_time(), time.perf_counter(), 0
    for q in questions:
        texts = [t["content"] for s in q["haystack_sessions"] for t in s]
        turns += len(texts)
        model.encode(texts, batch_size=args.batch)
        model.encode([q["question"]])
    print(f"{len(questions)} haystacks, {turns} turns: "
          f"CPU {time.process_time() - cpu:.1f} s, wall {time.perf_counter() - wall:.1f} s")


if __name__ == "__main__":
    main()
