"""A finished ``nanobot-memory preferences run`` as one result file for docs/results.md:
the behaviour table (each provider's n, its behaviour score with the 95 % interval by
attribute, what the first replies did), the pairwise verdicts, and what reproduces it
(command, commit, machine, date, the agent's model and tools).

    python benchmarks/preferences_result.py --run OUT \\
        --command "nanobot-memory preferences run ..." \\
        [--label TEXT] [--name preferences_real] [--results-dir benchmarks/results]
    python benchmarks/render_results.py

Run it from the checkout that ran the preferences run (its commit is recorded). A run
stopped midway (Ctrl-C or SIGTERM) left results.partial.json over the units it finished:
the file says ``complete: false`` and docs/results.md marks the table partial.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.redaction import redact_text

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "nanobot-memory-preferences-result/1"


def _machine() -> dict[str, Any]:
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {"platform": platform.platform(), "cpus": os.cpu_count(), "memory_gb": mem,
            "python": platform.python_version()}


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=False).stdout.strip()


def _ci(c: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if not c else {k: c.get(k) for k in ("value", "low", "high", "n")}


def portable(command: str) -> str:
    """The command without this machine's paths (any absolute path reads ``PATH``)."""
    return shlex.join("PATH" if w.startswith("/") else w for w in shlex.split(command))


def results_file(run: Path) -> Path | None:
    """The run's results, or a stopped run's partial ones (its finished units)."""
    for name in ("results.json", "results.partial.json"):
        if (run / name).is_file():
            return run / name
    return None


def summarize(run: Path, command: str, label: str) -> dict[str, Any]:
    path = results_file(run)
    assert path is not None
    results = json.loads(path.read_text(encoding="utf-8"))
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    settings = manifest["settings"]
    providers = {}
    for name, p in results["providers"].items():
        overall = p["scores"]["overall"]
        by_attribute = overall.get("ci_by_attribute") or {}
        providers[name] = {
            "memory_form": p.get("memory_form"),
            "personas": len(p.get("personas") or []),
            "tests": overall["tests"],
            "behaviour": _ci(by_attribute.get("behaviour")),
            "acts": overall.get("acts"),  # current / other / both / none
            "current_exposure": _ci(by_attribute.get("current_exposure")),
            "failures": sum((p.get("failures") or {}).values()),
        }
    pairwise = []
    for r in (results.get("pairwise") or {}).get("behaviour", []):
        headline = r.get("by_attribute") or r  # by attribute: the one that generalises
        pairwise.append({"a": r["a"], "b": r["b"], "difference": headline["difference"],
                         "low": headline["low"], "high": headline["high"], "n": r["n"],
                         "verdict": headline["verdict"]})
    agent = settings.get("agent") or {}
    return {
        "schema": SCHEMA,
        "title": "Preference sessions, " + (
            "the ideal reader (no model)" if settings.get("agent_tools") is None else
            f"nanobot's tools {'off' if settings['agent_tools'] == 'none' else 'on'}"),
        "label": label,
        "command": portable(redact_text(command)),
        "commit": _commit(),
        "machine": _machine(),
        "date": manifest["created_at"],
        "model": {"base_url": redact_text(agent["base_url"]) if agent.get("base_url")
                  else None, "model": agent.get("model")},
        "settings": {k: settings.get(k) for k in (
            "agent_tools", "max_turns", "recognition", "persona_caps", "budget")},
        "manifest_sha256": manifest["manifest_sha256"],
        # a stopped run: the units it finished (each provider's personas say how many)
        "complete": results.get("complete", True),
        "skipped": results.get("skipped") or [],
        "providers": providers,
        "pairwise": pairwise,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="the run's --out folder")
    parser.add_argument("--command", required=True, help="the command that ran it")
    parser.add_argument("--label", default="small-scale run on one model; not comparable "
                        "with published results")
    parser.add_argument("--name", default="preferences_real", help="results file name")
    parser.add_argument("--results-dir", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args(argv)
    if results_file(args.run) is None or not (args.run / "manifest.json").is_file():
        print(f"--run {args.run}: no preferences run results there (results.json when "
              "every unit is done, results.partial.json when the run was stopped); run "
              "or rerun its command", file=sys.stderr)
        return 2
    doc = summarize(args.run, args.command, args.label)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"{args.name}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
