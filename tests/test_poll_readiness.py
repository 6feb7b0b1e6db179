from __future__ import annotations

from nanobot_memory_adapters.base import poll_readiness
from nanobot_memory_adapters.contract import Readiness


def _script(*answers: Readiness):
    calls: list[int] = []

    async def check() -> Readiness:
        calls.append(1)
        return answers[min(len(calls), len(answers)) - 1]

    return check, calls


async def test_polls_until_ready_and_reports_the_whole_wait():
    check, calls = _script(Readiness(status="pending", pending_count=2, detail="busy"),
                           Readiness(status="pending", pending_count=1, detail="busy"),
                           Readiness(status="ready", pending_count=0, detail="drained"))
    state = await poll_readiness(check, timeout_s=5, interval_s=0.05)
    assert state.status == "ready" and state.detail == "drained" and len(calls) == 3
    assert state.waited_ms is not None and state.waited_ms >= 100


async def test_timeout_is_pending_never_a_false_green():
    check, calls = _script(Readiness(status="pending", pending_count=1, detail="deriving"))
    state = await poll_readiness(check, timeout_s=0.3, interval_s=0.1)
    assert state.status == "pending" and state.pending_count == 1
    assert state.detail == "timed out after 0.3s: deriving"
    assert state.waited_ms is not None and state.waited_ms >= 300 and len(calls) >= 3


async def test_unknown_is_final():
    check, calls = _script(Readiness(status="unknown", detail="no task status"))
    state = await poll_readiness(check, timeout_s=5, interval_s=0.05)
    assert state.status == "unknown" and len(calls) == 1 and state.detail == "no task status"
