"""What a prepared recall takes off the reply path, by history length (full_history).

    python benchmarks/bench_prepared_recall.py [--sizes 30,500,2000,5000] [--rounds 5]
                                               [--calls 40] [--budget 2000]

Without ``prepare_recall`` a turn of a full_history user retrieves on the reply path: it
reads every stored turn of the scope and packs the newest that fit. With it, the turn
reads the store's version (``store_version``: one ``PRAGMA data_version``) and is served
the section prepared after the previous turn's writes landed. For each history length,
in one process, on one SQLite file, the two calls alternate (``--calls`` each per round,
through the adapter's public async API, thread hop included); reported per length: both
p50s and their ratio, each the mean over ``--rounds`` rounds with its 95 % bootstrap
interval. Turns are LoCoMo-like (~25 words, two speakers, a session of 20 turns a day).
Not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _ratios import ratio_line

from nanobot_memory_adapters.conditions.full_history import FullHistory
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
)
from nanobot_memory_adapters.store import StoreProvider

TEXT = ("we talked about the garden the trip to the lake my sister and the new job at "
         "the bakery which starts next month and the dog who loves long walks")


def turns(n: int, scope: MemoryScope) -> list[MemoryEvent]:
    words = TEXT.split()
    start = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    return [MemoryEvent(
        event_id=f"t{i}", run_id=scope.run_id, user_id=scope.persona_id,
        agent_id=scope.agent_id or "nanobot", session_id=f"s{i // 20}", turn_id=str(i),
        timestamp=start + timedelta(days=i // 20, seconds=i % 20),
        messages=[Message(role="user", name=("Caroline", "Melanie")[i % 2],
                          content=" ".join(words[(i + k) % len(words)] for k in range(25)))],
    ) for i in range(n)]


async def timed(call) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def one_size(n: int, rounds: int, calls: int, budget: int, root: Path) -> dict:
    scope = MemoryScope(run_id="bench", persona_id=f"user{n}", agent_id="nanobot")
    adapter = StoreProvider(FullHistory(root / f"h{n}.sqlite3"))
    await adapter.setup_scope(scope)
    for event in turns(n, scope):
        await adapter.record_event(event)
    request = RetrieveRequest(query="-", scope=scope, budget=ContextBudget(max_tokens=budget))
    shown = len((await adapter.retrieve(request)).shown)
    retrieve_p50: list[float] = []
    version_p50: list[float] = []
    for _ in range(rounds):
        r: list[float] = []
        v: list[float] = []
        for _ in range(calls):
            r.append(await timed(lambda: adapter.retrieve(request)))
            v.append(await timed(lambda: adapter.store_version(scope)))
        retrieve_p50.append(statistics.median(r))
        version_p50.append(statistics.median(v))
    await adapter.aclose()
    return {"n": n, "shown": shown, "retrieve": retrieve_p50, "version": version_p50}


def sizes(text: str) -> list[int]:
    """``--sizes``: comma-separated history lengths, each a whole number of turns >= 1
    (argparse turns the error into one usage line, not a ValueError traceback)."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and int(part) >= 1 for part in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give comma-separated turn counts of 1 or more, e.g. 30,500,2000")
    return [int(part) for part in parts]


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=sizes, default=sizes("30,500,2000,5000"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--budget", type=int, default=2000)
    args = parser.parse_args()
    for option in ("rounds", "calls", "budget"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} {getattr(args, option)}: give 1 or more")
    with tempfile.TemporaryDirectory(prefix="bench-prepared-") as tmp:
        for n in args.sizes:
            got = await one_size(n, args.rounds, args.calls, args.budget, Path(tmp))
            print(f"\n== {n} stored turns ({got['shown']} shown at {args.budget} tokens)")
            print(ratio_line("  retrieve p50 (ms, the reply path without it)", got["retrieve"]))
            print(ratio_line("  store_version p50 (ms, the reply path with it)",
                             got["version"]))
            print(ratio_line("  retrieve / store_version",
                             [a / b for a, b in zip(got["retrieve"], got["version"],
                                                    strict=True)]))


if __name__ == "__main__":
    asyncio.run(main())
