"""A secret placed in every credential-bearing field of every provider (a password in a
URL, an api_key, a key or token in a query string, a database password) never reaches
stdout, stderr or any file the command writes. Real subprocesses; every endpoint is a
closed port on 127.0.0.1, so each provider fails loudly and its warnings name the URL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SECRETS = ("PWURL7f3", "QKEY9c1", "QTOK2b8", "AKEY4d6", "AKEY5e0", "DBPASS1a9")
URL = "http://bob:PWURL7f3@127.0.0.1:9/v1?api_key=QKEY9c1&token=QTOK2b8"
LLM = {"base_url": URL, "model": "m", "api_key": "AKEY4d6"}

CONFIGS: dict[str, dict[str, Any]] = {
    "mem0": {"backend": "mem0", "mem0": {"llm": LLM}},
    "graphiti": {"backend": "graphiti", "graphiti": {
        "llm": LLM,
        "embedder": {"provider": "openai", "model": "e", "base_url": URL,
                     "api_key": "AKEY5e0", "dimensions": 8},
        "database": {"provider": "neo4j", "uri": "bolt://127.0.0.1:9", "user": "bob",
                     "password": "DBPASS1a9"}}},
    "honcho": {"backend": "honcho", "honcho": {"base_url": URL, "api_key": "AKEY4d6"}},
    "memos": {"backend": "memos", "memos": {"base_url": URL, "api_key": "AKEY4d6"}},
    "rolling_summary": {"condition": "rolling_summary", "rolling_summary": {"llm": LLM}},
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nanobot_memory_adapters.cli", *args],
        capture_output=True, text=True, timeout=600,
    )


def assert_no_secret(texts: list[str], root: Path) -> None:
    for secret in SECRETS:
        for text in texts:
            assert secret not in text, (secret, text[-3000:])
        for path in root.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), (secret, path)


@pytest.mark.parametrize("provider", sorted(CONFIGS))
@pytest.mark.parametrize("as_json", [False, True])
def test_health_never_prints_a_secret(tmp_path, provider, as_json):
    config = tmp_path / "memory.json"
    config.write_text(json.dumps(CONFIGS[provider]))
    out = run("--log-file", str(tmp_path / "debug.log"),
              "health", "--config", str(config), "--data-dir", str(tmp_path / "data"),
              *(["--json"] if as_json else []))
    assert "Traceback" not in out.stderr
    texts = [out.stdout, out.stderr]
    # the output shows where the endpoint is, with the credentials masked
    assert "127.0.0.1:9" in out.stdout, out.stdout[-2000:]
    config.unlink()  # the user's own file holds the secrets; nothing else may
    assert_no_secret(texts, tmp_path)


# graphiti's swap uses embedded Kuzu: a neo4j driver retries a closed port for minutes.
SWAP = {**CONFIGS, "graphiti": {"backend": "graphiti", "graphiti": {
    "llm": LLM, "embedder": CONFIGS["graphiti"]["graphiti"]["embedder"]}}}


@pytest.mark.parametrize("provider", sorted(SWAP))
def test_swap_never_prints_or_writes_a_secret(tmp_path, provider):
    config = tmp_path / "memory.json"
    config.write_text(json.dumps(SWAP[provider]))
    out = run("--log-file", str(tmp_path / "debug.log"),
              "swap", "--config", str(config), "--data-dir", str(tmp_path / "data"),
              "--manifest", str(tmp_path / "manifest.json"), "--readiness-timeout", "5")
    assert out.returncode != 0  # every endpoint is down: a gate fails
    assert "Traceback" not in out.stderr
    config.unlink()
    assert_no_secret([out.stdout, out.stderr], tmp_path)


@pytest.mark.parametrize("command", ["health", "swap"])
def test_nanobot_llm_from_nanobots_config_is_used_and_never_printed(tmp_path, command):
    """``--nanobot-config``: a block's ``"llm": "nanobot"`` takes nanobot's endpoint and
    key; the endpoint shows, the key appears nowhere."""
    nanobot = tmp_path / "config.json"
    nanobot.write_text(json.dumps({
        "agents": {"defaults": {"model": "m", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "AKEY5e0", "apiBase": "http://127.0.0.1:9/v7"}}}))
    config = tmp_path / "memory.json"
    config.write_text(json.dumps({"backend": "mem0", "mem0": {"llm": "nanobot"}}))
    extra = (["--manifest", str(tmp_path / "manifest.json"), "--readiness-timeout", "5"]
             if command == "swap" else ["--json"])
    out = run("--log-file", str(tmp_path / "debug.log"), command, "--config", str(config),
              "--data-dir", str(tmp_path / "data"), "--nanobot-config", str(nanobot), *extra)
    assert "Traceback" not in out.stderr
    assert "127.0.0.1:9" in out.stdout + out.stderr, out.stdout[-2000:]
    if command == "health":  # the endpoint nanobot is configured with, not a default
        assert "127.0.0.1:9/v7" in out.stdout, out.stdout[-2000:]
    nanobot.unlink()
    assert_no_secret([out.stdout, out.stderr], tmp_path)
    missing = run("health", "--config", str(config), "--nanobot-config", str(nanobot))
    assert missing.returncode == 2 and "--nanobot-config" in missing.stderr


def test_bench_nanobot_config_resolves_the_block_and_keeps_the_key_out(tmp_path):
    """``bench --nanobot-config``: a ``--provider-config`` block with ``"llm": "nanobot"``
    is built on nanobot's endpoint (here a closed port, so the unit cannot extract); the
    key reaches no output and no file of the run. With ``--task preferences`` (where it
    would be ignored) the option is refused in one line."""
    from tests.harness.conftest import synthetic_locomo

    nanobot = tmp_path / "config.json"
    nanobot.write_text(json.dumps({
        "agents": {"defaults": {"model": "m", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "AKEY5e0", "apiBase": "http://127.0.0.1:9/v7"}}}))
    blocks = tmp_path / "providers.json"
    blocks.write_text(json.dumps({"mem0": {"llm": "nanobot"}}))
    dataset = tmp_path / "locomo.json"
    dataset.write_text(json.dumps(synthetic_locomo()))
    out_dir = tmp_path / "out"
    out = run("bench", "--dataset", str(dataset), "--providers", "mem0", "--provider-config",
              str(blocks), "--nanobot-config", str(nanobot), "--out", str(out_dir),
              "--test-points", "last", "--readiness-timeout", "5")
    assert "Traceback" not in out.stderr
    manifest = (out_dir / "manifest.json").read_text()
    assert "127.0.0.1:9/v7" in manifest, manifest[:2000]  # nanobot's endpoint, not a default
    nanobot.unlink()
    assert_no_secret([out.stdout, out.stderr], tmp_path)
    prefs = run("bench", "--task", "preferences", "--providers", "no_memory",
                "--nanobot-config", str(tmp_path / "config.json"), "--out", str(tmp_path / "p"))
    assert prefs.returncode == 2 and "--nanobot-config" in prefs.stderr, prefs.stderr
    assert prefs.stderr.strip().count("\n") == 0
