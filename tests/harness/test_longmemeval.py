"""LongMemEval: the file layout, the benchmark's metric definitions, the per-type judge,
and ``bench --task longmemeval`` end to end on a fixture written in the exact layout
(tests/harness/data/longmemeval_fixture.json: field names, nesting, ``answer_``/
``sharegpt_``/``ultrachat_`` session ids, ``has_answer`` on evidence turns only, an
``_abs`` abstention id, and one question whose ``haystack_dates`` are out of order as in
the oracle file)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from nanobot_memory_adapters.harness.datasets.locomo import DatasetError
from nanobot_memory_adapters.harness.datasets.longmemeval import (
    TYPE_CODE,
    load_longmemeval,
)
from nanobot_memory_adapters.harness.judge import LLMEndpoint
from nanobot_memory_adapters.harness.lme_judge import judge_prompt, lme_judge_setup, parse_yes_no
from nanobot_memory_adapters.harness.lme_metrics import (
    ask_scores,
    recompute_from_traces,
    retrieval_scores,
)
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench
from tests.harness.conftest import mem0_installed

FIXTURE = Path(__file__).parent / "data" / "longmemeval_fixture.json"


def test_fixture_fields_are_read_as_the_benchmark_defines_them():
    units = {u.sample_id: u for u in load_longmemeval(FIXTURE)}
    assert list(units) == ["e47becba", "6a1eabeb", "gpt4_2655b836_abs", "0edc2aef", "7161e7e2"]
    u = units["e47becba"]
    q = u.questions[0]
    # has_answer marks the third turn (1-based, both roles) of the second session
    assert q.evidence == ("D2:3",) and q.has_turn_evidence
    assert u.turn("D2:3").text.startswith("I graduated with a degree in Business")
    assert u.session_ids == ("sharegpt_yQ3kd7_0", "answer_280352e9", "ultrachat_481022")
    assert q.answer_sessions == (2,) and q.answer == "Business Administration"
    assert q.question_type == "single-session-user" and not q.abstention
    assert u.asked_at is not None and u.asked_at.isoformat() == "2023-05-30T23:40:00+00:00"
    assert q.ready_after == 3  # asked after the last session, whatever its evidence
    assert [s.start.day for s in u.sessions] == [20, 21, 25]
    assert u.sessions[1].turns[0].timestamp.hour == 10  # the session's haystack_date
    # two evidence sessions (knowledge update)
    ku = units["6a1eabeb"].questions[0]
    assert ku.answer_sessions == (1, 3) and ku.evidence == ("D1:1", "D3:1")
    assert ku.category == TYPE_CODE["knowledge-update"]
    # the abstention flag comes from the id suffix, not the type
    ab = units["gpt4_2655b836_abs"].questions[0]
    assert ab.abstention and ab.question_type == "temporal-reasoning"
    assert ab.category == TYPE_CODE["temporal-reasoning"] + 10
    assert not ab.retrieval_applicable
    # evidence on the assistant's turn; unsorted haystack_dates are put in date order
    sa = units["7161e7e2"]
    assert sa.session_ids == ("sharegpt_yQ3kd7_0", "answer_3f0c9d21")
    assert sa.questions[0].evidence == ("D2:2",) and sa.questions[0].answer_sessions == (2,)
    assert sa.turns[-1].speaker == "assistant"
    assert "(Current date: 2023/09/01 (Fri) 10:00)" in sa.questions[0].answer_prompt


def test_bad_files_get_one_line_naming_the_question_and_field(tmp_path):
    data = json.loads(FIXTURE.read_text())
    del data[1]["answer_session_ids"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(DatasetError, match=r"instance #1: field 'answer_session_ids' is missing"):
        load_longmemeval(bad)
    data = json.loads(FIXTURE.read_text())
    data[0]["haystack_dates"] = data[0]["haystack_dates"][:2]
    bad.write_text(json.dumps(data))
    with pytest.raises(DatasetError, match=r"'e47becba'.*3 haystack_session_ids, 2 haystack_dates"):
        load_longmemeval(bad)
    with pytest.raises(FileNotFoundError, match="not shipped"):
        load_longmemeval(tmp_path / "longmemeval_s.json")


def test_retrieval_metrics_follow_the_benchmark_definitions():
    # ranking x, r1, y, r2 against {r1, r2}: recall_any@3 = 1, recall_all@3 = 0,
    # ndcg@3 as upstream's eval_utils.dcg (rel[0] + sum rel[i]/log2(i+1): ranks 1 and 2
    # both weigh 1): dcg = 1/log2(2) = 1, ideal = 1 + 1 = 2 -> 0.5
    s = retrieval_scores(["x", "r1", "y", "r2"], {"r1", "r2"}, 3)
    assert s["any"] == 1.0 and s["all"] == 0.0
    assert s["ndcg"] == pytest.approx(0.5)
    # the one relevant document at rank 2 scores as at rank 1 upstream
    assert retrieval_scores(["x", "r1"], {"r1"}, 2)["ndcg"] == pytest.approx(1.0)
    # rank 3: 1/log2(3) over an ideal of 1
    assert retrieval_scores(["x", "y", "r1"], {"r1"}, 3)["ndcg"] == pytest.approx(
        1 / math.log2(3))
    assert retrieval_scores(["x", "r1", "y", "r2"], {"r1", "r2"}, 4)["all"] == 1.0
    assert retrieval_scores(["x"], {"r1"}, 1) == {"any": 0.0, "all": 0.0, "ndcg": 0.0}
    events = {"e1": "D1:1", "e2": "D1:2", "e3": "D3:4", "e4": "D2:1"}
    # session level ranks distinct sessions (k widens as the benchmark's turn2session
    # does): two items from session 1 then session 3's evidence turn
    scores = ask_scores([["e3"], ["e1"]], [["e1"], ["e2"], ["e4"], ["e3"]], events,
                        ["D3:4"], [1, 3], abstention=False)
    # session 1 is an answer session without a has_answer turn: upstream renames it
    # "noans", so ranking it first is no hit; only session 3 (through D3:4) is relevant
    assert scores["session_any@1"] == 0.0 and scores["session_any@5"] == 1.0
    assert scores["session_all@5"] == 1.0 and scores["session_all_shown"] == 1.0
    # a session is credited only through its has_answer turns (H4): session 3's other
    # turn ranks as a never-relevant session of its own
    via = ask_scores([], [["e5"], ["e3"]], {**events, "e5": "D3:1"}, ["D3:4"], [3], False,
                     readings=("native",))
    assert via["session_any@1"] == 0.0 and via["session_any@5"] == 1.0
    assert via["session_ndcg@5"] == pytest.approx(1.0)  # rank 2 weighs as rank 1 upstream
    # no has_answer turn at all: no session-level keys (nothing relevant upstream)
    assert not any(k.startswith("session_") for k in ask_scores(
        [["e1"]], [["e1"]], events, [], [1], False))
    assert scores["turn_any@1"] == 0.0 and scores["turn_any@5"] == 1.0
    assert scores["turn_ndcg_shown"] == pytest.approx(1.0)  # rank 2 (upstream's dcg)
    # items that name no source: n/a, never a made-up 0; abstention: no retrieval keys
    blind = ask_scores([None, []], [None], events, ["D3:4"], [3], abstention=False)
    assert blind["session_any_shown"] is None and blind["turn_all@5"] is None
    assert ask_scores([["e3"]], [["e3"]], events, ["D3:4"], [3], abstention=True) == {}
    # an empty section is a miss (0), not n/a
    assert ask_scores([], [], events, ["D3:4"], [3], False)["session_any_shown"] == 0.0


def test_judge_prompts_follow_the_per_type_rules():
    temporal = judge_prompt("How many days?", "18 days", "19 days",
                            TYPE_CODE["temporal-reasoning"])
    assert "off-by-one" in temporal
    assert "off-by-one" not in judge_prompt("q", "a", "r", TYPE_CODE["multi-session"])
    assert "updated" in judge_prompt("q", "a", "r", TYPE_CODE["knowledge-update"])
    pref = judge_prompt("Hotel?", "ocean view", "r", TYPE_CODE["single-session-preference"])
    assert "Rubric" in pref and "need not cover every point" in pref
    abstain = judge_prompt("q", "never mentioned", "r", TYPE_CODE["temporal-reasoning"] + 10)
    assert abstain.startswith("The question below cannot be answered")
    assert parse_yes_no("Yes.").score == 1.0 and parse_yes_no("no").score == 0.0
    assert parse_yes_no("maybe").label == "unparsed"


def _cfg(tmp_path: Path, providers: list[str], **kw) -> BenchConfig:
    return BenchConfig(dataset=FIXTURE, out=tmp_path, providers=providers, task="longmemeval",
                       test_points="last", run_id="longmemeval", **kw)


async def test_bench_longmemeval_end_to_end_on_the_fixture(tmp_path, llm_double):
    judge = lme_judge_setup(LLMEndpoint(base_url=llm_double.base_url, model="double-chat"))
    out = await run_bench(_cfg(tmp_path / "run", ["no_memory", "full_history"], judge=judge))
    block = out.results["longmemeval"]["providers"]
    nothing, everything = block["no_memory"]["retrieval"], block["full_history"]["retrieval"]
    # a provider that stores nothing scores nothing; the whole history finds every session
    assert nothing["overall"]["session_any_shown"]["value"] == 0.0
    assert everything["overall"]["session_all_shown"]["value"] == 1.0
    assert everything["overall"]["turn_all_shown"]["value"] == 1.0
    # the abstention question is left out of retrieval: n = 4 of 5 questions
    assert everything["overall"]["questions"] == 5
    assert everything["overall"]["session_any@5"]["n"] == 4
    low, high = (everything["overall"]["session_any_shown"][k] for k in ("low", "high"))
    assert low < 1.0 == high  # an interval, not a bare 1.0
    assert set(everything["by_type"]) == {"single-session-user", "knowledge-update",
                                          "temporal-reasoning", "single-session-preference",
                                          "single-session-assistant"}
    # every unit read-only at test time, asked once at question_date
    for m in out.results["providers"].values():
        assert sum(m["failures"].values()) == 0 and m["gate_probes"] == 5
    asks = [json.loads(line) for line in (out.out / "traces.jsonl").read_text().splitlines()
            if '"kind": "ask"' in line]
    assert len(asks) == 10 and {a["question_date"] for a in asks} >= {"2023/05/30 (Tue) 23:40"}
    # --verify: the block recomputed from traces.jsonl alone is the same
    again = recompute_from_traces(out.out / "traces.jsonl")
    assert {n: again[n] for n in block} == {n: e["retrieval"] for n, e in block.items()}
    # QA: graded with the per-type rules; with nothing remembered the double answers
    # "I do not know." -- right only on the abstention question, which is reported apart
    # (its own n and interval): the headline over the answerable questions is 0
    qa_none = block["no_memory"]["qa"]
    assert qa_none["abstention"]["accuracy"]["value"] == 1.0
    assert qa_none["abstention"]["accuracy"]["n"] == 1
    assert qa_none["overall"]["accuracy"]["value"] == 0.0
    assert qa_none["overall"]["accuracy"]["n"] == 4
    assert qa_none["overall"]["accuracy"]["high"] > 0.0  # an interval, not a bare 0
    # LoCoMo's category semantics stay with LoCoMo: no intervals block (categories 1-4 /
    # category 5), no judge agreement over them; the judged block splits on _abs
    assert "intervals" not in out.results and "ranked_at_k" not in out.results
    judged = out.results["judged"]
    assert "agreement" not in judged and "abstention (_abs)" in judged["note"]
    assert judged["providers"]["no_memory"]["overall"]["accuracy"] == 0.0
    assert judged["providers"]["no_memory"]["overall"]["interval"]["n"] == 4
    assert judged["providers"]["no_memory"]["abstention"]["count"] == 1
    assert "category_5" not in judged["providers"]["no_memory"]
    qa_all = block["full_history"]["qa"]
    assert qa_all["by_type"]["single-session-user"]["accuracy"]["value"] == 1.0
    assert qa_all["by_type"]["temporal-reasoning"]["accuracy"]["value"] == 0.0  # answered
    assert "longmemeval" not in json.dumps(out.results["metrics_sha256"])
    manifest = out.manifest["dataset"]
    assert manifest["format"] == "longmemeval" and len(manifest["sha256"]) == 64
    assert manifest["release"]["matched"] is False
    assert manifest["conversations"][2] == "gpt4_2655b836_abs"


@pytest.mark.skipif(not mem0_installed(), reason="mem0/graphiti extras not installed")
async def test_bench_longmemeval_runs_mem0_and_graphiti_on_the_double(tmp_path, llm_double):
    llm = {"base_url": llm_double.base_url, "model": "double", "api_key": "k"}
    out = await run_bench(_cfg(tmp_path / "arch", ["mem0", "graphiti"],
                               provider_configs={"mem0": {"llm": llm}, "graphiti": {"llm": llm}}))
    assert not out.skipped, out.skipped
    block = out.results["longmemeval"]["providers"]
    assert set(block) == {"mem0", "graphiti"}
    for name, m in out.results["providers"].items():
        assert sum(m["failures"].values()) == 0, (name, m["failures"])
        assert m["gate_probes"] == 5 and m["memory_form"] == "derived"
        overall = block[name]["retrieval"]["overall"]
        assert overall["questions"] == 5
        # derived memories are scored through the provenance they report: a figure or an
        # explicit n/a count, never a silent 0
        shown = overall["session_any_shown"]
        assert shown is not None or overall.get("session_any_shown_unattributed")
    again = recompute_from_traces(out.out / "traces.jsonl")
    assert {n: again[n] for n in block} == {n: e["retrieval"] for n, e in block.items()}


def test_cli_bench_task_longmemeval(tmp_path, locomo_file):
    from typer.testing import CliRunner

    from nanobot_memory_adapters.cli import app

    def run(*args: str):
        return CliRunner().invoke(app, ["bench", "--task", "longmemeval", *args])

    ok = run("--dataset", str(FIXTURE), "--providers", "no_memory,full_history",
             "--out", str(tmp_path / "ok"), "--verify", "--json")
    assert ok.exit_code == 0, ok.output
    results = json.loads(ok.stdout)
    assert results["longmemeval"]["providers"]["full_history"]["retrieval"]["overall"][
        "session_all_shown"]["value"] == 1.0
    assert "verified" in ok.stderr
    # bad input: one line naming the input and the fix, exit 2, no traceback
    for args, says in (
        ((), "--task longmemeval needs --dataset FILE"),
        (("--dataset", str(tmp_path / "longmemeval_s.json")), "not shipped"),
        (("--dataset", str(locomo_file)), "field 'question_id' is missing"),
        (("--dataset", str(FIXTURE), "--speakers", "dual"), "use single"),
        (("--dataset", str(FIXTURE), "--max-sessions", "2"), "--max-sessions: cuts LoCoMo"),
    ):
        bad = run(*args, "--providers", "no_memory", "--out", str(tmp_path / "bad"))
        assert bad.exit_code == 2, (args, bad.output)
        assert says in bad.stderr and "Traceback" not in bad.output


@pytest.mark.servers  # a process pool
async def test_workers_build_the_longmemeval_judge_and_change_nothing(tmp_path, llm_double):
    from nanobot_memory_adapters.harness.executors import ExecutionPlan

    endpoint = LLMEndpoint(base_url=llm_double.base_url, model="double-chat")
    runs = {}
    for n in (1, 2):  # workers rebuild the judge from the endpoint (units.run_unit)
        out = await run_bench(_cfg(
            tmp_path / f"w{n}", ["no_memory", "full_history"], judge=lme_judge_setup(endpoint)
            if n == 1 else None, judge_endpoint=endpoint, execution=ExecutionPlan(workers=n)))
        runs[n] = out.results["longmemeval"]["providers"]
    assert runs[2] == runs[1]
    assert runs[2]["no_memory"]["qa"]["abstention"]["accuracy"]["value"] == 1.0


def test_locomo10_is_named_by_its_published_hash_and_anything_else_is_not():
    from nanobot_memory_adapters.harness.datasets.releases import known_release

    named = known_release("79FA87E90F04081343B8C8DEBECB80A9A6842B76A7AA537DC9FDF651EA698FF4")
    assert named["matched"] is True and named["name"] == "LoCoMo locomo10.json"
    assert "locomo-audit" in named["source"]
    other = known_release("0" * 64)
    assert other["matched"] is False and other["name"] is None


def test_answer_recall_applies_by_each_benchmarks_own_question_types():
    from nanobot_memory_adapters.harness.datasets.beam import CATEGORY_BASE, BeamQuestion
    from nanobot_memory_adapters.harness.datasets.locomo import Question
    from nanobot_memory_adapters.harness.datasets.longmemeval import LmeQuestion

    def lme(qtype: str, abstention: bool = False) -> LmeQuestion:
        return LmeQuestion(qid="q", index=0, question="?", evidence=("D1:1",),
                           raw_evidence=(), answer="a", question_type=qtype,
                           abstention=abstention,
                           category=TYPE_CODE[qtype] + (10 if abstention else 0))

    # LongMemEval's codes are not LoCoMo's categories: temporal-reasoning (code 5) and
    # multi-session (3) are answerable; abstention and the preference rubric are not
    assert lme("temporal-reasoning").answer_recall_applicable
    assert lme("multi-session").answer_recall_applicable
    assert not lme("knowledge-update", abstention=True).answer_recall_applicable
    assert not lme("single-session-preference").answer_recall_applicable
    # BEAM is graded by rubric, whatever its code
    assert not BeamQuestion(qid="b", index=0, question="?", category=CATEGORY_BASE + 3,
                            evidence=(), raw_evidence=(), answer="x").answer_recall_applicable
    # LoCoMo: categories 1-4, not 5
    loc = Question(qid="l", index=0, question="?", category=4, evidence=(),
                   raw_evidence=(), answer="x")
    assert loc.answer_recall_applicable
    assert not Question(qid="l", index=0, question="?", category=5, evidence=(),
                        raw_evidence=(), answer=None,
                        adversarial_answer="x").answer_recall_applicable
