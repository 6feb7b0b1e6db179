"""Forget and backfill agree (issue 28): a forgotten scope stays forgotten through a
backfill, forget reaches every provider holding the scope and says when nothing is
stored, backfill is idempotent whatever the outbox pruned, counts what it skipped
truthfully, and files each group-chat turn under its own sender. Real AgentLoop, real
``nanobot-memory`` processes, LLM double."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from nanobot_memory_adapters.nanobot import plugin_for
from nanobot_memory_adapters.nanobot.runtime import MemoryPlugin
from nanobot_memory_adapters.nanobot.settings import load_settings
from nanobot_memory_adapters.nanobot.turns import chat_scope
from tests.nanobot.conftest import VENV_BIN, agent_request, long_term_memory, say
from tests.nanobot.test_user_features import ALICE, BOB, _hold_drain_lock, _items

FULL_HISTORY = {"memory": {"condition": "full_history"}}
NM = str(VENV_BIN / "nanobot-memory")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([NM, *args], capture_output=True, text=True, timeout=300)


def _backfill(home, provider: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return _run("backfill", "--nanobot-config", str(home.config_path), "--provider", provider,
                *extra)


def _opened(home) -> tuple[Any, MemoryPlugin]:
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    return loop, plugin


async def _reopened(home) -> tuple[Any, MemoryPlugin]:
    loop, plugin = _opened(home)
    assert plugin is not None and await plugin._ensure_adapter()
    return loop, plugin


@pytest.mark.servers
async def test_forget_then_backfill_does_not_bring_the_memory_back(home):
    home.write_memory(FULL_HISTORY)
    loop, plugin = _opened(home)
    await say(loop, "alice", "I keep bees on the roof.")
    await say(loop, "bob", "I keep chickens.")
    assert await plugin.flush() == 0
    reply = await say(loop, "alice", "/memory-forget confirm")
    assert reply.startswith("forgotten:"), reply
    assert "backfill skips this scope" in reply
    await say(loop, "alice", "My new hobby is chess.")  # said after the forget: kept
    assert await plugin.flush() == 0
    await home.close(loop)

    done = _backfill(home, "full_history")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("1 turn(s) of 1 forgotten scope(s) (default/telegram-alice) skipped"
            in done.stdout), done.stdout
    assert "--include-forgotten brings them back" in done.stdout
    assert "0 newly queued" in done.stdout, done.stdout
    loop, plugin = await _reopened(home)
    alice = await _items(plugin, ALICE, "what do I keep")
    assert not any("bees" in t for t in alice), alice
    assert sum("chess" in t for t in alice) == 1, alice
    assert any("chickens" in t for t in await _items(plugin, BOB, "what do I keep"))
    await home.close(loop)

    back = _backfill(home, "full_history", "--include-forgotten")  # told otherwise
    assert back.returncode == 0 and "1 newly queued" in back.stdout, back.stdout + back.stderr
    loop, plugin = await _reopened(home)
    alice = await _items(plugin, ALICE, "what do I keep")
    assert sum("bees" in t for t in alice) == 1 and sum("chess" in t for t in alice) == 1


async def test_nobody_brings_back_forgotten_memory_from_chat(home):
    """In a gateway anyone can type a command: Bob's backfill with --include-forgotten
    must not bring back what Alice asked to forget (before: it did). The operator can, on
    the machine (the test above)."""
    home.write_memory(FULL_HISTORY)
    loop, plugin = _opened(home)
    await say(loop, "alice", "My secret diagnosis is XYZZY-condition.")
    assert await plugin.flush() == 0
    assert (await say(loop, "alice", "/memory-forget confirm")).startswith("forgotten:")
    reply = await say(loop, "bob", "/memory-mode full_history --backfill --include-forgotten")
    assert "not taken from chat" in reply and "nanobot-memory backfill" in reply, reply
    plain = await say(loop, "bob", "/memory-mode FULL_HISTORY --backfill")  # any case
    assert "forgotten scope(s)" in plain and "on the machine" in plain, plain
    assert "/memory-mode full_history --backfill --include-forgotten" not in plain
    assert await plugin.flush() == 0
    assert not any("XYZZY" in t for t in await _items(plugin, ALICE, "my diagnosis"))


@pytest.mark.servers
async def test_forgetting_a_scope_that_holds_nothing_says_so(home):
    home.write_memory(FULL_HISTORY)
    loop, plugin = _opened(home)
    await say(loop, "alice", "I keep bees on the roof.")
    await say(loop, "bob", "I keep chickens.")
    assert await plugin.flush() == 0
    # in chat: a user nothing was stored for; other users' scopes are not listed there
    carol = await say(loop, "carol", "/memory-forget confirm")
    assert carol.startswith("nothing stored for this scope (default/telegram-carol)"), carol
    assert "telegram-alice" not in carol and "forgotten" not in carol
    await home.close(loop)

    for extra in (["--persona", "telegram-alicee"],  # a typo
                  ["--persona", "telegram-alice", "--run", "defualt"]):  # an unknown run
        typo = _run("forget", *extra, "--config", str(home.memory_path), "--yes")
        assert typo.returncode == 1, typo.stdout + typo.stderr
        assert "nothing stored for this scope" in typo.stdout, typo.stdout
        assert "forgotten" not in typo.stdout.split("known scopes")[0]
        assert "known scopes: default/telegram-alice, default/telegram-bob" in typo.stdout
    loop, plugin = await _reopened(home)
    assert await _items(plugin, ALICE, "bees") and await _items(plugin, BOB, "chickens")


@pytest.mark.parametrize("first", ["full_history", "mem0"])
async def test_forget_reaches_every_provider_that_holds_the_scope(home, llm_double, first):
    """Alice told one provider, then another: forget deletes her memory in both, also
    when they share one embedded store (mem0 and simple_rag: one Qdrant folder)."""
    pytest.importorskip("mem0")
    home.write_memory(FULL_HISTORY if first == "full_history" else {"memory": {
        "backend": "mem0", "mem0": {"llm": {"base_url": llm_double.base_url,
                                            "model": "double", "api_key": "x"}}}})
    loop, plugin = _opened(home)
    await say(loop, "alice", "I keep bees on the roof.")
    await say(loop, "bob", "I keep chickens.")
    assert await plugin.flush(timeout_s=120) == 0
    assert await _items(plugin, ALICE, "what do I keep")
    assert "now 'simple_rag'" in await plugin.switch_provider("simple_rag")
    await say(loop, "alice", "I also keep goats.")
    assert await plugin.flush(timeout_s=120) == 0

    reply = await say(loop, "alice", "/memory-forget confirm")
    first_line = reply.splitlines()[0]
    assert first_line.startswith(f"forgotten: 'simple_rag' and '{first}' deleted"), reply
    assert f"check ({first}): searching for it again returns nothing" in reply
    assert await plugin._ensure_adapter()
    assert await _items(plugin, ALICE, "goats") == []
    assert f"now '{first}'" in await plugin.switch_provider(first)  # switch back
    assert await plugin._ensure_adapter()
    assert await _items(plugin, ALICE, "what do I keep") == []  # the memory does not return
    assert await _items(plugin, BOB, "what do I keep")


@pytest.mark.servers
async def test_backfill_is_idempotent_whatever_the_outbox_pruned(home):
    home.write_memory({**FULL_HISTORY, "nanobot": {"keep_delivered": 2}})
    loop, plugin = _opened(home)
    facts = [f"Fact {n}: my locker {n} holds {n} marbles." for n in range(8)]
    for text in facts:
        await say(loop, "alice", text)
    assert await plugin.flush() == 0
    assert len(plugin.outbox.rows("full_history")) < len(facts)  # pruned
    await home.close(loop)

    again = _backfill(home, "full_history")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 newly queued, 8 already delivered" in again.stdout, again.stdout
    # the backfill's own rows, pruned too: a second backfill adds nothing either
    for expected in ("8 newly queued", "0 newly queued, 8 already delivered"):
        into = _backfill(home, "no_memory")
        assert into.returncode == 0 and expected in into.stdout, into.stdout + into.stderr
    loop, plugin = await _reopened(home)
    stored = await _items(plugin, ALICE, "marbles")
    assert len(stored) == len(facts)
    assert all(sum(text in t for t in stored) == 1 for text in facts), stored  # once each


@pytest.mark.servers
async def test_backfill_counts_pending_turns_apart_from_delivered_ones(home):
    home.write_memory(FULL_HISTORY)
    loop, plugin = _opened(home)
    await say(loop, "alice", "I keep bees on the roof.")
    assert await plugin.flush() == 0
    holder = await _hold_drain_lock(home)  # another process is delivering: rows wait
    try:
        await say(loop, "alice", "I also keep goats.")
        await say(loop, "alice", "And two cats.")
        assert plugin.outbox.stats("full_history").pending == 2
        await home.close(loop)
        beside = _backfill(home, "full_history")
    finally:
        holder.kill()
        holder.wait()
    assert ("3 turn(s) in 1 session(s): 0 newly queued, 1 already delivered, 2 already "
            "queued") in beside.stdout, beside.stdout + beside.stderr


@pytest.mark.servers
async def test_a_bad_wait_or_nanobot_config_is_one_line_before_anything_runs(home):
    """``backfill --wait-s -1`` (or nan) was taken; ``forget --nanobot-config <typo>``
    silently fell back to no nanobot config. Each is one line now, exit 2, nothing done."""
    home.write_memory(FULL_HISTORY)
    for value in ("-1", "nan", "inf"):
        done = _backfill(home, "full_history", "--wait-s", value)
        err = done.stderr.strip()
        assert done.returncode == 2 and len(err.splitlines()) == 1, done.stdout + err
        assert f"--wait-s {value}: give a number of seconds, 0 or more" in err, err
    typo = home.root / "conifg.json"
    done = _run("forget", "--persona", "alice", "--config", str(home.memory_path),
                "--nanobot-config", str(typo), "--yes")
    err = done.stderr.strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1, done.stdout + err
    assert f"--nanobot-config {typo}: no such file" in err, err
    assert not home.data_dir.exists()  # no outbox opened, no provider built


async def test_forget_on_static_profile_does_not_contradict_itself(home):
    home.write_memory({"memory": {"condition": "static_profile",
                                  "static_profile": {"profile": "Loves jazz."}}})
    loop, plugin = _opened(home)
    await say(loop, "alice", "I keep bees on the roof.")
    assert await plugin.flush() == 0
    reply = await say(loop, "alice", "/memory-forget confirm")
    assert reply.startswith("nothing stored for this scope"), reply
    assert "'static_profile' stores nothing from conversations" in reply
    assert "deleted" not in reply.replace("nothing was deleted", "")
    assert "NOT" not in reply and "forgotten" not in reply


@pytest.mark.servers
async def test_group_chat_backfill_files_each_turn_under_its_own_sender(home):
    home.write_memory(FULL_HISTORY)
    loop, plugin = _opened(home)

    async def group(sender: str, text: str) -> str:
        reply = await loop.process_direct(text, session_key="telegram:-500",
                                          channel="telegram", chat_id="-500",
                                          sender_id=sender)
        return reply.content if reply is not None else ""

    await group("1001", "Fact A1: my codename is ZEBRA-PAPAYA.")
    await group("2002", "Fact B1: I collect stamps.")
    await group("1001", "Fact A2: my bank is in Porto.")
    await say(loop, "alice", "/memory-mode read-only on")
    await group("2002", "Fact B2: said while the plugin did not record.")  # sender unknown later
    await say(loop, "alice", "/memory-mode read-only off")
    await group("2002", "Fact B3: I live in Oslo.")
    assert await plugin.flush() == 0
    await home.close(loop)

    done = _backfill(home, "no_memory")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 turn(s) in 1 group session(s) skipped" in done.stdout, done.stdout
    assert "4 newly queued" in done.stdout, done.stdout
    memory = load_settings(home.memory_path).memory
    assert memory is not None

    def scope_of(sender: str) -> str:
        return chat_scope(memory, channel="telegram", chat_id="-500", sender_id=sender,
                          session_key="telegram:-500")[0].persona_id

    filed = {}
    for row in plugin.outbox.rows("no_memory"):
        event = json.loads(row["payload"])
        filed[event["messages"][0]["content"].split(":")[0]] = event["user_id"]
    assert filed == {"Fact A1": scope_of("1001"), "Fact A2": scope_of("1001"),
                     "Fact B1": scope_of("2002"), "Fact B3": scope_of("2002")}, filed


def _delivered(box: Any, provider: str, persona: str, text: str, stamp: str) -> None:
    from datetime import datetime

    from nanobot_memory_adapters.events import MemoryEvent

    event = MemoryEvent(event_id=f"nb-{persona}-{provider}", run_id="default",
                        user_id=persona, agent_id="nanobot", session_id="discord:dm",
                        turn_id="t1", timestamp=datetime.fromisoformat(stamp),
                        messages=[{"role": "user", "content": text}])
    assert box.enqueue(provider, event, "discord:dm")
    seq = box.rows(provider)[-1]["seq"]
    box.mark_delivered(seq, status="committed", native_ids=[], latency_ms=1.0)


def test_a_turn_held_under_two_scopes_counts_for_both(tmp_path):
    """``migrate-scopes`` copies a turn (same session, same time) to its person's new
    scope. The ledger must record the provider as holding both scopes, or a forget of the
    new scope skips a provider the user switched away from."""
    from nanobot_memory_adapters.contract import MemoryScope
    from nanobot_memory_adapters.nanobot.outbox import Outbox

    box = Outbox(tmp_path / "outbox.sqlite3")
    stamp = "2026-01-01T10:00:00+00:00"
    _delivered(box, "mem0", "discord-jos", "My locker code is 11.", stamp)  # the old name
    _delivered(box, "mem0", "discord-jos~0123456789abcdef", "My locker code is 11.", stamp)
    new = MemoryScope(run_id="default", persona_id="discord-jos~0123456789abcdef")
    old = MemoryScope(run_id="default", persona_id="discord-jos")
    assert box.holders(new) == {"mem0"} and box.holders(old) == {"mem0"}
    box.close()


def test_an_outbox_from_before_the_rekey_keeps_its_ledger(tmp_path):
    import sqlite3

    from nanobot_memory_adapters.contract import MemoryScope
    from nanobot_memory_adapters.nanobot.outbox import Outbox

    path = tmp_path / "outbox.sqlite3"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE delivered_turn (provider TEXT NOT NULL, session_key TEXT NOT NULL,
            turn_at TEXT NOT NULL, run_id TEXT NOT NULL, persona_id TEXT NOT NULL,
            PRIMARY KEY (provider, session_key, turn_at));
        INSERT INTO delivered_turn VALUES ('graphiti', 'discord:dm', '2025-01-01T00:00:00Z',
            'default', 'discord-jos');
    """)
    db.close()
    box = Outbox(path)
    old = MemoryScope(run_id="default", persona_id="discord-jos")
    assert box.holders(old) == {"graphiti"}  # carried over
    stamp = "2025-01-01T00:00:00+00:00"
    _delivered(box, "graphiti", "discord-jos~0123456789abcdef", "x", stamp)
    new = MemoryScope(run_id="default", persona_id="discord-jos~0123456789abcdef")
    assert box.holders(new) == {"graphiti"}  # the trigger is back, on the new key
    box.close()
    again = Outbox(path)  # a second open changes nothing
    assert again.holders(old) == again.holders(new) == {"graphiti"}
    again.close()


