"""One unit of a bench (provider x conversation) as a job any executor can run.

A unit builds its own provider from the run's config in the process that runs it (its
embedded store in a directory of its own, a server by URL), seeds ``uuid4`` for itself,
and writes its traces to a file of its own. Nothing is shared between units but the
run's settings, so units can run one after another, side by side in worker processes,
or as Ray tasks on other machines, and give the same results: the driver joins the
units' traces in a fixed order, never in completion order.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pickle
import queue
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.harness.bench_config import ProviderExited, UnitFailed
from nanobot_memory_adapters.harness.safe_paths import joined_name, remove_tree
from nanobot_memory_adapters.harness.seeded_ids import SeededIds
from nanobot_memory_adapters.harness.unit_progress import (
    UnitProgress,
    keeps_store,
    save_progress,
)
from nanobot_memory_adapters.provider import replays_checked_writes

if TYPE_CHECKING:
    from nanobot_memory_adapters.harness.bench_config import BenchConfig
    from nanobot_memory_adapters.harness.datasets.locomo import Conversation

#: progress of a running unit: (unit key, sessions done since the last call, note)
ProgressFn = Callable[[str, int, str], None]


@dataclass
class UnitJob:
    """Everything a unit needs, picklable: the run's settings, the conversation itself
    (a worker on another machine has no dataset file) and where its store lives."""

    cfg: BenchConfig
    provider: str
    conv: Conversation
    points: list[int]
    store_dir: Path | None  # None: a temporary directory where the unit runs
    resume: UnitProgress | None = None  # go on after this session (unit_progress.py)
    manifest_sha256: str = ""  # the run's, written into the unit's progress file

    @property
    def key(self) -> str:
        return unit_key(self.provider, self.conv.sample_id)

    @property
    def sessions(self) -> int:
        return len(self.conv.sessions)


def unit_key(provider: str, conversation: str) -> str:
    """``provider::conversation``, one key per unit: a ``:`` (and ``%``) in the provider's
    name is percent-encoded, so the first ``::`` always ends it (a provider ``a::b`` with
    conversation ``c`` and a provider ``a`` with conversation ``b::c`` stay two units)."""
    return f"{provider.replace('%', '%25').replace(':', '%3A')}::{conversation}"


def part_name(key: str) -> str:
    """The file name of a unit's traces: ``<provider>__<conversation>.jsonl``, both ids
    through ``safe_name`` (one name per unit, never a path)."""
    provider, _, conversation = key.partition("::")
    return joined_name(provider.replace("%3A", ":").replace("%25", "%"), conversation) + ".jsonl"


def shippable(job: UnitJob) -> UnitJob:
    """The job as another process gets it: the judge travels as its endpoint (rebuilt
    there); anything else that cannot be pickled is refused with the reason."""
    cfg = job.cfg
    if cfg.judge is not None and cfg.judge_endpoint is None:
        raise ValueError("a judge given as an object runs in-process only: use --workers 1")
    shipped = dataclasses.replace(job, cfg=dataclasses.replace(cfg, judge=None))
    try:
        pickle.dumps(shipped)
    except Exception as exc:
        raise ValueError(
            f"this run's settings cannot be sent to a worker process ({type(exc).__name__}: "
            f"{exc}); use --workers 1"
        ) from None
    return shipped


async def run_unit(
    job: UnitJob, traces: Path, progress: ProgressFn | None = None
) -> dict[str, Any]:
    """Build the provider, run the unit, close everything; the unit's result dict."""
    cfg = job.cfg
    own_judge = None
    if cfg.judge is None and cfg.judge_endpoint is not None:
        from nanobot_memory_adapters.harness.beam_judge import beam_judge_setup
        from nanobot_memory_adapters.harness.judge import llm_judge_setup
        from nanobot_memory_adapters.harness.lme_judge import lme_judge_setup

        setup = {"longmemeval": lme_judge_setup, "beam": beam_judge_setup}.get(
            cfg.task, llm_judge_setup)
        own_judge = setup(cfg.judge_endpoint)
        cfg = dataclasses.replace(cfg, judge=own_judge)
    temp = None if job.store_dir is not None else tempfile.mkdtemp(prefix="nanobot-memory-unit-")
    try:
        return await _build_and_run(job, cfg, traces, job.store_dir or Path(temp or "."),
                                    progress)
    except SystemExit as exc:  # provider code ended the process: say so (ProviderExited)
        raise ProviderExited.of(job.provider, exc, f"in unit {job.key}") from None
    finally:
        if own_judge is not None:
            with contextlib.suppress(Exception):
                await own_judge.aclose()
        if temp is not None:
            remove_tree(Path(tempfile.gettempdir()), Path(temp))


