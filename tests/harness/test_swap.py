"""`nanobot-memory swap`: the design's swap flow end to end, every gate reported, failures
named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from nanobot_memory_adapters.contract import Readiness
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


def test_bad_data_dir_and_manifest_paths_are_one_line_before_any_gate(tmp_path):
    """A file as --data-dir ran every gate, then "NotADirectoryError: .../manifests" (exit
    1); a folder as --manifest ended in IsADirectoryError; a user's own file given as
    --manifest was overwritten with the manifest (exit 0)."""
    a_file, notes = tmp_path / "a-file", tmp_path / "notes.txt"
    a_file.write_text("x\n")
    notes.write_text("my notes, not a manifest\n")
    cases = [
        (["--data-dir", str(a_file)], f"--data-dir {a_file} is a file"),
        (["--manifest", str(tmp_path)], f"--manifest {tmp_path}: is a directory"),
        (["--manifest", str(a_file / "m.json")], f"its folder {a_file} is a file"),
        (["--manifest", str(notes)], f"--manifest {notes}: the file there is not a swap "
                                     "manifest"),
    ]
    for args, said in cases:
        result = CliRunner().invoke(app, ["swap", "--condition", "no_memory", *args])
        assert result.exit_code == 2, result.output
        assert result.stdout == "" and said in result.stderr, result.stderr  # no gate ran
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert notes.read_text() == "my notes, not a manifest\n"
    # a manifest an earlier swap wrote is replaced, as before
    again = ["swap", "--condition", "no_memory", "--data-dir", str(tmp_path / "d"),
             "--manifest", str(tmp_path / "m.json")]
    for _ in range(2):
        result = CliRunner().invoke(app, again)
        assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "m.json").read_text())["kind"] == "swap"


def test_a_read_only_data_dir_is_one_line_before_any_gate(tmp_path, monkeypatch):
    """A read-only --data-dir ended in a PermissionError; root writes anywhere, so the
    folder is made read-only through the check's own os.access."""
    import nanobot_memory_adapters.harness.cli_options as options

    real = options.os.access
    monkeypatch.setattr(options.os, "access", lambda path, mode, **kw: (
        False if Path(path) == tmp_path and mode & os.W_OK else real(path, mode, **kw)))
    result = CliRunner().invoke(app, ["swap", "--condition", "no_memory", "--data-dir",
                                      str(tmp_path)])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert f"--data-dir {tmp_path}: {tmp_path} is not writable" in result.stderr


async def test_a_pending_readiness_without_a_reason_says_none_was_given():
    """rolling_summary with an unreachable LLM ended "still pending after 5s: " (blank)."""
    from tests.harness.fakes import PendingAdapter

    class Silent(PendingAdapter):
        async def wait_until_ready(self, scope, timeout_s):  # type: ignore[no-untyped-def]
            return Readiness(status="pending", pending_count=1)

    report = await run_swap({}, adapter_factory=Silent, readiness_timeout_s=1)
    gate = report.failed_gate
    assert gate is not None and gate.name == "readiness" and gate.status == "pending"
    assert gate.detail.endswith("still pending after 1s: the provider gave no reason (its "
                                "warnings, or --log-file, may say why; a slow one needs a "
                                "longer --readiness-timeout)"), gate.detail


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
