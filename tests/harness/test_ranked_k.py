"""LoCoMo ranked retrieval at fixed k (``results["ranked_at_k"]``): the provider's own
ranking, any@k / strict@k at k = 1, 5, 10, category 5 apart, recomputed from traces."""

from __future__ import annotations

import json

import pytest

from nanobot_memory_adapters.harness.ranked_k import recompute_from_traces
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench

pytest.importorskip("bm25s")


async def test_ranked_at_k_on_the_synthetic_file(locomo_file, tmp_path):
    out = await run_bench(BenchConfig(dataset=locomo_file, out=tmp_path / "run",
                                      providers=["no_memory", "bm25"]))
    block = out.results["ranked_at_k"]["providers"]
    none = block["no_memory"]["categories_1_4"]
    assert none["turn_any@10"]["value"] == 0.0 and none["session_strict@1"]["value"] == 0.0
    bm25 = block["bm25"]["categories_1_4"]
    assert "category_5" in block["bm25"]  # reported apart, never averaged in
    for k in (1, 5, 10):
        est = bm25[f"turn_any@{k}"]
        assert 0.0 <= est["low"] <= est["value"] <= est["high"] <= 1.0
        assert bm25[f"turn_strict@{k}"]["value"] <= est["value"]
        assert bm25[f"session_any@{k}"]["value"] >= est["value"]  # a turn hit is a session hit
    assert bm25["turn_any@10"]["value"] >= bm25["turn_any@1"]["value"]
    # an independent reading of turn any@1 from the trace alone: the first ranked item's
    # event id names its turn (locomo-<sample>-D<s>-<t>)
    asks = [json.loads(line) for line in (out.out / "traces.jsonl").open()
            if '"kind": "ask"' in line]
    last = {}
    for a in asks:
        last[a["unit"]] = max(last.get(a["unit"], 0), a["point"])
    hits = []
    for a in asks:
        if a["provider"] != "bm25" or a["point"] != last[a["unit"]] or a["category"] == 5:
            continue
        first = (a["ranked_sources"] or [[None]])[0] or [None]
        turn = first[0].rsplit("-", 2) if first[0] else None
        dia = f"{turn[1]}:{turn[2]}" if turn else None
        hits.append(float(dia in a["evidence"]))
    assert bm25["turn_any@1"]["value"] == pytest.approx(sum(hits) / len(hits))
    assert bm25["turn_any@1"]["n"] == len(hits) == bm25["questions"]
    again = recompute_from_traces(out.out / "traces.jsonl")
    assert again == block


def test_ranked_at_k_clusters_by_conversation_only_from_min_conversations():
    # one rule for every block (harness/estimates.py): fewer than MIN_CONVERSATIONS
    # conversations are resampled by question (0/1 values: Wilson), more by conversation
    from nanobot_memory_adapters.harness.estimates import MIN_CONVERSATIONS
    from nanobot_memory_adapters.harness.ranked_k import summarize

    def rows(convs: int) -> list[tuple[str, int, dict[str, float | None]]]:
        return [(f"conv-{i % convs}", 1, {"turn_any@1": float(i % 2)}) for i in range(20)]

    few = summarize(rows(MIN_CONVERSATIONS - 1))["categories_1_4"]["turn_any@1"]
    many = summarize(rows(MIN_CONVERSATIONS))["categories_1_4"]["turn_any@1"]
    assert few["method"] == "wilson" and few["n"] == 20
    # clustered 0/1 values keep the Wilson floor (stats.mean_ci): never narrower
    assert many["method"] == "cluster-bootstrap+wilson" and many["n"] == 20
