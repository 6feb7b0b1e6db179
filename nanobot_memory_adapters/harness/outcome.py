"""What a harness run returns (LoCoMo bench and preference sessions alike)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: a run stopped midway leaves its finished units' results here (preference runs write
#: it; the runner's interruption message points at it when it is there)
PARTIAL_RESULTS = "results.partial.json"


@dataclass
class RunOutcome:
    out: Path
    manifest: dict[str, Any]
    results: dict[str, Any]
    skipped: list[dict[str, str]]
    resumed_units: int = 0  # finished units taken from the checkpoint
    resumed_mid_unit: int = 0  # units that went on after their last finished session
    wall_s: float = 0.0
