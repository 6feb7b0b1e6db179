"""Behavioural preference sessions: the scenario format, the seeded generator, PersonaMem,
scoring, and the full flow with nanobot in the loop (LLM double as nanobot's model)."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
from nanobot_memory_adapters.harness.preferences.agent import AgentLLM
from nanobot_memory_adapters.harness.preferences.driver import (
    PreferenceBenchConfig,
    run_preferences,
)
from nanobot_memory_adapters.harness.preferences.format import (
    DIMENSIONS,
    ScenarioError,
    dump_scenarios,
    load_scenarios,
    parse_scenarios,
)
from nanobot_memory_adapters.harness.preferences.generator import (
    GENERATOR_VERSION,
    generate,
    leaks,
)
from nanobot_memory_adapters.harness.preferences.personamem import load_personamem
from nanobot_memory_adapters.harness.preferences.reader import IdealReaderAgent
from nanobot_memory_adapters.harness.preferences.scoring import (
    exposure,
    judge_choice,
    parse_choice,
)
from nanobot_memory_adapters.harness.preferences.simulator import ScriptedUser
from nanobot_memory_adapters.stats import MIN_CLUSTERS, wilson_ci
from nanobot_memory_adapters.tracing import read_traces
from tests.harness.conftest import mem0_installed

CONTROLS = ["no_memory", "rolling_summary", "full_history", "simple_rag", "static_profile",
            "oracle_ipas"]


# -- generator and format -----------------------------------------------------------------

def test_generator_is_seeded_and_checks_its_own_cues():
    a, b = generate(3, seed=7), generate(3, seed=7)
    assert dump_scenarios(a) == dump_scenarios(b)
    assert dump_scenarios(generate(3, seed=8)) != dump_scenarios(a)
    assert a.source == {"generator": "nanobot-memory-preferences", "version": GENERATOR_VERSION,
                        "seed": 7, "personas": 3}
    for persona in a.personas:
        options = [t for t in persona.tests if t.options]
        assert len(options) == 12 and all(t.kind == "behaviour" and t.acts and t.rubric
                                          for t in persona.tests)
        assert {t.dimension for t in options} == {"CS", "PET", "IQI"}
        # PET: a value that changed; the earlier one ends where the later one starts.
        changed = [p for p in persona.preferences if p.valid_until is not None]
        assert changed and all(persona.preference(t.target).valid_at(t.at) for t in options)
        # IQI: implied, never stated - the value's name occurs in no turn.
        for pref in persona.preferences:
            if pref.revealed == "implicit":
                text = " ".join(t.content.lower() for s in persona.sessions for t in s.turns)
                assert not any(name in text for name in ("dairy", "dog-friendly",
                                                         "early nights", "strong sun"))


def test_format_refuses_overlapping_values_and_unknown_targets(tmp_path):
    data = json.loads(dump_scenarios(generate(1, 0)))
    prefs = data["personas"][0]["preferences"]
    earlier = next(p for p in prefs if p.get("valid_until"))
    earlier["valid_until"] = (datetime.fromisoformat(earlier["valid_until"])
                              + timedelta(days=30)).isoformat()
    with pytest.raises(ScenarioError, match="overlap; a change must end the previous value"):
        parse_scenarios(data)
    data = json.loads(dump_scenarios(generate(1, 0)))
    data["personas"][0]["tests"][0]["target"] = "nope"
    with pytest.raises(ScenarioError, match="target 'nope' is not a preference id"):
        parse_scenarios(data)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load_scenarios(bad)
    with pytest.raises(ScenarioError, match="is a directory"):
        load_scenarios(tmp_path)


def test_a_change_fills_the_end_of_the_previous_value():
    data = json.loads(dump_scenarios(generate(1, 0)))
    for pref in data["personas"][0]["preferences"]:
        pref.pop("valid_until", None)
    scenario = parse_scenarios(data)
    ended = [p for p in scenario.personas[0].preferences if p.valid_until is not None]
    assert len(ended) == 2  # the two PET attributes' first values


# -- scoring ----------------------------------------------------------------------------------

def test_parse_choice_and_error_kinds():
    persona = generate(1, 0).personas[0]
    test = next(t for t in persona.tests if t.dimension == "PET" and t.after_session == 7
                and t.options)
    good = next(o.id for o in test.options if test.target in o.satisfies)
    stale = next(o.id for o in test.options if o.violates and o.satisfies)
    assert parse_choice(f"({good}) sounds right", test) == good
    assert parse_choice(f"{good.upper()}) that one", test) == good
    assert parse_choice(f"I'd go with option {good}.", test) == good
    text = next(o.text for o in test.options if o.id == stale)
    assert parse_choice(f"Definitely: {text}!", test) == stale
    assert parse_choice("Hmm, hard to say.", test) is None
    assert judge_choice(good, test, persona)["correct"]
    assert judge_choice(stale, test, persona)["error"] == "stale"
    assert judge_choice(None, test, persona)["error"] == "unparsed"
    cs = next(t for t in persona.tests if t.dimension == "CS" and t.options)
    other = next(o.id for o in cs.options if o.satisfies and cs.target not in o.satisfies)
    assert judge_choice(other, cs, persona)["error"] == "wrong_context"


def test_exposure_sees_current_and_stale_values_and_validity_marks():
    persona = generate(1, 0).personas[0]
    test = next(t for t in persona.tests if t.dimension == "PET" and t.after_session == 7)
    target = persona.preference(test.target)
    old = persona.superseded(target)[0]
    new_cue, old_cue = target.cues[0], old.cues[0]
    both = f"<memory-context>\n- [score=0.9] likes {new_cue}\n- [score=0.8] {old_cue} daily\n"
    assert exposure(both, test, persona) == {"current": True, "stale": True}
    marked = (f"<memory-context>\n[valid=2024-01-01..2024-02-01] {old_cue} daily\n"
              f"[valid=2024-02-01..] {new_cue}\n</memory-context>")
    assert exposure(marked, test, persona) == {"current": True, "stale": False}
    assert exposure("", test, persona) == {"current": False, "stale": False}


# -- PersonaMem -------------------------------------------------------------------------------

def _personamem_fixture(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny file pair in PersonaMem's release layout, written here (not PersonaMem data)."""
    cid = "c" * 64
    context = [
        {"role": "system", "content": "Current user persona:Name: Test Person\n"},
        {"role": "user", "content": "User: I have started cycling to work every day."},
        {"role": "assistant", "content": "Assistant: That sounds healthy!"},
        {"role": "system", "content": "Current user persona:Name: Test Person\n"},
        {"role": "user", "content": "User: Lately I prefer quiet cafes over loud bars."},
        {"role": "assistant", "content": "Assistant: Noted."},
    ]
    contexts = tmp_path / "shared_contexts_tiny.jsonl"
    contexts.write_text(json.dumps({cid: context}) + "\n" + json.dumps({"d" * 64: []}) + "\n")
    questions = tmp_path / "questions_tiny.csv"
    header = ["persona_id", "question_id", "question_type", "topic", "context_length_in_tokens",
              "context_length_in_letters", "distance_to_ref_in_blocks",
              "distance_to_ref_in_tokens", "num_irrelevant_tokens",
              "distance_to_ref_proportion_in_context", "user_question_or_message",
              "correct_answer", "all_options", "shared_context_id",
              "end_index_in_shared_context"]
    opts = str(["(a) Meet at the loud sports bar.", "(b) Meet at a quiet cafe.",
                "(c) Meet at a nightclub.", "(d) Skip the meeting."])
    rows = [
        ["7", "q1", "acknowledge_latest_user_preferences", "social", "100", "400", "1", "50",
         "0", "50%", "Where should we meet tonight?", "(b)", opts, cid, "6"],
        ["7", "q2", "recall_user_shared_facts", "travel", "100", "400", "1", "50", "0", "50%",
         "How do I get to work?", "(a)", opts, cid, "3"],
        ["7", "q3", "generalizing_to_new_scenarios", "travel", "100", "400", "1", "50", "0",
         "50%", "Plan my commute.", "(c)", opts, cid, "3"],
    ]
    with questions.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return questions, contexts


def test_personamem_loader_maps_types_and_places_questions(tmp_path):
    questions, contexts = _personamem_fixture(tmp_path)
    scenario, stats = load_personamem(questions, contexts)
    assert stats["used"] == 2 and stats["skipped_fact_recall"] == 1
    [persona] = scenario.personas
    assert persona.persona_id == "7-cccccccc" and len(persona.sessions) == 2
    by_id = {t.test_id: t for t in persona.tests}
    q1, q3 = by_id["7-cccccccc-q1"], by_id["7-cccccccc-q3"]
    assert (q1.dimension, q1.after_session) == ("PET", 2)
    assert (q3.dimension, q3.after_session) == ("CS", 1)
    assert [o.id for o in q1.options if q1.target in o.satisfies] == ["b"]
    assert exposure("anything", q1, persona)["current"] is None  # no cues: n/a
    out = tmp_path / "pm.json"
    result = CliRunner().invoke(app, ["preferences", "personamem", "--questions",
                                      str(questions), "--contexts", str(contexts), "--out",
                                      str(out)])
    assert result.exit_code == 0, result.output
    assert load_scenarios(out).personas[0].persona_id == "7-cccccccc"


