"""Recall at scale: one person's retrieve as their history and the gateway's grow.

    python benchmarks/bench_recall_scale.py [--providers full_history,simple_rag,bm25,mem0]
        [--own 1000,5000,20000,100000] [--others 20x20000,100x100000] [--alone-own 200]
        [--cap simple_rag=20000 --cap mem0=2000] [--queries 48] [--out FILE]

Everything goes through the public API: ``load_provider`` builds each provider from its
block (mem0 with an ``llm`` block pointing at the deterministic LLM double from
``tests/llm_double``, which answers at once, so mem0's figures are mem0's and the
adapter's work, not a model's), turns go in with ``record_events`` (one call per LoCoMo
session, or ``record_event`` per turn for a provider without bulk ingest; inside
``ingest_lookahead`` windows of 1,024 turns where the provider declares it, as a bench
unit records them), and every figure is one ``retrieve`` at a 2,000-token
budget. Turns are LoCoMo's (``--dataset``), cycled as often as a size needs, with a
minute between turns; the questions are LoCoMo's, a different one per timed retrieve. For
mem0/simple_rag the query-embedding cache is emptied before every timed retrieve, so each
one embeds its question as a new message would.

``simple_rag_pgvector`` is simple_rag with its vectors in a PostgreSQL + pgvector that the
child starts for itself (``local_postgres.py``, the ``pgvector`` extra); its p50 at
100,000 own turns is also given as a ratio to simple_rag's (the embedded store's) at 1,000.

Two series per provider, each provider in a process of its own (memory is its own):

- ``own``: one store; the person's turns are added up to each size of ``--own`` in turn,
  and at each size: ingest rate of the step, then ``--queries`` timed retrieves (after 5
  untimed), p50/p95 with 95 % bootstrap intervals, the process's RSS.
- ``others``: a store with the person alone (``--alone-own`` turns) and one store per
  ``--others`` entry (``NxT``: N other users holding T turns between them, plus the same
  person); the person's retrieves go to the stores in turn, question by question (the
  order rotating), so a change of the machine's load hits all alike, and each store's
  p50 is given as a ratio to the alone store's (ratio of medians, 95 % bootstrap).

``--cap PROVIDER=N`` skips the sizes and stores that would need more than N turns
ingested into one store for that provider (ingesting through mem0's ``add`` runs at tens
to hundreds of turns a second here); what is skipped is listed. The JSON written
(default ``benchmarks/results/recall_scale-<UTC time>.json``) holds the command, commit,
machine, date, the load average before and after every step, every figure with n and
interval, and the targets met or not. Not a timed test: run it by hand, and read ratios
rather than milliseconds on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BUDGET = 2000
WARMUP = 5
LOOKAHEAD = 1024
PERSON = "person"
RUN = "scale"
VERBATIM = ("full_history", "simple_rag", "bm25")
TARGETS = {
    "others_ratio": ("simple_rag", "mem0", "bm25"),  # 20 users / 20k turns <= 1.5x alone
    "own_20k_ms": ("simple_rag", "bm25"),  # p50 <= 40 ms at 20k own turns
    "own_100k_ms": ("simple_rag", "bm25"),  # p50 <= 100 ms at 100k own turns
}


# -- data ------------------------------------------------------------------------------

def _corpus(dataset: Path) -> tuple[list[list[tuple[str, str]]], list[str]]:
    """LoCoMo's sessions as (speaker, text) lists, and its questions (categories 1-4)."""
    from nanobot_memory_adapters.harness.datasets.locomo import load_locomo

    sessions: list[list[tuple[str, str]]] = []
    questions: list[str] = []
    for conv in load_locomo(dataset):
        for session in conv.sessions:
            sessions.append([(t.speaker, t.content) for t in session.turns])
        questions.extend(q.question for q in conv.questions if 1 <= int(q.category) <= 4)
    return sessions, list(dict.fromkeys(questions))


