"""The four architectures and nanobot's own memory side by side, on one model, with cost
beside quality (docs/results.md).

Two tables, both at 2,000 tokens for every provider, with 95 % intervals and pairwise
verdicts: LoCoMo conv-26's first ``--sessions`` sessions and every question whose
evidence lies there (``nanobot-memory bench``), and the LongMemEval-shaped generated set
(``benchmarks/longmemeval_gen.py``, ``bench --task longmemeval``). Beside quality, per
provider: LLM calls and tokens per recorded turn (counted at the HTTP boundary by
``harness/llm_meter.py``, which every provider's model endpoint goes through: mem0,
Graphiti and nanobot's Dream by their blocks, the MemOS server by its start command, the
Honcho server by its deriver's settings), ingest time, retrieve p50/p95 and readiness
waits (bench's results.json).

    python benchmarks/side_by_side.py run --llm-base-url URL --llm-model M \\
        [--llm-api-key-env VAR] [--honcho-url URL] [--memos-url URL | --memos-port P] \\
        [--workers N] [--leave-out P,...] \\
        [--label TEXT] [--out bench-out/side-by-side] [--results-dir benchmarks/results]
    python benchmarks/side_by_side.py summarize --out DIR   # results JSON from a run's outputs
    python benchmarks/render_results.py                      # docs/results.md

Every step resumes: bench keeps a checkpoint per unit (rerun the same command), the MemOS
server is reused when healthy, the meter log is append-only. A real Honcho server is not
started here (its code is not part of this project): start one whose deriver and
embeddings use ``http://127.0.0.1:<meter port>/u/honcho`` (printed at start) and pass
``--honcho-url``; without one Honcho is skipped with that reason. A provider the bench
skips is listed with its reason. ``--workers N`` runs N units at once (API-bound runs; a
one-slot local model gains nothing).

Exit codes: 0 clean; 4 a provider asked for was skipped or failed (the results files are
written and name it); 3 a readiness wait timed out (results written, measured on memory
still pending: raise ``--readiness-timeout``); another bench exit (2 bad arguments, 130
interrupted) leaves that table unwritten: rerun the same command to resume.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from nanobot_memory_adapters.harness.llm_meter import LLMMeter, read_log, summarize
from nanobot_memory_adapters.redaction import is_variable_name, redact_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import ci as _ci
from _provenance import commit as _commit
from _provenance import machine as _machine
from _provenance import portable

REPO = Path(__file__).resolve().parents[1]

SCHEMA = "nanobot-memory-side-by-side/1"
BUDGET = 2000
# in the order the table shows them (the issue's)
PROVIDERS = ("no_memory", "full_history", "simple_rag", "bm25", "rolling_summary", "mem0",
             "graphiti", "memos", "honcho")
# One worker (a one-slot local model): cheapest first, so a run cut short has filled most
# of the table. More workers (an API): slowest first, so no worker idles at the end.
CHEAPEST_FIRST = ("no_memory", "full_history", "bm25", "simple_rag", "rolling_summary",
                  "mem0", "memos", "honcho", "graphiti")
LLM_PROVIDERS = ("rolling_summary", "mem0", "graphiti", "memos", "honcho")
TASKS = ("locomo", "lme")


def _loopback(url: str) -> bool:
    return (urlparse(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


def provider_blocks(meter: LLMMeter, args: argparse.Namespace, memos_url: str | None
                    ) -> dict[str, dict[str, Any]]:
    """Each provider's block: every model endpoint is the meter's URL for that provider."""
    def llm(name: str) -> dict[str, Any]:
        return {"base_url": meter.url_for(name), "model": args.llm_model,
                "api_key_env": args.llm_api_key_env}

    graphiti: dict[str, Any] = {"llm": llm("graphiti")}
    if not _loopback(args.llm_base_url):  # the meter is local; the endpoint is not
        from graphiti_core.helpers import SEMAPHORE_LIMIT

        graphiti["max_coroutines"] = SEMAPHORE_LIMIT
    blocks: dict[str, dict[str, Any]] = {
        "mem0": {"llm": llm("mem0")}, "graphiti": graphiti,
        "rolling_summary": {"llm": llm("rolling_summary")}, "bm25": {},
    }
    if args.honcho_url:
        blocks["honcho"] = {"base_url": args.honcho_url}
    if memos_url:
        blocks["memos"] = {"base_url": memos_url}
    return blocks


def start_memos(args: argparse.Namespace, meter: LLMMeter) -> tuple[str | None, str | None]:
    """(url, None) of a MemOS server whose LLM is the meter's, or (None, why not)."""
    if args.memos_url:
        return args.memos_url, None
    home = (args.memos_home or args.out / "memos").absolute()
    env = {**os.environ, "NANOBOT_MEMORY_MEMOS_LLM_API_KEY":
           os.environ.get(args.llm_api_key_env) or "not-needed"}
    cmd = [sys.executable, "-m", "nanobot_memory_adapters.cli", "memos-server", "start",
           "--home", str(home), "--port", str(args.memos_port),
           "--llm-base-url", meter.url_for("memos"),
           "--llm-model", args.llm_model]
    print(f"[side-by-side] MemOS server ({home}; provisioning a venv takes minutes once)",
          flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        return None, ("memos-server start failed: "
                      + redact_text((proc.stderr or proc.stdout).strip().splitlines()[-1]
                                    if (proc.stderr or proc.stdout).strip() else "no output"))
    status = json.loads(proc.stdout)
    return status.get("url") or status.get("base_url"), None


def bench_command(task: str, args: argparse.Namespace, meter: LLMMeter, config: Path,
                  providers: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "nanobot_memory_adapters.cli", "bench",
           "--providers", ",".join(providers), "--budget-tokens", str(BUDGET),
           "--provider-config", str(config), "--out", str(args.out / task),
           "--workers", str(args.workers), "--readiness-timeout", str(args.readiness_timeout)]
    if task == "locomo":
        cmd += ["--dataset", str(args.locomo), "--conversations", args.conversation,
                "--max-sessions", str(args.sessions)]
    else:
        cmd += ["--task", "longmemeval", "--dataset", str(lme_dataset(args))]
    if left_out := [p for p in args.leave_out.split(",") if p in providers]:
        cmd += ["--leave-out", ",".join(left_out)]  # same run, resumable without it
    if args.judge:
        cmd += ["--llm-base-url", meter.url_for("judge"), "--llm-model", args.llm_model,
                "--llm-api-key-env", args.llm_api_key_env]
    return cmd


def lme_dataset(args: argparse.Namespace) -> Path:
    path = args.out / f"lme-q{args.lme_questions}-s{args.lme_sessions}.json"
    if not path.exists():
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "longmemeval_gen.py"),
                        str(path), "--questions", str(args.lme_questions),
                        "--sessions", str(args.lme_sessions)], check=True)
    return path


