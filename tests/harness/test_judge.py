"""Optional LLM answer + judge, and behavioural sessions on the same timeline."""

from __future__ import annotations

from collections.abc import Sequence

from nanobot_memory_adapters.contract import Message
from nanobot_memory_adapters.harness.judge import (
    LLMEndpoint,
    ScriptedSimulator,
    SimulatedUserSession,
    Verdict,
    llm_judge_setup,
)
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench
from nanobot_memory_adapters.llm_endpoint import OpenAICompatibleEndpoint
from nanobot_memory_adapters.tracing import read_traces


def test_the_judge_and_agent_endpoints_are_the_one_model_and_describe_no_key(monkeypatch):
    from nanobot_memory_adapters.harness.preferences.agent import AgentLLM

    monkeypatch.setenv("JUDGE_KEY", "sk-from-env")
    for cls in (LLMEndpoint, AgentLLM):
        endpoint = cls(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="JUDGE_KEY")
        assert isinstance(endpoint, OpenAICompatibleEndpoint)
        assert endpoint.resolved_api_key() == "sk-from-env"
        described = endpoint.describe()  # what the manifest and results.json record
        assert described["api_key_env"] == "JUDGE_KEY"
        assert "sk-from-env" not in repr(described) and "sk-from-env" not in repr(endpoint)


async def test_llm_judge_is_optional_and_kept_apart(locomo_file, tmp_path, llm_double):
    base = BenchConfig(dataset=locomo_file, out=tmp_path / "plain", providers=["full_history"])
    plain = await run_bench(base)
    judged = await run_bench(
        BenchConfig(
            dataset=locomo_file,
            out=tmp_path / "judged",
            providers=["full_history"],
            judge=llm_judge_setup(LLMEndpoint(base_url=llm_double.base_url, model="double-chat")),
        )
    )
    section = judged.results["judged"]
    assert "separate from the judge-free metrics" in section["note"]
    overall = section["providers"]["full_history"]["overall"]
    # every placed question of categories 1-4, at the final test point; the adversarial
    # one (category 5) apart, never averaged in
    assert overall["count"] == 4 + 3
    assert section["providers"]["full_history"]["category_5"]["count"] == 1
    assert "category 5 (adversarial) apart" in section["note"]
    # The double answers with the context line closest to the question and grades CORRECT
    # iff the gold answer appears in it: every verdict parses, and both labels occur.
    assert "unparsed" not in overall["labels"]
    assert overall["labels"] == {"correct": 4, "wrong": 3}
    assert overall["accuracy"] == round(4 / 7, 6)
    # The judge changes nothing judge-free.
    assert judged.results["metrics_sha256"] == plain.results["metrics_sha256"]
    assert "judged" not in plain.results
    assert judged.manifest["judge"]["model"] == "double-chat"
    assert "api_key" not in str(judged.manifest["judge"]).replace("api_key_env", "")
    chats = llm_double.chat_requests()
    assert any("Grade an answer" in r.user for r in chats)
    lines = [
        r for r in read_traces(tmp_path / "judged" / "traces.jsonl") if r.get("kind") == "judge"
    ]
    assert len(lines) == 8 and all("verdict" in r for r in lines)
    labels = {r["question_id"]: r["verdict"]["label"] for r in lines}
    correct = {"syn-1:q0", "syn-1:q2", "syn-1:q4", "syn-2:q0"}
    assert labels == {q: "correct" if q in correct else "wrong" for q in labels}
    by_id = {r["question_id"]: r for r in lines}
    assert "Pistachio" in by_id["syn-1:q0"]["answer"]  # gold in the answer: correct
    # "early June" without the year is not the gold "early June 2023": wrong.
    assert "early June" in by_id["syn-1:q1"]["answer"]
    assert "2023" not in by_id["syn-1:q1"]["answer"]
    # Category 5 (adversarial): naming the trap's answer instead of declining is wrong.
    assert "Cairngorms" in by_id["syn-1:q7"]["answer"]
    assert by_id["syn-1:q7"]["verdict"] == {"label": "wrong", "score": 0.0, "raw": "WRONG"}
    assert section["providers"]["full_history"]["by_category"]["5"]["accuracy"] == 0.0
    assert section["providers"]["full_history"]["category_5"]["accuracy"] == 0.0


class EchoAgent:
    async def answer(self, question: str, context: str) -> str:
        return "I remember: " + ("Pistachio" if "Pistachio" in context else "nothing")


class RemembersDog:
    async def judge_session(self, transcript: Sequence[Message], goal: str) -> Verdict:
        ok = any("Pistachio" in m.content for m in transcript if m.role == "assistant")
        return Verdict("correct" if ok else "wrong", 1.0 if ok else 0.0)


async def test_behavioural_session_plugs_into_the_timeline(locomo_file, tmp_path):
    session = SimulatedUserSession(
        "dog-check",
        ScriptedSimulator(["What is my dog called?", "Thanks, bye."]),
        EchoAgent(),
        RemembersDog(),
        goal="The assistant recalls the dog's name.",
    )
    plain = await run_bench(
        BenchConfig(
            dataset=locomo_file,
            out=tmp_path / "p",
            providers=["full_history"],
            conversations=["syn-1"],
        )
    )
    run = await run_bench(
        BenchConfig(
            dataset=locomo_file,
            out=tmp_path / "b",
            providers=["full_history"],
            conversations=["syn-1"],
            sessions=[session],
        )
    )
    outcomes = run.results["behavioural"]["full_history"]
    assert [o["point"] for o in outcomes] == [1, 2, 4]
    for o in outcomes:
        assert o["turns"] == 2
        assert o["writes"] == ["skipped_read_only", "skipped_read_only"]  # the gate holds
        assert o["verdict"]["label"] in {"correct", "wrong"}
    assert outcomes[0]["verdict"]["label"] == "correct"  # the dog is in session 1's context
    assert run.manifest["behavioural_sessions"][0]["name"] == "dog-check"
    # Test sessions write nothing retrievable: the judge-free metrics are unchanged.
    assert run.results["metrics_sha256"] == plain.results["metrics_sha256"]


def test_judged_accuracy_carries_n_and_a_95_interval():
    from nanobot_memory_adapters.harness.judge import split_headline, verdict_summary

    s = verdict_summary([{"label": "correct", "score": 1.0}, {"label": "wrong", "score": 0.0},
                         {"label": "correct", "score": 1.0}, {"label": "error", "score": None}])
    assert s["count"] == 4 and s["accuracy"] == round(2 / 3, 6)
    e = s["interval"]  # over the 3 scored verdicts; the error is counted, never scored
    assert e["n"] == 3 and e["method"] == "wilson" and e["low"] < e["value"] < e["high"]
    assert verdict_summary([])["interval"] is None
    # each task's headline over its own answerable questions, the rest apart
    rows = [{"category": c} for c in (1, 4, 5, 101, 3, 13)]
    assert [len(x) for x in (split_headline("locomo", rows)[0],
                             split_headline("locomo", rows)[1][1])] == [3, 3]
    head, (name, apart) = split_headline("longmemeval", [{"category": 3}, {"category": 13}])
    assert name == "abstention" and [r["category"] for r in apart] == [13] and len(head) == 1
    head, (name, apart) = split_headline("beam", [{"category": 100}, {"category": 102}])
    assert name == "abstention" and [r["category"] for r in apart] == [100]
    assert [r["category"] for r in head] == [102]