class Turns:
    """An endless stream of one user's turns, session by session (LoCoMo's, cycled)."""

    def __init__(self, sessions: list[list[tuple[str, str]]], user: str, offset: int) -> None:
        self.sessions, self.user = sessions, user
        self.next_session = offset % len(sessions)
        self.count = 0
        self.t0 = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)

    def take(self, n: int) -> list[list[Any]]:
        """The next ``n`` turns as events, grouped by session (a session may be cut)."""
        from nanobot_memory_adapters.contract import MemoryEvent, Message

        out: list[list[Any]] = []
        while n > 0:
            session = self.sessions[self.next_session % len(self.sessions)]
            number = self.next_session
            self.next_session += 1
            batch = []
            first = session[0][0]
            for speaker, text in session[:n]:
                i = self.count
                self.count += 1
                batch.append(MemoryEvent(
                    event_id=f"{self.user}-{i}", run_id=RUN, user_id=self.user,
                    agent_id="nanobot", session_id=f"{self.user}-s{number}", turn_id=str(i),
                    timestamp=self.t0 + dt.timedelta(minutes=i),
                    messages=[Message(role="user" if speaker == first else "assistant",
                                      content=text, name=speaker.replace(" ", "_"))]))
            n -= len(batch)
            out.append(batch)
        return out


# -- measuring -------------------------------------------------------------------------

def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def _ingest(adapter: Any, sessions: list[list[Any]]) -> float:
    """Record the sessions (``record_events`` each, inside lookahead windows where the
    provider has them); seconds taken."""
    from nanobot_memory_adapters.contract import capabilities_of

    ahead = "ingest_lookahead" in capabilities_of(adapter)
    start = time.perf_counter()
    window: list[list[Any]] = []

    async def flush() -> None:
        if not window:
            return
        events = [e for s in window for e in s]
        if ahead:
            async with adapter.ingest_lookahead(events):
                for s in window:
                    await _record(adapter, s)
        else:
            for s in window:
                await _record(adapter, s)
        window.clear()

    for session in sessions:
        window.append(session)
        if sum(len(s) for s in window) >= LOOKAHEAD:
            await flush()
    await flush()
    return time.perf_counter() - start


async def _record(adapter: Any, events: list[Any]) -> None:
    bulk = getattr(adapter, "record_events", None)  # the bulk_ingest capability
    receipts = (await bulk(events) if bulk is not None
                else [await adapter.record_event(e) for e in events])
    bad = [r for r in receipts if r.status != "committed"]
    if bad:
        raise RuntimeError(f"{len(bad)} write(s) not committed, the first: {bad[0].status}")


async def _retrieve_ms(adapter: Any, query: str) -> float:
    from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest

    _clear_query_cache()
    request = RetrieveRequest(query=query, scope=MemoryScope(
        run_id=RUN, persona_id=PERSON, agent_id="nanobot"),
        budget=ContextBudget(max_tokens=BUDGET))
    start = time.perf_counter()
    await adapter.retrieve(request)  # a failed retrieve raises
    return (time.perf_counter() - start) * 1000


def _clear_query_cache() -> None:
    if "nanobot_memory_adapters.backends.mem0.embed_cache" in sys.modules:
        sys.modules["nanobot_memory_adapters.backends.mem0.embed_cache"].clear()


def _latency(values: list[float]) -> dict[str, Any]:
    from nanobot_memory_adapters.stats import percentile_ci

    out: dict[str, Any] = {"n": len(values), "ms": [round(v, 3) for v in values]}
    for p in (50, 95):
        est = percentile_ci(values, p)
        out[f"p{p}_ms"] = [round(est.value, 2), round(est.low, 2), round(est.high, 2)]
    return out


def _block(provider: str, double_url: str | None, dsn: str | None) -> dict[str, Any]:
    if provider == "simple_rag_pgvector":
        assert dsn
        return {"condition": "simple_rag", "simple_rag": {"vector_store": {
            "provider": "pgvector", "connection_string": dsn}}}
    if provider == "mem0":
        assert double_url
        return {"backend": "mem0", "mem0": {"llm": {"base_url": double_url, "model": "double"}}}
    if provider == "simple_rag":
        return {"condition": "simple_rag"}
    return {"condition": provider}


# -- the two series (one provider, in a child process) ---------------------------------

