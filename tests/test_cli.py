"""The `nanobot-memory` command as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nanobot_memory_adapters.cli", *args],
        capture_output=True, text=True, timeout=600, cwd=cwd,
    )


def test_conformance_full_history_json_reports_every_item_passed():
    out = run("conformance", "--condition", "full_history", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["provider"] == "full_history" and report["ok"] is True
    assert [i["item"] for i in report["items"]] == list(range(1, 14))
    # every item passes, but the one for a capability full_history does not declare
    assert {i["item"]: i["status"] for i in report["items"]} == {
        **{n: "passed" for n in range(1, 12)}, 12: "not_applicable", 13: "passed"}
    assert report["level"] == "full"
    assert report["groups"] == {"base": "passed 11", "ingest_lookahead": "not applicable",
                                "store_version": "passed 1"}


def test_conformance_runs_a_provider_class_that_is_not_registered(tmp_path):
    """A newcomer's class before its entry point exists: the reference store (one class
    implementing the store protocol, not registered; the CLI wraps it in the one provider
    wrapper) and a copy of it in a module of the current directory, by path."""
    out = run("conformance", "--provider-class",
              "nanobot_memory_adapters.testing.reference:ReferenceStore")
    assert out.returncode == 0, out.stderr
    assert "conformance level: full (base passed 10;" in out.stdout  # item 7: no backend
    source = Path(__file__).parents[1] / "nanobot_memory_adapters/testing/reference.py"
    (tmp_path / "my_memory.py").write_text(source.read_text().replace(
        '"reference"', '"my_memory"'))
    out = run("conformance", "--provider-class", "my_memory:ReferenceStore", "--json",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["provider"] == "my_memory" and report["level"] == "full"


@pytest.mark.parametrize(("target", "needle"), [
    ("my_memory", "is not module:Class"),
    ("no_such_module_xyz:Thing", "cannot import it"),
    ("json:dumps", "not a provider class"),
])
def test_conformance_provider_class_errors_are_one_line(target, needle):
    out = run("conformance", "--provider-class", target)
    assert out.returncode != 0
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) <= 2 and needle in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(("source", "needle"), [
    ("def broken(:\n", "importing module dev_memory raised SyntaxError: invalid syntax"),
    ("raise RuntimeError('no key set')\n",
     "importing module dev_memory raised RuntimeError: no key set"),
], ids=["syntax-error", "raises-at-import"])
def test_conformance_provider_class_whose_module_fails_to_import_is_one_line(
        tmp_path, source, needle):
    """A class in development whose module does not import (a syntax error, an exception
    raised at import): one line naming --provider-class, the module and the exception,
    exit 2; not the module's traceback."""
    (tmp_path / "dev_memory.py").write_text(source)
    out = run("conformance", "--provider-class", "dev_memory:DevStore", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    [line] = [line for line in out.stderr.splitlines() if line.strip()]
    assert line.startswith("error: --provider-class dev_memory:DevStore: ") and needle in line
    assert "Traceback" not in out.stderr


def test_health_no_memory_json_is_ok():
    out = run("health", "--condition", "no_memory", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "ok"


def test_version_lists_nanobot():
    out = run("version")
    assert out.returncode == 0 and "nanobot-ai 0.3" in out.stdout


@pytest.mark.parametrize(
    ("config", "key", "fix"),
    [
        ({"condition": "no_memoryy"}, "memory.condition", "did you mean 'no_memory'"),
        ({"backend": "mem0", "condition": "no_memory"}, "memory", "keep exactly one"),
        ({"condition": "no_memory", "budget": {"max_tokens": -1}},
         "memory.budget.max_tokens", "positive"),
    ],
)
def test_bad_config_exits_non_zero_with_one_line(tmp_path, config, key, fix):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps({"memory": config}))
    for command in ("health", "conformance"):
        out = run(command, "--config", str(path))
        assert out.returncode != 0
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, out.stderr
        assert key in lines[0] and fix in lines[0]


def test_exactly_one_provider_option():
    out = run("health", "--condition", "no_memory", "--backend", "mem0")
    assert out.returncode != 0 and "exactly one" in out.stderr


def test_conformance_uses_the_configured_readiness_timeout():
    from nanobot_memory_adapters.cli import _readiness_timeout
    from nanobot_memory_adapters.config import MemoryConfig

    class Slow:
        readiness_timeout_s = 90.0

    assert _readiness_timeout(MemoryConfig(condition="no_memory"), object()) == 60.0
    assert _readiness_timeout(MemoryConfig(condition="no_memory"), Slow()) == 90.0
    configured = MemoryConfig(condition="no_memory", readiness_timeout_s=5)
    assert _readiness_timeout(configured, Slow()) == 5.0


def test_conformance_and_pytest_read_item_7_from_the_provider_class():
    """One source for "no native backend": the class's declaration, read alike by the CLI
    and by ``SuiteTarget.for_class`` (what the pytest suite uses)."""
    from nanobot_memory_adapters.conditions.static_profile import StaticProfile
    from nanobot_memory_adapters.testing import SuiteTarget

    out = run("conformance", "--condition", "static_profile", "--items", "7", "--json")
    assert out.returncode == 0, out.stderr
    (item,) = json.loads(out.stdout)["items"]
    target = SuiteTarget.for_class(StaticProfile, make=None)  # type: ignore[arg-type]
    assert item["status"] == "not_applicable"
    assert target.no_native_backend and target.no_native_backend in json.dumps(item)
