"""The seed's two no-memory variants: ``no_memory`` (anonymized: the agent does not know
who it talks to) and ``no_memory_named`` (the agent knows the user's name, nothing else).
The name enters through the memory section, the prompt slot every condition uses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nanobot_memory_adapters import load_provider
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
)
from nanobot_memory_adapters.harness.preferences.agent import AgentLLM
from nanobot_memory_adapters.harness.preferences.driver import (
    PreferenceBenchConfig,
    run_preferences,
)
from nanobot_memory_adapters.harness.preferences.generator import generate
from nanobot_memory_adapters.harness.preferences.reader import IdealReaderAgent
from nanobot_memory_adapters.harness.preferences.simulator import ScriptedUser
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench
from nanobot_memory_adapters.tracing import read_traces

VARIANTS = ["no_memory", "no_memory_named"]


def _request(persona: str, query: str = "what should I cook tonight?") -> RetrieveRequest:
    return RetrieveRequest(query=query, scope=MemoryScope(run_id="r", persona_id=persona),
                           budget=ContextBudget(max_tokens=500))


def _items(context: str) -> list[str]:
    return [line for line in context.splitlines() if line.startswith("- ")]


async def test_named_shows_the_name_and_nothing_it_was_told():
    adapter = load_provider({"condition": "no_memory_named",
                             "no_memory_named": {"names": {"alice": "Alice Moreau"}}})
    try:
        event = MemoryEvent(
            event_id="e1", run_id="r", user_id="alice", agent_id="nanobot", session_id="s1",
            turn_id="t1", timestamp=datetime(2024, 5, 1, tzinfo=UTC),
            messages=[Message(role="user", content="Call me Ali; I am vegetarian.")])
        receipt = await adapter.record_event(event)
        assert receipt.status == "ignored"
        result = await adapter.retrieve(_request("alice", "vegetarian Ali"))
        [line] = _items(result.formatted_context)
        assert line.endswith("The user's name is Alice Moreau.")
        assert "vegetarian" not in result.formatted_context and "Ali;" not in line
        assert result.trace.backend_name == "no_memory_named"
        assert result.trace.condition_kind == "control"
        # a persona without a configured name gets nothing, and the trace says why
        other = await adapter.retrieve(_request("bob"))
        assert other.formatted_context == "" and other.items == []
        assert any("no name configured for persona 'bob'" in w for w in other.trace.warnings)
    finally:
        await adapter.aclose()
    anonymized = load_provider({"condition": "no_memory"})
    try:
        assert (await anonymized.retrieve(_request("alice"))).formatted_context == ""
    finally:
        await anonymized.aclose()


@pytest.mark.parametrize(("block", "needle"), [
    (None, "no_memory_named needs the user's name"),
    ({"name": "  "}, "name is empty"),
    ({"names": {"alice": "Al\nice"}}, "control character"),
    ({"names": {"*": "Alice"}}, "wildcard"),
])
def test_named_without_a_usable_name_is_one_clear_config_error(block, needle):
    source: dict = {"condition": "no_memory_named"}
    if block is not None:
        source["no_memory_named"] = block
    with pytest.raises(ConfigError) as err:
        load_provider(source)
    assert needle in str(err.value) and "\n" not in str(err.value)


async def test_preferences_fill_the_name_from_the_dataset_and_it_scores_nothing(tmp_path):
    """Read by the ideal reader: the name is in every named context and is the only
    thing there; the anonymized contexts are empty; neither exposes a preference, and
    the two behave exactly alike (a name says nothing about what the user prefers)."""
    scenario = generate(2, 0)
    out = tmp_path / "reader"
    outcome = await run_preferences(PreferenceBenchConfig(
        out=out, providers=VARIANTS, scenario=scenario, agent=IdealReaderAgent()))
    assert not outcome.skipped
    names = {p.persona_id: p.name for p in scenario.personas}
    entries = {e["name"]: e for e in outcome.manifest["providers"]}
    assert entries["no_memory_named"]["config"] == {"name": None, "names": names}
    assert not entries["no_memory"]["config"]
    lines = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "preference_test"]
    assert len(lines) == 2 * 2 * 12
    shown: dict[str, set[str]] = {}  # a context's text is traced once, then its hash
    for r in lines:
        if r["provider"] == "no_memory":
            assert r["context_tokens"] == 0 and not r.get("memory_context")
            continue
        assert r["context_tokens"] > 0
        shown.setdefault(r["conversation"], set()).add(r["context_sha256"])
        if context := r.get("memory_context"):
            [line] = _items(context)
            assert line.endswith(f"The user's name is {names[r['conversation']]}.")
    # one context per persona, the same at every test
    assert {pid: len(h) for pid, h in shown.items()} == dict.fromkeys(names, 1)
    results = outcome.results
    score = {n: results["providers"][n]["scores"]["overall"] for n in VARIANTS}
    for s in score.values():
        assert s["current_exposure"] == 0.0 and s["stale_exposure"] == 0.0
        assert s["behaviour"] == results["default_rate"]
    [pair] = results["pairwise"]["behaviour"]
    assert pair["difference"] == 0.0 and pair["verdict"] == "not distinguishable"


async def test_through_nanobot_only_the_named_agents_prompt_carries_the_name(
        tmp_path, llm_double):
    """The real AgentLoop's prompts, as the model received them: the persona's name is
    in every test turn's prompt of the named variant and in none of the anonymized one
    (the persona id, the channel and the scripted user never name the user)."""
    scenario = generate(1, 0)
    [persona] = scenario.personas
    first = persona.name.split()[0]
    prompts: dict[str, list[str]] = {}
    for name in VARIANTS:
        llm_double.requests.clear()
        outcome = await run_preferences(PreferenceBenchConfig(
            out=tmp_path / name, providers=[name], scenario=scenario,
            simulator=ScriptedUser(), agent=AgentLLM(base_url=llm_double.base_url,
                                                     model="double")))
        m = outcome.results["providers"][name]
        assert sum(m["failures"].values()) == 0, m["failures"]
        prompts[name] = [
            "\n".join(str(msg.get("content")) for msg in req.body["messages"])
            for req in llm_double.chat_requests()]
    assert len(prompts["no_memory"]) == len(prompts["no_memory_named"]) > 0
    assert not any(first in p for p in prompts["no_memory"])
    assert all(f"The user's name is {persona.name}." in p for p in prompts["no_memory_named"])


async def test_locomo_bench_names_the_user_speaker_in_either_protocol(locomo_file, tmp_path):
    for speakers in ("single", "dual"):
        out = tmp_path / speakers
        outcome = await run_bench(BenchConfig(
            dataset=locomo_file, out=out, providers=VARIANTS, budget_tokens=160,
            conversations=["syn-2"], speakers=speakers))
        assert not outcome.skipped
        entries = {e["name"]: e for e in outcome.manifest["providers"]}
        expected = ({"syn-2": "Chen"} if speakers == "single"
                    else {"syn-2-Chen": "Chen", "syn-2-Dara": "Dara"})
        assert entries["no_memory_named"]["config"] == {"name": None, "names": expected}
        asks = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "ask"]
        named = [r for r in asks if r["provider"] == "no_memory_named"]
        anonymized = [r for r in asks if r["provider"] == "no_memory"]
        assert named and len(named) == len(anonymized)
        assert all(r["context_tokens"] == 0 for r in anonymized)
        assert all(r["context_tokens"] > 0 for r in named)
        texts = [r["context"] for r in named if "context" in r]  # traced once, then hashed
        assert len(texts) == 1 and len({r["context_sha256"] for r in named}) == 1
        assert [s[2:] for s in _items(texts[0])] == [
            f"The user's name is {n}." for n in expected.values()]
        recall = outcome.results["providers"]["no_memory_named"]["recall"]["overall"]
        assert recall["turn"] == recall["session"] == 0.0


def test_answer_recall_reads_the_memory_not_its_frame():
    """The frame names the provider and the scope: ``backend="no_memory_named"``
    normalizes to "no memory named", which held LoCoMo's gold "No" (4 of the 5 answer hits
    this control had on locomo7), and ``scope=".../conv-26"`` would hold a gold "26"."""
    from nanobot_memory_adapters.harness.metrics import answer_present, context_answer_text

    context = ('<memory-context backend="no_memory_named" scope="locomo/conv-26">\n'
               "- The user's name is Ann.\n</memory-context>")
    assert not answer_present("No", context_answer_text(context))
    assert not answer_present("26", context_answer_text(context))
    assert answer_present("Ann", context_answer_text(context))