async def own_series(provider: str, args: argparse.Namespace, tmp: Path,
                     double_url: str | None, dsn: str | None) -> dict[str, Any]:
    from nanobot_memory_adapters import load_provider

    sessions, questions = _corpus(args.dataset)
    adapter = load_provider(_block(provider, double_url, dsn), data_dir=tmp / "own")
    turns = Turns(sessions, PERSON, 0)
    out: dict[str, Any] = {}
    try:
        have = 0
        for size in args.own:
            if size > args.cap.get(provider, size):
                out[str(size)] = {"skipped": f"--cap {provider}={args.cap[provider]}"}
                continue
            load_before = _load()
            seconds = await _ingest(adapter, turns.take(size - have))
            step = size - have
            have = size
            for q in questions[:WARMUP]:
                await _retrieve_ms(adapter, q)
            timed = [await _retrieve_ms(adapter, q) for q in questions[:args.queries]]
            out[str(size)] = {
                "turns": size, "retrieve": _latency(timed),
                "ingest": {"turns": step, "seconds": round(seconds, 2),
                           "turns_per_s": round(step / seconds, 1)},
                "rss_mib": round(_rss_mib(), 1), "load_before": load_before,
                "load_after": _load()}
            print(f"  {provider} own {size}: p50 {out[str(size)]['retrieve']['p50_ms']} ms, "
                  f"ingest {step / seconds:.0f} turns/s, load {_load()}", flush=True)
    finally:
        await adapter.aclose()
    return out


async def others_series(provider: str, args: argparse.Namespace, tmp: Path,
                        double_url: str | None, dsn: str | None) -> dict[str, Any]:
    from nanobot_memory_adapters import load_provider
    from nanobot_memory_adapters.stats import median_ratio

    sessions, questions = _corpus(args.dataset)
    stores: dict[str, Any] = {}
    ingest: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    try:
        for name in ["alone", *[f"{n}x{t}" for n, t in args.others]]:
            n_users, total = (0, 0) if name == "alone" else map(int, name.split("x"))
            need = args.alone_own + total
            if need > args.cap_others.get(provider, need):
                skipped[name] = f"--cap-others {provider}={args.cap_others[provider]}"
                continue
            adapter = load_provider(_block(provider, double_url, dsn), data_dir=tmp / name)
            stores[name] = adapter
            load_before = _load()
            seconds = await _ingest(adapter, Turns(sessions, PERSON, 0).take(args.alone_own))
            for u in range(n_users):  # the others, user by user
                share = total // n_users + (1 if u < total % n_users else 0)
                seconds += await _ingest(adapter, Turns(sessions, f"other{u}", u + 1)
                                         .take(share))
            ingest[name] = {"turns": args.alone_own + total, "seconds": round(seconds, 2),
                            "turns_per_s": round((args.alone_own + total) / seconds, 1),
                            "load_before": load_before, "load_after": _load()}
            print(f"  {provider} store {name}: {ingest[name]['turns_per_s']} turns/s",
                  flush=True)
        names = list(stores)
        for adapter in stores.values():
            for q in questions[:WARMUP]:
                await _retrieve_ms(adapter, q)
        timed: dict[str, list[float]] = {name: [] for name in names}
        load_before = _load()
        for i, q in enumerate(questions[:args.queries]):
            for k in range(len(names)):  # the order rotates question by question
                name = names[(i + k) % len(names)]
                timed[name].append(await _retrieve_ms(stores[name], q))
        out: dict[str, Any] = {"load_before": load_before, "load_after": _load(),
                               "rss_mib": round(_rss_mib(), 1), "skipped": skipped}
        for name in names:
            entry: dict[str, Any] = {"retrieve": _latency(timed[name]), "ingest": ingest[name]}
            if name != "alone" and "alone" in timed:
                ratio = median_ratio(timed[name], timed["alone"])
                entry["ratio_to_alone"] = [round(ratio.value, 3), round(ratio.low, 3),
                                           round(ratio.high, 3)]
            out[name] = entry
            print(f"  {provider} {name}: p50 {entry['retrieve']['p50_ms']} ms"
                  + (f", x{entry['ratio_to_alone']} alone" if "ratio_to_alone" in entry
                     else ""), flush=True)
        return out
    finally:
        for adapter in stores.values():
            await adapter.aclose()


