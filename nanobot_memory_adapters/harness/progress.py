"""Progress bars for long harness runs, and the resumable runner behind ``bench``,
``demo`` and ``preferences run`` (Ctrl-C exits 130 with the resume hint)."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from nanobot_memory_adapters.console import err_console, fail
from nanobot_memory_adapters.harness.outcome import PARTIAL_RESULTS


def short(n: float | None) -> str:
    """A count in at most five characters: 9999, 12k, 1.2M."""
    if n is None:
        return "?"
    n = int(n)
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1e6:.1f}M" if n < 100_000_000 else f"{n // 1_000_000}M"


class CompactCount(ProgressColumn):
    """``done/total`` in short counts, so a ten-million-token row fits 80 columns."""

    def render(self, task: Task) -> Text:
        return Text(f"{short(task.completed)}/{short(task.total)}")


class RichProgress:
    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}

    def start(self, provider: str, total: int) -> None:
        self.tasks[provider] = self.progress.add_task(provider, total=total, note="")

    def advance(self, provider: str, steps: int, note: str) -> None:
        self.progress.update(self.tasks[provider], advance=steps, note=note)


def token_sizes(jobs: list[Any]) -> dict[str, list[int]]:
    """Per unit, the tokens each of its sessions sends (its turns' recorded content, once
    per speaker copy), counted once per conversation: the scale a bench reports."""
    from nanobot_memory_adapters.tokens import count_tokens

    per_conv: dict[str, list[int]] = {}
    out = {}
    for job in jobs:
        conv = job.conv
        if conv.sample_id not in per_conv:
            per_conv[conv.sample_id] = [sum(count_tokens(t.content) for t in s.turns)
                                        for s in conv.sessions]
        copies = 2 if job.cfg.speakers == "dual" else 1
        out[job.key] = [n * copies for n in per_conv[conv.sample_id]]
    return out


class UnitsProgress:
    """A bench's progress: the run's units with an ETA, a tokens row (tokens ingested per
    second and the ETA at that pace) and a bar for every running unit (its sessions),
    however many run at once."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}
        self.overall: Any = None
        self.tokens_task: Any = None
        self.session_tokens: dict[str, list[int]] = {}
        self.at: dict[str, int] = {}
        self.ingested = 0
        self.t0 = time.perf_counter()

    def sizes(self, per_unit: dict[str, list[int]]) -> None:
        """The units still to run and their sessions' tokens (``token_sizes``)."""
        self.session_tokens = per_unit
        self.t0 = time.perf_counter()
        self.tokens_task = self.progress.add_task(
            "tokens", total=sum(sum(v) for v in per_unit.values()), note="")

    def _count(self, key: str, steps: int, note: str) -> None:
        sizes = self.session_tokens.get(key)
        if sizes is None or self.tokens_task is None:
            return
        at = self.at.get(key, 0)
        n = sum(sizes[at:at + steps])
        self.at[key] = at + steps
        task = self.tokens_task
        if "resumed after" in note:  # sessions a previous run ingested: not this run's
            left = self.progress.tasks[task].total or 0
            self.progress.update(task, total=max(0, left - n))
            return
        self.ingested += n
        rate = self.ingested / max(time.perf_counter() - self.t0, 1e-9)
        self.progress.update(task, advance=n, note=f"{short(rate)} tok/s")

    def planned(self, total: int, done: int) -> None:
        self.overall = self.progress.add_task("units", total=total, completed=done,
                                              note=f"{done} from the checkpoint" if done else "")

    def started(self, key: str, total: int) -> None:
        self.tasks[key] = self.progress.add_task(key.replace("::", " "), total=total, note="")

    def advanced(self, key: str, steps: int, note: str) -> None:
        if key in self.tasks:
            self.progress.update(self.tasks[key], advance=steps, note=note)
        self._count(key, steps, note)

    def finished(self, key: str) -> None:
        task = self.tasks.pop(key, None)
        if task is not None:
            self.progress.remove_task(task)
        if self.overall is not None:
            self.progress.update(self.overall, advance=1)