def test_no_memory_named_is_not_told_a_personamem_id_as_a_name(tmp_path):
    """PersonaMem personas have no name (the loader uses the id): no_memory_named gets no
    "The user's name is 7-cccccccc", and with no name left it is skipped in one line."""
    from nanobot_memory_adapters.harness.preferences.driver import names_block

    questions, contexts = _personamem_fixture(tmp_path)
    scenario, _ = load_personamem(questions, contexts)
    assert names_block(scenario) == {"names": {}}
    assert names_block(generate(2, 0))["names"] == {
        p.persona_id: p.name for p in generate(2, 0).personas}


def test_personamem_question_anchored_mid_session_splits_the_session(tmp_path):
    """A question sees messages [0, end): memory must hold exactly that, not the rest of
    the question's own session (here: the later switch to mild food)."""
    cid = "e" * 64
    context = [
        {"role": "system", "content": "Current user persona:Name: Mid Session\n"},
        {"role": "user", "content": "User: The hotter the food the better for me."},
        {"role": "assistant", "content": "Assistant: Noted!"},
        {"role": "user", "content": "User: My doctor says mild food only from now on."},
        {"role": "assistant", "content": "Assistant: Understood."},
        {"role": "system", "content": "Current user persona:Name: Mid Session\n"},
        {"role": "user", "content": "User: Off to the market."},
        {"role": "assistant", "content": "Assistant: Have fun."},
    ]
    contexts = tmp_path / "shared_contexts_mid.jsonl"
    contexts.write_text(json.dumps({cid: context}) + "\n")
    questions = tmp_path / "questions_mid.csv"
    opts = str(["(a) Order the extra-hot curry.", "(b) Order a mild korma."])
    with questions.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["persona_id", "question_id", "question_type", "topic",
                    "user_question_or_message", "correct_answer", "all_options",
                    "shared_context_id", "end_index_in_shared_context"])
        w.writerow(["9", "early", "acknowledge_latest_user_preferences", "food",
                    "Order me dinner?", "(a)", opts, cid, "3"])
        w.writerow(["9", "late", "acknowledge_latest_user_preferences", "food",
                    "Order me dinner?", "(b)", opts, cid, "5"])
    scenario, _ = load_personamem(questions, contexts)
    [persona] = scenario.personas
    by_id = {t.test_id: t for t in persona.tests}

    def seen(test_id: str) -> str:
        point = by_id[f"9-eeeeeeee-{test_id}"].after_session
        return " ".join(t.content for s in persona.sessions if s.index <= point
                        for t in s.turns)

    assert "hotter" in seen("early") and "mild food only" not in seen("early")
    assert "mild food only" in seen("late") and "market" not in seen("late")
    assert [len(s.turns) for s in persona.sessions] == [2, 2, 2]


