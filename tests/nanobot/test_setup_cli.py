"""``nanobot-memory setup | status | off | on`` as a user runs them: subprocesses in a fresh
HOME whose nanobot config points at the LLM double (the stand-in for the user's model)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
from tests.nanobot.conftest import VENV_BIN, Home
from tests.nanobot.test_cli import reply_of

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

CLI_USER = MemoryScope(run_id="default", persona_id="cli-user", agent_id="nanobot")


@pytest.fixture
def fresh(tmp_path, llm_double) -> Home:
    """A fresh HOME: nanobot's config at ~/.nanobot/config.json, no memory.json yet."""
    user_home = tmp_path / "user"
    h = Home(root=user_home / ".nanobot", base_url=llm_double.base_url)
    h.root.mkdir(parents=True)
    h.write_config()
    return h


def run(home: Home, *args: str, stdin: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``nanobot-memory ARGS`` with HOME set to the fresh home (no -c: the default path)."""
    base = {**os.environ, "HOME": str(home.root.parent), "OMP_NUM_THREADS": "1",
            "HF_HUB_OFFLINE": "1", "MEM0_TELEMETRY": "False", "NO_COLOR": "1",
            "COLUMNS": "200"}
    base.pop("NANOBOT_MEMORY_CONFIG", None)
    return subprocess.run([str(VENV_BIN / "nanobot-memory"), *args], capture_output=True,
                          text=True, timeout=400, env={**base, **(env or {})}, input=stdin,
                          cwd=home.root)


def one_error_line(proc: subprocess.CompletedProcess[str], *said: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0, proc.stderr
    for text in said:
        assert text in proc.stderr, proc.stderr


@pytest.mark.long(36)
async def test_setup_then_one_turn_gives_mem0_on_nanobots_own_model(fresh, llm_double):
    pytest.importorskip("mem0")
    # an index into the chat requests (the session-wide double also counts embedding and
    # model-list calls in ``requests``: slicing chat_requests() by that count skipped
    # this test's requests once earlier tests had run)
    seen = len(llm_double.chat_requests())
    proc = run(fresh, "setup", "--provider", "mem0", "--llm", "nanobot", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert fresh.read_memory() == {"memory": {"backend": "mem0", "mem0": {"llm": "nanobot"},
                                              "enabled": True}}
    assert not list(fresh.root.glob("memory.json.bak-*"))  # nothing to back up
    assert f"wrote {fresh.memory_path}" in proc.stdout
    assert "health: mem0 — ok" in proc.stdout, proc.stdout  # it ends with the health check
    assert "test-key" not in fresh.memory_path.read_text()
    # the connection test ran in a temporary store, not in the user's
    assert not (fresh.root / "memory-adapters").exists()

    # Each one-shot run delivers its turn before it returns, also on a loaded machine (the
    # default 3 s exit window may leave the turn in the outbox for a later process).
    fresh.write_memory({**fresh.read_memory(), "nanobot": {"exit_delivery_s": 120}})
    first = reply_of(fresh.cli("My sister Ana lives in Porto."))
    assert "You said: My sister Ana lives in Porto." in first
    answer = reply_of(fresh.cli("Where does my sister live?"))
    assert "default/cli-user" in answer  # a mem0 section for this user reached the LLM
    # mem0 extracted on nanobot's own model (the double behind nanobot's config) ...
    extraction = [r for r in llm_double.chat_requests()[seen:] if r.response_format]
    assert any("Ana" in r.user + r.system for r in extraction), "no extraction on the double"
    # ... and the fact is in the user's store, retrievable for this CLI user
    from nanobot_memory_adapters.nanobot.settings import data_dir_for, load_settings
    from nanobot_memory_adapters.nanobot_llm import resolve_nanobot_llm
    from nanobot_memory_adapters.registry import load_provider

    settings = load_settings(fresh.memory_path)
    assert settings.memory is not None
    adapter = await asyncio.to_thread(
        load_provider, resolve_nanobot_llm(settings.memory, fresh.config_path),
        data_dir=data_dir_for(settings))
    try:
        result = await adapter.retrieve(RetrieveRequest(
            query="Where does my sister live?", scope=CLI_USER,
            budget=ContextBudget(max_tokens=2000)))
    finally:
        await adapter.aclose()
    assert adapter.backend_name == "mem0"
    assert any("Porto" in item.text for item in result.items), result.items

    status = run(fresh, "status", "--json")
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["provider"] == "mem0" and shown["state"] == "on"
    assert shown["llm"] == "nanobot's own model"
    assert shown["memory_json"] == str(fresh.memory_path)
    assert shown["outbox"]["failed"] == 0 and shown["outbox"]["delivered"] >= 1


def test_setup_keeps_a_backup_and_the_other_settings(fresh):
    previous = {"memory": {"condition": "no_memory", "budget": {"max_tokens": 900}},
                "nanobot": {"recall_timeout_s": 7}}
    fresh.write_memory(previous)
    before = fresh.memory_path.read_bytes()
    proc = run(fresh, "setup", "--provider", "full_history", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    backups = list(fresh.root.glob("memory.json.bak-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == before
    assert f"previous file kept as {backups[0].name}" in proc.stdout
    assert fresh.read_memory() == {
        "memory": {"budget": {"max_tokens": 900}, "condition": "full_history",
                   "full_history": {}, "enabled": True},
        "nanobot": {"recall_timeout_s": 7}}
    assert "health: full_history — ok" in proc.stdout
    again = run(fresh, "setup", "--provider", "full_history", "--yes")
    assert again.returncode == 0 and len(list(fresh.root.glob("memory.json.bak-*"))) == 2


def test_setup_answers_from_stdin_like_a_user(fresh):
    """No flags: the wizard lists the providers and asks; a script can pipe the answers."""
    proc = run(fresh, "setup", stdin="full_history\ny\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "memory providers" in proc.stdout and "mem0" in proc.stdout
    assert fresh.read_memory()["memory"]["condition"] == "full_history"


def test_setup_with_no_one_to_answer_says_how_to_ask_nothing(fresh):
    """Input that ends before the questions do (no terminal, a short pipe) was a bare
    "Aborted."; it is one line saying nothing was written and how to run without questions."""
    for stdin in ("", "full_history\n"):  # ends at the first question; at the confirmation
        proc = run(fresh, "setup", stdin=stdin)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "nothing was written" in errors[0] and "--yes --provider NAME" in errors[0]
        assert not fresh.memory_path.exists()


def test_a_secret_is_stored_as_an_env_reference_and_read_when_built(fresh, tmp_path):
    secret = "sk-never-on-disk-5e1d"
    refused = run(fresh, "setup", "--provider", "memos", "--set", f"api_key={secret}",
                  "--yes", "--skip-test")
    one_error_line(refused, "api_key is a secret (given with --set)",
                   "give --secret api_key with the NAME of a variable")
    assert not fresh.memory_path.exists()
    pasted = run(fresh, "setup", "--provider", "memos", "--secret", f"api_key={secret}-x",
                 "--yes", "--skip-test")
    one_error_line(pasted, "--secret api_key takes the NAME of an environment variable")
    assert secret not in pasted.stdout + pasted.stderr
    nested = run(fresh, "setup", "--provider", "mem0", "--set",
                 f'llm={{"base_url": "http://x", "model": "m", "api_key": "{secret}"}}',
                 "--yes", "--skip-test")
    one_error_line(nested, "llm.api_key is a secret (given with --set)")
    # --skip-test skips the connection test, not the check of what is written
    for value in (f"http://u:{secret}@h:1", "notaurl"):
        bad_url = run(fresh, "setup", "--provider", "honcho", "--set", f"base_url={value}",
                      "--yes", "--skip-test")
        one_error_line(bad_url, "memory.honcho.base_url:", "give the endpoint as")
        assert secret not in bad_url.stdout + bad_url.stderr
        assert not fresh.memory_path.exists()
    no_eq = run(fresh, "setup", "--provider", "memos", "--secret", secret, "--yes")
    one_error_line(no_eq, "--secret takes FIELD=ENV_NAME")
    for proc in (refused, nested, no_eq):
        assert secret not in proc.stdout + proc.stderr
    unset = run(fresh, "setup", "--provider", "memos", "--secret", "api_key=MEMOS_TEST_KEY",
                "--yes")
    one_error_line(unset, "MEMOS_TEST_KEY: not set")
    proc = run(fresh, "setup", "--provider", "memos", "--secret", "api_key=MEMOS_TEST_KEY",
               "--set", "base_url=http://127.0.0.1:9", "--yes", "--skip-test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    block = fresh.read_memory()["memory"]["memos"]
    assert block == {"api_key": "${MEMOS_TEST_KEY}", "base_url": "http://127.0.0.1:9"}
    assert "set MEMOS_TEST_KEY in the environment" in proc.stdout
    # the one place that builds providers reads the reference (and only then)
    from nanobot_memory_adapters.config import ConfigError
    from nanobot_memory_adapters.registry import load_provider

    memory = fresh.read_memory()["memory"]
    with pytest.raises(ConfigError, match=r"memory\.memos\.api_key \(secret\): refers to "
                                          r"\$\{MEMOS_TEST_KEY\}, which is not set"):
        load_provider(memory, data_dir=tmp_path)
    os.environ["MEMOS_TEST_KEY"] = secret
    try:
        adapter = load_provider(memory, data_dir=tmp_path)
        assert adapter.store.config.api_key == secret  # type: ignore[attr-defined]
        asyncio.run(adapter.aclose())
    finally:
        del os.environ["MEMOS_TEST_KEY"]
    assert secret not in fresh.memory_path.read_text()


@pytest.mark.parametrize(("args", "said"), [
    (("--provider", "mem1"), ["--provider 'mem1': unknown provider", "did you mean 'mem0'"]),
    (("--provider", "mem0", "--llm", "ftp://x"), ["--llm 'ftp://x'", "base URL"]),
    (("--provider", "full_history", "--llm", "nanobot"), ["--llm: full_history takes no llm"]),
    (("--provider", "mem0", "--set", "threshold=2"), ["memory.mem0.threshold"]),
    (("--provider", "mem0", "--set", "nonsense=1"), ["memory.mem0.nonsense: unknown setting"]),
    (("--provider", "mem0", "--set", "x"), ["--set 'x' takes KEY=VALUE"]),
    (("--nanobot-config", "/nowhere/config.json", "--provider", "mem0"),
     ["--nanobot-config /nowhere/config.json: no such file"]),
    ((), ["--provider is required with --yes"]),
])
def test_setup_bad_input_is_one_line_and_writes_nothing(fresh, args, said):
    proc = run(fresh, "setup", *args, "--yes", "--skip-test")
    one_error_line(proc, *said)
    assert not fresh.memory_path.exists()


def test_setup_does_not_write_when_the_backend_is_unavailable(fresh):
    fresh.write_memory({"memory": {"condition": "no_memory"}})
    before = fresh.memory_path.read_bytes()
    proc = run(fresh, "setup", "--provider", "memos", "--set", "base_url=http://127.0.0.1:9",
               "--set", "timeout_s=2", "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "memos is unavailable" in proc.stderr and "was not changed" in proc.stderr
    assert fresh.memory_path.read_bytes() == before
    assert not list(fresh.root.glob("memory.json.bak-*"))


def test_off_keeps_everything_else_and_on_undoes_it(fresh):
    data = {"memory": {"backend": "mem0", "mem0": {"llm": "nanobot"}},
            "nanobot": {"recall_timeout_s": 3}}
    fresh.write_memory(data)
    off = run(fresh, "off")
    assert off.returncode == 0, off.stderr
    assert fresh.read_memory() == {"memory": {**data["memory"], "enabled": False},
                                   "nanobot": {"recall_timeout_s": 3}}
    status = json.loads(run(fresh, "status", "--json").stdout)
    assert status["state"].startswith("off") and status["provider"] == "mem0"
    assert status["outbox"] is None  # the plugin never ran: nothing was created to count
    assert not (fresh.root / "memory-adapters").exists()
    on = run(fresh, "on")
    assert on.returncode == 0, on.stderr
    assert fresh.read_memory()["memory"]["enabled"] is True


def test_off_is_honoured_by_nanobot(fresh):
    fresh.write_memory({"memory": {"condition": "full_history"}})
    assert run(fresh, "off").returncode == 0
    health = reply_of(fresh.cli("/memory-health"))
    assert '"enabled": false' in health and "own memory" in health, health


def test_status_and_off_without_or_with_a_broken_memory_json(fresh):
    status = run(fresh, "status")
    assert status.returncode == 0 and "no memory.json" in status.stdout
    assert "nanobot-memory setup" in status.stdout
    off = run(fresh, "off")
    assert off.returncode == 0 and "already uses its own memory" in off.stdout
    one_error_line(run(fresh, "on"), "nothing to turn on", "nanobot-memory setup")
    fresh.write_memory("{not json")
    one_error_line(run(fresh, "off"), "not valid JSON")
    broken = run(fresh, "status", "--json")
    assert broken.returncode == 1 and "broken" in json.loads(broken.stdout)["state"]
    fresh.write_memory({"memory": {"backend": "mem0", "mem0": {"embedding_dims": "lots"}}})
    one_error_line(run(fresh, "on"), "memory.mem0.embedding_dims")


def test_status_names_the_path_nanobot_reads(fresh, tmp_path):
    other = tmp_path / "elsewhere" / "memory.json"
    proc = run(fresh, "status", "--json", env={"NANOBOT_MEMORY_CONFIG": str(other)})
    assert json.loads(proc.stdout)["memory_json"] == str(other)
    assert Path(json.loads(run(fresh, "status", "--json").stdout)["memory_json"]) \
        == fresh.memory_path


def test_a_missing_or_folder_nanobot_config_is_refused_not_its_neighbour(fresh):
    """``off -c conifg-typo.json`` turned off the memory.json beside the typo (exit 0), and
    ``status -c missing.json`` reported "nanobot's own memory": -c must name a file."""
    fresh.write_memory({"memory": {"condition": "full_history"}})
    before = fresh.memory_path.read_bytes()
    typo, folder = fresh.root / "conifg-typo.json", fresh.root
    for command in ("status", "off", "on"):
        one_error_line(run(fresh, command, "-c", str(typo)), f"--nanobot-config {typo}:",
                       "no such file")
        one_error_line(run(fresh, command, "-c", str(folder)),
                       f"--nanobot-config {folder}: is a directory",
                       str(folder / "config.json"))
    assert fresh.memory_path.read_bytes() == before
    for args in (("setup", "--provider", "no_memory", "--yes", "--skip-test"),
                 ("health", "--condition", "no_memory")):
        one_error_line(run(fresh, *args, "--nanobot-config", str(folder)),
                       f"--nanobot-config {folder}: is a directory")
    assert fresh.memory_path.read_bytes() == before


def test_setup_says_when_nanobots_own_model_cannot_serve(fresh):
    """nanobot on Anthropic: "llm": "nanobot" cannot work; one line says what to give."""
    fresh.config_path.write_text(json.dumps({
        "agents": {"defaults": {"model": "claude-sonnet-4", "provider": "anthropic"}},
        "providers": {"anthropic": {"apiKey": "sk-ant-x"}}}))
    proc = run(fresh, "setup", "--provider", "mem0", "--yes")
    one_error_line(proc, "memory.mem0.llm:", "not an OpenAI-compatible API")
    assert "sk-ant-x" not in proc.stdout + proc.stderr
    assert not fresh.memory_path.exists()


def no_traceback_line(proc: subprocess.CompletedProcess[str], code: int, *said: str) -> None:
    """Exit ``code`` and one ``error:`` line on stderr saying each of ``said``."""
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for text in said:
        assert text in proc.stderr, proc.stderr


NANOBOT_SECRET = "sk-test-SECRET123456"


@pytest.mark.parametrize(("config_text", "said"), [
    (json.dumps({"agents": {"defaults": {"model": "double", "provider": "custom"}},
                 "providers": {"custom": {"apiKey": [NANOBOT_SECRET],
                                          "apiBase": "http://127.0.0.1:9/v1"}}}),
     "providers.custom.apiKey must be a valid string"),
    ('{"agents": ', "JSON syntax error at line 1"),
], ids=["key-is-a-list", "broken-json"])
def test_an_invalid_nanobot_config_is_one_line_without_its_values(fresh, tmp_path,
                                                                 config_text, said):
    """nanobot's own ConfigLoadError (its pydantic error holds the values, a key among
    them) becomes one line naming the file and the fix, in every command that reads it."""
    fresh.config_path.write_text(config_text)
    memory = tmp_path / "memory.json"
    memory.write_text(json.dumps({"memory": {"backend": "mem0", "mem0": {"llm": "nanobot"}}}))
    blocks = tmp_path / "blocks.json"
    blocks.write_text(json.dumps({"mem0": {"llm": "nanobot"}}))
    config = str(fresh.config_path)
    runs = [run(fresh, "setup", "--provider", "mem0", "--llm", "nanobot", "--yes"),
            run(fresh, "setup", "--provider", "mem0", "--yes", "--skip-test"),
            run(fresh, "health", "--config", str(memory), "--nanobot-config", config),
            run(fresh, "bench", "--provider-config", str(blocks), "--nanobot-config", config),
            run(fresh, "backfill", "--config", str(memory))]
    for proc in runs:
        no_traceback_line(proc, 2, f"nanobot cannot load {config}", said,
                          "fix that file")
        assert NANOBOT_SECRET not in proc.stdout + proc.stderr
        assert "input_value" not in proc.stderr
    assert not fresh.memory_path.exists()


def test_status_shows_the_llm_url_without_its_credentials(fresh):
    fresh.write_memory({"memory": {"backend": "mem0", "mem0": {"llm": {
        "base_url": "http://admin:hunter2SECRET@127.0.0.1:9/v1?api_key=QSECRET99",
        "api_key": "sk-test-SECRET123456", "model": "gpt-4o-mini"}}}})
    shown = run(fresh, "status", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["llm"] == \
        "gpt-4o-mini at http://admin:***@127.0.0.1:9/v1?api_key=***"
    table = run(fresh, "status")
    assert table.returncode == 0, table.stderr
    assert "http://admin:***@127.0.0.1:9/v1?api_key=***" in table.stdout, table.stdout
    for proc in (shown, table):
        for secret in ("hunter2SECRET", "QSECRET99", "SECRET123456"):
            assert secret not in proc.stdout + proc.stderr


@pytest.mark.parametrize("pasted", ["gsk_SECRET123456abcdefgh", "hf_pastedTok",
                                    "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8"])
def test_a_key_given_as_the_variable_name_is_refused_without_echo(fresh, pasted):
    """--llm-key-env / --secret take a variable NAME: a key pasted there is never
    written to memory.json or shown."""
    endpoint = ("--llm", "http://127.0.0.1:9/v1", "--llm-model", "m")
    runs = [run(fresh, "setup", "--provider", "mem0", *endpoint, "--llm-key-env", pasted,
                "--yes", "--skip-test"),
            run(fresh, "setup", "--provider", "mem0", *endpoint, "--llm-key-env", pasted,
                "--yes"),
            run(fresh, "setup", "--provider", "memos", "--secret", f"api_key={pasted}",
                "--set", "base_url=http://127.0.0.1:9", "--yes", "--skip-test")]
    for proc in runs:
        one_error_line(proc, "takes the NAME of an environment variable", "not its value")
        assert pasted not in proc.stdout + proc.stderr
    assert not fresh.memory_path.exists()
    # a variable's name that is set in the shell stays accepted, whatever it looks like
    named = run(fresh, "setup", "--provider", "mem0", *endpoint, "--llm-key-env",
                "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8", "--yes", "--skip-test",
                env={"Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8": "x"})
    assert named.returncode == 0, named.stderr
    assert fresh.read_memory()["memory"]["mem0"]["llm"]["api_key"] == \
        "${Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8}"


def test_a_damaged_outbox_is_one_line_in_every_command(fresh):
    """The line ``outbox status`` gives (describe_failure), not sqlite's traceback."""
    fresh.write_memory({"memory": {"condition": "full_history"}})
    outbox = fresh.root / "memory-adapters" / "nanobot-outbox.sqlite3"
    outbox.parent.mkdir()
    garbage = bytes(range(256)) * 32
    outbox.write_bytes(garbage)
    said = f"outbox {outbox}: it is damaged (not a readable SQLite database); move it aside"
    for args in (("outbox", "status"), ("status",), ("forget", "--persona", "alice", "--yes"),
                 ("backfill",)):
        no_traceback_line(run(fresh, *args), 1, said)
    shown = run(fresh, "status", "--json")
    assert shown.returncode == 1 and said in shown.stderr, shown.stderr
    assert said in json.loads(shown.stdout)["outbox"]["error"]
    assert outbox.read_bytes() == garbage  # nothing rewrote it


