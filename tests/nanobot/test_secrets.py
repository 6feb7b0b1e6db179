"""In chat, ``/memory-health`` names a broken endpoint without its credentials, and
nanobot's own files (session history, memory, logs) never hold them either."""

from __future__ import annotations

import pytest

from tests.nanobot.test_cli import reply_of
from tests.test_secrets import CONFIGS, SECRETS

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers


@pytest.mark.parametrize("provider", ["honcho", "memos", "mem0"])
async def test_memory_health_reply_and_session_files_hold_no_secret(home, provider):
    home.write_memory({"memory": CONFIGS[provider]})
    chat = home.cli("Hello there.")
    health_proc = home.cli("/memory-health")
    health = reply_of(health_proc)
    assert health.startswith(f"memory: {provider}"), health
    # the user sees which endpoint is broken (mem0's health may time out first on a busy
    # machine while its embedder loads; then it says so instead)
    if provider != "mem0" or "degraded" in health:
        assert "127.0.0.1:9" in health, health
    home.memory_path.unlink()  # the user's own file holds the secrets; nothing else may
    for secret in SECRETS:
        for proc in (chat, health_proc):
            assert secret not in proc.stdout and secret not in proc.stderr, secret
        for path in home.root.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), (secret, path)
    # nanobot saved the reply (with the masked URL) in its session file: the check saw it
    sessions = [p.read_text() for p in home.root.rglob("sessions/*/*.jsonl")]
    assert any("memory-health" in text for text in sessions), sessions
