"""The LoCoMo task's intervals, pairwise verdicts and answer baseline (issues 29 and 30):
in results.json, outside the metrics hash, recomputed by --verify, and an 80-column
terminal table."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from nanobot_memory_adapters.harness import outcome_view
from nanobot_memory_adapters.harness.locomo_stats import baseline_hit, locomo_intervals
from nanobot_memory_adapters.harness.metrics import metrics_sha256
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench
from tests.harness.conftest import LOCOMO7, mem0_installed

HEADLINE = ("turn", "provenance", "answer_lift")


def _locomo7() -> Path:
    return Path(os.environ.get("NANOBOT_MEMORY_LOCOMO") or LOCOMO7)


async def test_results_carry_intervals_and_pairwise_outside_the_hash(locomo_file, tmp_path):
    out = tmp_path / "run"
    outcome = await run_bench(BenchConfig(dataset=locomo_file, out=out, budget_tokens=160,
                                          providers=["no_memory", "full_history"]))
    results = json.loads((out / "results.json").read_text())
    iv = results["intervals"]
    assert iv["level"] == 0.95 and iv["cluster"] == "question" and iv["seed"] == 0
    for name in ("no_memory", "full_history"):
        block = iv["providers"][name]
        for metric in (*HEADLINE, "session", "answer", "answer_baseline"):
            e = block[metric]
            assert e["low"] <= e["value"] <= e["high"] and e["n"] > 0, (name, metric)
        # each interval's value is the figure the providers block reports
        # (categories 1-4: category 5 is apart, never averaged in)
        recall = results["providers"][name]["recall"]
        assert block["turn"]["value"] == recall["categories_1_4"]["turn"]
        answer = results["providers"][name]["recall"]["categories_1_4"]["answer"]
        assert block["answer"]["value"] == answer
        assert block["short_gold"]["n"] + block["long_gold"]["n"] == block["answer"]["n"]
        for c, b in results["providers"][name]["recall"]["by_category"].items():
            assert block["by_category"][c]["turn"]["value"] == b["turn"]
            assert block["by_category"][c]["turn"]["n"] == b["count"]
    (turn,) = iv["pairwise"]["turn"]
    assert (turn["a"], turn["b"]) == ("no_memory", "full_history")
    assert turn["distinguishable"] and turn["verdict"] == "full_history > no_memory"
    assert "saturated" in results["notes"]["session_recall"]
    # the intervals are not in the hash: the providers block alone gives it
    assert results["metrics_sha256"] == metrics_sha256(outcome.results["providers"])
    html = (out / "report.html").read_text()
    assert "Pairwise differences" in html and "no-evidence baseline" in html
    assert "full_history &gt; no_memory" in html


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
@pytest.mark.skipif(not _locomo7().exists(), reason="locomo7.json not present")
async def test_a_locomo_slice_separates_no_memory_from_simple_rag_not_from_itself(tmp_path):
    out = tmp_path / "slice"
    providers = ["no_memory", "simple_rag"]
    await run_bench(BenchConfig(dataset=_locomo7(), out=out, providers=providers,
                                conversations=["conv-26"], max_sessions=4, budget_tokens=500,
                                test_points="last"))
    results = json.loads((out / "results.json").read_text())
    for metric in ("turn", "answer_lift"):
        (d,) = results["intervals"]["pairwise"][metric]
        assert d["distinguishable"] and d["verdict"] == "simple_rag > no_memory", d
        assert d["high"] < 0  # no_memory - simple_rag
    itself = locomo_intervals(out / "traces.jsonl", ["simple_rag", "simple_rag"])
    for metric, (d,) in itself["pairwise"].items():
        assert not d["distinguishable"] and d["verdict"] == "not distinguishable", metric
        assert d["value"] == 0 and d["n"] > 0


def test_baseline_draws_only_turns_without_evidence_up_to_the_point_and_length():
    turns = {"D1:1": (1, "We met in Paris last spring."), "D1:2": (1, "It rained a lot."),
             "D2:1": (2, "Paris again next year?"), "D3:1": (3, "Lisbon was lovely.")}
    ask = {"conversation": "c", "qid": "q1", "point": 2, "gold": "Paris",
           "evidence": ["D1:1"], "tokens": 500}
    assert baseline_hit(ask, turns, 0)  # D2:1 holds the word without being evidence
    assert not baseline_hit({**ask, "evidence": ["D1:1", "D2:1"]}, turns, 0)
    assert not baseline_hit({**ask, "gold": "Lisbon"}, turns, 0)  # session 3 is after point 2
    assert not baseline_hit({**ask, "tokens": 0}, turns, 0)
    assert not baseline_hit({**ask, "tokens": 3}, turns, 0)  # no whole turn fits
    runs = {baseline_hit({**ask, "tokens": 9}, turns, s) for s in range(20)}
    assert runs == {True, False}  # one turn fits: which one depends on the seed


def test_baseline_skips_a_turn_too_long_and_keeps_drawing():
    # the no-evidence context is filled up to the ask's length: a long turn drawn first
    # is skipped, not the end of the draw (it stopped there, so the baseline read low and
    # the lift high)
    from nanobot_memory_adapters.harness.locomo_stats import _order

    long = "A very long account of the weather, the trains and the food. " * 8
    turns = {"D1:1": (1, long), "D1:2": (1, "Paris again next year?")}
    ask = {"conversation": "c", "qid": "q1", "point": 1, "gold": "Paris",
           "evidence": [], "tokens": 20}
    long_first = [s for s in range(20) if _order(turns, "c", "q1", 1, (), s)[0] == "D1:1"]
    assert long_first  # the case the old loop got wrong is drawn
    assert all(baseline_hit(ask, turns, s) for s in range(20))


def test_verify_recomputes_the_intervals(locomo_file, tmp_path, monkeypatch):
    from nanobot_memory_adapters.harness import locomo_stats

    args = ["bench", "--dataset", str(locomo_file), "--providers", "no_memory,full_history",
            "--budget-tokens", "200", "--test-points", "last", "--verify"]
    ok = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "ok")])
    assert ok.exit_code == 0 and "verified" in ok.stderr, ok.output
    real = locomo_stats.locomo_intervals

    def seeded_elsewhere(*a, **kw):
        return real(*a, **{**kw, "seed": 1})

    monkeypatch.setattr(locomo_stats, "locomo_intervals", seeded_elsewhere)
    bad = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 1 and "differs for: intervals" in bad.stderr, bad.output


async def test_terminal_output_fits_80_columns(locomo_file, tmp_path, monkeypatch):
    names = ["no_memory", "full_history", "rolling_summary"]
    outcome = await run_bench(BenchConfig(dataset=locomo_file, out=tmp_path / "w",
                                          providers=names, budgets=[160, 80]))
    results = outcome.results
    wide = Console(width=250)
    tables = [outcome_view.comparison_table(results, "syn-1: evidence recall at 160 tokens"),
              outcome_view.pairwise_table(results), outcome_view.cost_table(results),
              outcome_view.budget_table(results["budgets"])]
    for table in tables:  # laid out at their natural width, not squeezed
        assert table is not None
        assert wide.measure(table).maximum <= 80, table.title
    # printed where the terminal (or a pipe) is 80 columns: nothing wider, nothing cut
    term = Console(width=80, record=True, force_terminal=False)
    monkeypatch.setattr(outcome_view, "console", term)
    skipped = [{"name": "graphiti", "reason": "needs an LLM (extraction/derivation); "
                "configure one to include it, or run bench --providers graphiti with it"}]
    outcome_view.print_outcome(SimpleNamespace(
        results=results, manifest=outcome.manifest, out=tmp_path / "w",
        skipped=skipped, wall_s=1.0, resumed_units=0, resumed_mid_unit=0),
        "syn-1: evidence recall at 160 tokens (judge-free)")
    text = term.export_text()
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80, text
    assert "…" not in text, text
    for heading in ("turn recall", "prov. recall", "answer lift", "not dist.", "A / B"):
        assert heading in text


def test_a_bound_that_rounds_to_zero_is_never_negative_zero():
    """A bootstrap bound of -1e-9 (a zero lift) was stored as -0.0 and printed -0.00."""
    from nanobot_memory_adapters.harness.locomo_stats import _dump  # pyright: ignore[reportPrivateUsage]
    from nanobot_memory_adapters.stats import Estimate

    dumped = _dump(Estimate(value=0.0, low=-1e-9, high=1e-9, n=10, method="bootstrap"))
    assert f"{dumped['low']:+.2f}" == "+0.00" and f"{dumped['value']:+.3f}" == "+0.000"


def test_clustered_zeros_are_never_a_point_interval():
    """A trivial provider's all-zero figure over 50 asks in 10 conversations: the
    harness's estimate must keep the statistics module's Wilson floor (it once forced the
    plain bootstrap, which gives [0, 0] for any n)."""
    from nanobot_memory_adapters.harness.estimates import ci_cell, estimate

    e = estimate([0.0] * 50, [f"conv-{i % 10}" for i in range(50)])
    assert e is not None and e["high"] > 0.05 and "wilson" in e["method"], e
    assert ci_cell({**e, "low": -0.0026}, signed=True).count("-") == 0
