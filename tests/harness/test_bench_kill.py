"""Fault test: ``bench`` killed for real (SIGKILL, SIGINT) in the middle of a unit, then
run again with the same command, gives the same metrics hash as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.conftest import synthetic_locomo

# The module's clean run (clean_hash) is computed once, on one worker.
pytestmark = [pytest.mark.xdist_group("bench_kill"), pytest.mark.long(150), pytest.mark.servers]

PROVIDERS = "full_history,simple_rag"


def bench(dataset: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nanobot_memory_adapters.cli", "bench", "--dataset",
         str(dataset), "--providers", PROVIDERS, "--budget-tokens", "160", "--out", str(out),
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def metrics_hash(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    results = json.loads(out)
    for name, m in results["providers"].items():
        assert not any(m["failures"].values()), (name, m["failures"])
    return results["metrics_sha256"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("locomo") / "locomo-synthetic.json"
    path.write_text(json.dumps(synthetic_locomo()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def clean_hash(dataset, tmp_path_factory) -> str:
    return metrics_hash(bench(dataset, tmp_path_factory.mktemp("clean") / "out"))


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
def test_killed_bench_resumes_to_the_same_hash(dataset, clean_hash, tmp_path, sig, provider):
    pytest.importorskip("mem0")
    out = tmp_path / "out"
    proc = bench(dataset, out)
    _wait_for_record(out, provider, proc)
    os.kill(proc.pid, sig)
    proc.communicate(timeout=120)
    assert proc.returncode != 0  # it really stopped mid-run
    checkpoint = json.loads((out / "checkpoint.json").read_text())
    assert not checkpoint["complete"]
    assert metrics_hash(bench(dataset, out)) == clean_hash


def test_a_unit_killed_mid_way_goes_on_after_its_last_finished_session(
    dataset, clean_hash, tmp_path
):
    """SIGKILL once a simple_rag unit has finished a session (its progress file is
    there): the run started again keeps that unit's store and traces, records the cut
    session again (mem0 is asked for each turn first, so none is stored twice) and
    gives the uninterrupted run's metrics."""
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
    assert metrics_hash(bench(dataset, out)) == clean_hash
    units = json.loads((out / "checkpoint.json").read_text())["units"]
    assert [k for k, u in units.items() if u.get("resumed_after_sessions")], units.keys()
    records = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    turns = [(r["provider"], r["event_id"]) for r in records if r.get("kind") == "record"]
    assert len(turns) == len(set(turns))
