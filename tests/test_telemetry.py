"""The SDKs' telemetry stays off when the user never set its variables: the suite's
conftest sets them, so these run in processes whose environment has neither."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("mem0")

# Every test here starts a process: not in the fast suite.
pytestmark = pytest.mark.servers


def _bare_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEM0_TELEMETRY", "GRAPHITI_TELEMETRY_ENABLED")}
    env["OMP_NUM_THREADS"] = "1"
    return env


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=_bare_env())
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_mem0_imported_plainly_has_its_analytics_client_closed():
    """A plain ``import mem0`` makes mem0's analytics client (PostHog, the project's key)
    at import; ``quiet_mem0`` closes it and switches mem0's flags off."""
    out = _python(
        "import mem0, mem0.memory.telemetry as t\n"
        "print(t.client_telemetry.posthog is not None, t.MEM0_TELEMETRY)\n"
        "from nanobot_memory_adapters.telemetry import quiet_mem0\n"
        "quiet_mem0()\n"
        "print(t.client_telemetry.posthog is None, t.MEM0_TELEMETRY)")
    assert out.splitlines() == ["True True", "True False"]


def test_the_bench_fork_server_imports_mem0_with_telemetry_off():
    """The workers fork from a server that preloads mem0; imported there plainly, every
    worker restarted its analytics client's flag poller ("[PostHog] [FEATURE FLAGS]" on
    the bench's stderr, once per worker and poll)."""
    out = _python(
        "import nanobot_memory_adapters.harness.worker_preload\n"
        "import mem0.memory.telemetry as t\n"
        "print(t.client_telemetry.posthog is None, t.MEM0_TELEMETRY)")
    assert out == "True False"
