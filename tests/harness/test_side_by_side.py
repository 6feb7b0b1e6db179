"""``benchmarks/side_by_side.py`` and ``benchmarks/render_results.py`` end to end on the LLM
double: both tables' result files (quality with intervals and verdicts, cost from the
meter, what reproduces them) and docs/results.md rendered from them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.conftest import mem0_installed

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.servers, pytest.mark.long(60)]


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
def test_side_by_side_runs_both_tables_meters_the_model_and_renders(tmp_path, llm_double,
                                                                    locomo_file):
    out, results = tmp_path / "run", tmp_path / "results"
    cmd = [sys.executable, str(REPO / "benchmarks" / "side_by_side.py"), "run",
           "--llm-base-url", llm_double.base_url, "--llm-model", "double",
           "--providers", "no_memory,full_history,mem0,honcho", "--locomo", str(locomo_file),
           "--conversation", "syn-1", "--sessions", "2",
           "--lme-questions", "2", "--lme-sessions", "3", "--meter-port", "0",
           "--out", str(out), "--results-dir", str(results), "--label", "LLM double smoke"]
    env = {**os.environ, "OPENAI_API_KEY": "k"}
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    # honcho was asked for and skipped (no server): exit 4 as bench's, results still written
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "skipped honcho: no --honcho-url" in run.stderr
    docs = {t: json.loads((results / f"side_by_side_{t}.json").read_text())
            for t in ("locomo", "lme")}
    for task, doc in docs.items():
        assert doc["schema"] == "nanobot-memory-side-by-side/1" and doc["task"] == task
        assert doc["label"] == "LLM double smoke" and "side_by_side.py run" in doc["command"]
        assert len(doc["commit"]) == 40 and doc["machine"]["cpus"] and doc["date"]
        assert list(doc["providers"]) == ["no_memory", "full_history", "mem0"]
        assert [s["name"] for s in doc["skipped"]] == ["honcho"]
        assert "no --honcho-url" in doc["skipped"][0]["reason"]
        mem0, none = doc["providers"]["mem0"]["cost"], doc["providers"]["no_memory"]["cost"]
        # mem0's extraction went through the meter; a control calls no model
        assert mem0["llm"]["chat_calls"] > 0 and mem0["llm"]["chat_calls_per_turn"] > 0
        assert mem0["llm"]["failed_calls"] == 0 and mem0["recorded_turns"] > 0
        assert none["llm"]["chat_calls"] == 0 and none["recorded_turns"] == mem0[
            "recorded_turns"]
        for p in doc["providers"].values():
            assert p["cost"]["retrieve_ms"]["n"] > 0 and p["cost"]["ingest_s"] is not None
        assert all(r["verdict"] for rows in doc["pairwise"].values() for r in rows)
    q = docs["locomo"]["providers"]["full_history"]["quality"]
    assert q["turn_recall"]["n"] > 0 and q["turn_recall"]["low"] <= q["turn_recall"]["value"]
    lme = docs["lme"]["providers"]["full_history"]["quality"]
    assert lme["session_any_shown"]["n"] == 2 and lme["answer_recall"]["value"] == 1.0
    assert {"session_any_shown", "answer_recall"} <= set(docs["lme"]["pairwise"])
    # each table's meter calls are its own (the two runs' windows do not overlap)
    meter = [json.loads(line) for line in (out / "llm_meter.jsonl").read_text().splitlines()]
    chats = sum(1 for c in meter if c["label"] == "mem0" and c["kind"] == "chat")
    assert chats == sum(d["providers"]["mem0"]["cost"]["llm"]["chat_calls"]
                        for d in docs.values())

    md = tmp_path / "results.md"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "render_results.py"),
                    "--results-dir", str(results), "--out", str(md)], check=True, cwd=REPO)
    text = md.read_text()
    assert text.index("## LoCoMo syn-1, first 2 sessions") < text.index(
        "## LongMemEval-shaped generated set (2 questions x 3 sessions)")
    assert text.count("**LLM double smoke**") == 2 and "`honcho`: no --honcho-url" in text
    assert "| `mem0` | derived |" in text and "LLM calls / turn" in text
    assert "Pairwise verdicts on answer lift" in text

    # without the meter's log the cost of a model-backed memory is unknown, not 0
    (out / "llm_meter.jsonl").unlink()
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "side_by_side.py"),
                    "summarize", "--out", str(out), "--results-dir", str(results)],
                   check=True, cwd=REPO, capture_output=True)
    again = json.loads((results / "side_by_side_locomo.json").read_text())
    assert again["providers"]["mem0"]["cost"]["llm"] is None
    assert "not pointed at the run's meter" in again["providers"]["mem0"]["cost"]["llm_note"]
    assert again["date"] == docs["locomo"]["date"]  # the run's date, not the summary's


def test_leave_out_reaches_the_bench_commands_of_the_providers_it_names(tmp_path):
    """``--leave-out``: the same run without a provider too slow for the time at hand
    (bench lists it as skipped and resumes it in a run without the option)."""
    import argparse
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "side_by_side", REPO / "benchmarks" / "side_by_side.py")
    assert spec and spec.loader
    sbs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sbs)

    class Meter:
        def url_for(self, label: str) -> str:
            return f"http://127.0.0.1:1/u/{label}"

    args = argparse.Namespace(
        out=tmp_path, workers=1, readiness_timeout=60.0, locomo=tmp_path / "l.json",
        conversation="conv-26", sessions=5, judge=False, leave_out="graphiti,honcho")
    cmd = sbs.bench_command("locomo", args, Meter(), tmp_path / "p.json",
                            ["no_memory", "mem0", "graphiti"])
    assert cmd[cmd.index("--leave-out") + 1] == "graphiti"  # honcho is not in this run
    args.leave_out = ""
    assert "--leave-out" not in sbs.bench_command("locomo", args, Meter(),
                                                  tmp_path / "p.json", ["no_memory"])


def test_a_recorded_command_carries_no_machine_paths(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "side_by_side", REPO / "benchmarks" / "side_by_side.py")
    assert spec and spec.loader
    sbs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sbs)
    monkeypatch.chdir(tmp_path)  # the run's --out given relative to here
    command = (f"{REPO}/benchmarks/side_by_side.py run --out {tmp_path / 'run'} "
               "--memos-home /srv/somewhere/memos --label 'a b'")
    assert sbs.portable(command, Path("run")) == (
        "benchmarks/side_by_side.py run --out OUT --memos-home PATH --label 'a b'")


def test_a_bench_that_stopped_before_its_results_is_said_in_one_line(tmp_path, monkeypatch,
                                                                     capsys):
    """A unit whose provider could not be built ends bench with exit 4 before any results:
    the run says how to go on and exits non-zero, with no traceback from the summary."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "side_by_side", REPO / "benchmarks" / "side_by_side.py")
    assert spec and spec.loader
    sbs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sbs)
    calls: list[list[str]] = []
    real = subprocess.run

    def bench(cmd, **kwargs):
        if "bench" not in cmd:
            return real(cmd, **kwargs)
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 4)  # failed before writing results.json

    monkeypatch.setattr(sbs.subprocess, "run", bench)
    code = sbs.main(["run", "--tasks", "lme", "--providers", "no_memory",
                     "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m",
                     "--lme-questions", "2", "--lme-sessions", "3", "--meter-port", "0",
                     "--out", str(tmp_path / "run"), "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 4 and len(calls) == 1
    assert "lme: bench exited 4 without results" in err and "rerun the same command" in err
    assert "Traceback" not in err and not (tmp_path / "r").exists()


def test_summarize_where_no_run_is_says_so(tmp_path, capsys):
    """``summarize --out`` a folder with no run (a typo) printed nothing and exited 0, as
    if it had summarized: it is one usage error naming --out, exit 2, no results file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "side_by_side", REPO / "benchmarks" / "side_by_side.py")
    assert spec and spec.loader
    sbs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sbs)
    results = tmp_path / "results"
    with pytest.raises(SystemExit) as stopped:
        sbs.main(["summarize", "--out", str(tmp_path / "no-run"), "--results-dir",
                  str(results)])
    assert stopped.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"--out {tmp_path / 'no-run'}: no side-by-side run there" in last
    assert not results.exists()
