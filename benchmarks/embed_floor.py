"""The embedding floor of a LongMemEval-shaped set: what MiniLM alone costs for its turns.

    python benchmarks/embed_floor.py SET.json [--batch 32] [--runtime both]

Batch-encodes every haystack's turns (``--batch`` at a time) and each question once, with
the bundled MiniLM that ``simple_rag`` uses, model loaded first, one thread; prints the
process CPU and wall seconds. ``--runtime`` picks sentence-transformers, ONNX Runtime
(simple_rag's default, ``nanobot_memory_adapters.onnx_embedder``: length-aware batches of
at most 512 padded tokens, whatever ``--batch`` says) or both, interleaved haystack by
haystack, with their ratio. Per runtime it also prints the CPU per haystack with its 95 %
interval and that times ``--extrapolate`` haystacks (500: LongMemEval-S) in CPU-hours:
the least any simple_rag bench on that runtime can cost, since every turn must be
embedded once. Divide a bench run's CPU on the same set by it (`timing.unit_cpu_s`).
Not a timed test: run it by hand, on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from nanobot_memory_adapters.local_models import bundled_minilm_path


def read_set(parser: argparse.ArgumentParser, path: Path) -> list[dict[str, Any]]:
    """The set's questions, or one argparse error naming the file and the shape expected
    (a missing or malformed file is the user's typo, not a traceback)."""
    from nanobot_memory_adapters.json_files import JsonFileError, load_json_file

    fix = "make one with benchmarks/longmemeval_gen.py"
    try:
        data = load_json_file(path, what="LongMemEval-format set", fix=fix)
    except JsonFileError as exc:
        parser.error(str(exc))
    if not isinstance(data, list) or not data:
        parser.error(f"{path}: expected a non-empty JSON list of questions (LongMemEval's "
                     f"layout); {fix}")
    for n, q in enumerate(data):
        sessions = q.get("haystack_sessions") if isinstance(q, dict) else None
        if not (isinstance(q, dict) and isinstance(q.get("question"), str)
                and isinstance(sessions, list)
                and all(isinstance(s, list) and all(isinstance(t, dict)
                                                    and isinstance(t.get("content"), str)
                                                    for t in s) for s in sessions)):
            parser.error(f"{path}: question #{n} is not LongMemEval's layout (a question "
                         "string and haystack_sessions: lists of turns with a content "
                         f"string); {fix}")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--extrapolate", type=int, default=500, metavar="N",
                        help="haystacks the per-haystack CPU is multiplied by (default 500)")
    parser.add_argument("--runtime", choices=("sentence_transformers", "onnx", "onnx_int8",
                                              "both", "all"),
                        default="sentence_transformers",
                        help="both: sentence-transformers and onnx; all: the three")
    args = parser.parse_args()
    if args.batch < 1:
        parser.error(f"--batch {args.batch}: give 1 or more")
    questions = read_set(parser, args.set)
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
        encoders["onnx"] = onnx.encode  # its own length-aware batches (BATCH_TOKENS)
    if args.runtime in ("onnx_int8", "all"):
        from nanobot_memory_adapters.onnx_embedder import load_onnx_embedder

        int8 = load_onnx_embedder(path, threads=1, runtime="onnx_int8")
        encoders["onnx_int8"] = int8.encode
    spent = {name: [0.0, 0.0] for name in encoders}
    per_haystack: dict[str, list[float]] = {name: [] for name in encoders}
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
            per_haystack[name].append(time.process_time() - cpu)
            spent[name][0] += per_haystack[name][-1]
            spent[name][1] += time.perf_counter() - wall
    for name, (cpu, wall) in spent.items():
        print(f"{name}: {len(questions)} haystacks, {turns} turns: "
              f"CPU {cpu:.1f} s, wall {wall:.1f} s")
    if len(questions) >= 2:
        from nanobot_memory_adapters.stats import mean_ci

        for name, values in per_haystack.items():
            est = mean_ci(values)
            hours = args.extrapolate / 3600
            print(f"{name}: CPU per haystack {est.value:.1f} s [{est.low:.1f}, {est.high:.1f}]"
                  f" (95 % bootstrap, n={est.n}); x {args.extrapolate}: "
                  f"{est.value * hours:.2f} CPU-hours [{est.low * hours:.2f}, "
                  f"{est.high * hours:.2f}]")
    names = list(spent)
    for other in names[1:]:  # each against the first, measured interleaved
        (cpu_a, wall_a), (cpu_b, wall_b) = spent[names[0]], spent[other]
        print(f"{other} / {names[0]}: CPU {cpu_b / cpu_a:.2f}, wall {wall_b / wall_a:.2f}")


if __name__ == "__main__":
    main()
