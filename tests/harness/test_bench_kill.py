"""Fault test: ``bench`` killed for real (SIGKILL, SIGINT) in the middle of a unit, then
run again with the same command, gives the uninterrupted run's metrics hash, or, where
the kill cut a session short and the unit went on mid-way, names that session and keeps
every context it could keep (docs/harness.md: such a unit's replayed session draws other
ids, and two memories of equal score can then swap at the edge of the top k)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness.conftest import synthetic_locomo

# The module's clean run (clean) is computed once, on one worker.
pytestmark = [pytest.mark.xdist_group("bench_kill"), pytest.mark.long(150), pytest.mark.servers]

PROVIDERS = "full_history,simple_rag"


def bench(dataset: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nanobot_memory_adapters.cli", "bench", "--dataset",
         str(dataset), "--providers", PROVIDERS, "--budget-tokens", "160", "--out", str(out),
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a shell's background job (``&``, nohup, some CI runners) ignores SIGINT and its
        # children inherit that: this test's own SIGINT must reach bench as Ctrl-C does
        preexec_fn=sigint_default,
    )


def sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def finished(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    results = json.loads(out)
    for name, m in results["providers"].items():
        assert not any(m["failures"].values()), (name, m["failures"])
    return results


def _asks(out: Path) -> dict[tuple[str, str, str, int], str]:
    """Every ask's context, by (provider, conversation, question, point)."""
    rows = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    return {(r["provider"], r["conversation"], r["question_id"], r["point"]): r["context_sha256"]
            for r in rows if r.get("kind") == "ask"}


def assert_resumed_like_clean(results: dict, out: Path, clean: Clean) -> None:
    """The uninterrupted run's hash, unless a unit went on in the middle of a session:
    then that session is named (results, notes, checkpoint), and every context but those
    asked from the cut session on is the uninterrupted run's."""
    cut = results["timing"].get("replayed_cut_sessions")
    if not cut:
        assert results["metrics_sha256"] == clean.hash
        return
    assert "resume" in results["notes"]
    units = json.loads((out / "checkpoint.json").read_text())["units"]
    assert {k: u["replayed_cut_sessions"] for k, u in units.items()
            if u.get("replayed_cut_sessions")} == cut
    first_cut = {tuple(k.split("::")): min(v) for k, v in cut.items()}
    asks, clean_asks = _asks(out), _asks(clean.out)
    assert asks.keys() == clean_asks.keys()
    kept = [k for k in asks if k[3] < first_cut.get((k[0], k[1]), 10**6)]
    assert kept and len(kept) < len(asks)
    assert [asks[k] for k in kept] == [clean_asks[k] for k in kept]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("locomo") / "locomo-synthetic.json"
    path.write_text(json.dumps(synthetic_locomo()), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Clean:
    hash: str
    out: Path


@pytest.fixture(scope="module")
def clean(dataset, tmp_path_factory) -> Clean:
    out = tmp_path_factory.mktemp("clean") / "out"
    return Clean(finished(bench(dataset, out))["metrics_sha256"], out)


def _wait_for_record(out: Path, provider: str, proc: subprocess.Popen[str]) -> None:
    """Until a unit of ``provider`` has recorded a turn (its own trace file, units/)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert proc.poll() is None, "bench finished before the kill point"
        for traces in (out / "units").glob(f"{provider}__*.jsonl"):
            for line in traces.read_text(encoding="utf-8").splitlines():
                if '"kind": "record"' in line and f'"provider": "{provider}"' in line:
                    return
        time.sleep(0.01)
    raise AssertionError(f"no {provider} record within 300 s")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
@pytest.mark.parametrize("provider", ["full_history", "simple_rag"])
def test_killed_bench_resumes_to_the_uninterrupted_results(dataset, clean, tmp_path, sig,
                                                           provider):
    pytest.importorskip("mem0")
    out = tmp_path / "out"
    proc = bench(dataset, out)
    _wait_for_record(out, provider, proc)
    os.kill(proc.pid, sig)
    proc.communicate(timeout=120)
    assert proc.returncode != 0  # it really stopped mid-run
    checkpoint = json.loads((out / "checkpoint.json").read_text())
    assert not checkpoint["complete"]
    assert_resumed_like_clean(finished(bench(dataset, out)), out, clean)


def test_a_unit_killed_mid_way_goes_on_after_its_last_finished_session(
    dataset, clean, tmp_path
):
    """SIGKILL once a simple_rag unit has finished a session (its progress file is
    there): the run started again keeps that unit's store and traces, records the cut
    session again (mem0 is asked for each turn first, so none is stored twice) and
    gives the uninterrupted run's results (or names the session it cut)."""
    pytest.importorskip("mem0")
    out = tmp_path / "out"
    proc = bench(dataset, out)
    deadline = time.monotonic() + 300
    while not list((out / "units").glob("simple_rag__*.progress.json")):
        assert proc.poll() is None, "bench finished before the kill point"
        assert time.monotonic() < deadline, "no simple_rag session finished within 300 s"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert_resumed_like_clean(finished(bench(dataset, out)), out, clean)
    units = json.loads((out / "checkpoint.json").read_text())["units"]
    assert [k for k, u in units.items() if u.get("resumed_after_sessions")], units.keys()
    records = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    turns = [(r["provider"], r["event_id"]) for r in records if r.get("kind") == "record"]
    assert len(turns) == len(set(turns))
