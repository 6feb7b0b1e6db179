"""The canary leak fuzzer at CI size (``fuzz.py`` says what it drives and checks): seeded,
so a failure is reproduced by its seed; it must find no canary where someone who reads the
chat did not already know it, and no reply naming a person other than its chat's one
reader — and must see canaries and ids where they belong (a fuzzer that never recalls
anything would pass by construction)."""

from __future__ import annotations

import pytest

from tests.privacy.fuzz import Fuzzer

pytestmark = [pytest.mark.servers, pytest.mark.xdist_group("canary-fuzz")]


@pytest.mark.parametrize(("provider", "group_recall", "episodes", "seed"), [
    ("full_history", "none", 300, 11),
    ("full_history", "group", 100, 12),
    ("full_history", "personal", 100, 14),
    ("simple_rag", "none", 120, 13),
])
async def test_no_canary_reaches_a_request_or_reply_of_another_audience(
        llm_double, tmp_path, provider, group_recall, episodes, seed):
    if provider == "simple_rag":
        pytest.importorskip("mem0")
    fuzzer = Fuzzer(seed=seed, double=llm_double, provider=provider,
                    group_recall=group_recall, root=tmp_path, segment=40)
    tally = await fuzzer.run(episodes)
    assert not tally.leaks, (f"seed {seed}: {tally.leaks[0]}\nlast operations:\n"
                             + "\n".join(fuzzer.log[-15:]))
    assert tally.episodes == episodes
    assert tally.requests_checked > tally.episodes  # every episode's requests were seen
    # memory works where it may: owners' canaries reach their own direct chats
    assert tally.recalled_own > episodes // 10, tally
    # ...and the identifier check sees ids where they belong (a person's own direct chat)
    assert tally.own_ids_shown > 0, tally
    print(f"\n{provider}/{group_recall}: {tally.episodes} interleavings, {tally.ops} ops, "
          f"{tally.requests_checked} requests and {tally.replies_checked} replies checked, "
          f"{tally.requests_with_canaries} requests carried canaries")
