"""Where a bench's units run: in this process, in local worker processes, or on Ray.

Every executor runs :func:`~nanobot_memory_adapters.harness.units.run_unit` for each job
and tells the driver as units start, advance and finish; the driver checkpoints each
finished unit and joins the units' traces in a fixed order, so the outputs do not depend
on the executor, on the number of workers or on the order units finish in.

- ``local`` with one worker: the units one after another in this process.
- ``local`` with N workers: a pool of N spawned worker processes (the standard library's
  ``ProcessPoolExecutor``), one unit at a time in each: a unit's seeded ids, its SDK's
  threads and its embedded store stay in its process.
- ``ray``: each unit is a Ray task (``ray`` extra) that builds its provider on its worker
  (embedded stores in a worker-local temporary directory) and streams its progress and
  trace lines back as it goes; ``--ray-address`` joins a running cluster, without it a
  local Ray instance is started for the run. At most N tasks are in flight.

A provider's ``max_concurrent_units`` (``provider.max_concurrent_units``) caps how many
of its units run at once (a server that tolerates only so many writers); units of other
providers fill the remaining workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Protocol

# EXECUTORS and ExecutionPlan live in bench_config; named here too for the CLI and tests
from nanobot_memory_adapters.harness.bench_config import EXECUTORS as EXECUTORS
from nanobot_memory_adapters.harness.bench_config import ExecutionPlan
from nanobot_memory_adapters.harness.units import UnitJob, part_name, run_unit, shippable


class UnitDisplay(Protocol):
    """What the driver shows while units run (a rich progress, or nothing)."""

    def planned(self, total: int, done: int) -> None: ...
    def started(self, key: str, total: int) -> None: ...
    def advanced(self, key: str, steps: int, note: str) -> None: ...
    def finished(self, key: str) -> None: ...


class NoDisplay:
    def planned(self, total: int, done: int) -> None:
        pass

    def started(self, key: str, total: int) -> None:
        pass

    def advanced(self, key: str, steps: int, note: str) -> None:
        pass

    def finished(self, key: str) -> None:
        pass


OnDone = Callable[[UnitJob, dict[str, Any]], None]


async def execute(
    plan: ExecutionPlan, jobs: list[UnitJob], parts: Path, display: UnitDisplay, on_done: OnDone
) -> None:
    """Run ``jobs``; each unit's traces land in ``parts/<unit>.jsonl``; ``on_done`` is
    called (in the driver, one at a time) as each unit finishes. The first unit that
    fails stops the run (finished units stay checkpointed) and its error is raised."""
    parts.mkdir(parents=True, exist_ok=True)
    if not jobs:
        return
    if plan.executor == "ray":
        await _Ray(plan).run(jobs, parts, display, on_done)
    elif plan.workers <= 1:
        for job in jobs:
            await _in_this_process(job, parts, display, on_done)
    else:
        await _Pool(plan).run(jobs, parts, display, on_done)


async def _in_this_process(
    job: UnitJob, parts: Path, display: UnitDisplay, on_done: OnDone
) -> None:
    display.started(job.key, job.sessions)
    unit = await run_unit(job, parts / part_name(job.key), display.advanced)
    on_done(job, unit)
    display.finished(job.key)


async def _bounded(
    plan: ExecutionPlan, jobs: list[UnitJob], start: Callable[[UnitJob], Awaitable[None]]
) -> None:
    """Run ``start(job)`` for every job, at most ``plan.workers`` at once and at most a
    provider's limit of its units at once; the first failure cancels the rest."""
    workers = asyncio.Semaphore(max(1, plan.workers))
    limits = {name: asyncio.Semaphore(n) for name, n in plan.limits.items()}

    async def one(job: UnitJob) -> None:
        async with limits.get(job.provider) or contextlib.nullcontext(), workers:
            await start(job)

    tasks = [asyncio.ensure_future(one(job)) for job in jobs]
    try:
        for task in asyncio.as_completed(tasks):
            await task
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- local worker processes ------------------------------------------------------------------


def _die_with_parent() -> None:
    """Pool initializer: a worker whose driver was killed (SIGKILL, OOM) must not go on
    writing its unit's trace and store while a resumed run rebuilds them. Linux's
    PR_SET_PDEATHSIG ends it with the driver; elsewhere a watchdog thread does."""
    import ctypes
    import signal
    import sys
    import threading

    parent = os.getppid()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if os.getppid() != parent:  # the parent died before the call took effect
                os._exit(1)
            return

    def watch() -> None:  # pragma: no cover - non-Linux
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


#: Imported once in the fork server, so each worker starts without paying for them; the
#: first routes the SDKs' import-time warnings away from the bench's stderr.
PRELOAD = ["nanobot_memory_adapters.harness.worker_preload",
           "nanobot_memory_adapters.harness.units", "torch", "sentence_transformers",
           "onnxruntime", "qdrant_client", "mem0", "graphiti_core", "kuzu"]


