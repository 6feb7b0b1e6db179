"""What a LoCoMo unit (provider x conversation) measures while it runs: one typed field per
figure. Outside the unit it travels as a plain dict (the unit's result in
``checkpoint.json``, ``units/*.progress.json``, a worker's or Ray task's answer), which
the metrics read: ``to_dict`` writes exactly the keys the unit always wrote, in the same
order (a figure not yet counted is left out, as before); ``from_dict`` refuses a dict with
a missing, unknown or mistyped key in one line instead of failing later in the run."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic validates it on Python < 3.12


@with_config(ConfigDict(extra="forbid"))
class ReadinessWait(TypedDict):
    """One test point's wait for the provider to have processed what it was given."""

    point: int
    status: str  # "ready", or the provider's last answer ("pending", "unknown")
    waited_s: float


@with_config(ConfigDict(extra="forbid"))
@dataclass
class UnitState:
    """A LoCoMo unit's measurements. The records (``asks``, ``judged``, ``behavioural``)
    are the per-question rows the metrics aggregate; their keys depend on the task
    (provenance counts, LongMemEval fields, a sweep's budget) and stay dicts."""

    provider: str
    conversation: str
    ingest_mode: Literal["bulk", "single"]
    events: int = 0
    record_failures: int = 0
    record_latency_ms: list[float] = field(default_factory=list[float])
    record_latency_per_event_ms: list[float] = field(default_factory=list[float])
    ingest_s: float = 0.0
    readiness: list[ReadinessWait] = field(default_factory=list[ReadinessWait])
    mode_failures: int = 0
    gate_violations: int = 0
    gate_probes: int = 0
    asks: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    judged: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    behavioural: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    reset_status: str | None = None  # the scopes' reset: "failed" if any failed
    # counted from the first time they happen (absent from the dict until then)
    ingest_tokens: int | None = None  # tokens sent to record (tokens/s = these / ingest_s)
    behavioural_writes: int | None = None  # behavioural sessions' record calls (gated)
    resumed_after_sessions: list[int] | None = None  # sessions it went on after, per resume
    replayed_cut_sessions: list[int] | None = None  # sessions a crash cut short, replayed
    wall_s: float | None = None  # the unit's time over all attempts (set when it ends)
    # of ingest_s, the provider's ingest_lookahead (a conversation embedded ahead)
    lookahead_s: float | None = None
    # the process CPU (all threads) the unit took, for a unit run in one attempt in a
    # process of its own (a worker, or the driver with one worker): CPU-hours of a run
    cpu_s: float | None = None
    # accepted writes whose backend kept nothing new (``WriteReceipt.stored_nothing``);
    # None: a unit begun before it was counted
    stored_nothing: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The unit's result as it is stored and aggregated."""
        out: dict[str, Any] = {}
        for f in _ORDER:
            value = getattr(self, f)
            if value is not None or f not in _OPTIONAL:
                out[f] = value
        return out

    @classmethod
    def from_dict(cls, data: Any) -> UnitState:
        """A stored unit back; ValueError naming the keys when it is not one."""
        if not isinstance(data, dict):
            raise ValueError(f"unit state: expected an object, got {type(data).__name__}")
        missing = [k for k in _REQUIRED if k not in data]
        unknown = [k for k in data if k not in _ORDER]
        if missing or unknown:
            raise ValueError(
                "unit state: "
                + "; ".join(
                    f"{what} key(s) {', '.join(map(repr, keys))}"
                    for what, keys in (("missing", missing), ("unknown", unknown)) if keys
                )
            )
        nulls = [k for k in _OPTIONAL if k in data and data[k] is None]
        if nulls:  # never written: an absent figure is left out, not null
            raise ValueError(f"unit state: null key(s) {', '.join(map(repr, nulls))}")
        try:
            return _ADAPTER.validate_python(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"unit state: {where}: {first['msg']}") from None


# the order the unit has always written its keys in (the base keys, then the late ones)
_ORDER = (
    "provider", "conversation", "events", "ingest_mode", "record_failures",
    "record_latency_ms", "record_latency_per_event_ms", "ingest_s", "readiness",
    "mode_failures", "gate_violations", "gate_probes", "asks", "judged", "behavioural",
    "reset_status", "ingest_tokens", "behavioural_writes", "resumed_after_sessions",
    "replayed_cut_sessions", "wall_s", "lookahead_s", "cpu_s", "stored_nothing",
)
_OPTIONAL = frozenset(
    ("ingest_tokens", "behavioural_writes", "resumed_after_sessions", "replayed_cut_sessions",
     "wall_s", "lookahead_s", "cpu_s", "stored_nothing")
)
_REQUIRED = tuple(k for k in _ORDER if k not in _OPTIONAL)
_ADAPTER = TypeAdapter(UnitState)
assert set(_ORDER) == {f.name for f in fields(UnitState)}, "every field has its place"
