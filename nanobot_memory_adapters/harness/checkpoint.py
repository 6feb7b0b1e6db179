"""Resume an interrupted bench run.

The unit of work is one provider x conversation (a timeline in a fresh scope). After each
finished unit the checkpoint stores its results. In a LoCoMo bench each unit has its own
store and trace file (``units/``): on resume a unit that did not finish (or whose trace
file is gone) starts over from an empty store, unless it can go on after its last
finished session (``unit_progress.py``). Runs that append every unit to one traces file
(preference sessions) store its length and cut it back on resume. A resumed run gives
the metrics of an uninterrupted one when its units started over or went on after a
finished session (tested); its traces differ in timings and in the lines that record
the resumption. A unit resumed in the middle of a session replays that session under
other ids, so its contexts and metrics can differ (``results.json`` names it).

The checkpoint belongs to one manifest: resuming with different settings is refused.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.harness.safe_paths import remove_file
from nanobot_memory_adapters.json_files import write_json_atomic
from nanobot_memory_adapters.versions import source_revision

CHECKPOINT_FILE = "checkpoint.json"


class CheckpointMismatch(RuntimeError):
    pass


@dataclass
class Checkpoint:
    path: Path
    manifest_sha256: str
    units: dict[str, dict[str, Any]] = field(default_factory=dict)
    traces_bytes: int = 0  # runs that append to one traces file: its length at the last unit
    complete: bool = False
    attempts: dict[str, int] = field(default_factory=dict)  # units started, per unit
    # per finished unit: the code that ran it, where and when (a run resumed across
    # commits or machines says so in its result file)
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)

    def start(self, provider: str, conversation: str) -> int:
        """Count a unit's start (saved at once) and return which attempt this is: a unit
        started over in a store its first attempt wrote to needs ids it did not draw."""
        key = self.key(provider, conversation)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        self.save()
        return self.attempts[key]

    @staticmethod
    def key(provider: str, conversation: str) -> str:
        return f"{provider}::{conversation}"

    def done(self, provider: str, conversation: str) -> dict[str, Any] | None:
        return self.units.get(self.key(provider, conversation))

    def save_unit(self, unit: dict[str, Any], traces_bytes: int = 0) -> None:
        key = self.key(unit["provider"], unit["conversation"])
        self.units[key] = unit
        self.provenance[key] = unit_provenance()
        self.traces_bytes = traces_bytes
        self.save()

    def save(self) -> None:
        data = {
            "manifest_sha256": self.manifest_sha256,
            "traces_bytes": self.traces_bytes,
            "complete": self.complete,
            "attempts": self.attempts,
            "provenance": self.provenance,
            "units": self.units,
        }
        write_json_atomic(self.path, data)


def unit_provenance() -> dict[str, Any]:
    """The code, machine and time a unit finished with. The machine from ``os.uname``
    (``platform.platform()`` asks ``uname -p`` in a child process)."""
    return {"code": source_revision(), "machine": f"{os.cpu_count()} CPUs, "
            f"{platform.system()}-{platform.release()}-{platform.machine()}",
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds")}


def open_checkpoint(out: Path, manifest_sha256: str, traces: Path | None = None) -> Checkpoint:
    """Load the checkpoint in ``out`` (or start one). ``traces``: a run that appends every
    unit to one file (the preference sessions) has it cut back to the checkpoint."""
    source_revision()  # read now: the code this process runs, not what a later edit made
    path = out / CHECKPOINT_FILE
    if not path.exists():
        if traces is not None:
            remove_file(out, traces)
        cp = Checkpoint(path, manifest_sha256)
        cp.save()
        return cp
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("manifest_sha256") != manifest_sha256:
        raise CheckpointMismatch(
            f"{out} holds a run with different settings (manifest "
            f"{str(data.get('manifest_sha256'))[:12]} vs {manifest_sha256[:12]}); "
            "pass --fresh to start over or choose another --out"
        )
    cp = Checkpoint(
        path,
        manifest_sha256,
        units=data.get("units", {}),
        traces_bytes=int(data.get("traces_bytes", 0)),
        complete=bool(data.get("complete", False)),
        attempts={str(k): int(v) for k, v in data.get("attempts", {}).items()},
        provenance={str(k): v for k, v in (data.get("provenance") or {}).items()
                    if isinstance(v, dict)},
    )
    if traces is None:
        return cp
    if traces.exists() and traces.stat().st_size > cp.traces_bytes:
        with traces.open("r+b") as f:
            f.truncate(cp.traces_bytes)
    elif not traces.exists() and cp.traces_bytes:
        raise CheckpointMismatch(
            f"{traces} is missing but the checkpoint expects {cp.traces_bytes} bytes of it; "
            "pass --fresh to start over"
        )
    return cp
