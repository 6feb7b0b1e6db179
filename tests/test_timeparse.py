from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from nanobot_memory_adapters.timeparse import parse_time, require_time


def test_parse_time_reads_native_values_and_never_invents_a_timezone():
    assert parse_time("2024-05-01T10:00:00Z") == datetime(2024, 5, 1, 10, tzinfo=UTC)
    aware = parse_time("2024-05-01T10:00:00-07:00")
    assert aware is not None and aware.utcoffset() == timedelta(hours=-7)
    naive = parse_time("2024-05-01T10:00:00")
    assert naive == datetime(2024, 5, 1, 10) and naive.tzinfo is None
    given = datetime(2024, 5, 1, tzinfo=timezone(timedelta(hours=2)))
    assert parse_time(given) is given
    for bad in (None, "", "yesterday", 1714557600, b"2024-05-01"):
        assert parse_time(bad) is None


def test_require_time_refuses_what_it_would_have_to_guess():
    assert require_time("2024-05-01T10:00:00Z", "as_of") == datetime(2024, 5, 1, 10, tzinfo=UTC)
    with pytest.raises(ValueError, match=r"as_of .* has no timezone"):
        require_time("2024-05-01T10:00:00", "as_of")
    with pytest.raises(ValueError, match="valid_at 'soon' is not an ISO 8601 time"):
        require_time("soon", "valid_at")
    with pytest.raises(ValueError, match="must be a datetime or an ISO 8601 string"):
        require_time(3, "valid_at")
    with pytest.raises(ValueError, match="no timezone"):
        require_time(datetime(2024, 5, 1), "valid_at")
