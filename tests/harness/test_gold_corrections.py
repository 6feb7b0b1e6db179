"""Audited LoCoMo (issue 30): --gold-corrections applies a corrections file in the
locomo-audit layout; the manifest records it; an entry that matches no question is
counted and named; category 5 (adversarial) is reported apart, never averaged in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from nanobot_memory_adapters.harness.datasets.gold_corrections import (
    apply_corrections,
    load_corrections,
)
from nanobot_memory_adapters.harness.datasets.locomo import DatasetError, load_locomo
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench
from nanobot_memory_adapters.tracing import read_traces
from tests.harness.conftest import synthetic_locomo


def _entry(qid: str, question: str, gold: str, correct: str, error_type: str,
           cited: list[str], correct_evidence: list[str], category: int = 4) -> dict:
    """One entry exactly as locomo-audit's errors.json writes it (all nine fields)."""
    return {"question_id": qid, "question": question, "golden_answer": gold,
            "category": category, "error_type": error_type, "cited_evidence": cited,
            "correct_evidence": correct_evidence, "reasoning": "written for this test",
            "correct_answer": correct}


@pytest.fixture
def audited(tmp_path) -> tuple[Path, Path]:
    """The synthetic file under the sample ids the audit's locomo_0 / locomo_1 name, and a
    corrections file: 2 entries that apply, 4 that match nothing (each for its own reason)."""
    data = synthetic_locomo()
    data[0]["sample_id"], data[1]["sample_id"] = "conv-26", "conv-30"
    dataset = tmp_path / "locomo-audited.json"
    dataset.write_text(json.dumps(data), encoding="utf-8")
    entries = [
        # an answer correction (conv-26 question 0)
        _entry("locomo_0_qa0", "What is the name of Alice's greyhound?", "Pistachio",
               "Pistachio the three-legged greyhound", "HALLUCINATION", ["D1:1"], ["D1:1"]),
        # a citation-only correction: same answer, other evidence (conv-26 question 4)
        # (its correct_answer carries a remark, as 21 of the audit's 57 do: not a gold)
        _entry("locomo_0_qa4", "Which instrument is Bob learning?", "bassoon",
               "bassoon (answer is correct, citation is wrong)", "WRONG_CITATION",
               ["D:2:01"], ["D2:1", "D4:2"]),
        # other question text at that index
        _entry("locomo_0_qa1", "When did Alice move to Wellington?", "early June 2023",
               "June 2023", "TEMPORAL_ERROR", ["D2:3"], ["D2:3"], 2),
        # a conversation this run does not have (locomo_2 = conv-41)
        _entry("locomo_2_qa0", "Anything?", "x", "y", "AMBIGUOUS", [], []),
        # the gold answer differs from the file's
        _entry("locomo_1_qa0", "Where is Chen's pottery class?", "Osaka", "Kyoto, Japan",
               "ATTRIBUTION_ERROR", ["D1:1"], ["D1:1"]),
        # a question that was never placed (no evidence in the dataset)
        _entry("locomo_0_qa3", "Would Alice enjoy hiking?", "likely", "unclear",
               "AMBIGUOUS", [], [], 3),
    ]
    corrections = tmp_path / "errors.json"
    corrections.write_text(json.dumps(entries, indent=2), encoding="utf-8")
    return dataset, corrections


def test_matching_entries_change_gold_and_evidence_the_rest_are_counted(audited):
    dataset, corrections = audited
    convs, record = apply_corrections(load_locomo(dataset), corrections)
    q = {x.index: x for x in convs[0].questions}
    assert q[0].answer == "Pistachio the three-legged greyhound"
    assert q[0].evidence == ("D1:1",)
    assert q[4].answer == "bassoon" and q[4].evidence == ("D2:1", "D4:2")
    assert q[4].ready_after == 4  # placed by its corrected evidence
    assert record["entries"] == 6 and record["applied"] == 2 and record["not_matched"] == 4
    assert record["answers_changed"] == 1 and record["evidence_changed"] == 1
    assert record["applied_by_error_type"] == {"HALLUCINATION": 1, "WRONG_CITATION": 1}
    named = {u["question_id"]: u["reason"] for u in record["not_matched_examples"]}
    assert set(named) == {"locomo_0_qa1", "locomo_2_qa0", "locomo_1_qa0", "locomo_0_qa3"}
    assert "other text" in named["locomo_0_qa1"]
    assert "conv-41 is not in this run" in named["locomo_2_qa0"]
    assert "gold answer differs" in named["locomo_1_qa0"]
    assert "no placed question #3" in named["locomo_0_qa3"]
    assert sum(record["not_matched_reasons"].values()) == 4
    untouched = load_locomo(dataset)
    assert {x.index: x for x in untouched[0].questions}[0].answer == "Pistachio"


