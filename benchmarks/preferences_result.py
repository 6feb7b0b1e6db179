"""A ``nanobot-memory preferences run`` as one result file for docs/results.md: the
behaviour table (each provider's n, its behaviour score with the 95 % interval, what the
first replies did), the pairwise verdicts, and what reproduces it (command, commit,
machine, date, the agent and its tools).

    python benchmarks/preferences_result.py --run OUT \\
        --command "nanobot-memory preferences run ..." \\
        [--label TEXT] [--name preferences_real] [--results-dir benchmarks/results]
    python benchmarks/render_results.py

Run it from the checkout that ran the preferences run (its commit is recorded, and
whether the checkout was edited). A run stopped midway (Ctrl-C or SIGTERM) left
results.partial.json over the units it finished: the file says ``complete: false`` and
docs/results.md marks the table partial. A retrieval-only run (no agent) has no behaviour
to show and is refused, as is anything that is not a preferences run's folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.outcome_view import failure_counts
from nanobot_memory_adapters.harness.preferences.driver import PARTIAL, RESULTS_SCHEMA
from nanobot_memory_adapters.harness.preferences.report import headline_ci, headline_pair
from nanobot_memory_adapters.redaction import redact_text
from nanobot_memory_adapters.stats import wilson_ci

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import ci, commit, machine, portable

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "nanobot-memory-preferences-result/1"


class NotARun(ValueError):
    """The folder holds no preferences run results this script can read."""


def results_file(run: Path) -> tuple[Path, bool] | None:
    """The run's results and whether the run is complete (a stopped run left partial
    results over its finished units)."""
    if (run / "results.json").is_file():
        return run / "results.json", True
    if (run / PARTIAL).is_file():
        return run / PARTIAL, False
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotARun(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise NotARun(f"{path}: not a JSON object")
    return doc


def run_code(run: Path, stated: list[str] | None = None) -> dict[str, Any]:
    """What the checkpoint recorded of the code, machines and times that finished the
    units (``checkpoint.unit_provenance``); ``stated``: the revisions a run that predates
    that record ran on, as whoever ran it states them (kept apart, marked as stated)."""
    try:
        data = json.loads((run / "checkpoint.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = {}
    units = list(data.get("units") or {})
    seen = [p for k, p in (data.get("provenance") or {}).items() if k in units]
    times = sorted(str(p.get("finished_at")) for p in seen if p.get("finished_at"))
    return {"units": len(units), "units_recorded": len(seen),
            "revisions": sorted({str(p.get("code")) for p in seen}),
            "machines": sorted({str(p.get("machine")) for p in seen}),
            "first_finished": times[0] if times else None,
            "last_finished": times[-1] if times else None,
            "stated_revisions": stated or []}


def summarize(run: Path, command: str, label: str, stated: list[str] | None = None
              ) -> dict[str, Any]:
    found = results_file(run)
    if found is None or not (run / "manifest.json").is_file():
        raise NotARun(f"no preferences run results in {run} (results.json when every unit "
                      f"is done, {PARTIAL} when the run was stopped): run or rerun its "
                      "command")
    path, complete = found
    results, manifest = _read(path), _read(run / "manifest.json")
    if results.get("schema") != RESULTS_SCHEMA or manifest.get("kind") != "preferences":
        raise NotARun(f"{path}: not a preferences run's results (schema "
                      f"{results.get('schema')!r}); give the folder of `nanobot-memory "
                      "preferences run --out`")
    if results.get("manifest_sha256") != manifest.get("manifest_sha256"):
        raise NotARun(f"{path} was written by another run than {run / 'manifest.json'} "
                      "describes (manifest hashes differ): rerun its command")
    settings = manifest["settings"]
    agent = settings.get("agent")
    if not agent:
        raise NotARun(f"{run}: a retrieval-only run (no agent) has no behaviour to show; "
                      "its exposure figures are in its own results.json and report.html")
    reader = agent.get("kind") == "ideal-reader"
    try:
        command = portable(redact_text(command), run)
    except ValueError as exc:
        raise NotARun(f"--command: {exc} (quote it as the shell ran it)") from None
    skipped = {s["name"] for s in results.get("skipped") or []}
    providers = {}
    for name, p in results["providers"].items():
        overall = p["scores"]["overall"]
        behaviour = headline_ci(overall, "behaviour")
        providers[name] = {
            "memory_form": p.get("memory_form"),
            "personas": len(p.get("personas") or []),
            "tests": overall["tests"],
            # the interval's own n: the tests with a behaviour score
            # None when no test has a behaviour score (an options-only run, all failed)
            "behaviour": _with_method(behaviour),
            # the same score clustered by persona (the tests of one persona share one
            # memory): from stats.MIN_CLUSTERS personas up, else unclustered (``method``)
            "behaviour_by_persona": _with_method((overall.get("ci") or {}).get("behaviour")),
            # failed tests are out of n (not scored 0); ``failures`` counts them by kind
            "scored_tests": overall.get("scored_tests"),
            # scored tests whose memory section was empty (a derived memory empty in all
            # of them produced nothing: its row is the model without memory)
            "empty_memory": overall.get("empty_memory"),
            "acts": overall.get("acts"),  # current / other / both / none
            **named_shares(overall.get("acts") or {}),
            "current_exposure": ci(headline_ci(overall, "current_exposure")),
            # every kind the run's exit code counts (one place: ``failure_counts``)
            "failures": failure_counts({"providers": {name: p}}).get(name, {}),
        }
    pairs = results.get("pairwise") or {}
    caps = {k: v for k, v in (settings.get("persona_caps") or {}).items() if k not in skipped}
    return {
        "schema": SCHEMA,
        "title": "Preference sessions, " + (
            "the ideal reader (a deterministic agent double, no model)" if reader else
            f"nanobot's tools {'off' if settings.get('agent_tools') == 'none' else 'on'}"),
        "label": label,
        "command": command,
        **commit(),
        "machine": machine(),
        "date": manifest["created_at"],
        "agent": ({"kind": "ideal-reader", "model": None, "base_url": None} if reader else
                  {"kind": "nanobot", "model": agent.get("model"),
                   "base_url": redact_text(str(agent["base_url"]))
                   if agent.get("base_url") else None}),
        "settings": {"agent_tools": settings.get("agent_tools"),
                     "max_turns": settings.get("max_turns"),
                     "recognition": settings.get("recognition"),
                     "persona_caps": caps,
                     "budget_tokens": (settings.get("budget") or {}).get("max_tokens")},
        "manifest_sha256": manifest["manifest_sha256"],
        # the code that ran the units, where and when (a run resumes across commits)
        "run_code": run_code(run, stated),
        "complete": complete,  # false: a stopped run, over the units it finished
        # what acting on each attribute's default scores (the scenario's share of tests
        # whose current value is the default): how to read a memory-less row's behaviour
        "default_rate": results.get("default_rate"),
        "skipped": results.get("skipped") or [],
        "providers": providers,
        "pairwise": _pairwise(pairs.get("behaviour")),
        # what memory showed, pair by pair: whether the memories differ at all
        "exposure_pairwise": _pairwise(pairs.get("current_exposure")),
    }


def _with_method(c: dict[str, Any] | None) -> dict[str, Any] | None:
    """An interval with how it was clustered (``method``, ``n_clusters``)."""
    return None if c is None else (ci(c) or {}) | {k: c.get(k) for k in ("method",
                                                                          "n_clusters")}


def _pairwise(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Each pair's difference clustered by attribute (the headline) and by persona; the
    pair is apart only when both are (each clustering alone ignores the other's
    correlation, so one verdict can be too sure), with McNemar's exact p."""
    out = []
    for r in rows or []:
        headline = headline_pair(r)  # by attribute when there is one: it generalises
        apart = bool(headline.get("distinguishable", " > " in headline["verdict"])
                     and r.get("distinguishable", " > " in r["verdict"]))
        out.append({"a": r["a"], "b": r["b"], "difference": headline["difference"],
                    "low": headline["low"], "high": headline["high"], "n": r["n"],
                    "method": headline.get("method"), "n_clusters": headline.get("n_clusters"),
                    "mcnemar_p": headline.get("mcnemar_p"),
                    "by_persona": {k: r.get(k) for k in ("difference", "low", "high",
                                                         "method", "n_clusters", "verdict")},
                    "verdict": headline["verdict"] if apart else "not distinguishable"})
    return out


