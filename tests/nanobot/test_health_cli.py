"""``nanobot-memory health`` on the README's own memory.json: ``"llm":
"nanobot"`` finds nanobot's config.json beside memory.json, or says in one line to pass
``--nanobot-config``; mem0 without an llm says why it reports itself as simple_rag."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.nanobot.conftest import VENV_BIN

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

pytest.importorskip("mem0")
README_MEMORY = {"memory": {"backend": "mem0", "mem0": {"llm": "nanobot"}}}


def _health(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "nanobot-memory"), "health", *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200"})


async def test_health_on_the_readmes_memory_json_finds_nanobots_config(home):
    home.write_memory(README_MEMORY)
    found = _health("--config", str(home.memory_path), "--json", cwd=home.root)
    assert found.returncode == 0, found.stdout + found.stderr
    assert json.loads(found.stdout)["backend_name"] == "mem0"  # extracting, with nanobot's llm
    assert "test-key" not in found.stdout + found.stderr

    alone = home.root / "alone"
    alone.mkdir()
    (alone / "memory.json").write_text(json.dumps(README_MEMORY))
    missing = _health("--config", str(alone / "memory.json"), cwd=alone)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert missing.stderr.strip().count("\n") == 0 and "Traceback" not in missing.stderr
    assert 'memory.mem0.llm is "nanobot": give nanobot\'s config.json with --nanobot-config' \
        in missing.stderr, missing.stderr


async def test_health_says_why_mem0_runs_as_simple_rag(home):
    ran = _health("--backend", "mem0", "--data-dir", str(home.root / "data"), cwd=home.root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "health: simple_rag" in ran.stdout
    assert ("note: mem0 runs as simple_rag: memory.mem0 has no llm configured, so mem0 runs "
            "add(infer=False), the simple_rag control") in ran.stdout, ran.stdout
    assert 'set memory.mem0.llm to "nanobot"' in ran.stdout
