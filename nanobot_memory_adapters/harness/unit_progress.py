"""A unit's progress inside a bench: where a long unit resumes after an interruption.

The run's checkpoint (``checkpoint.py``) stores finished units. A unit whose provider
declares ``replay_checked_writes`` (a replayed event is stored once; the store outlives
the process) also leaves, after each finished LoCoMo session (its records and its test
point), a file beside its trace file with what it has measured so far, the length of its
trace file and the session reached. A run started again with the same command resumes
such a unit after that session: its store is kept (no scope reset), its trace file is cut
back to that length, and the session that was cut short is recorded again (the provider
skips what it already holds). Other units start over, as before.

Seeded ids: the interrupted attempt may have stored turns of the cut session under ids
drawn after the progress was saved, so a resumed unit must never draw those again. Each
resumption therefore re-seeds the unit's ids under a key of its own (``resume-N``, N
counted in the progress file, which is rewritten as soon as the unit resumes), so ids
stay unique; ids drawn after a resumption differ from an uninterrupted run's.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

SUFFIX = ".progress.json"


@dataclass
class UnitProgress:
    """What a unit had measured when its ``session`` (a LoCoMo session number) ended."""

    session: int
    unit: dict[str, Any]
    seen_contexts: list[str]
    dia_of_event: dict[str, str]
    trace_bytes: int
    elapsed_s: float
    resumes: int = 0  # how often the unit was picked up again (each draws fresh ids)


def progress_path(traces: Path) -> Path:
    """The progress file of the unit whose trace file is ``traces``."""
    return traces.with_name(traces.name.removesuffix(".jsonl") + SUFFIX)


def save_progress(traces: Path, progress: UnitProgress) -> None:
    path = progress_path(traces)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(progress), ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def load_progress(traces: Path) -> UnitProgress | None:
    """The unit's progress, with its trace file cut back to it; None (and no trace file
    left) when there is nothing sound to resume from."""
    path = progress_path(traces)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f.name for f in fields(UnitProgress)}
        progress = UnitProgress(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError):
        discard_progress(traces)
        return None
    if not traces.exists() or traces.stat().st_size < progress.trace_bytes:
        discard_progress(traces)  # the traces it counted on are gone: start over
        return None
    with traces.open("r+b") as f:
        f.truncate(progress.trace_bytes)
    return progress


def discard_progress(traces: Path) -> None:
    """Forget a unit's progress and its traces (it starts over)."""
    progress_path(traces).unlink(missing_ok=True)
    traces.unlink(missing_ok=True)