@pytest.mark.servers
async def test_terminal_sessions_from_while_the_plugin_was_off_are_backfilled_as_cli_user(
        home, llm_double):
    """``nanobot agent -m`` while the plugin was off (with and without ``-s``): a backfill
    filed those sessions under made-up users (``default/offcheck-unknown``) that nothing
    ever recalls; nanobot's CLI sends every turn as ``user`` on the ``cli`` channel, the
    scope the live turns use (``cli-user``). A chat of another channel never seen live is
    not filed under a guessed person (unknown means shared)."""
    import os

    home.write_memory({"memory": {"condition": "full_history"}})
    env = {**os.environ, "NANOBOT_MEMORY_PLUGIN": "off", "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    env.pop("NANOBOT_MEMORY_CONFIG", None)
    nanobot = [str(VENV_BIN / "nanobot"), "agent", "-c", str(home.config_path),
               "--no-markdown", "-m"]
    for args in (["My cat is called PEPPER-TIGER."],
                 ["My locker code is LOCKER-7781.", "-s", "offcheck"]):
        proc = subprocess.run([*nanobot, *args], capture_output=True, text=True, timeout=180,
                              env=env, cwd=home.root)
        assert proc.returncode == 0, proc.stderr[-2000:]
    loop = home.loop()  # a Matrix room nobody vouched for, also before the plugin
    session = loop.sessions.get_or_create("matrix:!room:x.org")
    session.add_message("user", "Team secret is ROOM-SECRET-42.")
    session.add_message("assistant", "Noted.")
    loop.sessions.save(session)
    await home.close(loop)
    done = subprocess.run([str(VENV_BIN / "nanobot-memory"), "backfill", "--nanobot-config",
                           str(home.config_path), "--provider", "full_history"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "group session" in " ".join(done.stdout.split()), done.stdout  # the room: skipped
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await plugin._ensure_adapter()
    assert await plugin.flush() == 0
    users = {json.loads(r["payload"])["user_id"] for r in plugin.outbox.rows("full_history")}
    assert users == {"cli-user"}, users
    reply = await loop.process_direct("What is my cat called and my locker code?")
    req = agent_request(llm_double, "What is my cat called")
    assert "PEPPER-TIGER" in long_term_memory(req) and "LOCKER-7781" in long_term_memory(req)
    assert reply is not None


async def test_a_readiness_wait_that_fails_is_its_scopes_line_not_a_stopped_delivery():
    """A readiness wait that raised (rolling_summary's Dream, a server gone) after every
    turn was delivered was reported as "stopped ... the rest stays queued" (nothing was
    queued; the rerun printed "delivered 0" and exited 0). It is that scope's line now,
    and the backfill does not end as if everything were readable (``all_ready``); a
    chat's line carries no backend text."""
    from nanobot_memory_adapters.contract import AdapterError, MemoryScope, Readiness
    from nanobot_memory_adapters.nanobot import backfill

    class Waits:
        """Declares nothing: offers what its methods show (readiness)."""

        def __init__(self, outcome: Any) -> None:
            self.outcome = outcome

        async def wait_until_ready(self, scope: MemoryScope, timeout_s: float) -> Readiness:
            if isinstance(self.outcome, Exception):
                raise self.outcome
            return Readiness(status=self.outcome)

        async def readiness(self, scope: MemoryScope) -> Readiness:
            return await self.wait_until_ready(scope, 0)

    scope = MemoryScope(run_id="default", persona_id="telegram-1001")
    broken = Waits(AdapterError("Dream failed on 'My PIN is 4417'", backend_name="x",
                                operation="wait_until_ready", retryable=False))
    [line] = await backfill.wait_ready(broken, [scope], 1.0)  # type: ignore[arg-type]
    assert line.startswith(f"readiness {scope.key}: failed (") and "Dream failed" in line
    assert not backfill.all_ready([line])
    [chat_line] = await backfill.wait_ready(broken, [scope], 1.0,  # type: ignore[arg-type]
                                            detail=False)
    assert "4417" not in chat_line and chat_line.endswith("failed (the log has why)")
    pending = await backfill.wait_ready(Waits("pending"), [scope], 1.0)  # type: ignore[arg-type]
    ready = await backfill.wait_ready(Waits("ready"), [scope], 1.0)  # type: ignore[arg-type]
    assert not backfill.all_ready(pending) and backfill.all_ready(ready)
    assert backfill.all_ready([backfill.NOTHING_TO_WAIT_FOR])
