"""`nanobot-memory demo`'s exit code when a demo provider cannot run: an extra that is
not installed is left out (the demo runs what is installed); a provider that is installed
and fails its swap step is a failure, in results.json and the exit code."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from nanobot_memory_adapters import registry
from nanobot_memory_adapters.cli import app


def _demo(tmp_path, locomo_file, monkeypatch, broken: dict[str, BaseException]):
    real = registry.load_provider

    def load(source: Any, *args: Any, **kwargs: Any):
        for name, exc in broken.items():
            if name in json.dumps(source, default=str):
                raise exc
        return real(source, *args, **kwargs)

    monkeypatch.setattr(registry, "load_provider", load)
    out = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "--dataset", str(locomo_file), "--conversation",
                                      "syn-1", "--out", str(out), "--no-preferences",
                                      "--no-probe", "--budget-tokens", "500"])
    return result, json.loads((out / "results.json").read_text())


def test_an_installed_provider_failing_its_swap_step_fails_the_demo(
        tmp_path, locomo_file, monkeypatch):
    result, results = _demo(tmp_path, locomo_file, monkeypatch, {
        "full_history": RuntimeError("unable to open database file"),
        "simple_rag": ImportError("No module named 'mem0'"),
    })
    assert result.exit_code == 4, result.output[-2000:]
    assert [s["name"] for s in results["skipped"]] == ["full_history"]
    assert "unable to open database file" in results["skipped"][0]["reason"]
    assert list(results["providers"]) == ["no_memory"]
    assert "skipped simple_rag" in result.output  # still reported, not a failure


def test_an_extra_not_installed_is_left_out_with_exit_0(tmp_path, locomo_file, monkeypatch):
    result, results = _demo(tmp_path, locomo_file, monkeypatch,
                            {"simple_rag": ImportError("No module named 'mem0'")})
    assert result.exit_code == 0, result.output[-2000:]
    assert results["skipped"] == []
    assert list(results["providers"]) == ["no_memory", "full_history"]
