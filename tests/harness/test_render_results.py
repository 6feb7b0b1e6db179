"""docs/results.md's recall-at-scale and privacy sections, rendered from result files."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _step(p50: float, ratio: list[float] | None = None) -> dict:
    step = {"retrieve": {"n": 40, "p50_ms": [p50, p50 - 1, p50 + 1]},
            "ingest": {"turns": 10, "seconds": 1.0, "turns_per_s": 100.0}}
    if ratio:
        step["ratio_to_alone"] = ratio
    return step


def test_scale_and_fuzz_files_render_with_intervals_and_totals(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    scale = {
        "benchmark": "bench_recall_scale", "command": "python benchmarks/bench_recall_scale.py",
        "commit": "abcdef1234567", "date": "2026-12-05T12:00:00+00:00",
        "machine": {"cores": 2, "mem_mib": 24576, "platform": "Linux", "python": "3.11"},
        "settings": {"queries": 40, "budget_tokens": 2000, "alone_own": 200},
        "load_start": [0.5, 0.4, 0.3],
        "results": {"bm25": {"own": {"1000": _step(2.0), "20000": _step(9.5)},
                             "others": {"alone": _step(1.5),
                                        "20x20000": _step(1.6, [1.07, 0.9, 1.2])}},
                    "simple_rag": {"own": {"1000": _step(20.0),
                                           "20000": {"skipped": "--cap simple_rag=1000"}},
                                   "others": {}}},
        "targets": [{"target": "p50 <= 40 ms at 20000 own turns", "provider": "bm25",
                     "value": 9.5, "met": True},
                    {"target": "p50 <= 40 ms at 20000 own turns", "provider": "simple_rag",
                     "value": None, "met": None}],
    }
    (results / "recall_scale-x.json").write_text(json.dumps(scale))
    for seed, episodes, complete, leaks in ((1, 100, True, []), (2, 50, False, [{"x": 1}])):
        (results / f"privacy-fuzz-{seed}.json").write_text(json.dumps({
            "seed": seed, "provider": "full_history", "group_recall": "none",
            "episodes": episodes, "requests_checked": 10 * episodes,
            "replies_checked": 9 * episodes, "canaries": 3 * episodes, "leaks": leaks,
            "complete": complete, "commit": "abc1234", "date": "2026-12-05T10:00:00Z"}))
    (results / "lme_m_shape-x.json").write_text(json.dumps({
        "benchmark": "bench_lme_m", "command": "python benchmarks/bench_lme_m.py",
        "commit": "abcdef1234567", "date": "2026-12-05T13:00:00+00:00", "wall_s": 600.0,
        "machine": {"cores": 2, "platform": "Linux", "python": "3.11"},
        "settings": {"haystacks": 6, "sessions": 500, "turns_per_haystack": [5000, 5010],
                     "workers": 2, "full_set": 500},
        "providers": {"bm25": {"cpu_s_per_haystack": {"value": 20.0, "low": 18.0,
                                                      "high": 22.0, "n": 6},
                               "cpu_hours_full_set": {"value": 2.78, "low": 2.5,
                                                      "high": 3.06, "haystacks": 500}}}}))
    md = tmp_path / "results.md"
    spec = importlib.util.spec_from_file_location(
        "render_results", REPO / "benchmarks" / "render_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--results-dir", str(results), "--out", str(md)])
    text = md.read_text()
    assert "| `bm25` | 2.0 [1.0, 3.0] (100/s) | 9.5 [8.5, 10.5] (100/s) |" in text
    assert "| `simple_rag` | 20.0 [19.0, 21.0] (100/s) | skipped |" in text
    assert "| `bm25` | 1.5 [0.5, 2.5] | 1.6 [0.6, 2.6] (x1.07 [0.90, 1.20]) |" in text
    assert "- `bm25`: p50 <= 40 ms at 20000 own turns: met (9.5)" in text
    assert "- `simple_rag`: p50 <= 40 ms at 20000 own turns: not measured" in text
    assert "| 2 | `full_history` | none | 50 (stopped early) | 500 |" in text
    assert "| `bm25` | 20.0 [18.0, 22.0] (6) | 2.78 [2.5, 3.06] |" in text
    assert "| all | | | 150 | 1,500 | 1,350 | 450 | 1 | | |" in text


def test_a_pair_s_difference_reads_as_its_verdict_winner_minus_loser():
    """The stored difference is a - b whichever won; the line says winner > loser, so
    its figure is the winner's score minus the loser's, never a negative 'lead'."""
    spec = importlib.util.spec_from_file_location(
        "render_results", REPO / "benchmarks" / "render_results.py")
    assert spec and spec.loader
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    b_won = {"a": "no_memory", "b": "bm25", "difference": -0.938, "low": -0.98,
             "high": -0.88, "n": 113, "verdict": "bm25 > no_memory"}
    a_won = {**b_won, "difference": 0.25, "low": 0.1, "high": 0.4,
             "verdict": "no_memory > bm25"}
    assert render._winner_minus_loser(b_won) == "+0.938 [+0.88, +0.98]"
    assert render._winner_minus_loser(a_won) == "+0.250 [+0.10, +0.40]"


def _module(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.servers  # the summary reads the commit with git
def test_a_preferences_run_becomes_a_result_file_and_a_table(tmp_path, capsys):
    """A finished preferences run (the ideal reader here; a real model's run is read the
    same way) becomes one result file whose table gives each provider's n, behaviour
    with its interval, what the replies did, and the pairwise verdicts; an unfinished run
    is refused with one line."""
    from typer.testing import CliRunner

    from nanobot_memory_adapters.cli import app

    run = tmp_path / "run"
    argv = ["preferences", "run", "--personas", "3", "--agent", "ideal-reader",
            "--providers", "no_memory,oracle_ipas", "--persona-cap", "no_memory=2",
            "--out", str(run)]
    assert CliRunner().invoke(app, argv).exit_code == 0
    summarize = _module("preferences_result")
    results = tmp_path / "results"
    assert summarize.main(["--run", str(tmp_path / "nothing"), "--command", "x",
                           "--results-dir", str(results)]) == 2
    assert "no preferences run results in" in capsys.readouterr().err
    bench_like = tmp_path / "bench"  # results and a manifest, but not a preferences run's
    bench_like.mkdir()
    (bench_like / "results.json").write_text(json.dumps({"schema": "other"}))
    (bench_like / "manifest.json").write_text(json.dumps({"kind": "bench"}))
    assert summarize.main(["--run", str(bench_like), "--command", "x",
                           "--results-dir", str(results)]) == 2
    assert "not a preferences run's results" in capsys.readouterr().err
    assert summarize.main(["--run", str(run), "--command", "don't", "--results-dir",
                           str(results)]) == 2
    assert "--command" in capsys.readouterr().err
    assert summarize.main(["--run", str(run), "--command", "nanobot-memory " + " ".join(
        argv), "--results-dir", str(results), "--label", "a test run"]) == 0
    doc = json.loads((results / "preferences_real.json").read_text())
    assert "--out OUT" in doc["command"] and str(tmp_path) not in doc["command"]
    assert isinstance(doc["dirty"], bool) and doc["complete"] is True
    oracle, none = doc["providers"]["oracle_ipas"], doc["providers"]["no_memory"]
    assert (oracle["personas"], none["personas"]) == (3, 2)
    assert oracle["tests"] == 36 and none["tests"] == 24
    assert oracle["behaviour"]["n"] == 36 and oracle["behaviour"]["low"] is not None
    [pair] = doc["pairwise"]
    assert pair["n"] == 24 and pair["verdict"] == "oracle_ipas > no_memory"
    assert pair["mcnemar_p"] < 0.05 and pair["by_persona"]["verdict"] == pair["verdict"]
    # which code finished each unit, where and when (a run resumes across commits)
    rc = doc["run_code"]
    assert rc["units"] == rc["units_recorded"] == 5 and len(rc["revisions"]) == 1
    assert rc["revisions"][0].startswith("0.") and rc["first_finished"] <= rc["last_finished"]
    # no_memory's section is empty in every test; oracle's never (it shows the gold)
    assert none["empty_memory"] == none["scored_tests"] == 24
    assert oracle["empty_memory"] == 0 and oracle["scored_tests"] == 36
    # by persona: 3 personas are too few to cluster (the cell says so)
    assert oracle["behaviour_by_persona"]["n_clusters"] is None
    md = tmp_path / "results.md"
    _module("render_results").main(["--results-dir", str(results), "--out", str(md)])
    text = md.read_text()
    assert "## Behaviour in preference sessions" in text and "**a test run**" in text
    assert "### Preference sessions, the ideal reader" in text
    assert "`no_memory` on the first 2 personas" in text
    assert f"the attribute's default in {doc['default_rate']:.3f} of the scenario" in text
    assert 0 < doc["default_rate"] < 1
    row = next(line for line in text.splitlines() if line.startswith("| `oracle_ipas`"))
    assert "| 3 | 36 |" in row and "[" in row
    assert "| not estimable (3 personas) |" in row and "| 0 of 36 |" in row
    assert "units recorded their code: `0." in text
    assert "its memory section was empty" not in text  # no_memory stores nothing by design
    assert "- oracle_ipas > no_memory (+" in text and "n 24; p " in text
    assert "**Partial**" not in text
    # what the run can separate, read from its own figures
    acts = oracle["acts"]
    named = acts["current"] + acts["other"] + acts["both"]
    assert oracle["named_value"]["n"] == 36 and oracle["named_value"]["value"] == named / 36
    assert oracle["current_when_named"]["n"] == named
    assert oracle["current_when_named"]["low"] <= oracle["current_when_named"]["value"]
    [exposure] = doc["exposure_pairwise"]
    assert exposure["verdict"] == "oracle_ipas > no_memory"  # the ideal reader's memory shows
    assert "- what memory showed (current exposure): 1 of 1 pairs apart: oracle_ipas >" in text
    assert "- what the replies did (behaviour): 1 of 1 pairs apart" in text
    none = sum(p["acts"]["none"] for p in doc["providers"].values())
    assert f"named none of the attribute's values: {none} of 60" in text
    assert f"(n {named})" in row  # current when named says its own n
    # a stopped run's partial results read the same way, marked partial
    (run / "results.json").rename(run / "results.partial.json")
    partial = json.loads((run / "results.partial.json").read_text())
    # every failure kind the exit code counts shows in the table (a gate that leaked too)
    partial["providers"]["no_memory"]["failures"]["gate_violations"] = 2
    # a provider with no behaviour score (every test failed): its n is "–", not its tests
    overall = partial["providers"]["no_memory"]["scores"]["overall"]
    overall["ci"]["behaviour"] = overall["ci_by_attribute"]["behaviour"] = None
    (run / "results.partial.json").write_text(json.dumps({**partial, "complete": False}))
    assert summarize.main(["--run", str(run), "--command", "x", "--results-dir",
                           str(results)]) == 0
    assert json.loads((results / "preferences_real.json").read_text())["complete"] is False
    _module("render_results").main(["--results-dir", str(results), "--out", str(md)])
    assert "**Partial**: the run was stopped" in md.read_text()
    row = next(line for line in md.read_text().splitlines()
               if line.startswith("| `no_memory`"))
    assert row.endswith("| gate_violations 2 |"), row
    assert "| 2 | – | – |" in row, row  # personas 2, n –, behaviour –


def test_a_derived_memory_empty_in_every_test_is_said_to_have_produced_nothing():
    """nanobot's Dream on a small model wrote no MEMORY.md: rolling_summary's section was
    empty in all its tests, and its row read like a weak memory. The page says its row is
    the model without memory; a pair apart by attribute but not by persona, or whose
    McNemar p does not reach 0.05, says why it is not distinguishable."""
    render = _module("render_results")
    doc = {"providers": {
        "rolling_summary": {"memory_form": "derived", "scored_tests": 48, "empty_memory": 48},
        "mem0": {"memory_form": "derived", "scored_tests": 24, "empty_memory": 3},
        "no_memory": {"memory_form": "none", "scored_tests": 24, "empty_memory": 24}}}
    [line, _] = render._empty_rows(doc)
    assert line.startswith("- `rolling_summary`: its memory section was empty in all 48")
    row = {"a": "x", "b": "y", "low": 0.002, "high": 0.45, "mcnemar_p": 0.125}
    assert "McNemar's p does not reach 0.05" in render._why_not_apart(row)
    by_persona = {"verdict": "not distinguishable", "n_clusters": 9}
    assert "not by persona" in render._why_not_apart(
        row | {"mcnemar_p": 0.01, "by_persona": by_persona})
    assert "unclustered" in render._why_not_apart(
        row | {"mcnemar_p": 0.01, "by_persona": by_persona | {"n_clusters": None}})
    # a result file written before by-persona verdicts counted: no reason is made up
    assert render._why_not_apart(row | {"mcnemar_p": None}) == ""
    assert render._why_not_apart(row | {"low": -0.1}) == ""


def test_the_preference_table_says_what_its_run_could_not_separate():
    """Pairs not apart give their intervals' median width (about the smallest difference
    this n could have separated), and a run whose replies mostly named no value says so."""
    render = _module("render_results")
    pair = {"a": "x", "b": "y", "n": 24, "verdict": "not distinguishable"}
    doc = {"providers": {"x": {"acts": {"current": 1, "other": 0, "both": 0, "none": 23}},
                         "y": {"acts": {"current": 2, "other": 1, "both": 0, "none": 21}}},
           "pairwise": [pair | {"difference": -0.04, "low": -0.2, "high": 0.1},
                        pair | {"a": "y", "b": "x", "difference": 0.04, "low": -0.5,
                                "high": 0.6}],
           "exposure_pairwise": [pair | {"verdict": "y > x", "difference": -0.9,
                                         "low": -1.0, "high": -0.8}]}
    text = "\n".join(render._separates(doc))
    assert "0 of 2 pairs apart; the intervals of the pairs not apart are a median ±0.55 " \
           "wide (n 24 to 24)" in text
    assert "1 of 1 pairs apart: y > x (+0.900 [+0.80, +1.00])" in text
    assert "named none of the attribute's values: 44 of 48 (0.92)" in text


@pytest.mark.parametrize(("setup", "said"), [
    ("missing", "--results-dir {dir} does not exist"),
    ("invalid-json", "{dir}/bad.json: not a readable JSON result file"),
    ("not-an-object", "{dir}/list.json: a result file holds one JSON object, not a list"),
], ids=["missing", "invalid-json", "not-an-object"])
def test_a_results_dir_it_cannot_render_is_refused_and_the_page_is_kept(tmp_path, capsys,
                                                                        setup, said):
    """A missing --results-dir (a typo) used to write an empty page over docs/results.md
    with exit 0, and a broken result file was a JSONDecodeError traceback naming no
    file: each is one usage error naming the directory or the file, exit 2, and the
    page already there is left as it was."""
    results = tmp_path / "results"
    if setup != "missing":
        results.mkdir()
        (results / "good.json").write_text(json.dumps({"schema": "other"}))
    if setup == "invalid-json":
        (results / "bad.json").write_text("{not json")
    if setup == "not-an-object":
        (results / "list.json").write_text("[1, 2]")
    md = tmp_path / "results.md"
    md.write_text("the page as it was\n")
    with pytest.raises(SystemExit) as stopped:
        _module("render_results").main(["--results-dir", str(results), "--out", str(md)])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert said.format(dir=results) in err.strip().splitlines()[-1]
    assert "Traceback" not in err
    assert md.read_text() == "the page as it was\n"