async def child(provider: str, args: argparse.Namespace) -> dict[str, Any]:
    double = None
    if provider == "mem0":
        from tests.llm_double import LLMDouble

        double = LLMDouble()
        double.start()
    try:
        url = double.base_url if double else None
        with tempfile.TemporaryDirectory(prefix="recall-scale-") as tmp:
            dsn = None
            if provider.endswith("_pgvector"):  # a Postgres of its own, stopped after
                from nanobot_memory_adapters import local_postgres

                dsn = local_postgres.dsn(Path(tmp) / "pg")
            try:
                result: dict[str, Any] = {}
                if args.own:
                    result["own"] = await own_series(provider, args, Path(tmp), url, dsn)
                if args.others:
                    result["others"] = await others_series(provider, args, Path(tmp), url,
                                                           dsn)
                result["peak_rss_mib"] = round(_peak_rss_mib(), 1)
                return result
            finally:
                if dsn is not None:
                    local_postgres.stop_server(Path(tmp) / "pg")
    finally:
        if double is not None:
            double.stop()


# -- the parent: one child per provider, the result file --------------------------------

def _targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for provider in TARGETS["others_ratio"]:
        entry = results.get(provider, {}).get("others", {}).get("20x20000", {})
        ratio = entry.get("ratio_to_alone")
        out.append({"target": "20 other users holding 20k turns <= 1.5x alone (p50 ratio)",
                    "provider": provider, "value": ratio,
                    "met": None if ratio is None else ratio[0] <= 1.5})
    from nanobot_memory_adapters.stats import median_ratio

    pg = results.get("simple_rag_pgvector", {}).get("own", {}).get("100000", {})
    base = results.get("simple_rag", {}).get("own", {}).get("1000", {})
    ratio = None
    if "retrieve" in pg and "retrieve" in base:
        est = median_ratio(pg["retrieve"]["ms"], base["retrieve"]["ms"])
        ratio = [round(est.value, 3), round(est.low, 3), round(est.high, 3)]
    out.append({"target": "pgvector at 100k own turns <= 2x the embedded default at 1k "
                "(p50 ratio)", "provider": "simple_rag_pgvector", "value": ratio,
                "met": None if ratio is None else ratio[0] <= 2})
    for size, limit, key in ((20000, 40, "own_20k_ms"), (100000, 100, "own_100k_ms")):
        for provider in TARGETS[key]:
            entry = results.get(provider, {}).get("own", {}).get(str(size), {})
            p50 = entry.get("retrieve", {}).get("p50_ms")
            out.append({"target": f"p50 <= {limit} ms at {size} own turns",
                        "provider": provider, "value": p50,
                        "met": None if p50 is None else p50[0] <= limit})
    return out


def _machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = next((int(line.split()[1]) // 1024 for line in
                Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), None)
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_mib": mem,
            "python": platform.python_version(), "platform": platform.platform()}


def _commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True,
                              check=False).stdout.strip()

    return git("rev-parse", "HEAD") + ("-dirty" if git("status", "--porcelain") else "")


def _count(text: str) -> int | None:
    """A whole number of turns, 1 or more, or None."""
    text = text.strip()
    return int(text) if text.isdigit() and int(text) >= 1 else None


def _sizes(text: str) -> list[int]:
    """``--own``: comma-separated store sizes (argparse reports a bad one in one line)."""
    counts = [_count(x) for x in text.split(",") if x.strip()]
    if not counts or None in counts:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give comma-separated turn counts of 1 or more, e.g. 1000,5000")
    return [c for c in counts if c is not None]


