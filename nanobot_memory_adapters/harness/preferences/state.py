"""What a preference unit (provider x persona) measures while it runs: one typed field per
figure. The checkpoint stores, and the preference metrics read, its ``to_dict``: the keys
the unit always wrote, in the same order."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from typing_extensions import TypedDict

from nanobot_memory_adapters.harness.locomo_state import ReadinessWait


class FeedbackCounts(TypedDict):
    """The feedback group's ``apply_feedback`` calls: accepted, or not."""

    sent: int
    failed: int


@dataclass
class PreferenceUnitState:
    """A preference unit's measurements; ``tests`` are its per-test records (the rows the
    scores aggregate, with the test's own fields), kept as dicts."""

    provider: str
    conversation: str  # the persona's id
    group: str  # the persona's group (e.g. "feedback")
    events: int = 0
    record_failures: int = 0
    retrieve_failures: int = 0
    agent_failures: int = 0
    mode_failures: int = 0
    gate_violations: int = 0
    gate_probes: int = 0
    reset_status: str | None = None
    readiness: list[ReadinessWait] = field(default_factory=list[ReadinessWait])
    feedback: FeedbackCounts = field(
        default_factory=lambda: FeedbackCounts(sent=0, failed=0))
    tests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    record_latency_per_event_ms: list[float] = field(default_factory=list[float])
    retrieve_latency_ms: list[float] = field(default_factory=list[float])
    ingest_s: float = 0.0
    wall_s: float | None = None  # set when the unit ends (absent from the dict until then)
    # accepted writes whose backend kept nothing new (``WriteReceipt.stored_nothing``);
    # None (absent from the dict): a unit begun before it was counted
    stored_nothing: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The unit's result as it is stored and aggregated."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("wall_s", "stored_nothing") or getattr(self, f.name) is not None}
