"""The LoCoMo loader: lenient evidence parsing (counted), dates, test points."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nanobot_memory_adapters.harness.datasets.locomo import load_locomo, parse_session_date
from nanobot_memory_adapters.harness.timeline import resolve_test_points
from tests.harness.conftest import LOCOMO7


def test_sessions_dates_and_turns(locomo_file):
    conv1, conv2 = load_locomo(locomo_file)
    assert [s.number for s in conv1.sessions] == [1, 2, 4]  # keys as present
    s1 = conv1.sessions[0]
    assert s1.start == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert [t.timestamp - s1.start for t in s1.turns] == [timedelta(seconds=i) for i in range(4)]
    image = conv1.turn("D1:4")
    assert (
        image.text.endswith("library.") and "[shares a photo: a photo of a mural]" in image.content
    )
    assert not conv1.turn("D1:3").distinctive  # "Thanks!" cannot attribute a session
    assert conv1.turn("D1:1").distinctive
    # An unreadable date keeps the order: one day after the previous session.
    bad = conv2.sessions[1]
    assert not bad.date_parsed and bad.start == conv2.sessions[0].start + timedelta(days=1)


def test_evidence_parsing_is_lenient_and_counted(locomo_file):
    conv1, conv2 = load_locomo(locomo_file)
    placed = {q.qid: q for q in conv1.questions}
    assert sorted(placed) == ["syn-1:q0", "syn-1:q1", "syn-1:q2", "syn-1:q4", "syn-1:q7"]
    assert placed["syn-1:q2"].evidence == ("D1:1", "D4:1")  # 'D1:1; D4:1' split
    assert placed["syn-1:q2"].ready_after == 4
    assert placed["syn-1:q4"].evidence == ("D2:1",)  # 'D:2:01' repaired
    assert placed["syn-1:q7"].gold == "Cairngorms" and placed["syn-1:q7"].category == 5
    stats = conv1.evidence_stats.to_dict()
    assert stats | {"examples": []} == {
        "questions": 8,
        "placed": 5,
        "no_evidence": 1,
        "malformed_strings": 4,
        "repaired_ids": 3,
        "dropped_tokens": 1,
        "unknown_ids": 1,
        "skipped_questions": 3,
        "malformed_questions": 0,
        "examples": [],
    }
    assert any("'D4:9'" in e for e in stats["examples"])
    assert len(conv2.questions) == 3


def test_selecting_conversations(locomo_file):
    assert [c.sample_id for c in load_locomo(locomo_file, ["syn-2"])] == ["syn-2"]
    with pytest.raises(ValueError, match="not in"):
        load_locomo(locomo_file, ["conv-404"])
    with pytest.raises(FileNotFoundError, match="--dataset"):
        load_locomo(locomo_file.parent / "missing.json")


def test_session_date_parser():
    assert parse_session_date("12:09 am on 13 February, 2024") == datetime(
        2024, 2, 13, 0, 9, tzinfo=UTC
    )
    assert parse_session_date("12:30 pm on 1 July 2023").hour == 12
    assert parse_session_date("yesterday") is None


def test_test_points():
    sessions = [1, 2, 4, 5, 7]
    assert resolve_test_points("every", sessions) == sessions
    assert resolve_test_points("last", sessions) == [7]
    assert resolve_test_points("every:2", sessions) == [2, 5, 7]
    assert resolve_test_points("4,7,99", sessions) == [4, 7]
    with pytest.raises(ValueError, match="name no session"):
        resolve_test_points("3", sessions)
    with pytest.raises(ValueError, match="every, last"):
        resolve_test_points("often", sessions)


@pytest.mark.skipif(not LOCOMO7.exists(), reason="locomo7.json not present")
def test_real_file_quirks_are_reported():
    convs = load_locomo(LOCOMO7)
    assert [c.sample_id for c in convs][:2] == ["conv-26", "conv-30"]
    total = sum(c.evidence_stats.questions for c in convs)
    placed = sum(len(c.questions) for c in convs)
    skipped = sum(c.evidence_stats.skipped_questions for c in convs)
    assert total == 1347 and placed + skipped == total
    assert sum(c.evidence_stats.no_evidence for c in convs) >= 2
    assert sum(c.evidence_stats.malformed_strings for c in convs) >= 4


def test_an_undatable_session_after_the_calendars_last_day_is_one_error(tmp_path):
    """A session without a readable date takes the day after the one before; after
    31 December 9999 there is none (before: an OverflowError traceback)."""
    import json

    from nanobot_memory_adapters.harness.datasets.locomo import DatasetError
    from tests.harness.conftest import synthetic_locomo

    sample = json.loads(json.dumps(synthetic_locomo()[0]))
    conv = sample["conversation"]
    conv["session_1_date_time"] = "11:59 pm on 31 December, 9999"
    conv["session_2_date_time"] = "someday"
    path = tmp_path / "far.json"
    path.write_text(json.dumps([sample]))
    with pytest.raises(DatasetError, match="session_2_date_time 'someday'"):
        load_locomo(path)