def _others(text: str) -> list[tuple[int, int]]:
    """``--others``: comma-separated ``NxTOTAL`` (N other users sharing TOTAL turns)."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        n, _, total = part.partition("x")
        pair = (_count(n), _count(total))
        if pair[0] is None or pair[1] is None:
            raise argparse.ArgumentTypeError(
                f"{part!r}: give NxTOTAL (N other users, TOTAL turns), e.g. 20x20000")
        out.append((pair[0], pair[1]))
    return out


def _caps(parser: argparse.ArgumentParser, values: list[str], option: str) -> dict[str, int]:
    """``--cap``/``--cap-others`` PROVIDER=N, each checked: a typo is one usage error."""
    caps = {}
    for value in values:
        name, sep, n = value.partition("=")
        count = _count(n)
        if not sep or not name.strip() or count is None:
            parser.error(f"{option} {value!r}: give PROVIDER=N (N turns, 1 or more), "
                         "e.g. mem0=2000")
        caps[name.strip()] = count
    return caps


def _shown(path: Path) -> str:
    """A path as the result file records it: relative to the repository when inside it,
    else its name (no machine's directories in a committed file)."""
    full, repo = path.resolve(), REPO.resolve()
    if full.is_relative_to(repo.parent):  # the repository or a sibling (../shared/data)
        return os.path.relpath(full, repo)
    return path.name


def _command() -> str:
    """The command that reproduces the run, with repository-relative paths."""
    args = [_shown(Path(a)) if os.sep in a and Path(a).exists() else a
            for a in sys.argv[1:]]
    return " ".join(["python", "benchmarks/bench_recall_scale.py", *args])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--providers",
                        default="full_history,simple_rag,bm25,mem0,simple_rag_pgvector")
    parser.add_argument("--own", type=_sizes, default=_sizes("1000,5000,20000,100000"))
    parser.add_argument("--others", type=_others, default=_others("20x20000,100x100000"))
    # simple_rag_pgvector: simple_rag on a Postgres + pgvector of its own (extra pgvector)
    parser.add_argument("--alone-own", type=int, default=200)
    parser.add_argument("--cap", action="append", default=[],
                        help="PROVIDER=N: skip own sizes above N turns for that provider")
    parser.add_argument("--cap-others", action="append", default=[],
                        help="PROVIDER=N: skip others stores needing more than N turns")
    parser.add_argument("--queries", type=int, default=48)
    parser.add_argument("--dataset", type=Path,
                        default=REPO.parent / "shared/data/locomo/locomo7.json")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.cap = _caps(parser, args.cap, "--cap")
    args.cap_others = _caps(parser, args.cap_others, "--cap-others")
    if args.queries < 40:
        parser.error("--queries: at least 40 (a p50 of fewer is too rough)")
    if args.child:
        from loguru import logger

        logger.remove()  # the SDKs' debug chatter: warnings and worse only
        logger.add(sys.stderr, level="WARNING")
        result = asyncio.run(child(args.child, args))
        args.child_out.write_text(json.dumps(result))
        return 0
    started = dt.datetime.now(dt.UTC)
    out = args.out or REPO / "benchmarks/results" / (
        f"recall_scale-{started.strftime('%Y%m%dT%H%M%SZ')}.json")
    report: dict[str, Any] = {
        "benchmark": "bench_recall_scale", "command": _command(),
        "commit": _commit(), "machine": _machine(), "date": started.isoformat(),
        "settings": {"budget_tokens": BUDGET, "queries": args.queries, "warmup": WARMUP,
                     "own": args.own, "others": [f"{n}x{t}" for n, t in args.others],
                     "alone_own": args.alone_own, "caps": args.cap,
                     "caps_others": args.cap_others,
                     "dataset": _shown(args.dataset)},
        "load_start": _load(), "results": {}}
    for provider in [p.strip() for p in args.providers.split(",") if p.strip()]:
        print(f"{provider} (load {_load()})", flush=True)
        with tempfile.NamedTemporaryFile(suffix=".json") as part:
            argv = [sys.executable, __file__, "--child", provider, "--child-out", part.name,
                    "--own", ",".join(map(str, args.own)),
                    "--others", ",".join(f"{n}x{t}" for n, t in args.others),
                    "--alone-own", str(args.alone_own), "--queries", str(args.queries),
                    "--dataset", str(args.dataset),
                    *[a for k, v in args.cap.items() for a in ("--cap", f"{k}={v}")],
                    *[a for k, v in args.cap_others.items()
                      for a in ("--cap-others", f"{k}={v}")]]
            done = subprocess.run(argv, check=False)
            report["results"][provider] = (json.loads(Path(part.name).read_text())
                                           if done.returncode == 0
                                           else {"error": f"exit {done.returncode}"})
    report["load_end"] = _load()
    report["finished"] = dt.datetime.now(dt.UTC).isoformat()
    report["targets"] = _targets(report["results"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    for t in report["targets"]:
        verdict = {True: "met", False: "NOT met", None: "not measured"}[t["met"]]
        print(f"{t['provider']}: {t['target']}: {t['value']} -> {verdict}")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
