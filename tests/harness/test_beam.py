"""BEAM (``bench --task beam``): the conversation-folder layout (chat.json batches with
time anchors and global turn ids; probing_questions.json per ability with rubrics and
source_chat_ids as a list or a dict), BEAM's event-ordering score, and the bench end to
end with the per-ability nugget judge on the LLM double.

tests/harness/data/beam/100K/1 is written by us in the upstream layout
(mohammadtavakoli78/BEAM, chats/<scale>/<n>/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nanobot_memory_adapters.harness.beam_judge import beam_judge_setup, ordering_score
from nanobot_memory_adapters.harness.datasets.beam import BeamQuestion, load_beam
from nanobot_memory_adapters.harness.datasets.locomo import DatasetError
from nanobot_memory_adapters.harness.judge import LLMEndpoint
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench

SCALE = Path(__file__).parent / "data" / "beam" / "100K"


def test_beam_folder_is_read_as_upstream_lays_it_out(tmp_path):
    (conv,) = load_beam(SCALE)
    assert conv.sample_id == "beam-100K-1" and load_beam(SCALE / "1")[0].sample_id == conv.sample_id
    # batches are the sessions, dated by their time anchors
    assert [(s.number, s.start.isoformat()[:10]) for s in conv.sessions] == [
        (1, "2024-03-15"), (2, "2024-04-02")]
    qs = {q.qid.split(":", 1)[1]: q for q in conv.questions if isinstance(q, BeamQuestion)}
    assert len(qs) == len(conv.questions)  # every one a BEAM question (rubric, ability)
    # source_chat_ids are global turn ids: id 2 is batch 1's third turn, id 8 batch 2's fifth
    assert qs["information_extraction:0"].evidence == ("D1:3",)
    assert conv.turn("D1:3").text.startswith("My first sprint ends on March 29")
    assert qs["knowledge_update:0"].evidence == ("D2:5",)  # from the dict form
    assert qs["event_ordering:0"].evidence == ("D1:1", "D2:1", "D2:3")
    assert qs["event_ordering:0"].rubric == ("budget tracker setup", "login feature",
                                             "deployment")
    assert not qs["abstention:0"].has_turn_evidence
    assert all(q.ready_after == 2 for q in conv.questions)  # asked after the last batch
    assert json.loads(qs["information_extraction:0"].judge_gold) == [
        "LLM response should state: March 29"]
    bad = tmp_path / "2"
    bad.mkdir()
    (bad / "chat.json").write_text("[]")
    with pytest.raises(DatasetError, match=r"probing_questions\.json is missing"):
        load_beam(bad)


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("chat.json", '[{"batch_number": "one", "turns": []}]', "positive whole number"),
    ("chat.json", '[{"turns": [["not a turn"]]}]', "AttributeError"),
    ("chat.json", "{not json", "not valid JSON"),
    ("probing_questions.json", '{"abstention": ["a question as a bare string"]}',
     "question objects"),
    ("probing_questions.json", '{"summarization": [{"question": "q", "rubric": "r"}]}',
     "'rubric' is not a list"),
])
def test_a_malformed_beam_file_is_one_line_naming_the_file_and_the_fix(tmp_path, name,
                                                                       text, needle):
    import shutil

    folder = tmp_path / "100K" / "1"
    shutil.copytree(SCALE / "1", folder)
    target = folder / name if name == "chat.json" else folder / "probing_questions" / name
    target.write_text(text)
    with pytest.raises(DatasetError) as err:
        load_beam(folder)
    line = str(err.value)
    assert "\n" not in line and line.startswith(str(target)) and needle in line
    assert "fetch the folder again from mohammadtavakoli78/BEAM" in line


async def test_beam_evidence_is_scored_without_a_judge(tmp_path):
    out = await run_bench(BenchConfig(
        dataset=SCALE, out=tmp_path / "run", providers=["no_memory", "full_history"],
        task="beam", test_points="last", run_id="beam"))
    block = out.results["beam"]
    assert block["graded"] is False
    full = block["providers"]["full_history"]
    assert full["overall"] is None  # nothing judged: no made-up score
    assert full["retrieval"]["turn_recall"]["value"] == 1.0
    assert full["retrieval"]["turn_recall"]["n"] == 3
    assert block["providers"]["no_memory"]["retrieval"]["turn_recall"]["value"] == 0.0


def test_event_ordering_score_is_tau_norm_times_f1():
    ref = ["a", "b", "c"]
    same = {(i, i): True for i in range(3)}
    assert ordering_score(ref, ["x", "y", "z"], same)["ordering"] == 1.0
    swapped = {(0, 1): True, (1, 0): True, (2, 2): True}
    s = ordering_score(ref, ["b", "a", "c"], swapped)
    assert s["f1"] == 1.0 and s["tau_norm"] == pytest.approx((1 / 3 + 1) / 2)
    partial = ordering_score(ref, ["a"], {(0, 0): True})
    assert partial["precision"] == 1.0 and partial["recall"] == pytest.approx(1 / 3)
    assert ordering_score(ref, ["q"], {})["ordering"] == 0.0


async def test_bench_beam_end_to_end_on_the_double(tmp_path, llm_double):
    judge = beam_judge_setup(LLMEndpoint(base_url=llm_double.base_url, model="double-chat"))
    out = await run_bench(BenchConfig(
        dataset=SCALE, out=tmp_path / "run", providers=["no_memory", "full_history"],
        task="beam", test_points="last", run_id="beam", judge=judge))
    for m in out.results["providers"].values():
        assert sum(m["failures"].values()) == 0 and m["gate_probes"] == 4
    block = out.results["beam"]["providers"]
    none, full = block["no_memory"], block["full_history"]
    assert full["by_ability"]["information_extraction"]["value"] == 1.0
    assert full["by_ability"]["knowledge_update"]["value"] == 1.0
    assert none["by_ability"]["information_extraction"]["value"] == 0.0
    # the ordering is graded by rank correlation: full history lists the three events
    # in the order they were said
    assert full["event_ordering_tau_f1"]["value"] == 1.0
    assert none["event_ordering_tau_f1"]["value"] == 0.0
    assert full["event_ordering_tau_norm"]["value"] == 1.0  # BEAM's tau_norm, apart
    assert full["event_ordering_tau_norm"]["n"] == 1
    # the headline is over every ability but abstention (3 questions); abstention apart
    # with its own n and interval; a provider that stores nothing scores 0 there
    assert full["overall"]["n"] == 3 and full["not_graded"] == 0
    assert full["abstention"]["n"] == none["abstention"]["n"] == 1
    assert none["overall"]["value"] == 0.0 and none["overall"]["high"] > 0.0
    # the evidence (source_chat_ids) is scored judge-free; the abstention question's
    # stand-in evidence is counted, never scored
    for p in (none, full):
        assert p["retrieval"]["questions"] == 3 and p["retrieval"]["evidence_stand_in"] == 1
    assert none["retrieval"]["turn_recall"]["value"] == 0.0
    assert full["retrieval"]["turn_recall"]["value"] == 1.0
    assert none["retrieval"]["turn_any@5"]["value"] == 0.0
    assert full["retrieval"]["session_any@5"]["value"] == 1.0
    # LoCoMo's category semantics are not applied to BEAM's categories
    assert "intervals" not in out.results and "ranked_at_k" not in out.results
    assert out.manifest["dataset"]["format"] == "beam"
    assert len(out.manifest["dataset"]["sha256"]) == 64


def test_cli_bench_task_beam_bad_input_is_one_line(tmp_path):
    import shutil

    from typer.testing import CliRunner

    from nanobot_memory_adapters.cli import app

    folder = tmp_path / "100K" / "1"
    shutil.copytree(SCALE / "1", folder)
    (folder / "chat.json").write_text('[{"batch_number": "one", "turns": []}]')
    for args, says in (
        (("--dataset", str(SCALE), "--max-sessions", "1"), "--max-sessions: cuts LoCoMo"),
        (("--dataset", str(folder)), f"{folder / 'chat.json'}: batch 1 has batch_number"),
    ):
        bad = CliRunner().invoke(app, ["bench", "--task", "beam", *args, "--providers",
                                       "no_memory", "--out", str(tmp_path / "bad")])
        assert bad.exit_code == 2, (args, bad.output)
        assert says in bad.stderr.replace("\n", "") and "Traceback" not in bad.output


def test_cli_bench_beam_verify_passes_on_a_sweep(tmp_path):
    from typer.testing import CliRunner

    from nanobot_memory_adapters.cli import app

    ok = CliRunner().invoke(app, [
        "bench", "--task", "beam", "--dataset", str(SCALE), "--providers",
        "no_memory,full_history", "--budget-tokens", "2000,60", "--out", str(tmp_path / "ok"),
        "--verify", "--json"])
    assert ok.exit_code == 0, ok.output
    assert "verified" in ok.stderr and "BEAM evidence" in ok.stderr
    full = json.loads(ok.stdout)["beam"]["providers"]["full_history"]["retrieval"]
    # the block is the headline budget's asks: each question once, not once per budget
    assert full["questions"] == 3 and full["evidence_stand_in"] == 1
    assert full["turn_recall"]["n"] == 3 and full["turn_recall"]["value"] == 1.0


async def test_verify_names_the_beam_evidence_figure_that_differs(tmp_path, capsys):
    import typer

    from nanobot_memory_adapters.harness.cli import verify_recall

    out = await run_bench(BenchConfig(
        dataset=SCALE, out=tmp_path / "run", providers=["no_memory", "full_history"],
        task="beam", test_points="last", run_id="beam"))
    verify_recall(out)  # as run: the block recomputed from traces.jsonl is the same
    assert "verified" in capsys.readouterr().err
    block = out.results["beam"]["providers"]["full_history"]["retrieval"]
    right = json.loads(json.dumps(block))
    block["turn_recall"]["value"] = 0.9  # results.json says something the traces do not
    with pytest.raises(typer.Exit) as err:
        verify_recall(out)
    assert err.value.exit_code == 1
    said = " ".join(capsys.readouterr().err.split())
    assert "full_history (beam retrieval: turn_recall)" in said and "verified" not in said
    out.results["beam"]["providers"]["full_history"]["retrieval"] = right
    # a trace line edited instead: full_history's ranking for the ordering question is
    # gone, so its ranked figures (and only those: the generic recall block does not read
    # ranked_sources) no longer match
    traces = out.out / "traces.jsonl"
    lines = traces.read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if (rec.get("kind") == "ask" and rec["provider"] == "full_history"
                and rec["ability"] == "event_ordering"):
            rec["ranked_sources"] = []
            lines[i] = json.dumps(rec)
    traces.write_text("\n".join(lines) + "\n")
    with pytest.raises(typer.Exit):
        verify_recall(out)
    said = " ".join(capsys.readouterr().err.split())
    assert "full_history (beam retrieval: turn_any@5, session_any@5, session_all@5)" in said
    assert "no_memory" not in said


def test_a_judge_that_cannot_be_reached_is_a_failure_not_an_ungraded_answer(tmp_path,
                                                                           monkeypatch):
    """Every answer and judge call raising (a refused connection, as a timeout on a busy
    one-slot server) is counted as a judge failure: exit 4, never 0 with 'not graded'."""
    from typer.testing import CliRunner

    from nanobot_memory_adapters.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    run = CliRunner().invoke(app, [
        "bench", "--task", "beam", "--dataset", str(SCALE), "--providers", "no_memory",
        "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m",
        "--out", str(tmp_path / "dead"), "--json"])
    assert run.exit_code == 4, run.output
    results = json.loads(run.stdout)
    assert results["providers"]["no_memory"]["failures"]["judge"] == 4
    assert "judge=4" in run.stderr