def run(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    meter = LLMMeter(args.llm_base_url, args.out / "llm_meter.jsonl", args.meter_port,
                     args.embed_base_url).start()
    try:
        print(f"[side-by-side] model endpoint metered at http://127.0.0.1:{meter.port}/u/"
              f"<provider> -> {redact_text(args.llm_base_url)}", flush=True)
        print(f"[side-by-side] a Honcho server's LLM and embeddings must use "
              f"{meter.url_for('honcho')} (LLM_OPENAI_BASE_URL, "
              "EMBEDDING_MODEL_CONFIG__OVERRIDES__BASE_URL)", flush=True)
        order = CHEAPEST_FIRST if args.workers == 1 else CHEAPEST_FIRST[::-1]
        wanted = [p for p in order if p in args.providers]
        skipped: dict[str, str] = {}
        memos_url = None
        if "memos" in wanted:
            memos_url, why = start_memos(args, meter)
            if why:
                skipped["memos"] = why
        if "honcho" in wanted and not args.honcho_url:
            skipped["honcho"] = ("no --honcho-url: needs a real Honcho server (not in the "
                                 "package registries; docs/honcho.md says how to run one)")
        running = [p for p in wanted if p not in skipped]
        command = redact_text(shlex.join([sys.argv[0], *sys.argv[1:]]))
        before = (json.loads((args.out / "run.json").read_text())
                  if (args.out / "run.json").is_file() else {})
        (args.out / "run.json").write_text(json.dumps({  # what summarize reports
            "command": command,  # each table's own: a later run may do only one task
            "commands": {**before.get("commands", {}), **{t: command for t in args.tasks}},
            "label": args.label, "llm_base_url": redact_text(args.llm_base_url),
            "llm_model": args.llm_model,
            "embed_base_url": redact_text(args.embed_base_url) if args.embed_base_url else None,
            "conversation": args.conversation,
            "sessions": args.sessions, "lme_questions": args.lme_questions,
            "lme_sessions": args.lme_sessions, "skipped": skipped,
            **_commit(), "machine": _machine()}, indent=1))
        config = args.out / "providers.json"
        config.write_text(json.dumps(provider_blocks(meter, args, memos_url), indent=1))
        code = 0
        for task in args.tasks:
            cmd = bench_command(task, args, meter, config, running)
            print(f"[side-by-side] {task}: {shlex.join(cmd)}", flush=True)
            started = time.time()
            rc = subprocess.run(cmd, cwd=REPO, check=False).returncode
            with (args.out / "windows.jsonl").open("a", encoding="utf-8") as f:
                f.write(json.dumps({"task": task, "started": started, "ended": time.time(),
                                    "exit": rc}) + "\n")
            # 3: a readiness wait timed out, 4: a provider failed or was skipped: the run
            # finished and says so (its exit is in the results JSON); anything else did not
            # a unit that failed outright (its provider could not be built) also exits 4,
            # before any results: no summary then, only the way on
            if rc not in (0, 3, 4) or not (args.out / task / "results.json").exists():
                print(f"[side-by-side] {task}: bench exited {rc} without results; fix what "
                      "it said and rerun the same command to resume", file=sys.stderr)
                code = code or rc or 1
                continue
            path = write_summary(args.out, task, args.results_dir, args.name)
            print(f"[side-by-side] {task}: wrote {path}", flush=True)
            code = code or rc
        for name, why in skipped.items():
            print(f"[side-by-side] skipped {name}: {why}", file=sys.stderr)
        return code or (4 if skipped else 0)  # as bench: a provider asked for is missing
    finally:
        meter.stop()


# -- the results JSON ----------------------------------------------------------------------


def _pair(r: dict[str, Any], value_key: str = "value") -> dict[str, Any]:
    return {"a": r["a"], "b": r["b"], "difference": r[value_key], "low": r["low"],
            "high": r["high"], "n": r["n"], "p": r.get("p_value"),
            "verdict": r["verdict"]}


def unit_windows(task_out: Path, provider: str) -> list[tuple[float, float]]:
    """When each of the provider's units ran: the first and last trace time of each unit
    file (``units/<provider>__<unit>.jsonl``). Read from the units themselves, so a bench
    that was stopped and resumed (across days) still has its model calls counted, and
    only the calls of the unit attempts the results come from."""
    spans = []
    for path in sorted((task_out / "units").glob(f"{provider}__*.jsonl")):
        times = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                at = (json.loads(line).get("trace") or {}).get("at")
            except ValueError:
                continue
            if at:
                times.append(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())
        if times:
            spans.append((min(times), max(times)))
    return spans


def cost(out: Path, task: str, results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    calls = list(read_log(out / "llm_meter.jsonl"))
    metered = {name: summarize([c for c in calls if c["label"] == name],
                               unit_windows(out / task, name)).get(name)
               for name in results["providers"]}
    table: dict[str, dict[str, Any]] = {}
    for name, m in results["providers"].items():
        t, calls = m["timing"], metered.get(name)
        turns = m.get("events_recorded") or 0
        entry: dict[str, Any] = {
            "recorded_turns": turns, "ingest_s": t.get("ingest_s"),
            "retrieve_ms": {k: t["retrieve_latency_ms"].get(k) for k in ("p50", "p95", "n")},
            "readiness_wait_s": t.get("readiness_wait_s"),
            "context_tokens_mean": (m.get("context_tokens") or {}).get("mean"),
            "failures": sum((m.get("failures") or {}).values()),
            "llm": None,
        }
        if name in LLM_PROVIDERS:
            if not calls or not (calls["chat_calls"] or calls["embedding_calls"]):
                entry["llm_note"] = ("no model call went through the meter: its model was "
                                     "not pointed at the run's meter (figures unknown)")
            else:
                tokens = calls["chat_prompt_tokens"] + calls["chat_completion_tokens"]
                entry["llm"] = {**calls, **({
                    "chat_calls_per_turn": round(calls["chat_calls"] / turns, 4),
                    "chat_tokens_per_turn": round(tokens / turns, 1),
                    "embedding_calls_per_turn": round(calls["embedding_calls"] / turns, 4),
                } if turns else {})}
        else:
            entry["llm"] = {"chat_calls": 0, "chat_calls_per_turn": 0.0,
                            "chat_tokens_per_turn": 0.0, "embedding_calls_per_turn": 0.0,
                            "note": "no model"}
        table[name] = entry
    return table


def _windows(out: Path) -> list[dict[str, Any]]:
    path = out / "windows.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def locomo_quality(results: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    intervals = results.get("intervals") or {}
    judged = (results.get("judged") or {}).get("providers") or {}
    quality = {}
    for name, m in results["providers"].items():
        iv = (intervals.get("providers") or {}).get(name) or {}
        quality[name] = {"memory_form": m.get("memory_form"),
                         "turn_recall": _ci(iv.get("turn")),
                         "provenance_recall": _ci(iv.get("provenance")),
                         "answer_lift": _ci(iv.get("answer_lift")),
                         "judged_accuracy": _ci((judged.get(name) or {}).get("accuracy"))
                         if judged else None}
    pairwise = {metric: [_pair(r) for r in rows]
                for metric, rows in (intervals.get("pairwise") or {}).items()
                if metric in ("turn", "provenance", "answer_lift")}
    return quality, pairwise


LME_METRICS = ("session_any_shown", "turn_all_shown", "answer_recall")


def lme_quality(out: Path, results: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bench's LongMemEval figures, answer recall (the gold in the context, the
    LoCoMo rule: it sees memories whose items cannot name their source turns, which the
    retrieval metrics read as n/a), and pairwise verdicts over the same questions
    (stats.paired_difference, from traces.jsonl's ask lines: bench has none for this
    task)."""
    from nanobot_memory_adapters.harness.lme_metrics import ask_scores, read_asks
    from nanobot_memory_adapters.harness.metrics import answer_present, context_answer_text
    from nanobot_memory_adapters.stats import mean_ci, paired_difference

    block = (results.get("longmemeval") or {}).get("providers") or {}
    quality = {}
    for name, m in results["providers"].items():
        o = ((block.get(name) or {}).get("retrieval") or {}).get("overall") or {}
        qa = ((block.get(name) or {}).get("qa") or {}).get("overall") or {}
        quality[name] = {"memory_form": m.get("memory_form"),
                         **{k: _ci(o.get(k)) for k in (*LME_METRICS, "session_any@5")},
                         "judged_accuracy": _ci(qa.get("accuracy"))}
    events, asks = read_asks(out / "lme" / "traces.jsonl",
                             lambda r: r.get("benchmark") == "longmemeval")
    per: dict[str, dict[str, dict[str, float]]] = {}
    for r in asks:
        if r.get("budget_tokens", BUDGET) != BUDGET:
            continue
        scores = ask_scores(r.get("shown_sources") or [], r.get("ranked_sources") or [],
                            events[r["unit"]], r["turn_evidence"], r["answer_sessions"],
                            bool(r["abstention"]))
        row = {k: v for k, v in scores.items() if v is not None}
        if not r["abstention"] and r.get("answer_applicable", True):
            row["answer_recall"] = float(answer_present(
                r["gold"], context_answer_text(r.get("context") or "")))
        per.setdefault(r["provider"], {})[r["question_id"]] = row
    for name, rows in per.items():
        values = [row["answer_recall"] for row in rows.values() if "answer_recall" in row]
        if name in quality and values:
            est = mean_ci(values)
            quality[name]["answer_recall"] = {"value": est.value, "low": est.low,
                                              "high": est.high, "n": est.n}
    names = [n for n in results["providers"] if n in per]
    pairwise: dict[str, list[dict[str, Any]]] = {}
    for metric in LME_METRICS:
        rows = []
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                keys = [q for q in per[a] if metric in per[a][q]
                        and metric in per.get(b, {}).get(q, {})]
                if not keys:
                    continue
                d = paired_difference([per[a][q][metric] for q in keys],
                                      [per[b][q][metric] for q in keys], names=(a, b))
                rows.append({"a": a, "b": b, "difference": d.value, "low": d.low,
                             "high": d.high, "n": d.n, "p": d.p_value,
                             "verdict": d.verdict})
        pairwise[metric] = rows
    return quality, pairwise


def empty_notes(task_out: Path, results: dict[str, Any]) -> dict[str, str]:
    """Providers with memory whose section was empty for every question: say so, with
    the retrieve warning they gave most (why it is empty), so a 0 reads as measured."""
    notes = {}
    for name, m in results["providers"].items():
        if (m.get("memory_form") in (None, "none")
                or (m.get("context_tokens") or {}).get("mean") not in (0, 0.0)):
            continue
        said: Counter[str] = Counter()
        for path in (task_out / "units").glob(f"{name}__*.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                trace = json.loads(line).get("trace") or {}
                if trace.get("operation") == "retrieve":
                    said.update(trace.get("warnings") or [])
        why = f" (retrieve said: {said.most_common(1)[0][0]})" if said else ""
        notes[name] = f"an empty section for every question{why}"
    return notes


def left_out_measured(run_out: Path, task: str, name: str) -> str:
    """What a provider left out of the run had done by then (its model calls, from the
    meter; its finished sessions, from its units' progress files): the reason in figures."""
    calls = [c for c in read_log(run_out / "llm_meter.jsonl") if c["label"] == name]
    if not calls:
        return ""
    model_s = sum(c["ended"] - c["started"] for c in calls)
    cut = sum(1 for c in calls if c.get("completion_tokens", 0) >= 4000)
    sessions = [json.loads(p.read_text()).get("session", 0)
                for p in (run_out / task / "units").glob(f"{name}__*.progress.json")]
    return (f"; measured in the run's meter log before it was left out: {len(calls)} "
            f"model calls over "
            f"{model_s / 3600:.1f} h ({model_s / len(calls):.0f} s a call, {cut} answers "
            f"of 4,000+ tokens), {sum(sessions)} session(s) finished")


def write_summary(run_out: Path, task: str, results_dir: Path, name: str) -> Path:
    """``<results_dir>/<name>_<task>.json``: one table's figures with what reproduces them
    (command, commit, machine, date, model), from the run's outputs alone."""
    out = run_out / task
    ran = json.loads((run_out / "run.json").read_text())
    results = json.loads((out / "results.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    windows = [w for w in _windows(run_out) if w["task"] == task]
    quality, pairwise = (locomo_quality(results) if task == "locomo"
                         else lme_quality(run_out, results))
    spent = cost(run_out, task, results)
    order = [p for p in PROVIDERS if p in results["providers"]]
    skips = [{"name": s["name"], "reason": s["reason"] + (
        left_out_measured(run_out, task, s["name"]) if "--leave-out" in s["reason"] else "")}
        for s in results.get("skipped", [])]
    skips += [{"name": n, "reason": r} for n, r in ran["skipped"].items()]
    doc = {
        "schema": SCHEMA, "task": task,
        "title": (f"LoCoMo {ran['conversation']}, first {ran['sessions']} sessions"
                  if task == "locomo" else "LongMemEval-shaped generated set "
                  f"({ran['lme_questions']} questions x {ran['lme_sessions']} sessions)"),
        "label": ran["label"],
        "command": portable(ran.get("commands", {}).get(task, ran["command"]), run_out),
        "commit": ran["commit"], "dirty": ran["dirty"], "machine": ran["machine"],
        "date": datetime.fromtimestamp(windows[-1]["ended"] if windows else time.time(),
                                       UTC).isoformat(timespec="seconds"),
        "model": {"base_url": ran["llm_base_url"], "model": ran["llm_model"],
                  "embeddings_base_url": ran.get("embed_base_url")},
        "budget_tokens": BUDGET,
        "bench_exit": windows[-1]["exit"] if windows else None,
        "wall_s": round(sum(u.get("wall_s") or 0.0 for u in json.loads(
            (out / "checkpoint.json").read_text())["units"].values()), 1),  # units' own
        "dataset": manifest.get("dataset"),
        "manifest_sha256": results.get("manifest_sha256"),
        "metrics_sha256": results.get("metrics_sha256"),
        "providers": {n: {"questions": results["providers"][n].get("questions"),
                          "asks": results["providers"][n].get("asks"),
                          "quality": quality[n], "cost": spent[n]} for n in order},
        "pairwise": pairwise,
        "skipped": skips,
        "notes": empty_notes(out, results),
        "outputs": f"OUT/{task}",
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}_{task}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("run", "summarize"):
        p = sub.add_parser(name)
        p.add_argument("--out", type=Path, default=REPO / "bench-out" / "side-by-side")
        p.add_argument("--results-dir", type=Path, default=REPO / "benchmarks" / "results")
        p.add_argument("--name", default="side_by_side", help="results file prefix")
        p.add_argument("--tasks", default="locomo,lme")
    run_p = sub.choices["run"]
    run_p.add_argument("--label", default="small-scale run on one model; not comparable "
                       "with published results")
    run_p.add_argument("--llm-base-url", required=True)
    run_p.add_argument("--llm-model", required=True)
    run_p.add_argument("--llm-api-key-env", default="OPENAI_API_KEY")
    run_p.add_argument("--conversation", default="conv-26")
    run_p.add_argument("--sessions", type=int, default=5)
    run_p.add_argument("--lme-questions", type=int, default=8,
                       help="answerable questions, each with a haystack of its own")
    run_p.add_argument("--lme-sessions", type=int, default=14,
                       help="sessions per haystack (at least 13-14 come anyway: the "
                       "evidence and 12 distractors; 2 turns each)")
    run_p.add_argument("--providers", default=",".join(PROVIDERS))
    run_p.add_argument("--embed-base-url", help="an endpoint for /embeddings calls (the "
                       "Honcho server's; default: --llm-base-url's)")
    run_p.add_argument("--honcho-url")
    run_p.add_argument("--memos-url")
    run_p.add_argument("--memos-home", type=Path)
    run_p.add_argument("--leave-out", default="",
                       help="providers (comma-separated) not run this time (bench's "
                       "--leave-out: the results list them as skipped; rerun without it "
                       "to resume them)")
    run_p.add_argument("--memos-port", type=int, default=8797,
                       help="the MemOS server's port; fixed so a resumed run has the same "
                       "manifest (its base_url is in it)")
    run_p.add_argument("--workers", type=int, default=1)
    run_p.add_argument("--meter-port", type=int, default=8796)
    run_p.add_argument("--readiness-timeout", type=float, default=3600.0)
    run_p.add_argument("--judge", action="store_true",
                       help="also the LLM judge (answer + grade per question; many calls)")
    run_p.add_argument("--locomo", type=Path,
                       default=REPO.parent / "shared" / "data" / "locomo" / "locomo7.json")
    args = parser.parse_args(argv)
    if args.cmd == "run" and not is_variable_name(args.llm_api_key_env):
        # a key pasted here would be written to providers.json and printed as a "name"
        parser.error("--llm-api-key-env takes the NAME of an environment variable "
                     "(letters, digits, _), not its value, e.g. OPENAI_API_KEY")
    args.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    bad = [t for t in args.tasks if t not in TASKS]
    if bad:
        parser.error(f"--tasks {','.join(bad)}: use locomo and/or lme")
    args.out = args.out.absolute()
    if args.cmd == "summarize":
        done = [t for t in args.tasks if (args.out / t / "results.json").is_file()]
        if not done:  # a typo in --out would otherwise print nothing and exit 0
            sub.choices["summarize"].error(
                f"--out {args.out}: no side-by-side run there (no "
                f"{' or '.join(f'{t}/results.json' for t in args.tasks)}); give the --out "
                "of a finished run")
        for task in done:
            print(write_summary(args.out, task, args.results_dir, args.name))
        return 0
    args.providers = [p.strip() for p in args.providers.split(",") if p.strip()]
    unknown = [p for p in args.providers if p not in PROVIDERS]
    if unknown:
        parser.error(f"--providers {','.join(unknown)}: use some of {','.join(PROVIDERS)}")
    if args.workers < 1:
        parser.error("--workers: 1 or more")
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