async def _build_and_run(
    job: UnitJob, cfg: BenchConfig, traces: Path, store: Path, progress: ProgressFn | None
) -> dict[str, Any]:
    from nanobot_memory_adapters.harness.locomo_unit import UnitRunner
    from nanobot_memory_adapters.harness.prepared import prepare_provider
    from nanobot_memory_adapters.tracing import JsonlTraceWriter

    ids = SeededIds(cfg.seed) if cfg.deterministic_ids else None
    writer = JsonlTraceWriter(traces, buffered=True)  # flushed at sessions, points, end
    with ids or contextlib.nullcontext(), contextlib.closing(writer):
        p, reason = await prepare_provider(job.provider, cfg, writer, data_dir=store)
        if p is None:
            raise UnitFailed(f"{job.key}: {reason}")
        if ids is not None:  # after the build: what an SDK draws once per process
            # (mem0's telemetry id) must not shift the unit's ids
            ids.reseed(f"{job.provider}/{job.conv.sample_id}")

        def save(done: UnitProgress) -> None:
            if not keeps_store(job.store_dir):  # a server's, or a pinned path
                return
            done.manifest_sha256 = job.manifest_sha256
            writer.flush()  # the recorded size covers every line of the finished work
            done.trace_bytes = traces.stat().st_size if traces.exists() else 0
            save_progress(traces, done)

        # a store that stays where the next run finds it: the unit may resume mid-way
        on_session = save if replays_checked_writes(p.adapter) else None
        try:
            reporter = _Reporter(job.key, progress) if progress else None
            return await UnitRunner(p, job.conv, job.points, cfg, reporter,
                                    resume=job.resume, on_session=on_session,
                                    ids=ids).run()
        finally:
            with contextlib.suppress(Exception):
                await p.adapter.aclose()


class _Reporter:
    """The ``Progress`` a ``UnitRunner`` talks to, forwarding to a unit-keyed callback."""

    def __init__(self, key: str, fn: ProgressFn) -> None:
        self.key, self.fn = key, fn

    def start(self, provider: str, total: int) -> None:  # the driver knows the total
        pass

    def advance(self, provider: str, steps: int, note: str) -> None:
        self.fn(self.key, steps, note)


# -- streaming (Ray) -----------------------------------------------------------------------


@dataclass
class Streamed:
    """One item a streamed unit yields: progress, a chunk of trace lines, or the result."""

    kind: str  # "progress" | "traces" | "done"
    steps: int = 0
    note: str = ""
    data: bytes = b""
    unit: dict[str, Any] | None = None


def stream_unit(job: UnitJob, poll_s: float = 0.5) -> Iterator[Streamed]:
    """Run the unit in a thread here and yield its progress and its trace lines as they
    are written (whole lines only), then its result: what a Ray task streams back."""
    events: queue.Queue[tuple[int, str]] = queue.Queue()
    box: dict[str, Any] = {}
    folder = Path(tempfile.mkdtemp(prefix="nanobot-memory-traces-"))
    traces = folder / "traces.jsonl"

    def work() -> None:
        try:
            box["unit"] = asyncio.run(
                run_unit(job, traces, lambda _key, steps, note: events.put((steps, note)))
            )
        except BaseException as exc:  # re-raised where the stream is read
            box["error"] = exc

    thread = threading.Thread(target=work, name=f"unit {job.key}", daemon=True)
    thread.start()
    sent = 0
    try:
        while True:
            alive = thread.is_alive()
            with contextlib.suppress(queue.Empty):
                while True:
                    steps, note = events.get_nowait()
                    yield Streamed("progress", steps=steps, note=note)
            if traces.exists():
                with traces.open("rb") as f:
                    f.seek(sent)
                    chunk = f.read()
                whole = chunk[: chunk.rfind(b"\n") + 1]
                if whole:
                    sent += len(whole)
                    yield Streamed("traces", data=whole)
            if not alive:
                break
            thread.join(poll_s)
        if "error" in box:
            raise box["error"]
        yield Streamed("done", unit=box["unit"])
    finally:
        remove_tree(Path(tempfile.gettempdir()), folder)