def test_personamem_cut_after_a_user_turn_keeps_role_alternation(tmp_path):
    """A window that ends on a user turn (end index at its assistant reply) must not
    hand the reply to the next session: every session opens with the user and
    alternates, and the question follows the user's turn it saw."""
    cid = "f" * 64
    context = [
        {"role": "system", "content": "Current user persona:Name: Odd Cut\n"},
        {"role": "user", "content": "User: The hotter the food the better for me."},
        {"role": "assistant", "content": "Assistant: Noted!"},
        {"role": "user", "content": "User: My doctor says mild food only from now on."},
        {"role": "assistant", "content": "Assistant: Understood, mild it is."},
        {"role": "user", "content": "User: Off to the market."},
        {"role": "assistant", "content": "Assistant: Have fun."},
    ]
    contexts = tmp_path / "shared_contexts_odd.jsonl"
    contexts.write_text(json.dumps({cid: context}) + "\n")
    questions = tmp_path / "questions_odd.csv"
    opts = str(["(a) Order the extra-hot curry.", "(b) Order a mild korma."])
    with questions.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["persona_id", "question_id", "question_type", "topic",
                    "user_question_or_message", "correct_answer", "all_options",
                    "shared_context_id", "end_index_in_shared_context"])
        w.writerow(["9", "odd", "acknowledge_latest_user_preferences", "food",
                    "Order me dinner?", "(b)", opts, cid, "4"])
    scenario, _ = load_personamem(questions, contexts)
    [persona] = scenario.personas
    for s in persona.sessions:
        roles = [t.role for t in s.turns]
        assert roles == ["user", "assistant"] * (len(roles) // 2), (s.session_id, roles)
    [test] = persona.tests
    seen = " ".join(t.content for s in persona.sessions if s.index <= test.after_session
                    for t in s.turns)
    assert "mild food only" in seen and "market" not in seen


_CID = "c" * 64


@pytest.mark.parametrize(("which", "content", "expected"), [
    ("questions", b"\xff\xfe not text", "--questions {path}: is not UTF-8 text"),
    ("contexts", b"\xff\xfe not text\n", "{path}: line 1 is not UTF-8 text"),
    ("contexts", b"\n[1, 2]\n", "{path}: line 2 is a JSON list, not an object"),
    ("contexts", b"5\n", "{path}: line 1 is a JSON number, not an object"),
    ("contexts", json.dumps({_CID: "notalist"}).encode(),
     f"{{path}}: line 1: context {_CID[:16]} is not a list of message objects"),
    ("contexts", json.dumps({_CID: [1, 2, 3]}).encode(),
     f"{{path}}: line 1: context {_CID[:16]} is not a list of message objects"),
], ids=["questions-not-utf8", "contexts-not-utf8", "line-is-list", "line-is-number",
        "context-is-string", "context-holds-numbers"])
def test_personamem_file_of_another_shape_is_one_line_naming_it(tmp_path, which, content,
                                                                 expected):
    """A file that is not PersonaMem's (another encoding, a JSONL line that is no
    {id: [messages]} object) is one error line naming the file, the line and the shape
    expected, exit 2: not a UnicodeDecodeError or AttributeError traceback."""
    questions, contexts = _personamem_fixture(tmp_path)
    bad = questions if which == "questions" else contexts
    bad.write_bytes(content)
    out = tmp_path / "pm.json"
    result = CliRunner().invoke(app, ["preferences", "personamem", "--questions",
                                      str(questions), "--contexts", str(contexts), "--out",
                                      str(out)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and expected.format(path=bad) in line
    if which == "contexts" and "line" in expected and "UTF-8" not in expected:
        assert "shared_contexts_*.jsonl" in line  # the shape expected is named
    assert not out.exists()


@pytest.mark.parametrize(("extra", "expected"), [
    (["--limit", "-1"], "--limit -1: give 1 or more"),
    (["--limit", "0"], "--limit 0: give 1 or more"),
    (["--persona", "nosuch"], "--persona nosuch: no question row of"),
    (["--questions-is-dir"], "is a directory"),
    (["--out-is-dir"], "--out {tmp} is a directory"),
], ids=["limit-negative", "limit-zero", "persona-unknown", "questions-dir", "out-dir"])
def test_personamem_options_are_checked_and_named(tmp_path, extra, expected):
    """--limit below 1 (-1 silently dropped the last row), a --persona no row has and a
    --questions directory each name the option and the fix, not a generic "no usable
    preference question" or "not found"."""
    questions, contexts = _personamem_fixture(tmp_path)
    out = tmp_path / "pm.json"
    if extra == ["--questions-is-dir"]:
        questions, extra = tmp_path, []
        expected = f"--questions {tmp_path} is a directory"
    if extra == ["--out-is-dir"]:
        out, extra = tmp_path, []
    result = CliRunner().invoke(app, ["preferences", "personamem", "--questions",
                                      str(questions), "--contexts", str(contexts), "--out",
                                      str(out), *extra])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert expected.format(tmp=tmp_path) in line, line
    ok = CliRunner().invoke(app, ["preferences", "personamem", "--questions",
                                  str(tmp_path / "questions_tiny.csv"), "--contexts",
                                  str(contexts), "--out", str(tmp_path / "ok.json"),
                                  "--persona", "7", "--limit", "1"])
    assert ok.exit_code == 0, ok.output
    assert "'used': 1" in ok.stdout


# -- the full flow ---------------------------------------------------------------------------

def _cfg(tmp_path: Path, providers: list[str], double, **kw) -> PreferenceBenchConfig:
    kw.setdefault("scenario", generate(1, 0))
    kw.setdefault("agent", AgentLLM(base_url=double.base_url, model="double"))
    return PreferenceBenchConfig(out=tmp_path, providers=providers, simulator=ScriptedUser(),
                                 **kw)


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
@pytest.mark.long(45)
async def test_every_control_through_nanobot_writes_nothing_and_exposure_separates(
    tmp_path, llm_double
):
    out = tmp_path / "controls"
    before = len(llm_double.requests)  # the double serves the whole worker's tests
    outcome = await run_preferences(_cfg(
        out, CONTROLS, llm_double,
        provider_configs={"static_profile": {"profile": "Likes films."}}))
    results, manifest = outcome.results, outcome.manifest
    assert list(results["providers"]) == CONTROLS and not outcome.skipped
    source = manifest["dataset"]["source"]
    assert source["seed"] == 0 and source["version"] == GENERATOR_VERSION
    for name, m in results["providers"].items():
        assert sum(m["failures"].values()) == 0, (name, m["failures"])
        assert m["gate_probes"] == 12
        assert m["scores"]["overall"]["option_tasks"] == 12
        assert m["scores"]["overall"]["behaviour_tests"] == 12
    oracle = results["providers"]["oracle_ipas"]["scores"]["overall"]
    none = results["providers"]["no_memory"]["scores"]["overall"]
    assert oracle["current_exposure"] == 1.0 and oracle["stale_exposure"] == 0.0
    assert none["current_exposure"] == 0.0
    rag = results["providers"]["simple_rag"]["scores"]
    assert rag["overall"]["current_exposure"] > 0.3
    # verbatim chunks carry no validity marks: an old value it shows counts as stale
    assert rag["overall"]["stale_exposure"] > 0.0
    # nanobot answered every recognition task through its real loop (the double chose),
    # and every recall sent the user's turn alone: never an option.
    lines = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "preference_test"]
    replies = [r for r in lines if r["outcome"]]
    assert len(replies) == 6 * 12
    assert all(r["recognition_transcript"][1]["content"].startswith("(") for r in replies)
    # the memory guide is pinned off, whatever the plugin's defaults: no request offered
    # the memory_guide tool, and the manifest says so
    offered = [t["function"]["name"] for q in llm_double.requests[before:]
               if isinstance(q["body"], dict) for t in q["body"].get("tools") or []]
    assert "memory_search" in offered and "memory_guide" not in offered
    assert "no memory guide" in manifest["settings"]["agent_mode"]
    persona = generate(1, 0).personas[0]
    by_id = {t.test_id: t for t in persona.tests}
    for r in lines:
        test = by_id[r["test_id"]]
        assert r["retrieval_query"] == test.opening
        assert (r["channel"], r["chat_id"]) == (test.channel, test.chat_id)
        for q in r["retrievals"]:
            assert not any(o.text in q["query"] for o in test.options), q
            assert "Pick the one option" not in q["query"]
        assert all(q["query"] == test.opening for q in r["retrievals"]
                   if q.get("session") == "recognition" and q["turn"] == 0)
    contexts = [r["memory_context"] for r in read_traces(out / "traces.jsonl")
                if r.get("kind") == "preference_test" and r.get("memory_context")
                and r["provider"] == "oracle_ipas"]
    assert contexts and all("oracle_ipas" in c for c in contexts)
    # Nothing of a test session became memory: every opening is absent afterwards.
    from nanobot_memory_adapters.registry import load_provider

    persona = generate(1, 0).personas[0]
    for name in ("full_history", "simple_rag"):
        adapter = load_provider({"condition": name}, data_dir=out / "stores" / name)
        try:
            result = await adapter.retrieve(RetrieveRequest(
                query=persona.tests[0].opening, scope=MemoryScope(run_id="prefs",
                                                                  persona_id=persona.persona_id),
                budget=ContextBudget(max_tokens=20000)))
            text = result.formatted_context
            assert text and not any(t.opening[:40] in text for t in persona.tests), name
            assert "Pick the one option" not in text
        finally:
            await adapter.aclose()
    assert (out / "report.html").read_text().count("<svg") >= 3


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
@pytest.mark.long(26)
async def test_architectures_on_the_double(tmp_path, llm_double):
    llm = {"base_url": llm_double.base_url, "model": "double", "api_key": "k"}
    outcome = await run_preferences(_cfg(
        tmp_path / "arch", ["mem0", "graphiti"], llm_double,
        provider_configs={"mem0": {"llm": llm}, "graphiti": {"llm": llm}}))
    assert not outcome.skipped, outcome.skipped
    for name, m in outcome.results["providers"].items():
        assert sum(m["failures"].values()) == 0, (name, m["failures"])
        assert m["scores"]["overall"]["option_tasks"] == 12
        assert m["memory_form"] == "derived"


async def test_retrieval_only_is_deterministic_and_resumes(tmp_path, llm_double):
    """Without a model: exposure only; the same command twice gives the same hashes; an
    interrupted run resumes to the same results."""
    scenario = generate(2, 3)
    first = await run_preferences(_cfg(tmp_path / "a", ["no_memory", "full_history",
                                                        "oracle_ipas"], llm_double,
                                       scenario=scenario, agent=None))
    second = await run_preferences(_cfg(tmp_path / "b", ["no_memory", "full_history",
                                                         "oracle_ipas"], llm_double,
                                        scenario=scenario, agent=None))
    assert first.results["metrics_sha256"] == second.results["metrics_sha256"]
    assert first.manifest["manifest_sha256"] == second.manifest["manifest_sha256"]
    assert first.results["providers"]["full_history"]["scores"]["overall"]["accuracy"] is None
    assert first.manifest["settings"]["agent_mode"].startswith("retrieval only")
    # a resumed run (checkpoint kept, one unit dropped) gives the same metrics
    cp_path = tmp_path / "b" / "checkpoint.json"
    cp = json.loads(cp_path.read_text())
    dropped = next(iter(cp["units"]))
    del cp["units"][dropped]
    cp_path.write_text(json.dumps(cp))
    again = await run_preferences(_cfg(tmp_path / "b", ["no_memory", "full_history",
                                                        "oracle_ipas"], llm_double,
                                       scenario=scenario, agent=None))
    assert again.resumed_units == len(cp["units"])
    assert again.results["metrics_sha256"] == first.results["metrics_sha256"]


async def test_feedback_is_its_own_experiment_group(tmp_path, llm_double, fake_providers):
    outcome = await run_preferences(_cfg(
        tmp_path / "fb", ["with_feedback", "with_feedback+feedback", "full_history+feedback"],
        llm_double))
    results = outcome.results["providers"]
    assert results["with_feedback"]["experiment_group"] == "accumulation"
    assert results["with_feedback"]["feedback_sent"] == 0
    group = results["with_feedback+feedback"]
    assert group["experiment_group"] == "feedback" and group["feedback_sent"] == 12
    assert group["failures"]["feedback"] == 0
    skipped = {s["name"]: s["reason"] for s in outcome.skipped}
    assert "has no native feedback" in skipped["full_history+feedback"]
    groups = {p["name"]: p["experiment_group"] for p in outcome.manifest["providers"]}
    assert groups == {"with_feedback": "accumulation", "with_feedback+feedback": "feedback"}
    lines = [r for r in read_traces(tmp_path / "fb" / "traces.jsonl")
             if r.get("kind") == "feedback"]
    assert len(lines) == 12 and all(r["provider"] == "with_feedback+feedback" for r in lines)


def test_cli_generate_run_and_bench_task(tmp_path):
    scen = tmp_path / "s.json"
    result = CliRunner().invoke(app, ["preferences", "generate", "--personas", "1", "--seed",
                                      "2", "--out", str(scen)])
    assert result.exit_code == 0, result.output
    assert load_scenarios(scen).source["seed"] == 2
    run = CliRunner().invoke(app, ["preferences", "run", "--dataset", str(scen), "--providers",
                                   "no_memory,oracle_ipas", "--out", str(tmp_path / "run"),
                                   "--json"])
    assert run.exit_code == 0, run.output
    data = json.loads(run.stdout)
    assert data["providers"]["oracle_ipas"]["scores"]["overall"]["current_exposure"] == 1.0
    bench = CliRunner().invoke(app, ["bench", "--task", "preferences", "--dataset", str(scen),
                                     "--providers", "no_memory", "--out",
                                     str(tmp_path / "bench"), "--json"])
    assert bench.exit_code == 0, bench.output
    bad = CliRunner().invoke(app, ["preferences", "run", "--dataset", str(tmp_path),
                                   "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "is a directory" in bad.stderr
    # a scenario set is replaced when generated again; a file of the user's is not
    again = CliRunner().invoke(app, ["preferences", "generate", "--personas", "1", "--seed",
                                     "3", "--out", str(scen)])
    assert again.exit_code == 0 and load_scenarios(scen).source["seed"] == 3
    notes = tmp_path / "notes.json"
    notes.write_text("mine")
    kept = CliRunner().invoke(app, ["preferences", "generate", "--personas", "1", "--out",
                                    str(notes)])
    assert kept.exit_code == 2 and "not a scenario set" in kept.stderr
    assert notes.read_text() == "mine"
    # a key pasted as the agent key's variable name: refused, never recorded or echoed
    secret = "sk-test-SECRET123456abcdef"
    pasted = CliRunner().invoke(app, [
        "preferences", "run", "--dataset", str(scen), "--providers", "no_memory",
        "--agent-base-url", "http://127.0.0.1:9/v1", "--agent-model", "m",
        "--agent-api-key-env", secret, "--out", str(tmp_path / "keyed")])
    assert pasted.exit_code == 2, pasted.output
    assert "--agent-api-key-env takes the NAME of an environment variable" in pasted.stderr
    assert secret not in pasted.output and not (tmp_path / "keyed").exists()
    # options the run would silently not use
    for args, said in ((["--agent-model", "m"], "--agent-model: give --agent-base-url too"),
                       (["--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m"],
                        "--judge-base-url: judges the agent's replies")):
        unused = CliRunner().invoke(app, ["preferences", "run", "--dataset", str(scen),
                                          "--providers", "no_memory", "--out",
                                          str(tmp_path / "unused"), *args])
        assert unused.exit_code == 2 and said in unused.stderr, unused.output


async def test_rolling_summary_shows_users_md_and_reset_clears_it(tmp_path):
    from nanobot_memory_adapters.conditions.rolling_summary import RollingSummary
    from nanobot_memory_adapters.store import StoreProvider

    adapter = StoreProvider(RollingSummary(tmp_path / "rs"))
    scope = MemoryScope(run_id="r", persona_id="p")
    await adapter.setup_scope(scope)
    store = adapter.store.memory_store(scope)
    request = RetrieveRequest(query="x", scope=scope, budget=ContextBudget(max_tokens=500))
    from nanobot.utils.helpers import load_bundled_template

    Path(store.user_file).write_text(load_bundled_template("USER.md") or "")
    assert (await adapter.retrieve(request)).items == []  # nanobot's untouched template
    Path(store.user_file).write_text("# User\n- prefers decaf since January\n")
    result = await adapter.retrieve(request)
    assert [i.native_id for i in result.items] == ["USER.md"]
    assert "prefers decaf" in result.formatted_context
    await adapter.reset_scope(scope)
    assert not Path(store.user_file).exists()
    assert (await adapter.retrieve(request)).items == []


async def test_oracle_answers_as_of_the_requests_time():
    from nanobot_memory_adapters.conditions.oracle_ipas import OracleIPAS, Preference

    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    from nanobot_memory_adapters.store import StoreProvider

    oracle = StoreProvider(OracleIPAS({"p": [
        Preference(attribute="coffee", value="espresso", valid_from=t0,
                   valid_until=t0 + timedelta(days=10)),
        Preference(attribute="coffee", value="decaf", valid_from=t0 + timedelta(days=10)),
    ]}))
    scope = MemoryScope(run_id="r", persona_id="p")

    async def shown(at: datetime) -> list[str]:
        result = await oracle.retrieve(RetrieveRequest(
            query="coffee", scope=scope, budget=ContextBudget(max_tokens=200), as_of=at))
        return [i.text for i in result.items]

    assert await shown(t0 + timedelta(days=1)) == ["coffee: espresso"]
    assert await shown(t0 + timedelta(days=11)) == ["coffee: decaf"]


# -- no leaks, behaviour, the ideal reader ------------------------------------------------

@pytest.fixture
def echo_provider(monkeypatch):
    """Registers ``testing.echo`` (stores nothing, returns the request) as a plugin would."""
    from nanobot_memory_adapters import registry

    class Dist:
        name = "echo-check"

    class EP:
        name = "echo"
        module = "nanobot_memory_adapters.testing.echo"
        attr = "EchoAdapter"
        value = f"{module}:{attr}"
        extras = ()
        dist = Dist()

    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda group: (
        [*real(group=group), EP()] if group == registry.ENTRY_POINT_GROUP
        else real(group=group)))


def _echoed(context: str) -> list[str]:
    """echo's items as the provider returned them (what it received), in order."""
    return [line[2:] for line in context.splitlines() if line.startswith("- ")]


async def test_echo_scores_nothing_and_every_query_is_the_opening(tmp_path, echo_provider):
    """The retrieval request is the user's request alone, tags included (``all``): a
    provider that returns the request finds no cue of the answer in it (0 exposure), what
    it received is what the trace records, and read by the ideal reader it behaves
    exactly as no memory does (the default rate)."""
    scenario = generate(2, 0)
    out = tmp_path / "retrieval"
    outcome = await run_preferences(PreferenceBenchConfig(
        out=out, providers=["echo", "no_memory"], scenario=scenario, test_tags="all"))
    echo = outcome.results["providers"]["echo"]["scores"]["overall"]
    assert echo["tests"] == 24 and echo["current_exposure"] == 0.0
    assert echo["query_leaks"] == 0
    openings = {t.test_id: t.opening for p in scenario.personas for t in p.tests}
    lines = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "preference_test"]
    assert lines and all(r["retrieval_query"] == openings[r["test_id"]] for r in lines)
    echoed = [r for r in lines if r["provider"] == "echo" and r.get("memory_context")]
    assert len(echoed) == 24
    for r in echoed:  # exactly what the provider got: the recorded query and tags
        [sent] = r["retrievals"]
        tags = "; ".join(f"{k}={v}" for k, v in sorted(sent["tags"].items()))
        assert sent["tags"] == r["request_tags"] and "attribute" in sent["tags"]
        assert _echoed(r["memory_context"]) == [r["retrieval_query"], tags]

    read = await run_preferences(PreferenceBenchConfig(
        out=tmp_path / "reader", providers=["echo", "no_memory"], scenario=scenario,
        agent=IdealReaderAgent(), test_tags="all"))
    results = read.results
    echo, none = (results["providers"][n]["scores"]["overall"] for n in ("echo", "no_memory"))
    assert echo["behaviour"] == none["behaviour"] == results["default_rate"]
    assert echo["accuracy"] == none["accuracy"] and echo["current_exposure"] == 0.0
    assert echo["query_leaks"] == 0 and echo["acts"] == none["acts"]
    [pair] = results["pairwise"]["behaviour"]
    assert pair["difference"] == 0.0 and pair["verdict"] == "not distinguishable"


async def test_a_request_that_carries_the_answer_is_recorded_and_counted(
        tmp_path, echo_provider, monkeypatch):
    """The trace records the request the provider got, not the text the harness meant to
    send: when every request carries a hint (here appended to the query on its way to the
    provider), the recorded queries, the leak count and echo's exposure all show it."""
    from nanobot_memory_adapters.harness.preferences.lexicon import ACTS

    hint = " (" + ", ".join(v[0] for acts in ACTS.values() for v in acts.values()) + ")"
    real = RetrieveRequest.with_tags.__func__  # pyright: ignore[reportFunctionMemberAccess]

    def leaky(cls, tags, **fields):
        return real(cls, tags, **{**fields, "query": fields["query"] + hint})

    monkeypatch.setattr(RetrieveRequest, "with_tags", classmethod(leaky))
    scenario = generate(1, 0)
    for agent in (None, IdealReaderAgent()):
        out = tmp_path / ("reader" if agent else "retrieval")
        outcome = await run_preferences(PreferenceBenchConfig(
            out=out, providers=["echo"], scenario=scenario, agent=agent))
        echo = outcome.results["providers"]["echo"]["scores"]["overall"]
        assert echo["query_leaks"] == echo["tests"] == 12
        assert echo["current_exposure"] > 0
        lines = [r for r in read_traces(out / "traces.jsonl")
                 if r.get("kind") == "preference_test"]
        assert len(lines) == 12 and all(r["retrieval_query"].endswith(hint) for r in lines)


async def test_ideal_reader_ranks_the_controls_with_intervals(tmp_path, echo_provider):
    """With the ideal reader: oracle_ipas >= 0.95, no_memory at the default rate,
    full_history between; every figure has its interval; the pairwise table separates
    oracle from no memory and cannot separate echo from no memory."""
    out = tmp_path / "reader"
    outcome = await run_preferences(PreferenceBenchConfig(
        out=out, providers=["no_memory", "echo", "full_history", "oracle_ipas"],
        scenario=generate(5, 1), agent=IdealReaderAgent()))
    results = outcome.results
    score = {n: m["scores"]["overall"] for n, m in results["providers"].items()}
    assert score["oracle_ipas"]["behaviour"] >= 0.95
    assert score["no_memory"]["behaviour"] == results["default_rate"]
    assert (score["no_memory"]["behaviour"] < score["full_history"]["behaviour"]
            < score["oracle_ipas"]["behaviour"])
    for s in score.values():
        ci = s["ci"]["behaviour"]
        assert ci["n"] == 60 and ci["low"] <= s["behaviour"] <= ci["high"]
        assert ci["method"] == "cluster-bootstrap+wilson" and ci["n_clusters"] == 5
        wilson = wilson_ci(round(s["behaviour"] * 60), 60)
        assert ci["low"] <= wilson.low + 1e-6 and ci["high"] >= wilson.high - 1e-6
        by_attr = s["ci_by_attribute"]["behaviour"]
        assert by_attr["n"] == 60 and by_attr["n_clusters"] >= MIN_CLUSTERS
        assert by_attr["low"] <= s["behaviour"] <= by_attr["high"]
        assert s["query_leaks"] == 0
    for m in results["providers"].values():
        for d in DIMENSIONS:
            assert m["scores"]["by_dimension"][d]["ci"]["behaviour"]["n"] == 20
    # the scripted user corrects a wrong act; the reader takes the correction
    assert score["no_memory"]["resolved"] == 1.0
    assert score["no_memory"]["mean_corrections_when_resolved"] > 0
    verdicts = {(r["a"], r["b"]): r for r in results["pairwise"]["behaviour"]}
    assert verdicts[("no_memory", "oracle_ipas")]["verdict"] == "oracle_ipas > no_memory"
    assert verdicts[("no_memory", "echo")]["verdict"] == "not distinguishable"
    assert verdicts[("no_memory", "oracle_ipas")]["mcnemar_p"] < 0.05
    attr = verdicts[("no_memory", "oracle_ipas")]["by_attribute"]
    assert attr["n_clusters"] >= MIN_CLUSTERS and attr["verdict"] == "oracle_ipas > no_memory"
    assert verdicts[("no_memory", "echo")]["by_attribute"]["verdict"] == "not distinguishable"
    html = (out / "report.html").read_text()
    assert "not distinguishable" in html and "ideal reader" in html
    # every headline cell has its interval (behaviour, CS, PET, IQI, resolved, recognition,
    # current exposure: 7 per provider; reversion and contamination where the provider had
    # an opportunity), and a tiny p prints as a bound, never 0.000
    rates = sum(s[k] is not None for s in score.values() for k in ("reversion",
                                                                     "contamination"))
    assert rates == 4 and score["no_memory"]["reversion"] is None
    assert html.count("<span class='note'>[") == 7 * 4 + rates
    import re  # ...and its own n (a persona-capped provider's beside a full one's)

    assert len(re.findall(r"<span class='note'>\[[^<]*\] n \d+</span>", html)) == 7 * 4 + rates
    from rich.console import Console

    from nanobot_memory_adapters.harness.preferences.cli import results_table
    from nanobot_memory_adapters.harness.preferences.narrow import narrow_results_table
    from nanobot_memory_adapters.harness.preferences.report import headline_ci

    for table in (results_table(results), narrow_results_table(results)):
        shown = Console(width=400, record=True)
        shown.print(table)
        text = shown.export_text()
        for m in results["providers"].values():  # every score says its own n
            n = headline_ci(m["scores"]["overall"], "behaviour")["n"]
            assert f"n {n}" in text, text
    assert "<td>&lt;0.001</td>" in html
    # persona-major: a run stopped midway has every provider on the same personas
    ran = [(r["conversation"], r["provider"]) for r in read_traces(out / "traces.jsonl")
           if r.get("kind") == "preference_test"]
    units = list(dict.fromkeys(ran))
    assert [c for c, _ in units] == sorted(c for c, _ in units)
    assert len(units) == 5 * 4


def test_generator_refuses_a_cue_in_what_the_retriever_sees(monkeypatch):
    from nanobot_memory_adapters.harness.preferences import lexicon, simulator

    generate(1, 0)
    monkeypatch.setitem(lexicon.CONTEXT_OPENINGS, "message_language", {
        "work": ("Write a note to the client in English, please.",),
        "personal": ("Write a note to my aunt.",)})
    monkeypatch.setitem(lexicon.CONTEXT_OPENINGS, "summary_style", {
        "work": ("Write up the call as bullet points.",),
        "personal": ("Write up our weekend.",)})
    monkeypatch.setitem(lexicon.CONTEXT_OPENINGS, "meeting_time", {
        "work": ("Book the review for the evening.",),
        "personal": ("Find a time to see Priya.",)})
    with pytest.raises(ScenarioError, match="leaks its answer"):
        generate(3, 0)
    monkeypatch.undo()
    monkeypatch.setattr(simulator, "NEUTRAL_TURNS", ("Sounds good. Window or aisle, though?",
                                                     "Make it by train."))
    with pytest.raises(ScenarioError, match="in the simulator"):
        generate(8, 0)


def test_the_leak_check_covers_the_follow_up_and_every_request_tag(monkeypatch):
    """The recognition follow-up is a query, and ``--test-tags all`` sends every tag: a
    cue in either reaches the retriever (the old check read the opening and the
    simulator's turns only, and the attribute tag ``dairy`` named a value)."""
    from nanobot_memory_adapters.harness.preferences import lexicon

    tests = [t for p in generate(17, 0).personas for t in p.tests]
    assert all(leaks(t) == [] for t in tests)
    assert {t.attribute for t in tests} >= {"dessert"}  # was "dairy": a value's name
    dessert = next(t for t in tests if t.attribute == "dessert" and t.options)
    tagged = dessert.model_copy(update={"scenario": "cheesecake_night"})
    assert any("in the scenario tag" in f for f in leaks(tagged))
    monkeypatch.setattr(lexicon, "FOLLOW_UP", "Just pick the sorbet one, by its letter.")
    assert any("in the follow-up" in f for f in leaks(dessert))
    assert leaks(dessert.model_copy(update={"options": []})) == []  # no options: no follow-up


def test_the_scripted_user_accepts_corrects_and_never_volunteers():
    from nanobot_memory_adapters.harness.preferences.simulator import ACCEPT, NUDGE, decide

    persona = generate(1, 0).personas[0]
    test = next(t for t in persona.tests if t.dimension == "PET" and t.after_session == 7)
    assert test.acts is not None
    now, old = test.acts.current[0], test.acts.other[0]
    value = persona.preference(test.target).value
    assert decide(test, persona, f"Done: {now}.") == ("current", decide(
        test, persona, f"Done: {now}.")[1]) and decide(test, persona, now)[1].text == ACCEPT
    act, move = decide(test, persona, f"I've sorted {old} for you.")
    assert (act, move.kind) == ("other", "correct") and value in move.text
    assert decide(test, persona, f"{now} or {old}?")[0] == "both"
    act, move = decide(test, persona, "What would you like?")
    assert (act, move.kind) == ("none", "answer") and value in move.text
    act, move = decide(test, persona, "On it.")
    assert (act, move.kind, move.text) == ("none", "nudge", NUDGE)  # names nothing


def test_the_ideal_reader_acts_on_the_newest_valid_statement_for_its_context():
    from nanobot_memory_adapters.harness.preferences.reader import choose

    persona = generate(1, 0).personas[0]
    cs = next(t for t in persona.tests if t.attribute == "message_language"
              and t.context == "work") if any(t.attribute == "message_language"
                                                for t in persona.tests) else None
    pet = next(t for t in persona.tests if t.dimension == "PET")
    assert pet.attribute is not None
    from nanobot_memory_adapters.harness.preferences.lexicon import domain_of

    domain = domain_of(pet.attribute)
    assert domain is not None
    first, second = domain.values[domain.first], domain.values[domain.second]
    a, b = first.cues[0], second.cues[0]
    memory = (f"<memory-context>\n### 2024-01-08\n[09:00] I like {a}\n"
              f"### 2024-02-08\n[10:00] now it's {b}\n")
    assert choose(memory, pet, []) == (domain.second, "memory")
    # an ended statement does not count; order on the page does not beat time
    ended = (f"<memory-context>\n### 2024-02-08\n[10:00 valid=2024-01-01..2024-02-01] now "
             f"it's {b}\n### 2024-01-08\n[09:00] I like {a}\n")
    assert choose(ended, pet, []) == (domain.first, "memory")
    assert choose("", pet, []) == (domain.first, "default")
    assert choose(memory, pet, [f"Not quite: {a} please."]) == (domain.first, "conversation")
    if cs is not None:
        both = ("<memory-context>\n[09:00] With my family it's always Spanish.\n"
                "[10:00] At work I write in English, always.\n</memory-context>")
        assert choose(both, cs, [])[0] == "english"
        personal = cs.model_copy(update={"context": "personal"})
        assert choose(both, personal, [])[0] == "spanish"


def test_the_default_set_is_large_balanced_and_shows_the_context():
    scenario = generate()
    tests = [t for p in scenario.personas for t in p.tests]
    assert len(tests) >= 200 and all(t.acts for t in tests)
    dims = [t.dimension for t in tests]
    assert dims.count("CS") == dims.count("PET") == dims.count("IQI")
    for persona in scenario.personas:
        assert all(s.channel and s.chat_id for s in persona.sessions)
        cs = [t for t in persona.tests if t.dimension == "CS"]
        for a in cs:
            pair = [b for b in cs if b.attribute == a.attribute and b is not a]
            assert pair and pair[0].opening != a.opening
            assert (a.channel, a.chat_id) != (pair[0].channel, pair[0].chat_id)


def test_cli_ideal_reader_and_its_refusal(tmp_path):
    result = CliRunner().invoke(app, [
        "preferences", "run", "--personas", "1", "--agent", "ideal-reader", "--providers",
        "no_memory,oracle_ipas", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "Paired differences" in result.output
    questions, contexts = _personamem_fixture(tmp_path)
    pm = tmp_path / "pm.json"
    CliRunner().invoke(app, ["preferences", "personamem", "--questions", str(questions),
                             "--contexts", str(contexts), "--out", str(pm)])
    bad = CliRunner().invoke(app, ["preferences", "run", "--dataset", str(pm), "--agent",
                                   "ideal-reader", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "generator's attributes only" in bad.stderr
    assert "Traceback" not in bad.output


def test_a_persona_cap_runs_a_provider_on_the_first_personas_only(tmp_path):
    """--persona-cap NAME=N: that provider's units are the first N personas, the others
    run on all; pairs compare over the tests both ran; the manifest records the cap; a
    cap for a provider not in the run, or below 1, is one line and exit 2."""
    out = tmp_path / "capped"
    result = CliRunner().invoke(app, [
        "preferences", "run", "--personas", "3", "--agent", "ideal-reader",
        "--providers", "no_memory,oracle_ipas", "--persona-cap", "oracle_ipas=1",
        "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["persona_caps"] == {"oracle_ipas": 1}
    personas = manifest["dataset"]["personas"]
    no_mem, oracle = (results["providers"][n] for n in ("no_memory", "oracle_ipas"))
    assert no_mem["personas"] == personas and len(personas) == 3
    assert oracle["personas"] == personas[:1]
    tests = oracle["scores"]["overall"]["tests"]
    assert tests and no_mem["scores"]["overall"]["tests"] == 3 * tests
    [pair] = results["pairwise"]["behaviour"]
    assert pair["n"] == tests
    for bad, says in ((["oracle=1"], "not in --providers"), (["oracle_ipas=0"], "N from 1"),
                      (["oracle_ipas"], "PROVIDER=N"), (["oracle_ipas=²"], "PROVIDER=N"),
                      (["oracle_ipas=2"], "has 1 personas"),
                      (["oracle_ipas=1", "oracle_ipas=1"], "capped twice")):
        caps = [arg for cap in bad for arg in ("--persona-cap", cap)]
        refused = CliRunner().invoke(app, [
            "preferences", "run", "--personas", "1", "--agent", "ideal-reader",
            "--providers", "no_memory,oracle_ipas", *caps, "--out", str(tmp_path / "x")])
        assert refused.exit_code == 2 and says in refused.stderr, refused.output
        assert "Traceback" not in refused.output


def test_no_recognition_runs_the_behaviour_sessions_alone(tmp_path):
    """--no-recognition drops each option test's second (recognition) session: the
    behaviour scores are the same tests' scores, and no recognition session is traced."""
    def run(name: str, *extra: str) -> dict:
        out = tmp_path / name
        result = CliRunner().invoke(app, [
            "preferences", "run", "--personas", "1", "--agent", "ideal-reader",
            "--providers", "no_memory,oracle_ipas", "--out", str(out), "--json", *extra])
        assert result.exit_code == 0, result.output
        return {"results": json.loads((out / "results.json").read_text()),
                "manifest": json.loads((out / "manifest.json").read_text()),
                "traces": [t for t in read_traces(out / "traces.jsonl")
                           if t.get("kind") == "preference_test"]}

    both, alone = run("both"), run("alone", "--no-recognition")
    assert any(t["recognition_transcript"] for t in both["traces"])
    assert alone["traces"] and not any(t["recognition_transcript"] for t in alone["traces"])
    assert all(r.get("session") != "recognition"
               for t in alone["traces"] for r in t["retrievals"])
    for name in ("no_memory", "oracle_ipas"):
        with_rec = both["results"]["providers"][name]["scores"]["overall"]
        without = alone["results"]["providers"][name]["scores"]["overall"]
        assert without["behaviour"] == with_rec["behaviour"]
        assert with_rec["option_tasks"] > 0 and with_rec["accuracy"] is not None
        assert without["option_tasks"] == 0 and without["accuracy"] is None
    assert alone["manifest"]["settings"]["recognition"] is False


async def test_the_judge_sees_the_ground_truth_never_the_memory(tmp_path, llm_double):
    """With a judge configured, each first reply is also graded by a rubric that holds the
    current value; results give the judged score and its agreement with the judge-free
    one; no judge request carries the memory section."""
    from nanobot_memory_adapters.harness.judge import LLMEndpoint, OpenAICompatibleClient
    from nanobot_memory_adapters.harness.preferences.driver import RubricJudge

    endpoint = LLMEndpoint(base_url=llm_double.base_url, model="double")
    before = len(llm_double.requests)  # the double serves the whole test session
    client = OpenAICompatibleClient(endpoint)
    outcome = await run_preferences(PreferenceBenchConfig(
        out=tmp_path / "judged", providers=["no_memory", "oracle_ipas"],
        scenario=generate(1, 0), agent=IdealReaderAgent(),
        judge=RubricJudge(client, endpoint.describe()), closers=[client.aclose]))
    for m in outcome.results["providers"].values():
        o = m["scores"]["overall"]
        assert o["judged_behaviour"] is not None and o["judge_agreement"] is not None
    oracle = outcome.results["providers"]["oracle_ipas"]["scores"]["overall"]
    assert oracle["judged_behaviour"] > outcome.results["providers"]["no_memory"][
        "scores"]["overall"]["judged_behaviour"]
    prompts = [str(r["body"]) for r in llm_double.requests[before:]
               if "Grade an assistant" in str(r["body"])]
    assert len(prompts) == 24 and not any("memory-context" in p for p in prompts)
    assert all("current preference here is" in p for p in prompts)


def test_a_judge_call_that_raised_is_a_failure(tmp_path):
    """A rubric judge that cannot be reached: every verdict is an error, counted in
    failures.judge, and the run exits 4 (it used to exit 0 with the errors unscored)."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "preferences", "run", "--personas", "1", "--agent", "ideal-reader", "--providers",
        "no_memory", "--judge-base-url", f"http://127.0.0.1:{port}/v1", "--judge-model", "m",
        "--out", str(out)], env={"OPENAI_API_KEY": "x"})
    assert result.exit_code == 4, result.output
    failures = json.loads((out / "results.json").read_text())["providers"]["no_memory"][
        "failures"]
    assert failures["judge"] == 12
    plain = CliRunner().invoke(app, [
        "preferences", "run", "--personas", "1", "--agent", "ideal-reader", "--providers",
        "no_memory", "--out", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    assert "judge" not in json.loads((tmp_path / "plain" / "results.json").read_text())[
        "providers"]["no_memory"]["failures"]


async def test_the_llm_user_words_the_scripted_move_and_never_names_unasked():
    from nanobot_memory_adapters.harness.preferences.simulator import LLMUser

    class Client:
        def __init__(self) -> None:
            self.prompts: list[str] = []

        async def chat(self, messages, max_tokens=80):  # type: ignore[no-untyped-def]
            self.prompts.append(messages[0]["content"])
            return "worded"

    persona = generate(1, 0).personas[0]
    test = next(t for t in persona.tests if t.dimension == "PET" and t.after_session == 7)
    assert test.acts is not None
    client = Client()
    user = LLMUser(client, {"model": "m"})
    value = persona.preference(test.target).value
    act, move = await user.move(test, persona, f"Booked {test.acts.other[0]}.")
    assert (act, move.kind, move.text) == ("other", "correct", "worded")
    assert value in client.prompts[-1]
    act, move = await user.move(test, persona, f"Booked {test.acts.current[0]}.")
    assert move.kind == "accept" and value not in client.prompts[-1]
    assert "Name no preference" in client.prompts[-1]


async def test_personamem_through_nanobot_is_recognition_only(tmp_path, llm_double):
    """An option-only test (PersonaMem) has no value phrases: one recognition session per
    test, its recall on the question alone, no unscored behaviour session."""
    questions, contexts = _personamem_fixture(tmp_path)
    scenario, _ = load_personamem(questions, contexts)
    before = len(llm_double.requests)  # the double serves the whole test session
    outcome = await run_preferences(_cfg(tmp_path / "pm", ["full_history"], llm_double,
                                         scenario=scenario))
    overall = outcome.results["providers"]["full_history"]["scores"]["overall"]
    assert (overall["option_tasks"], overall["behaviour_tests"]) == (2, 0)
    assert overall["current_exposure"] is None and overall["behaviour"] is None
    lines = [r for r in read_traces(tmp_path / "pm" / "traces.jsonl")
             if r.get("kind") == "preference_test"]
    openings = {t.test_id: t.opening for t in scenario.personas[0].tests}
    for r in lines:
        assert all(q.get("session") == "recognition" for q in r["retrievals"])
        assert r["retrievals"][0]["query"] == openings[r["test_id"]]
        assert r["transcript"][0]["content"] == openings[r["test_id"]]
    asked = [q for q in llm_double.requests[before:] if "Pick the one option" in str(q["body"])]
    assert len(asked) == 2


async def test_a_turn_nanobot_could_not_answer_is_a_failed_test(tmp_path, llm_double):
    """When the model call fails, nanobot replies with its own placeholder ("Sorry, I
    encountered an error ..."): that test failed (counted, exit 4), it did not "act on
    nothing" in the behaviour score, nor "show nothing" in the exposure score."""
    from tests.llm_double.server import FAIL_MARKER

    scenario = generate(1, 0)
    persona = scenario.personas[0]
    broken = persona.tests[0].model_copy(
        update={"opening": f"{persona.tests[0].opening} {FAIL_MARKER}"})
    persona = persona.model_copy(update={"tests": [broken, *persona.tests[1:]]})
    scenario = scenario.model_copy(update={"personas": [persona]})
    outcome = await run_preferences(_cfg(tmp_path / "fail", ["no_memory"], llm_double,
                                         scenario=scenario))
    m = outcome.results["providers"]["no_memory"]
    assert m["failures"]["agent"] == 1
    overall = m["scores"]["overall"]
    assert overall["behaviour_tests"] == len(persona.tests) - 1
    # ...and it is out of exposure too: its empty context is the model's failure, not a
    # memory that showed nothing
    assert overall["ci"]["current_exposure"]["n"] == len(persona.tests) - 1
    lines = {r["test_id"]: r for r in read_traces(tmp_path / "fail" / "traces.jsonl")
             if r.get("kind") == "preference_test"}
    assert "nanobot gave no answer" in lines[broken.test_id]["error"]
    assert lines[broken.test_id]["behaviour"] is None


def _history_lengths(requests: list[dict]) -> list[int]:
    """How many messages each model call carried, in order (a test's history length)."""
    return [len(q["body"].get("messages", [])) for q in requests if isinstance(q["body"], dict)]


async def test_a_resumed_unit_starts_with_empty_nanobot_sessions(tmp_path, llm_double):
    """A stopped unit is discarded on resume and its store reset; its nanobot sessions must
    go too. Left in place, a session stopped mid-turn (``pending_user_turn``, a user message
    last) is closed by nanobot's recovery with "Task interrupted ..." and the test's
    history carries the discarded attempt."""
    cfg = _cfg(tmp_path / "run", ["no_memory"], llm_double)
    start = len(llm_double.requests)
    first = await run_preferences(cfg)
    seen_first = _history_lengths(llm_double.requests[start:])
    assert not any(first.results["providers"]["no_memory"]["failures"].values())
    sessions = sorted((tmp_path / "run" / "agents").rglob("sessions/*/*.jsonl"))
    assert sessions
    for path in sessions:  # every session as a process killed mid-turn leaves it
        meta, *messages = [json.loads(line) for line in path.read_text().splitlines()]
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        meta["metadata"]["pending_user_turn"] = True
        path.write_text("".join(json.dumps(r) + "\n" for r in [meta, *messages[:last_user + 1]]))
    cp_path = tmp_path / "run" / "checkpoint.json"
    cp = json.loads(cp_path.read_text())
    cp["units"], cp["traces_bytes"] = {}, 0
    cp_path.write_text(json.dumps(cp))

    start = len(llm_double.requests)
    again = await run_preferences(cfg)
    assert again.resumed_units == 0
    asked = llm_double.requests[start:]
    # the model saw what it saw in the uninterrupted run: no placeholder, no old attempt
    assert not [q for q in asked if "Task interrupted" in str(q["body"])]
    assert _history_lengths(asked) == seen_first
    m = again.results["providers"]["no_memory"]
    assert not any(m["failures"].values())
    replies = [r.get("reply") or "" for r in read_traces(tmp_path / "run" / "traces.jsonl")
               if r.get("kind") == "preference_test"]
    assert replies and not [r for r in replies if "interrupted" in r.lower()]
    assert again.results["metrics_sha256"] == first.results["metrics_sha256"]


async def test_a_run_that_used_up_its_tool_iterations_is_no_answer():
    """nanobot sets ``max_iterations`` only on the run-level context (after its loop):
    the outcome hook reads it there, so its fallback text is not scored as an answer."""
    from types import SimpleNamespace

    from nanobot_memory_adapters.harness.preferences.agent import RunOutcomeHook

    hook = RunOutcomeHook()
    await hook.after_iteration(SimpleNamespace(stop_reason=None, error=None))
    assert hook.no_answer("I'll order your usual flat white.") is None
    await hook.after_run(SimpleNamespace(stop_reason="max_iterations", error=None))
    assert hook.no_answer("I reached the maximum number of tool call iterations") == (
        "stop reason max_iterations")


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
async def test_a_mem0_unit_started_over_stores_every_write_again(tmp_path, llm_double):
    """A unit dropped from the checkpoint (a run stopped inside it) starts over in the same
    store. mem0 keeps its history rows, so if the unit drew its first attempt's seeded ids
    again its writes failed on ``history.id`` (the real-model run's simple_rag p01)."""
    scenario = generate(1, 3)
    out = tmp_path / "run"
    first = await run_preferences(_cfg(out, ["simple_rag"], llm_double,
                                       scenario=scenario, agent=None))
    assert first.results["providers"]["simple_rag"]["failures"]["record"] == 0
    cp_path = out / "checkpoint.json"
    for attempt in (2, 3):  # the real run's p01 failed at its third attempt
        cp = json.loads(cp_path.read_text())
        cp["units"].clear()
        cp["complete"] = False
        cp_path.write_text(json.dumps(cp))
        again = await run_preferences(_cfg(out, ["simple_rag"], llm_double,
                                           scenario=scenario, agent=None))
        failures = again.results["providers"]["simple_rag"]["failures"]
        assert failures["record"] == 0 and failures["reset"] == 0, (attempt, failures)
        assert again.results["metrics_sha256"] == first.results["metrics_sha256"]


def test_memory_items_read_transcript_lines_inside_a_section_only():
    """Inside a ``<memory-context>`` section every line that opens an item is one
    (``Ana: …``, ``[10:00] …``, ``- …``), with its day and clock; outside one (a native
    memory file) only ``- `` lines are; stored text cannot close the section early."""
    from nanobot_memory_adapters.harness.preferences.lexicon import memory_items

    section = ("<memory-context backend=\"x\" scope=\"r/u\">\n### 2024-02-08 09:00\n"
               "Ana: &lt;/memory-context&gt; I like tea\n[10:00] Ana: now coffee\n"
               "  every day\n- a fact\n</memory-context>\nAna: outside\n- outside fact")
    assert memory_items(section) == [
        ("Ana: </memory-context> I like tea", "2024-02-08 09:00"),
        ("[10:00] Ana: now coffee\n  every day", "2024-02-08 10:00"),
        ("- a fact", "2024-02-08 09:00"),
        ("- outside fact", "2024-02-08 09:00"),
    ]
    assert memory_items("# User\nprefers decaf\n- likes tea") == [("- likes tea", None)]


async def test_agent_tools_none_offers_the_model_no_tool(tmp_path, llm_double):
    """``--agent-tools none``: nanobot answers the test turns without any tool (a 1.5B
    model offered tools answers with a tool call printed as text); the default run offers
    nanobot's tools and memory_search. The manifest records which."""
    def chats(start: int) -> list[dict]:
        return [q for q in llm_double.requests[start:] if isinstance(q["body"], dict)
                and q["path"].endswith("/chat/completions")]

    runs = {}
    for tools in ("none", "default"):
        start = len(llm_double.requests)
        outcome = await run_preferences(_cfg(tmp_path / tools, ["no_memory"], llm_double,
                                             agent_tools=tools, recognition=False))
        m = outcome.results["providers"]["no_memory"]
        assert not any(m["failures"].values()) and m["scores"]["overall"]["behaviour_tests"] == 12
        runs[tools] = (chats(start), outcome.manifest["settings"])
    asked, settings = runs["none"]
    assert len(asked) >= 12
    assert all("tools" not in q["body"] for q in asked), [q["body"].get("tools") for q in asked]
    assert settings["agent_tools"] == "none" and "no tools" in settings["agent_mode"]
    asked, settings = runs["default"]
    assert all("memory_search" in str(q["body"].get("tools")) for q in asked)
    assert settings["agent_tools"] == "default"


def test_cli_refuses_agent_tools_without_a_model(tmp_path):
    for extra in ([], ["--agent", "ideal-reader"]):
        result = CliRunner().invoke(app, ["preferences", "run", "--personas", "1",
                                          "--agent-tools", "none", "--out",
                                          str(tmp_path / "x"), *extra])
        assert result.exit_code == 2, result.output
        assert "--agent-tools none" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["preferences", "run", "--personas", "1",
                                      "--agent-tools", "some", "--out", str(tmp_path / "y")])
    assert result.exit_code == 2 and "use default or none" in result.output


# -- reversion and cross-context contamination ---------------------------------------------

def _rec(test_id: str, point: int, target: str, first_act: str | None, *,
         attribute: str = "dessert", context: str | None = None, persona: str = "p01"
         ) -> dict:
    behaviour = None if first_act is None else {"first_act": first_act,
                                                "correct": first_act == "current"}
    return {"test_id": test_id, "persona": persona, "point": point, "target": target,
            "attribute": attribute, "context": context, "dimension": "IQI",
            "behaviour": behaviour}


def test_reversion_and_contamination_count_opportunities_only():
    from nanobot_memory_adapters.harness.preferences.consistency import annotate

    implied = "p01-dessert-no_dairy"  # IQI: never the default (dairy is)
    records = [
        _rec("t1", 5, implied, "current"), _rec("t2", 7, implied, "none"),  # reverted
        _rec("t3", 9, implied, "current"),  # acted at 5: an opportunity, kept
        # a PET first value is the default: acting on it needs no memory, never counted
        _rec("t4", 3, "p01-coffee_order-espresso", "current", attribute="coffee_order"),
        _rec("t5", 7, "p01-coffee_order-espresso", "other", attribute="coffee_order"),
        # never acted on: no opportunity (not a clean 0)
        _rec("t6", 5, "p01-bedtime-early", "other", attribute="bedtime"),
        _rec("t7", 7, "p01-bedtime-early", "other", attribute="bedtime"),
        # CS: personal acted on at 5; the work request at 5 acts on it, at 7 it does not
        _rec("t8", 5, "p01-message_language-spanish", "current",
             attribute="message_language", context="personal"),
        _rec("t9", 5, "p01-message_language-english", "other",
             attribute="message_language", context="work"),
        _rec("t10", 7, "p01-message_language-english", "current",
             attribute="message_language", context="work"),
        # the default's direction (work value in a personal request) is not counted
        _rec("t11", 5, "p01-summary_style-bullets", "current", attribute="summary_style",
             context="work"),
        _rec("t12", 5, "p01-summary_style-story", "other", attribute="summary_style",
             context="personal"),
    ]
    got = {r["test_id"]: (r["reversion"], r["contamination"]) for r in annotate(records)}
    assert got == {"t1": (None, None), "t2": (True, None), "t3": (False, None),
                   "t4": (None, None), "t5": (None, None), "t6": (None, None),
                   "t7": (None, None), "t8": (None, None), "t9": (None, True),
                   "t10": (None, False), "t11": (None, None), "t12": (None, None)}


def test_later_sessions_keep_the_default_set_and_probe_every_remembered_value():
    base, later = generate(2, 0), generate(2, 0, later_sessions=3)
    assert later.source["later_sessions"] == 3 and "later_sessions" not in base.source
    for a, b in zip(base.personas, later.personas, strict=True):
        assert b.sessions[:7] == a.sessions and b.tests[:12] == a.tests
        assert [s.index for s in b.sessions] == list(range(1, 11))
        late = [t for t in b.tests if t.after_session == 10]
        assert len(late) == 8 and {t.dimension for t in late} == {"PET", "CS", "IQI"}
        assert {t.context for t in late if t.dimension == "CS"} == {"work", "personal"}
        chat = " ".join(t.content for s in b.sessions[7:] for t in s.turns)
        assert not any(c.lower() in chat.lower() for p in b.preferences for c in p.cues)
    assert dump_scenarios(generate(2, 0, later_sessions=3)) == dump_scenarios(later)
    with pytest.raises(ValueError, match="later sessions"):
        generate(1, 0, later_sessions=21)


def _expected_reversion(scenario, forget_after: int) -> tuple[int, int]:
    """(reverted, opportunities) for an agent that acts on every current value up to
    ``forget_after`` and on the default afterwards (from the scenario alone)."""
    from nanobot_memory_adapters.harness.preferences.lexicon import default_key, domain_of

    reverted = opportunities = 0
    for persona in scenario.personas:
        for t in persona.tests:
            domain = domain_of(t.attribute)
            assert domain is not None
            if t.target.endswith(f"-{default_key(domain)}"):
                continue
            if any(o.target == t.target and o.after_session < t.after_session
                   and o.after_session <= forget_after for o in persona.tests):
                opportunities += 1
                reverted += t.after_session > forget_after
    return reverted, opportunities


async def test_reversion_is_zero_for_the_oracle_and_counts_a_reader_that_forgets(
        tmp_path, echo_provider, monkeypatch):
    """The ideal reader on oracle_ipas acts on every current value: reversion 0 and no
    contamination, over opportunities it had. The same reader made to forget after
    session 7 (it acts on the default from then on) reverts exactly on the later tests
    of values it had acted on. A provider that stores nothing (no_memory, echo) never
    acts on a remembered value: n/a, never a clean 0."""
    from nanobot_memory_adapters.harness.preferences import reader

    scenario = generate(4, 0, later_sessions=2)
    outcome = await run_preferences(PreferenceBenchConfig(
        out=tmp_path / "ok", providers=["oracle_ipas", "no_memory", "echo"],
        scenario=scenario, agent=IdealReaderAgent()))
    scores = {n: m["scores"]["overall"] for n, m in outcome.results["providers"].items()}
    oracle = scores["oracle_ipas"]
    _, opportunities = _expected_reversion(scenario, forget_after=99)
    assert oracle["reversion"] == 0.0 and oracle["reversion_opportunities"] == opportunities
    ci = oracle["ci_by_attribute"]["reversion"]
    assert ci["n"] == opportunities and ci["low"] == 0.0 and ci["high"] > 0.0
    assert oracle["contamination"] == 0.0 and oracle["contamination_opportunities"] > 0
    for trivial in ("no_memory", "echo"):
        assert scores[trivial]["reversion"] is None, trivial
        assert scores[trivial]["reversion_opportunities"] == 0
        assert scores[trivial]["contamination"] is None
    assert "reversion" not in outcome.results["pairwise"] or all(
        "no_memory" not in (r["a"], r["b"]) for r in outcome.results["pairwise"]["reversion"])

    real = reader.choose

    def forgets(memory, test, user_turns):
        if test.after_session > 7 and not user_turns:
            domain = reader.domain_of(test.attribute)
            assert domain is not None
            return reader.default_key(domain), "default"
        return real(memory, test, user_turns)

    monkeypatch.setattr(reader, "choose", forgets)
    forgot = await run_preferences(PreferenceBenchConfig(
        out=tmp_path / "forgets", providers=["oracle_ipas"], scenario=scenario,
        agent=IdealReaderAgent()))
    o = forgot.results["providers"]["oracle_ipas"]["scores"]["overall"]
    reverted, opportunities = _expected_reversion(scenario, forget_after=7)
    assert 0 < reverted < opportunities
    assert o["reversion_opportunities"] == opportunities
    assert o["reversion"] == pytest.approx(reverted / opportunities, abs=1e-6)
    assert forgot.results["providers"]["oracle_ipas"]["scores"]["by_point"]["9"][
        "reversion"] == 1.0
    html = (tmp_path / "forgets" / "report.html").read_text()
    assert "Reversion (over the opportunities both had" in html and "lower is better" in html


async def test_contamination_is_caught_in_a_reader_that_ignores_context(
        tmp_path, monkeypatch):
    """On full_history (every turn in view, no tags), the ideal reader keeps each
    context's value apart; the same reader blind to context acts on the newest value
    everywhere, so wherever it acted on the personal value it also did so at work."""
    from nanobot_memory_adapters.harness.preferences import reader

    scenario = generate(6, 0)
    cfg = {"out": tmp_path / "aware", "providers": ["full_history"], "scenario": scenario,
           "agent": IdealReaderAgent(), "budget_tokens": 20000, "test_tags": "none"}
    aware = (await run_preferences(PreferenceBenchConfig(**cfg))).results
    a = aware["providers"]["full_history"]["scores"]["overall"]
    assert a["contamination"] == 0.0 and a["contamination_opportunities"] > 0
    monkeypatch.setattr(reader, "_context_of", lambda text: None)
    blind = (await run_preferences(PreferenceBenchConfig(
        **{**cfg, "out": tmp_path / "blind"}))).results
    b = blind["providers"]["full_history"]["scores"]["overall"]
    assert b["contamination"] == 1.0 and b["contamination_opportunities"] > 0
    ci = b["ci"]["contamination"]
    assert ci["n"] == b["contamination_opportunities"] and ci["low"] > 0.0


@pytest.mark.servers  # a real process, really signalled
def test_a_stopped_run_writes_its_partial_results_and_resumes(tmp_path):
    """SIGTERM (how a background run is stopped; Ctrl-C alike) mid-run: exit 130, and
    results.partial.json holds the finished units' scores (``complete`` false, each
    provider's personas); the same command then finishes, and the partial file is gone.
    Carried to another folder (checkpoint.json and traces.jsonl), it finishes there alike."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    argv = [sys.executable, "-m", "nanobot_memory_adapters.cli", "preferences", "run",
            "--personas", "48", "--agent", "ideal-reader", "--providers",
            "no_memory,full_history,oracle_ipas", "--out", str(out), "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    checkpoint = out / "checkpoint.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpoint.exists() and len(json.loads(checkpoint.read_text() or "{}").get(
                "units", {})) >= 4:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "rerun the same command to resume" in err
    assert "results.partial.json" in err.replace("\n", "")  # rich wraps long lines
    partial = json.loads((out / "results.partial.json").read_text())
    assert partial["complete"] is False and not (out / "results.json").exists()
    done = json.loads(checkpoint.read_text())["units"]
    for name, m in partial["providers"].items():
        finished = [u for u in done.values() if u["provider"] == name]
        assert len(m["personas"]) == len(finished) < 48
        assert m["scores"]["overall"]["tests"] == 12 * len(finished)
    moved = tmp_path / "elsewhere"  # another machine: the checkpoint and traces carried
    moved.mkdir()
    for name in ("checkpoint.json", "traces.jsonl"):
        (moved / name).write_bytes((out / name).read_bytes())
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert not (out / "results.partial.json").exists()
    results = json.loads((out / "results.json").read_text())
    assert all(len(m["personas"]) == 48 for m in results["providers"].values())
    there = subprocess.run([*argv[:argv.index("--out") + 1], str(moved), "--json"],
                           capture_output=True, text=True, timeout=600, check=False)
    assert there.returncode == 0, there.stderr[-2000:]
    carried = json.loads((moved / "results.json").read_text())
    assert {n: m["scores"] for n, m in carried["providers"].items()} == \
        {n: m["scores"] for n, m in results["providers"].items()}


def test_run_last_orders_units_without_changing_the_run(tmp_path):
    """``--run-last P``: P's units run after every other provider's (its checkpoint order
    shows it), while the manifest and the scores are those of the persona-major run, so a
    run resumes with or without the flag. A name not in --providers is one line."""
    base = ["preferences", "run", "--personas", "3", "--agent", "ideal-reader",
            "--providers", "no_memory,full_history", "--json"]
    plain = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "plain")])
    last = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "last"),
                                    "--run-last", "no_memory"])
    assert plain.exit_code == 0 and last.exit_code == 0, (plain.output, last.output)
    units = list(json.loads((tmp_path / "last" / "checkpoint.json").read_text())["units"])
    assert units == [f"full_history::p0{i}" for i in (1, 2, 3)] + \
        [f"no_memory::p0{i}" for i in (1, 2, 3)]
    persona_major = list(json.loads(
        (tmp_path / "plain" / "checkpoint.json").read_text())["units"])
    assert persona_major[:2] == ["no_memory::p01", "full_history::p01"]

    def read(name: str, file: str) -> dict:
        return json.loads((tmp_path / name / file).read_text())

    assert read("last", "manifest.json")["manifest_sha256"] == \
        read("plain", "manifest.json")["manifest_sha256"]
    assert {n: m["scores"] for n, m in read("last", "results.json")["providers"].items()} == \
        {n: m["scores"] for n, m in read("plain", "results.json")["providers"].items()}
    bad = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "bad"),
                                   "--run-last", "mem0"])
    assert bad.exit_code == 2 and "--run-last mem0: not among --providers" in bad.output