async def test_bench_records_the_corrections_in_the_manifest_and_asks_the_corrected_gold(
        audited, tmp_path):
    dataset, corrections = audited
    out = tmp_path / "run"
    outcome = await run_bench(BenchConfig(dataset=dataset, out=out, budget_tokens=160,
                                          providers=["full_history"],
                                          gold_corrections=corrections))
    manifest = json.loads((out / "manifest.json").read_text())
    rec = manifest["dataset"]["gold_corrections"]
    import hashlib

    assert rec["sha256"] == hashlib.sha256(corrections.read_bytes()).hexdigest()
    assert (rec["applied"], rec["not_matched"], rec["file"]) == (2, 4, "errors.json")
    asks = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "ask"]
    golds = {r["question_id"]: r.get("gold") for r in asks}
    assert golds["conv-26:q0"] == "Pistachio the three-legged greyhound"
    # another corrections file (or none) is another run: the manifest hash differs
    plain = await run_bench(BenchConfig(dataset=dataset, out=tmp_path / "plain",
                                        budget_tokens=160, providers=["full_history"]))
    assert plain.manifest["manifest_sha256"] != outcome.manifest["manifest_sha256"]
    assert "gold_corrections" not in plain.manifest["dataset"]


def test_cli_reports_applied_and_unmatched_and_refuses_bad_input(audited, tmp_path):
    dataset, corrections = audited
    runner = CliRunner()
    res = runner.invoke(app, ["bench", "--dataset", str(dataset), "--providers", "no_memory",
                              "--out", str(tmp_path / "cli"), "--gold-corrections",
                              str(corrections), "--budget-tokens", "160", "--verify"])
    assert res.exit_code == 0, res.output
    assert "2 of 6 applied" in res.output and "4 matched no question" in res.output
    assert "verified" in res.output  # the corrected golds are what the traces carry
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "conv-26:q0", "question": "q",
                                "correct_answer": "a"}]))
    res = runner.invoke(app, ["bench", "--dataset", str(dataset), "--providers", "no_memory",
                              "--out", str(tmp_path / "bad"), "--gold-corrections", str(bad)])
    assert res.exit_code == 2 and "locomo_<conversation>_qa<index>" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["bench", "--task", "longmemeval", "--dataset", str(dataset),
                              "--out", str(tmp_path / "lme"), "--gold-corrections",
                              str(corrections)])
    assert res.exit_code == 2 and "--gold-corrections" in res.output


def test_loader_refuses_what_is_not_the_audit_layout(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"locomo_0_qa0": "x"}))
    with pytest.raises(DatasetError, match="JSON list") as refused:
        load_corrections(p)
    assert str(refused.value).endswith("got a JSON object")  # not "{type(data).__name__}"
    p.write_text("5")
    with pytest.raises(DatasetError, match=r"got a JSON number$"):
        load_corrections(p)
    p.write_text(json.dumps([{"question_id": "locomo_0_qa0", "question": "q"}]))
    with pytest.raises(DatasetError, match="correct_answer"):
        load_corrections(p)
    with pytest.raises(DatasetError, match="no such file"):
        load_corrections(tmp_path / "missing.json")


async def test_category_5_is_reported_apart_never_averaged_into_the_headline(
        locomo_file, tmp_path):
    out = tmp_path / "run"
    await run_bench(BenchConfig(dataset=locomo_file, out=out, budget_tokens=160,
                                providers=["full_history"]))
    results = json.loads((out / "results.json").read_text())
    rec = results["providers"]["full_history"]["recall"]
    block = results["intervals"]["providers"]["full_history"]
    assert rec["by_category"]["5"]["count"] > 0  # the fixture has an adversarial question
    # the headline interval is the categories 1-4 figure, not the all-categories one
    assert block["turn"]["value"] == rec["categories_1_4"]["turn"]
    assert block["turn"]["n"] == rec["categories_1_4"]["count"]
    assert block["category_5"]["n"] == rec["by_category"]["5"]["count"]
    assert block["category_5"]["turn"]["value"] == rec["by_category"]["5"]["turn"]
    assert "category 5" in results["intervals"]["categories"]
    ranked = results["ranked_at_k"]
    assert "category_5" in json.dumps(ranked)