@pytest.mark.parametrize("damage", ["not-utf8", "memory-is-a-string", "a-directory"])
def test_an_unreadable_memory_json_is_one_line_and_kept(fresh, damage):
    """memory.json that cannot be read: one line in every command, and no command
    (setup least of all) replaces what the user wrote."""
    path = fresh.memory_path
    if damage == "a-directory":
        path.mkdir()
        (path / "mine.txt").write_text("kept")
    else:
        path.write_bytes(b'{"memory": {"condition": "full_history"}}\xff'
                         if damage == "not-utf8" else b'{"memory": "mem0"}')
    before = None if path.is_dir() else path.read_bytes()
    commands = [("setup", "--provider", "full_history", "--yes"),
                ("setup", "--provider", "full_history", "--yes", "--skip-test"),
                ("off",), ("on",), ("outbox", "status"), ("forget", "--persona", "alice",
                                                         "--yes"),
                ("migrate-scopes",), ("backfill",), ("backfill", "--provider", "full_history")]
    for args in commands:
        no_traceback_line(run(fresh, *args), 2, str(path) if args[0] in ("setup", "off", "on")
                          else "")
    status = run(fresh, "status", "--json")
    assert status.returncode == 1 and "Traceback" not in status.stderr, status.stderr
    assert "broken" in json.loads(status.stdout)["state"]
    if before is None:
        assert (path / "mine.txt").read_text() == "kept"
    else:
        assert path.read_bytes() == before
    assert not list(fresh.root.glob("memory.json.bak-*"))


BLOCK_BM25 = '''
import sys
class _Missing:
    """bm25s and PyStemmer as if the [bm25] extra were not installed."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("bm25s", "Stemmer"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Missing())
'''


def _without_bm25s(tmp_path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_BM25)
    return {"PYTHONPATH": str(site)}


def test_setup_offers_only_what_is_installed_and_names_the_extra(fresh, tmp_path):
    """Without bm25s, bm25 was offered and its connection test said ok; every recall then
    failed. And the install hint lost its extra: rich took ``[bm25]`` for a style tag."""
    env = _without_bm25s(tmp_path)
    proc = run(fresh, "setup", "--provider", "bm25", "--yes", env=env)
    one_error_line(proc, "--provider bm25", "pip install 'nanobot-memory-adapters[bm25]'")
    assert not fresh.memory_path.exists()
    listing = run(fresh, "setup", stdin="bm25\nfull_history\n\n", env=env)
    table = [line for line in listing.stdout.splitlines() if line.strip().startswith("│ bm25")]
    assert table and "no —" in table[0], listing.stdout
    assert "pip install 'nanobot-memory-adapters[bm25]'" in " ".join(
        listing.stdout.split()), listing.stdout
