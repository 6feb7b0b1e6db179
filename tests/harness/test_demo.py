"""`nanobot-memory demo`: the README's main job, here on a small synthetic file."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness.conftest import mem0_installed

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers


def test_demo_runs_swap_then_bench_and_prints_the_table(locomo_file, tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nanobot_memory_adapters.cli",
            "demo",
            "--dataset",
            str(locomo_file),
            "--conversation",
            "syn-1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    assert "swap flow" in text and "comparison" in text
    for name in ("no_memory", "full_history"):
        assert (out / "swap" / name / "manifest.json").is_file()
    results = json.loads((out / "results.json").read_text())
    ran = list(results["providers"])
    expected = ["no_memory", "full_history"] + (["simple_rag"] if mem0_installed() else [])
    assert ran == expected
    for name in ran:
        assert name in text
    # Providers outside the demo are listed with a reason, never crash it.
    for name in ("graphiti", "honcho", "memos", "rolling_summary"):
        assert f"skipped {name}:" in text
    assert "LLM" in text
    # the whole demo fits an 80-column terminal, nothing cut: the LoCoMo headline with
    # intervals and pairwise verdicts, and the preference headline with its own
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80, text
    assert "…" not in text
    locomo, prefs_part = text.split("4. preference sessions")
    assert "answer lift" in locomo and "A / B" in locomo
    assert "behaviour" in prefs_part and "current exp." in prefs_part
    assert "A / B" in prefs_part and "[" in prefs_part  # verdicts and 95 % intervals
    assert results["providers"]["full_history"]["recall"]["overall"]["turn"] > 0
    assert (out / "report.html").is_file()
    # 4. the generated preference set for the controls (retrieval only, no model)
    assert "preference sessions" in text
    prefs = json.loads((out / "preferences" / "results.json").read_text())
    oracle = prefs["providers"]["oracle_ipas"]["scores"]["overall"]
    assert oracle["current_exposure"] == 1.0
    assert prefs["providers"]["no_memory"]["scores"]["overall"]["current_exposure"] == 0.0
    assert (out / "preferences" / "report.html").is_file()
    # The SDKs' own chatter is not on the console, but kept in the DEBUG log file.
    for noise in ("Loading weights", "UserWarning", "spaCy", "fastembed", "Deprecat"):
        assert noise not in proc.stderr, proc.stderr[-2000:]
    if mem0_installed():
        log = (out / "debug.log").read_text(encoding="utf-8")
        assert "Payload indexes have no effect" in log