def units_bar() -> Progress:
    # narrow enough for an 80-column terminal with a 10M-token "M/N" on the tokens row
    return Progress(
        TextColumn("[bold]{task.description:<20}"),
        BarColumn(bar_width=8),
        CompactCount(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[note]}"),
        console=err_console,
        transient=False,
    )


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:<14}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("sessions"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[note]}"),
        console=err_console,
        transient=False,
    )


class _SaidOnStart:
    """A progress display that prints ``note`` before its first report: the note belongs to
    a run that started, not to one refused for its input (that stays one line)."""

    def __init__(self, display: Any, note: str) -> None:
        self._display, self._note = display, note

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._display, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._note is not None:
                err_console.print(self._note, highlight=False)
                self._note = None
            return attr(*args, **kwargs)

        return call


def run_resumable(runner: Any, cfg: Any, *, quiet: bool = False, units: bool = False) -> Any:
    """``runner(cfg[, progress])`` to completion with a progress bar (none when ``quiet``);
    Ctrl-C says how to resume from the checkpoint and exits 130; a mismatched checkpoint
    or bad input is one line. The outcome gets its ``wall_s``."""
    from nanobot_memory_adapters.harness.checkpoint import CheckpointMismatch
    from nanobot_memory_adapters.harness.outcome_view import EXIT_FAILURES
    from nanobot_memory_adapters.harness.safe_paths import FolderInUse, run_lock
    from nanobot_memory_adapters.harness.trace_sink import error_text
    from nanobot_memory_adapters.harness.units import UnitFailed
    from nanobot_memory_adapters.logs import logger
    from nanobot_memory_adapters.redaction import redact_text

    note = None
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        note = ("note: Ctrl-C (SIGINT) is ignored by this process's parent (a background "
                "job); stop the run with SIGTERM, it resumes from its checkpoint")
    started = time.perf_counter()
    try:
        with run_lock(cfg.out):
            if quiet:
                outcome = asyncio.run(runner(cfg))
            else:
                with units_bar() if units else progress_bar() as progress:
                    display = UnitsProgress(progress) if units else RichProgress(progress)
                    if note is not None:  # said once the run is under way, not on bad input
                        display = _SaidOnStart(display, note)
                    outcome = asyncio.run(runner(cfg, display))
    except FolderInUse as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        partial = cfg.out / PARTIAL_RESULTS
        err_console.print(
            f"[yellow]interrupted[/yellow]: rerun the same command to resume "
            f"from {escape(str(cfg.out / 'checkpoint.json'))}"
            + (f"; the finished units' results: {escape(str(partial))}"
               if partial.is_file() else ""), markup=True
        )
        raise typer.Exit(130) from None
    except CheckpointMismatch as exc:
        raise fail(str(exc)) from None
    except (FileNotFoundError, ValueError) as exc:
        raise fail(redact_text(str(exc))) from None
    except UnitFailed as exc:  # a unit's provider failed to build where it ran, or exited
        raise fail(str(exc), EXIT_FAILURES) from None
    except SystemExit as exc:  # provider code in the driver, outside any unit
        raise fail(f"a provider exited (sys.exit({exc.code!r})) during the run; the run "
                   "stopped: fix or remove the provider", EXIT_FAILURES) from None
    except typer.Exit:
        raise
    except Exception as exc:  # a unit's setup raised (a server gone between units, ...)
        logger.opt(exception=exc).debug("the run stopped")  # the traceback: debug.log
        raise fail(f"the run stopped: {error_text(exc)}; the finished units are kept: "
                   f"rerun the same command to resume from {cfg.out / 'checkpoint.json'}",
                   EXIT_FAILURES) from None
    outcome.wall_s = time.perf_counter() - started
    return outcome
