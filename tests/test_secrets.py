"""A secret placed in every credential-bearing field of every provider (a password in a
URL, an api_key, a key or token in a query string, a database password) never reaches
stdout, stderr or any file the command writes. Real subprocesses; every endpoint is a
closed port on 127.0.0.1, so each provider fails loudly and its warnings name the URL."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
@pytest.mark.servers
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
@pytest.mark.servers
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
@pytest.mark.servers
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


@pytest.mark.servers
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


# -- a key pasted where a model name or an endpoint goes (issue 28) -----------------------------

PASTED = "sk-proj-Zq8xY2kL9mN4pR7tV1wB3cD5fG6hJ0aE"


LOCAL = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(("field", "block"), [
    ("mem0.llm.model",
     {"backend": "mem0", "mem0": {"llm": {**LLM, "base_url": LOCAL, "model": PASTED}}}),
    ("mem0.llm.base_url", {"backend": "mem0", "mem0": {"llm": {**LLM, "base_url": PASTED}}}),
    ("rolling_summary.llm.base_url",
     {"condition": "rolling_summary",
      "rolling_summary": {"llm": {**LLM, "base_url": f"http://127.0.0.1:9/{PASTED}"}}}),
])
@pytest.mark.parametrize("command", ["health", "swap"])
@pytest.mark.servers
def test_a_key_in_a_model_or_url_is_refused_without_echoing_it(tmp_path, field, block, command):
    """Before: health showed the model name (the key) in its details. Now the config is
    refused in one line that names the key and the fix (swap: its instantiate gate), and
    the key appears nowhere."""
    config = tmp_path / "memory.json"
    config.write_text(json.dumps(block))
    extra = ["--manifest", str(tmp_path / "m.json")] if command == "swap" else []
    out = run("--log-file", str(tmp_path / "debug.log"), command, "--config", str(config),
              "--data-dir", str(tmp_path / "data"), *extra)
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    if command == "health":  # bad input: one line, exit 2
        assert out.returncode == 2 and len(lines) == 1, (out.returncode, out.stdout, out.stderr)
    else:  # swap: its instantiate gate fails with the same line
        assert out.returncode == 1 and "instantiate" in lines[-1], (out.stdout, out.stderr)
    assert f"memory.{field}" in lines[-1] and "API key" in lines[-1], lines
    config.unlink()
    for text in (out.stdout, out.stderr):
        assert PASTED[8:] not in text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert PASTED[8:].encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8000/v1", "ftp://h/v1", "http://", "http://h:99999/v1", "http://h /v1"])
def test_base_url_must_be_an_http_endpoint(url):
    from nanobot_memory_adapters.config import ConfigError
    from nanobot_memory_adapters.registry import load_provider

    block = {"condition": "rolling_summary", "rolling_summary": {"llm": {**LLM, "base_url": url}}}
    with pytest.raises(ConfigError) as caught:
        load_provider(block)
    assert caught.value.key == "memory.rolling_summary.llm.base_url"
    assert "http(s)://host:port/path" in str(caught.value)


def test_key_shaped_strings_are_masked_anywhere():
    from nanobot_memory_adapters.contract import AdapterError
    from nanobot_memory_adapters.redaction import redact

    details = {"llm": {"model": PASTED}, "note": f"endpoint http://h/{PASTED}/v1 said no",
               "aws": "AKIAIOSFODNN7EXAMPLE1", "gh": "ghp_" + "a1" * 18,
               "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"}
    shown = json.dumps(redact(details))
    for secret in (PASTED, "IOSFODNN7EXAMPLE1", "a1" * 18, "dozjgNryP4J3jVmNHl0w5N"):
        assert secret[4:] not in shown, shown
    assert "sk-***" in shown and "AKIA***" in shown
    error = AdapterError(f"model {PASTED} not found", backend_name="b", operation="retrieve")
    assert PASTED[4:] not in str(error)
    # ordinary words with the same beginnings stay
    plain = "sk-learn task-force AKIA hf_ eyJ ghp_short skeleton sk-2024"
    assert json.dumps(redact({"t": plain})) == json.dumps({"t": plain})


# -- linear time (issue 28): bounded work, not a timed test --------------------------------------

_OLD_WORDS = (
    r"api[_-]?key|apikey|secret|secret[_-]?key|access[_-]?key|private[_-]?key|"
    r"password|passwd|pwd|token|access[_-]?token|auth[_-]?token|authorization|credentials?"
)
_OLD_URL = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@/\s]+@", re.I)
_OLD_PARAM = re.compile(
    rf"(?P<name>\b(?:[a-z0-9]+[_-])*(?:{_OLD_WORDS}))(?P<sep>['\"]?\s*[=:]\s*)"
    r"(?P<quote>['\"]?)(?P<value>[^\s&'\",;)}\]]+)", re.I)
_OLD_BEARER = re.compile(r"\b(?P<kind>Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{4,}", re.I)


def old_redact_text(text: str) -> str:
    """redact_text as it was at bd2feb8 (quadratic: the reference for what it redacts)."""
    text = _OLD_URL.sub(r"\g<scheme>\g<user>:***@", text)
    text = _OLD_BEARER.sub(r"\g<kind> ***", text)
    return _OLD_PARAM.sub(lambda m: m.group(0) if m.group("value") == "***" else
                          f"{m.group('name')}{m.group('sep')}{m.group('quote')}***", text)


# pieces that make every pattern's cues, near-misses and separators
_ATOMS = ["token", "Token", "api", "key", "_", "-", "x", "1", "=", ":", " ", "'", '"', "@",
          "/", "://", "http", "a", "é", "secret", "password", "pwd", "auth", "access",
          "Bearer", "basic", "***", "&", ",", "K", "ſ", "\t", "+", ".", "credentials", "ab"]
_TEXT = st.lists(st.sampled_from(_ATOMS), max_size=40).map("".join)


@settings(max_examples=3000, deadline=None)
@given(text=_TEXT)
def test_redaction_is_what_the_old_patterns_redacted(text):
    from nanobot_memory_adapters.redaction import redact_text

    assert redact_text(text) == old_redact_text(text)


MIB = 1 << 20


# Tiles that make a backtracking pattern try every split of a long run: a chain of
# name segments with no credential word at its end ("a-a-a-…", "a1-…"), a credential
# word with no separator after it ("x-token…"), key prefixes and JWT heads that never
# complete, URL schemes without user info, "Bearer" without a token, and every atom of
# the equality test at once. The patterns redaction.py used before took 36 s on 20 KB
# of "a-" (hours at 1 MiB); the scrubber takes about 0.1-2 s per MiB of each.
_PATHOLOGICAL = ["a-", "a1-", "a", "x-token", "-token", "api_", "token:", "sk-", "eyJ",
                 "eyJaaaaaaaaaa.", "a://", "Bearer ", "a:b", "".join(_ATOMS)]
_SCRUB_ALL = """
import sys
from nanobot_memory_adapters.redaction import redact_text
size = int(sys.argv[1])
for tile in sys.argv[2:]:
    redact_text((tile * (size // len(tile) + 1))[:size])
print("ok")
"""
# A hard cap far above the linear scrub (~10 s for all tiles on a busy 2-core machine)
# and far below any super-linear one: a catastrophe detector, not a speed target.
_SCRUB_CAP_S = 120


@pytest.mark.servers
def test_redaction_of_megabyte_pathological_inputs_finishes_under_a_hard_cap():
    """Every crafted 1 MiB input is scrubbed in a child process that is killed at the
    cap: backtracking that a counter of match spans cannot see (a failed search costs
    nothing there) shows here as the child running out of time."""
    try:
        done = subprocess.run([sys.executable, "-c", _SCRUB_ALL, str(MIB), *_PATHOLOGICAL],
                              capture_output=True, text=True, timeout=_SCRUB_CAP_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"redacting 1 MiB of each of {_PATHOLOGICAL} took over {_SCRUB_CAP_S} s:"
                    " a pattern backtracks (super-linear)")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_an_error_line_keeps_its_prose_and_loses_its_keys():
    """Error lines name settings: `api_key: refers to ...` lost its next word to the
    redactor (`api_key: *** to ...`); keys and URL passwords in them still go."""
    from nanobot_memory_adapters.config import ConfigError
    from nanobot_memory_adapters.redaction import redact_shapes, redact_text

    said = str(ConfigError("memory.honcho.api_key", "refers to ${NOPE}, which is not set"))
    assert "api_key (secret): refers to ${NOPE}" in redact_text(said)
    assert str(ConfigError("memory.budget", "too big")) == "memory.budget: too big"
    assert redact_shapes("--secret: expected KEY=VALUE") == "--secret: expected KEY=VALUE"
    line = redact_shapes("not 'sk-test-SECRET123456'; see http://u:hunter2SECRET@127.0.0.1/v1")
    assert "SECRET123456" not in line and "hunter2SECRET" not in line, line


def test_a_server_commands_credentials_stay_out_of_a_manifest():
    """An MCP block's command line and environment: ``--api-key VALUE`` is two items of a
    list (only ``--api-key=VALUE`` was masked) and ``UPSTREAM_SERVICE_KEY`` named no word
    the key pattern knew; both reached a bench's manifest.json in clear."""
    from nanobot_memory_adapters.harness import manifest as mf
    from nanobot_memory_adapters.redaction import redact

    block = {"preset": "server-memory",
             "command": ["node", "server.js", "--api-key", "Zq8hT2pLmN4vX9", "--port", "8000"],
             "env": {"MEMORY_FILE_PATH": "{data_dir}/m.jsonl",
                     "UPSTREAM_SERVICE_KEY": "Zq8hT2pLmN4vX9b", "DB_PASS": "hunter2hunter2"}}
    _, _, native = mf.native_config(mf.provider_source("mcp", block))
    shown = json.dumps(native)
    for secret in ("Zq8hT2pLmN4vX9", "hunter2hunter2"):
        assert secret not in shown, shown
    assert native["command"][-2:] == ["--port", "8000"]  # other arguments stay
    assert native["env"]["MEMORY_FILE_PATH"] == "{data_dir}/m.jsonl"
    # names that merely end like a key, in lower case, stay (a scope key is no secret)
    kept = {"scope_key": "default/telegram-1", "api_key_env": "OPENAI_API_KEY"}
    assert redact(kept) == kept


def test_a_native_error_is_redacted_before_it_is_cut():
    """``_as_error`` cut the text at 500 characters, then redacted: a key cut short no
    longer looks like a key and kept up to 15 of its characters."""
    from nanobot_memory_adapters.testing.echo import EchoAdapter

    key = "sk-proj" + "A1b2C3d4E5" * 4
    text = "x" * 481 + " " + key  # the old cut at 500 kept "sk-" and 15 characters
    error = EchoAdapter()._as_error(RuntimeError(text), "retrieve")
    assert key[:12] not in str(error), str(error)[-40:]
