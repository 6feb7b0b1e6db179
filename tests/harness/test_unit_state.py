"""The LoCoMo unit's state at its boundary: the dict the checkpoint stores and the metrics
read, and the progress file a unit resumes from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nanobot_memory_adapters.harness.locomo_state import UnitState
from nanobot_memory_adapters.harness.metrics import provider_metrics
from nanobot_memory_adapters.harness.preferences.state import PreferenceUnitState
from nanobot_memory_adapters.harness.unit_progress import load_progress, progress_path

# the keys a unit has always written, in its order (checkpoint.json, *.progress.json)
BASE_KEYS = [
    "provider", "conversation", "events", "ingest_mode", "record_failures",
    "record_latency_ms", "record_latency_per_event_ms", "ingest_s", "readiness",
    "mode_failures", "gate_violations", "gate_probes", "asks", "judged", "behavioural",
    "reset_status",
]


def finished_state() -> UnitState:
    unit = UnitState(provider="simple_rag", conversation="syn-1", ingest_mode="bulk")
    unit.events = 4
    unit.ingest_tokens = 57
    unit.record_latency_ms += [1.5, 2.25]
    unit.record_latency_per_event_ms += [0.75, 1.125]
    unit.ingest_s = 0.01
    unit.readiness.append({"point": 2, "status": "ready", "waited_s": 0.0})
    unit.gate_probes = 1
    unit.asks.append({"qid": "syn-1-q0", "point": 2, "is_final": True, "category": 1,
                      "turn_recall": 1.0, "session_recall": 1.0, "answer_hit": True,
                      "tokens": 12, "budget_violation": False, "latency_ms": 1.0,
                      "failed": None, "n_evidence": 1, "turn_hits": 1, "n_sessions": 1,
                      "session_hits": 1, "retrieved_count": 1})
    unit.reset_status = "reset"
    unit.resumed_after_sessions = [1]
    unit.wall_s = 0.5
    return unit


def test_the_dict_keeps_the_units_keys_and_order_and_round_trips():
    fresh = UnitState(provider="no_memory", conversation="syn-1", ingest_mode="single")
    assert list(fresh.to_dict()) == BASE_KEYS  # late figures absent until counted
    unit = finished_state()
    data = unit.to_dict()
    assert list(data) == [*BASE_KEYS, "ingest_tokens", "resumed_after_sessions", "wall_s"]
    text = json.dumps(data, ensure_ascii=False)
    again = UnitState.from_dict(json.loads(text))
    assert again == unit
    assert json.dumps(again.to_dict(), ensure_ascii=False) == text  # byte-identical


def test_the_metrics_read_a_units_dict():
    fresh = UnitState(provider="no_memory", conversation="syn-1", ingest_mode="single")
    m = provider_metrics("simple_rag", [finished_state().to_dict(), fresh.to_dict()], 200)
    assert m["asks"] == 1
    assert m["events_recorded"] == 4
    assert m["gate_probes"] == 1
    assert m["timing"]["ingest_tokens"] == 57
    assert m["timing"]["resumed_after_sessions"] == {"syn-1": [1]}


def test_stored_nothing_is_a_figure_only_when_every_unit_counted_it():
    """A unit begun before the count has none (unknown, not 0): the provider's figure is
    left out rather than undercounted."""
    from nanobot_memory_adapters.harness.preferences.state import PreferenceUnitState

    counted = finished_state()
    counted.stored_nothing = 3
    data = counted.to_dict()
    assert data["stored_nothing"] == 3 and UnitState.from_dict(data) == counted
    zero = UnitState(provider="x", conversation="syn-2", ingest_mode="single",
                     stored_nothing=0)
    m = provider_metrics("simple_rag", [data, zero.to_dict()], 200)
    assert m["events_stored_nothing"] == 3
    old = UnitState(provider="x", conversation="syn-2", ingest_mode="single")
    assert "stored_nothing" not in old.to_dict()
    assert "events_stored_nothing" not in provider_metrics(
        "simple_rag", [data, old.to_dict()], 200)
    pref = PreferenceUnitState(provider="mem0", conversation="p1", group="g")
    assert "stored_nothing" not in pref.to_dict()
    pref.stored_nothing = 0
    assert pref.to_dict()["stored_nothing"] == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("asks"), "missing key(s) 'asks'"),
        (lambda d: d.update(gate_probe=1), "unknown key(s) 'gate_probe'"),
        (lambda d: d.update(events="four"), "events: Input should be a valid integer"),
        (lambda d: d.update(ingest_mode="batch"), "ingest_mode: Input should be 'bulk' or"),
        (lambda d: d.update(wall_s=None), "null key(s) 'wall_s'"),
    ],
)
def test_a_dict_that_is_not_a_units_state_is_refused_in_one_line(change, message):
    data = finished_state().to_dict()
    change(data)
    with pytest.raises(ValueError, match=r"^unit state: ") as err:
        UnitState.from_dict(data)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def _progress_file(traces: Path, unit: dict) -> None:
    traces.write_text('{"kind": "record"}\n', encoding="utf-8")
    progress_path(traces).write_text(json.dumps({
        "manifest_sha256": "m", "session": 1, "unit": unit, "seen_contexts": [],
        "dia_of_event": {}, "trace_bytes": traces.stat().st_size, "elapsed_s": 0.1,
        "resumes": 0, "next_started": False,
    }), encoding="utf-8")


def test_a_progress_file_holds_a_typed_state(tmp_path):
    traces = tmp_path / "simple_rag__syn-1.jsonl"
    _progress_file(traces, finished_state().to_dict())
    progress = load_progress(traces, "m", tmp_path)
    assert progress is not None
    assert progress.unit == finished_state()


def test_a_progress_file_whose_unit_lacks_a_key_starts_the_unit_over(tmp_path):
    """A progress file not written by this unit (another version's, or edited) is not
    resumed from: resuming would fail mid-run on the missing figure."""
    traces = tmp_path / "simple_rag__syn-1.jsonl"
    unit = finished_state().to_dict()
    del unit["asks"]
    _progress_file(traces, unit)
    assert load_progress(traces, "m", tmp_path) is None
    assert not traces.exists()
    assert not progress_path(traces).exists()


def test_the_preference_units_dict_keeps_its_keys_and_order():
    unit = PreferenceUnitState(provider="simple_rag", conversation="p1", group="feedback")
    keys = ["provider", "conversation", "group", "events", "record_failures",
            "retrieve_failures", "agent_failures", "mode_failures", "gate_violations",
            "gate_probes", "reset_status", "readiness", "feedback", "tests",
            "record_latency_per_event_ms", "retrieve_latency_ms", "ingest_s"]
    assert list(unit.to_dict()) == keys  # wall_s when it ends
    unit.feedback["sent"] += 1
    unit.wall_s = 1.0
    data = unit.to_dict()
    assert list(data) == [*keys, "wall_s"]
    assert data["feedback"] == {"sent": 1, "failed": 0}