def named_shares(acts: dict[str, int]) -> dict[str, dict[str, Any] | None]:
    """How often the first reply named any of the attribute's values, and, of those that
    did, how often only the current one: what separates a model that cannot act on
    memory (it names no value) from one that acts on the wrong memory. Wilson intervals
    over the replies, not clustered (the result files keep counts, not the tests)."""
    named = sum(acts.get(k, 0) for k in ("current", "other", "both"))
    total = named + acts.get("none", 0)

    def share(k: int, n: int) -> dict[str, Any] | None:
        if n <= 0:
            return None
        return wilson_ci(k, n).model_dump(include={"value", "low", "high", "n", "method"})

    return {"named_value": share(named, total),
            "current_when_named": share(acts.get("current", 0), named)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="the run's --out folder")
    parser.add_argument("--command", required=True, help="the command that ran it")
    parser.add_argument("--label", default="small-scale run on one model; not comparable "
                        "with published results")
    parser.add_argument("--name", default="preferences_real", help="results file name")
    parser.add_argument("--run-revisions", default="", help="comma-separated commits the "
                        "run's code was at, for units its checkpoint did not record "
                        "(runs started before it recorded them); published as stated")
    parser.add_argument("--results-dir", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args(argv)
    try:
        doc = summarize(args.run, args.command, args.label,
                        [c.strip() for c in args.run_revisions.split(",") if c.strip()])
    except NotARun as exc:
        print(f"--run: {exc}", file=sys.stderr)
        return 2
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"{args.name}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