def _worker_context() -> Any:
    """Workers fork from a fork server that imported the heavy SDKs once (POSIX); the
    server forks before any SDK starts a thread, so no worker inherits one. Elsewhere:
    spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # a module that is missing is skipped
    return context


def _worker_entry(
    job: UnitJob, traces: str, events: Any, logging: tuple[str, str | None]
) -> dict[str, Any]:
    """A pool worker: log like the driver, run one unit, report progress on ``events``."""
    from nanobot_memory_adapters.logs import configure_logging

    level, file = logging
    configure_logging(level, Path(file) if file else None)
    return asyncio.run(
        run_unit(job, Path(traces), lambda key, steps, note: events.put((key, steps, note)))
    )


class _Pool:
    def __init__(self, plan: ExecutionPlan) -> None:
        self.plan = plan

    async def run(
        self, jobs: list[UnitJob], parts: Path, display: UnitDisplay, on_done: OnDone
    ) -> None:
        from nanobot_memory_adapters.logs import logging_settings

        level, file = logging_settings()
        logging = (level, str(file) if file else None)
        shipped = {job.key: shippable(job) for job in jobs}
        context = _worker_context()
        loop = asyncio.get_running_loop()
        with context.Manager() as manager, ProcessPoolExecutor(
            max_workers=self.plan.workers, mp_context=context, initializer=_die_with_parent
        ) as pool:
            events = manager.Queue()
            stop = asyncio.Event()

            async def relay() -> None:
                while not stop.is_set():
                    try:
                        key, steps, note = await asyncio.to_thread(events.get, True, 0.2)
                    except (EOFError, BrokenPipeError, ConnectionError):
                        return  # the manager went away (the run is ending or interrupted)
                    except Exception:  # queue.Empty
                        continue
                    display.advanced(key, steps, note)

            relaying = asyncio.ensure_future(relay())

            async def start(job: UnitJob) -> None:
                display.started(job.key, job.sessions)
                unit = await loop.run_in_executor(
                    pool, _worker_entry, shipped[job.key], str(parts / part_name(job.key)),
                    events, logging,
                )
                on_done(job, unit)
                display.finished(job.key)

            try:
                await _bounded(self.plan, jobs, start)
            finally:
                stop.set()
                await relaying
                pool.shutdown(wait=True, cancel_futures=True)


# -- Ray ---------------------------------------------------------------------------------------


def _ray_unit(job: UnitJob, logging_level: str) -> Any:
    """The Ray task: stream the unit's progress, trace lines and result."""
    from nanobot_memory_adapters.harness.units import stream_unit
    from nanobot_memory_adapters.logs import configure_logging

    configure_logging(logging_level)
    yield from stream_unit(job)


class _Ray:
    def __init__(self, plan: ExecutionPlan) -> None:
        self.plan = plan

    async def run(
        self, jobs: list[UnitJob], parts: Path, display: UnitDisplay, on_done: OnDone
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ValueError(
                "--executor ray needs Ray: pip install 'nanobot-memory-adapters[ray]'"
            ) from None
        from nanobot_memory_adapters.logs import logging_settings

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry
        shipped = {job.key: shippable(job) for job in jobs}
        started_here = not ray.is_initialized()
        if started_here:
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                       "configure_logging": False}
            if self.plan.ray_address:
                ray.init(address=self.plan.ray_address, **options)
            else:  # a local instance for this run; units mostly wait on the network
                ray.init(num_cpus=max(self.plan.workers, 1), **options)
        task = ray.remote(num_returns="streaming", num_cpus=1, max_retries=0)(_ray_unit)
        level = logging_settings()[0]

        async def start(job: UnitJob) -> None:
            display.started(job.key, job.sessions)
            unit: dict[str, Any] | None = None
            with (parts / part_name(job.key)).open("wb") as traces:
                stream: Any = task.remote(shipped[job.key], level)  # an ObjectRefGenerator
                try:
                    async for ref in stream:
                        item = await ref
                        if item.kind == "progress":
                            display.advanced(job.key, item.steps, item.note)
                        elif item.kind == "traces":
                            traces.write(item.data)
                            traces.flush()
                        else:
                            unit = item.unit
                except asyncio.CancelledError:
                    # another unit failed or the run was interrupted: on a cluster the
                    # task would otherwise go on writing for nobody
                    with contextlib.suppress(Exception):
                        ray.cancel(stream, force=True)
                    raise
            if unit is None:
                raise RuntimeError(f"{job.key}: the Ray task ended without a result")
            on_done(job, unit)
            display.finished(job.key)

        try:
            await _bounded(self.plan, jobs, start)
        finally:
            if started_here:
                ray.shutdown()
