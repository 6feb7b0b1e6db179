"""A unit's progress inside a bench: where a long unit resumes after an interruption.

The run's checkpoint (``checkpoint.py``) stores finished units. A unit whose provider
declares ``replay_checked_writes`` (a replayed event is looked up and stored once) and
whose store lives in the unit's own store folder (an embedded store: the folder says
the data is still there; a server's could have been wiped) also leaves, after each
finished LoCoMo session (its records and its test point), a file beside its trace file
with what it has measured so far, the length of its trace file, the session reached and
the run's manifest hash. A run started again with the same settings resumes such a unit
after that session: its store is kept (no scope reset), its trace file is cut back to
that length, and the session that was cut short is recorded again (the provider answers
the turns it holds from its store). Any other unit starts over, as before.

Seeded ids are drawn per session. The file also says whether the next session had begun
writing: if so, the crash may have left turns in the store under ids of that session's
stream, so its replay draws from a stream of its own (its contexts, and so the run's
metrics, can then differ from an uninterrupted run's; the unit's result lists the
session in ``replayed_cut_sessions``); later sessions draw what an uninterrupted run
draws.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from nanobot_memory_adapters.harness.locomo_state import UnitState
from nanobot_memory_adapters.harness.safe_paths import remove_file
from nanobot_memory_adapters.json_files import write_json_atomic

SUFFIX = ".progress.json"


@dataclass
class UnitProgress:
    """What a unit had measured when its ``session`` (a LoCoMo session number) ended."""

    manifest_sha256: str
    session: int
    unit: UnitState  # stored as ``UnitState.to_dict()``
    seen_contexts: list[str]
    dia_of_event: dict[str, str]
    trace_bytes: int
    elapsed_s: float  # the unit's time up to the end of ``session``, over all attempts
    resumes: int = 0  # how often the unit was picked up again
    next_started: bool = True  # the session after ``session`` may have written


def progress_path(traces: Path) -> Path:
    """The progress file of the unit whose trace file is ``traces``."""
    return traces.with_name(traces.name.removesuffix(".jsonl") + SUFFIX)


def keeps_store(store: Path | None) -> bool:
    """The unit's store folder holds its store (an embedded one wrote there)."""
    return store is not None and store.is_dir() and any(store.iterdir())


def save_progress(traces: Path, progress: UnitProgress) -> None:
    path = progress_path(traces)
    data = {f.name: getattr(progress, f.name) for f in fields(UnitProgress)}
    data["unit"] = progress.unit.to_dict()
    write_json_atomic(path, data)


def load_progress(traces: Path, manifest_sha256: str, root: Path) -> UnitProgress | None:
    """The unit's progress under this run's manifest, with its trace file cut back to it;
    None (progress and traces discarded, inside ``root`` only) when there is nothing
    sound to resume from."""
    path = progress_path(traces)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f.name for f in fields(UnitProgress)} - {"unit"}
        progress = UnitProgress(
            **{k: v for k, v in data.items() if k in known},
            unit=UnitState.from_dict(data.get("unit")),  # ValueError: not a unit's state
        )
    except (OSError, ValueError, TypeError):
        discard_progress(traces, root)
        return None
    stale = progress.manifest_sha256 != manifest_sha256  # other settings measured it
    if stale or not traces.exists() or traces.stat().st_size < progress.trace_bytes:
        discard_progress(traces, root)
        return None
    with traces.open("r+b") as f:
        f.truncate(progress.trace_bytes)
    return progress


def discard_progress(traces: Path, root: Path) -> None:
    """Forget a unit's progress and its traces (it starts over); only inside ``root``."""
    remove_file(root, progress_path(traces))
    remove_file(root, traces)
