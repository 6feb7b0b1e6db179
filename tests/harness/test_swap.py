"""`nanobot-memory swap`: the design's swap flow end to end, every gate reported, failures
named."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from nanobot_memory_adapters.harness.swap import GATES, run_swap
from tests.harness.conftest import mem0_installed


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nanobot_memory_adapters.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.servers
def test_swap_full_history_json_reports_every_gate(tmp_path):
    out = cli("swap", "--condition", "full_history", "--json", "--data-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] and report["failed_gate"] is None
    assert [g["name"] for g in report["gates"]] == list(GATES)
    status = {g["name"]: g["status"] for g in report["gates"]}
    assert status.pop("readiness") == "not_applicable"  # immediate consistency
    assert set(status.values()) == {"passed"}
    manifest = json.loads((tmp_path / "manifests" / "swap-full_history.json").read_text())
    assert manifest == report["manifest"]
    entry = manifest["provider"]
    assert entry["name"] == "full_history" and entry["condition_kind"] == "control"
    assert len(entry["config_sha256"]) == 64 and "capabilities" in entry
    assert entry["scope_mapping"]["scope_key"] == "swap-smoke-0/smoke-alice"
    assert manifest["seed"] == 0 and "nanobot-ai" in manifest["versions"]
    assert report["cleanup"] == ["reset", "reset", "reset"]


async def test_manifest_hash_is_stable_and_secrets_are_removed(tmp_path, llm_double):
    secret = "sk-swap-test-7f3c9e2a"

    def source(api_key: str) -> dict:
        llm = {"base_url": llm_double.base_url, "api_key": api_key, "model": "double-chat"}
        return {"condition": "rolling_summary", "rolling_summary": {"llm": llm}}

    written = tmp_path / "a" / "manifest.json"
    one = await run_swap(source(secret), data_dir=tmp_path / "a", manifest_path=written)
    two = await run_swap(source("sk-another-key"), data_dir=tmp_path / "b")
    assert one.ok and two.ok
    # The key is no part of the manifest: another key, the same hash.
    assert one.manifest["manifest_sha256"] == two.manifest["manifest_sha256"]
    assert json.loads(written.read_text())["provider"]["config"]["llm"]["api_key"] == "***"
    assert secret not in json.dumps(one.to_dict())
    outputs = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written in outputs
    assert not [p for p in outputs if secret.encode() in p.read_bytes()]
    other = await run_swap(source(secret), data_dir=tmp_path / "c", seed=7)
    assert other.manifest["manifest_sha256"] != one.manifest["manifest_sha256"]


@pytest.mark.parametrize(
    ("provider", "gate", "status", "code"),
    [
        ("leaky", "isolation", "failed", 1),
        ("down", "health", "failed", 1),
        ("gate_leak", "read_only", "failed", 1),
        ("never_ready", "readiness", "pending", 3),
    ],
)
def test_broken_provider_exits_non_zero_naming_the_gate(
    fake_providers, tmp_path, provider, gate, status, code
):
    result = CliRunner().invoke(
        app, ["swap", "--backend", provider, "--json", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == code, result.output
    report = json.loads(result.stdout)
    assert report["failed_gate"] == gate and not report["ok"]
    gates = {g["name"]: g["status"] for g in report["gates"]}
    assert gates[gate] == status
    after = list(GATES)[list(GATES).index(gate) + 1 :]
    assert all(gates[g] == "skipped" for g in after)  # never a green after a failure
    assert gates["manifest"] == "skipped"
    assert f"swap stopped at gate '{gate}'" in result.stderr


def test_unknown_provider_fails_at_instantiate(tmp_path):
    result = CliRunner().invoke(
        app, ["swap", "--condition", "ful_history", "--json", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["failed_gate"] == "instantiate"
    assert "did you mean 'full_history'" in report["gates"][1]["detail"]


def test_table_output_names_each_gate(tmp_path):
    result = CliRunner().invoke(
        app, ["swap", "--condition", "no_memory", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for gate in GATES:
        assert gate in result.stdout
    assert "not_applicable" in result.stdout  # write_read: no_memory stores nothing


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
@pytest.mark.servers
def test_swap_mem0_backend_passes(tmp_path):
    out = cli("swap", "--backend", "mem0", "--json", "--data-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    status = {g["name"]: g["status"] for g in report["gates"]}
    assert status["readiness"] == "passed" and status["write_read"] == "passed"
    assert "bulk_ingest" in report["manifest"]["provider"]["capabilities"]
    # Without an LLM block mem0 is its infer=False ablation, and the swap says so.
    assert report["gates"][1]["data"]["runs_as"] == "simple_rag"
