"""Recall that can see what extracting architectures store: provenance and answer recall,
the speaker protocols, and a bench that says when writes or reads failed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from nanobot_memory_adapters.contract import ContextBudget
from nanobot_memory_adapters.formatting import compose_sections, split_budget
from nanobot_memory_adapters.harness.metrics import (
    answer_forms,
    answer_present,
    kendall_tau,
    normalize_answer,
    provenance_counts,
    recall_block,
)
from nanobot_memory_adapters.harness.timeline import run_bench
from nanobot_memory_adapters.tokens import count_tokens
from nanobot_memory_adapters.tracing import read_traces
from tests.harness.conftest import mem0_installed
from tests.harness.test_bench import assert_recall_recomputes, assert_within_budget, config


def test_answer_forms_and_presence():
    assert answer_forms("7 May 2023") == ["7 may 2023", "2023 05 07"]
    assert answer_forms("May 7, 2023")[-1] == "2023 05 07"
    assert answer_forms("June 2023")[-1] == "2023 06"
    assert answer_forms(2022) == ["2022"] and answer_forms(None) == []
    context = normalize_answer("- [2023-05-07 13:56] User adopted Pistachio, a greyhound.")
    assert answer_present("Pistachio", context)
    assert answer_present("7 May 2023", context)
    assert not answer_present("Pist", context)  # whole words only
    assert not answer_present("8 May 2023", context)


def test_provenance_counts_and_na():
    dia = {"e1": "D1:1", "e2": "D1:2", "e3": "D2:1"}
    counts = provenance_counts(["D1:1", "D2:1"], [["e1", "e2"], None], dia)
    assert counts == {"prov_hits": 1, "prov_items": 2, "prov_items_known": 1, "prov_sources": 2}
    ask = {"n_evidence": 2, "turn_recall": 0.0, "session_recall": 0.0, "answer_hit": None}
    # Items shown, none could say where it came from: n/a, never 0.
    blind = recall_block([{**ask, "prov_hits": 0, "prov_items": 3, "prov_items_known": 0}])
    assert blind["provenance"] is None
    # Nothing shown at all (no_memory): a true 0.
    empty = recall_block([{**ask, "prov_hits": 0, "prov_items": 0, "prov_items_known": 0}])
    assert empty["provenance"] == 0.0
    seen = recall_block([{**ask, **counts}])
    assert seen["provenance"] == 0.5 and seen["answer"] is None


def test_kendall_tau():
    assert kendall_tau([0.1, 0.2, 0.3], [0.2, 0.5, 0.9]) == 1.0
    assert kendall_tau([0.1, 0.2, 0.3], [0.9, 0.5, 0.2]) == -1.0
    assert kendall_tau([0.1], [0.2]) is None


def test_split_budget_and_compose_fit_exactly():
    """Two sections rendered apart at their shares compose to one within the budget."""
    from nanobot_memory_adapters.contract import RetrievedItem
    from nanobot_memory_adapters.formatting import render_context

    budget = ContextBudget(max_tokens=300)
    parts = [("Alice's memory", "run/syn-1-Alice"), ("Bob's memory", "run/syn-1-Bob")]
    shares = split_budget(budget, "simple_rag", "run/syn-1", parts)
    sections = []
    for (label, scope), share in zip(parts, shares, strict=True):
        items = [RetrievedItem(text=f"{label} line {i} " + "word " * 20) for i in range(40)]
        rendered = render_context(backend="simple_rag", scope=scope, items=items, budget=share)
        assert rendered.token_count <= share.max_tokens
        assert rendered.text.split("\n")[1:-1] == "\n".join(rendered.lines).split("\n")
        sections.append((label, rendered.lines))
    text, complete = compose_sections("simple_rag", "run/syn-1", sections, 300)
    assert complete and count_tokens(text) <= 300
    assert text.count("<memory-context ") == 1 and text.count("</memory-context>") == 1
    assert "## Alice&#x27;s memory" in text or "## Alice's memory" in text
    assert compose_sections("simple_rag", "run/syn-1", [("A", ()), ("B", ())], 300) == ("",
                                                                                       True)
    with pytest.raises(TypeError, match="lines"):  # a rendered text is not its lines
        compose_sections("simple_rag", "run/syn-1", [("A", text)], 300)


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
async def test_extracting_mem0_is_seen_by_provenance_and_answer_recall(
    locomo_file, tmp_path, llm_double
):
    """mem0 with extraction rewrites turns ("I adopted..." -> "User adopted..."): turn
    recall cannot see it, provenance and answer recall can, and every metric recomputes
    from traces alone."""
    block = {"llm": {"base_url": llm_double.base_url, "model": "double", "api_key": "k"}}
    out = tmp_path / "mem0"
    outcome = await run_bench(config(
        locomo_file, out, ["mem0", "simple_rag", "static_profile", "no_memory"],
        budget_tokens=400, provider_configs={
            "mem0": block, "static_profile": {"profile": "Alice likes dogs."}},
    ))
    results = outcome.results
    mem0 = results["providers"]["mem0"]
    assert sum(mem0["failures"].values()) == 0
    assert mem0["memory_form"] == "derived" and "not comparable" in mem0["metrics_apply"]["turn"]
    # Alice's own facts are rewritten: turn text barely survives, provenance sees them.
    assert mem0["recall"]["overall"]["provenance"] > mem0["recall"]["overall"]["turn"]
    assert mem0["recall"]["overall"]["provenance"] > 0.3
    assert mem0["recall"]["categories_1_4"]["answer"] > 0
    assert mem0["provenance"]["coverage"] == 1.0
    rag = results["providers"]["simple_rag"]
    assert rag["memory_form"] == "verbatim" and rag["recall"]["overall"]["provenance"] >= \
        rag["recall"]["overall"]["turn"]
    # A provider that shows items but cannot say where they come from: n/a, never 0.
    profile = results["providers"]["static_profile"]
    assert profile["recall"]["overall"]["provenance"] is None
    assert profile["provenance"]["coverage"] == 0.0
    assert results["providers"]["no_memory"]["recall"]["overall"]["provenance"] == 0.0
    assert_recall_recomputes(out, results)
    asks = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "ask"
            and r["provider"] == "mem0"]
    assert asks and all("shown_sources" in r and "gold" in r for r in asks)
    assert "provenance recall" in (out / "report.html").read_text()


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
async def test_dual_speaker_protocol(locomo_file, tmp_path):
    out = tmp_path / "dual"
    outcome = await run_bench(config(
        locomo_file, out, ["simple_rag", "full_history"], budget_tokens=300, speakers="dual"))
    manifest, results = outcome.manifest, outcome.results
    assert manifest["settings"]["speakers"] == "dual"
    assert "dual" in manifest["settings"]["turn_event"]
    records = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "record"
               and r["provider"] == "simple_rag" and r["conversation"] == "syn-1"]
    personas = {r["persona"] for r in records}
    assert personas == {"syn-1-Alice", "syn-1-Bob"}
    d11 = [r for r in records if r["dia_id"] == "D1:1"]
    assert sorted(r["event_id"] for r in d11) == ["locomo-syn-1-D1-1@Alice",
                                                  "locomo-syn-1-D1-1@Bob"]
    # an image turn's record line carries what was stored (its caption too); others don't
    image = next(r for r in records if r["dia_id"] == "D1:4")
    assert image["content"] == image["text"] + " [shares a photo: a photo of a mural]"
    assert all("content" not in r for r in d11)
    for m in results["providers"].values():
        assert sum(m["failures"].values()) == 0
    rag = results["providers"]["simple_rag"]
    assert rag["recall"]["overall"]["turn"] > 0.3
    contexts = [r["context"] for r in read_traces(out / "traces.jsonl")
                if r.get("kind") == "ask" and r.get("context") and r["provider"] == "simple_rag"]
    assert any("## Alice" in c and "## Bob" in c for c in contexts)
    assert_within_budget(out, results)
    assert_recall_recomputes(out, results)


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
def test_bench_exits_4_and_prints_counts_when_writes_fail(locomo_file, tmp_path, llm_double):
    """An extraction cut at max_tokens stores nothing: the bench must not exit 0."""
    cfg = tmp_path / "providers.json"
    cfg.write_text(json.dumps({"mem0": {"llm": {
        "base_url": llm_double.base_url, "model": "double", "api_key": "k", "max_tokens": 5}}}))
    args = ["bench", "--dataset", str(locomo_file), "--providers", "mem0,no_memory",
            "--provider-config", str(cfg), "--budget-tokens", "200", "--test-points", "last",
            "--conversations", "syn-2", "--out", str(tmp_path / "fail")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 4, result.output
    assert "mem0" in result.stderr and "record=" in result.stderr
    results = json.loads((tmp_path / "fail" / "results.json").read_text())
    assert results["providers"]["mem0"]["failures"]["record"] == 4
    assert results["providers"]["no_memory"]["failures"]["record"] == 0
    statuses = {r["status"] for r in read_traces(tmp_path / "fail" / "traces.jsonl")
                if r.get("kind") == "record" and r["provider"] == "mem0"}
    assert statuses == {"failed"}
