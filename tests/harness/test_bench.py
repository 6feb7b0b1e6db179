"""`nanobot-memory bench`: the timeline driver, its outputs, determinism and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.harness.checkpoint import CheckpointMismatch
from nanobot_memory_adapters.harness.datasets.locomo import load_locomo
from nanobot_memory_adapters.harness.manifest import provider_source
from nanobot_memory_adapters.harness.metrics import (
    metrics_sha256,
    recompute_from_traces,
    strip_timing,
)
from nanobot_memory_adapters.harness.timeline import BenchConfig, SeededIds, run_bench
from nanobot_memory_adapters.harness.unit_progress import progress_path
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.tokens import count_tokens
from nanobot_memory_adapters.tracing import read_traces
from tests.harness.conftest import LOCOMO7, mem0_installed

OUTPUTS = ("manifest.json", "traces.jsonl", "results.json", "report.html")


def config(dataset: Path, out: Path, providers: list[str], **kw) -> BenchConfig:
    kw.setdefault("budget_tokens", 160)
    return BenchConfig(dataset=dataset, out=out, providers=providers, **kw)


def assert_recall_recomputes(out: Path, results: dict) -> None:
    again = recompute_from_traces(out / "traces.jsonl")
    for name, m in results["providers"].items():
        assert again[name] == m["recall"], name


def assert_within_budget(out: Path, results: dict) -> None:
    budget = results["budget_tokens"]
    for rec in read_traces(out / "traces.jsonl"):
        if rec.get("kind") == "ask":
            assert rec["context_tokens"] <= budget
            if "context" in rec:
                assert count_tokens(rec["context"]) == rec["context_tokens"] <= budget
    for m in results["providers"].values():
        assert m["context_tokens"]["over_budget"] == 0
        assert (m["context_tokens"]["max"] or 0) <= budget


async def test_bench_writes_everything_and_recall_recomputes_from_traces(
    locomo_file, tmp_path, fake_providers
):
    out = tmp_path / "run"
    outcome = await run_bench(
        config(locomo_file, out, ["no_memory", "full_history", "bulk_ready", "needs_llm", "down"])
    )
    for name in OUTPUTS:
        assert (out / name).is_file(), name
    results = json.loads((out / "results.json").read_text())
    assert results == outcome.results
    assert list(results["providers"]) == ["no_memory", "full_history", "bulk_ready"]
    skipped = {s["name"]: s["reason"] for s in results["skipped"]}
    assert "needs an LLM" in skipped["needs_llm"] and "unavailable" in skipped["down"]

    fh, nm, bulk = (results["providers"][n] for n in ("full_history", "no_memory", "bulk_ready"))
    assert nm["recall"]["overall"]["turn"] == 0.0
    assert fh["recall"]["overall"]["turn"] > 0.0
    assert bulk["recall"]["overall"]["turn"] > 0.0
    # syn-1: points 1, 2, 4 ask 1, 3 (+q4 at D2:1), 5 questions; syn-2: 1 then 3.
    assert fh["asks"] == (1 + 3 + 5) + (1 + 3)
    assert fh["final_point"]["overall"]["count"] == 5 + 3
    assert set(fh["recall"]["by_category"]) == {"1", "2", "4", "5"}
    assert bulk["ingest_mode"] == ["bulk"] and fh["ingest_mode"] == ["single"]
    assert bulk["timing"]["readiness_wait_s"]["waits"] == 3 + 2  # one per test point
    for m in results["providers"].values():
        assert sum(m["failures"].values()) == 0
        assert m["gate_probes"] == m["asks"]
    assert results["evidence_parsing"]["skipped_questions"] == 3
    assert_recall_recomputes(out, results)
    assert_within_budget(out, results)

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["manifest_sha256"] == results["manifest_sha256"]
    assert [p["name"] for p in manifest["providers"]] == list(results["providers"])
    assert manifest["settings"]["budget"]["max_tokens"] == 160
    assert manifest["settings"]["test_points_resolved"] == {"syn-1": [1, 2, 4], "syn-2": [1, 2]}
    html = (out / "report.html").read_text()
    assert html.count("<svg") >= 5 and "<script" not in html
    assert "http://" not in html and "https://" not in html  # self-contained


async def test_read_only_window_and_ids_in_traces(locomo_file, tmp_path):
    out = tmp_path / "run"
    await run_bench(config(locomo_file, out, ["full_history"], conversations=["syn-2"]))
    lines = read_traces(out / "traces.jsonl")
    modes = [r["reason"] for r in lines if r.get("kind") == "mode"]
    assert modes == [
        "bench_unit_start",
        "test_session",
        "test_session_end",
        "test_session",
        "test_session_end",
    ]
    records = [r for r in lines if r.get("kind") == "record"]
    assert [r["trace"]["event_id"] for r in records] == [
        "locomo-syn-2-D1-1",
        "locomo-syn-2-D1-2",
        "locomo-syn-2-D2-1",
        "locomo-syn-2-D2-2",
    ]
    probes = [r for r in lines if r.get("kind") == "gate_probe"]
    assert probes and {p["status"] for p in probes} == {"skipped_read_only"}
    # One reset: the fresh scope before the timeline starts; never between test points.
    resets = [i for i, r in enumerate(lines) if r["trace"]["operation"] == "reset_scope"]
    first_test = next(i for i, r in enumerate(lines) if r.get("reason") == "test_session")
    assert len(resets) == 1 and resets[0] < first_test


async def test_gate_violations_are_counted(locomo_file, tmp_path, fake_providers):
    outcome = await run_bench(
        config(locomo_file, tmp_path / "run", ["gate_leak"], conversations=["syn-2"])
    )
    m = outcome.results["providers"]["gate_leak"]
    assert m["failures"]["gate_violations"] == m["asks"] == 4


async def test_events_that_stored_nothing_are_counted_not_failed(locomo_file, tmp_path,
                                                                  fake_providers, capsys):
    """A write the backend took and kept nothing from (an extraction that found no fact)
    is accepted, not a failure, and counted beside the events recorded, so a memory that
    kept little does not read like a healthy one; a store that keeps every turn counts 0."""
    from nanobot_memory_adapters.harness.outcome_view import report_failures

    outcome = await run_bench(config(locomo_file, tmp_path / "run",
                                     ["selective", "full_history"], conversations=["syn-2"]))
    sel = outcome.results["providers"]["selective"]
    assert sel["failures"]["record"] == 0
    assert 0 < sel["events_stored_nothing"] < sel["events_recorded"]
    assert outcome.results["providers"]["full_history"]["events_stored_nothing"] == 0
    assert report_failures(outcome.results) == 0
    err = capsys.readouterr().err
    assert f"{sel['events_stored_nothing']} of {sel['events_recorded']} recorded events" in err


async def test_same_command_twice_same_manifest_and_metrics(locomo_file, tmp_path):
    runs = [
        await run_bench(config(locomo_file, tmp_path / f"r{i}", ["no_memory", "full_history"]))
        for i in range(2)
    ]
    a, b = (r.results for r in runs)
    assert runs[0].manifest["manifest_sha256"] == runs[1].manifest["manifest_sha256"]
    assert a["metrics_sha256"] == b["metrics_sha256"]
    assert strip_timing(a["providers"]) == strip_timing(b["providers"])


class Interrupt:
    """A progress sink that interrupts the run after ``after`` steps (like Ctrl-C)."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.steps = 0

    def planned(self, total: int, done: int) -> None:
        pass

    def started(self, key: str, total: int) -> None:
        pass

    def finished(self, key: str) -> None:
        pass

    def advanced(self, key: str, steps: int, note: str) -> None:
        self.steps += 1
        if self.steps == self.after:
            raise KeyboardInterrupt


async def test_resume_after_interruption_gives_the_same_results(locomo_file, tmp_path):
    providers = ["no_memory", "full_history"]
    clean = await run_bench(config(locomo_file, tmp_path / "clean", providers))
    out = tmp_path / "resumed"
    # Steps: no_memory syn-1 (3 sessions), syn-2 (2), full_history syn-1 (3): stop in its 2nd.
    with pytest.raises(KeyboardInterrupt):
        await run_bench(config(locomo_file, out, providers), progress=Interrupt(after=7))
    checkpoint = json.loads((out / "checkpoint.json").read_text())
    assert sorted(checkpoint["units"]) == ["no_memory::syn-1", "no_memory::syn-2"]
    assert not checkpoint["complete"]
    resumed = await run_bench(config(locomo_file, out, providers))
    assert resumed.resumed_units == 2
    # full_history keeps its store in memory: its cut unit started over, it left no
    # progress to resume from
    assert resumed.resumed_mid_unit == 0
    assert not list((out / "units").glob("*.progress.json"))
    assert resumed.results["metrics_sha256"] == clean.results["metrics_sha256"]
    assert_recall_recomputes(out, resumed.results)
    asks = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "ask"]
    assert len(asks) == sum(m["asks"] for m in resumed.results["providers"].values())
    # Different settings in the same directory are refused, not mixed in.
    with pytest.raises(CheckpointMismatch, match="--fresh"):
        await run_bench(config(locomo_file, out, providers, budget_tokens=300))
    fresh = await run_bench(config(locomo_file, out, providers, budget_tokens=300, fresh=True))
    assert fresh.resumed_units == 0


async def test_a_left_out_provider_is_skipped_now_and_resumed_later(locomo_file, tmp_path):
    """``--leave-out``: the same run (same manifest) without one provider; its results
    name it as skipped, and the same run without the option runs only what is missing."""
    providers = ["no_memory", "full_history"]
    clean = await run_bench(config(locomo_file, tmp_path / "clean", providers))
    out = tmp_path / "partial"
    partial = await run_bench(config(locomo_file, out, providers, leave_out=["full_history"]))
    assert list(partial.results["providers"]) == ["no_memory"]
    assert [s["name"] for s in partial.skipped] == ["full_history"]
    assert "--leave-out" in partial.skipped[0]["reason"]
    assert partial.manifest["manifest_sha256"] == clean.manifest["manifest_sha256"]
    assert (partial.results["providers"]["no_memory"]
            == clean.results["providers"]["no_memory"] | {"timing": partial.results[
                "providers"]["no_memory"]["timing"]})
    assert not json.loads((out / "checkpoint.json").read_text())["complete"]
    whole = await run_bench(config(locomo_file, out, providers))
    assert whole.resumed_units == 2 and not whole.skipped  # no_memory's two conversations
    assert whole.results["metrics_sha256"] == clean.results["metrics_sha256"]


def test_cli_leave_out_must_name_a_provider_of_the_run(locomo_file, tmp_path):
    result = CliRunner().invoke(app, [
        "bench", "--dataset", str(locomo_file), "--providers", "no_memory,full_history",
        "--leave-out", "mem0", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "--leave-out mem0: not among --providers (no_memory,full_history)" in result.output
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("run_id", "said"), [
    ("", "--run-id is empty"),
    (" ", "--run-id is empty"),
    ("a\nb", "--run-id 'a\\nb' contains the control character U+000A"),
    ("run*", "--run-id 'run*' contains a wildcard character"),
], ids=["empty", "blank", "newline", "wildcard"])
def test_cli_run_id_is_checked_before_out_is_claimed(locomo_file, tmp_path, run_id, said):
    """A --run-id no scope accepts is one line naming --run-id (not pydantic's dump of
    MemoryScope once the run began), and --out is left untouched: no stores/, no marker."""
    out = tmp_path / "x"
    result = CliRunner().invoke(app, [
        "bench", "--dataset", str(locomo_file), "--providers", "no_memory", "--run-id",
        run_id, "--out", str(out)])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and said in line, line
    assert not out.exists()


@pytest.mark.parametrize("key_env", ["sk-test-SECRET123456abcdef", "gsk_abcdef123456",
                                     "MY KEY"])
def test_cli_a_key_given_as_the_key_variable_s_name_is_refused_unrecorded(
        locomo_file, tmp_path, key_env):
    """--llm-api-key-env takes a variable's name: a key pasted there would be recorded in
    the manifest, results and report as that "name". One line that never repeats it."""
    out = tmp_path / "x"
    result = CliRunner().invoke(app, [
        "bench", "--dataset", str(locomo_file), "--providers", "no_memory",
        "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m",
        "--llm-api-key-env", key_env, "--out", str(out)])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert "--llm-api-key-env takes the NAME of an environment variable" in line
    assert key_env not in result.output and not out.exists()


@pytest.mark.parametrize(("args", "said"), [
    (["--llm-model", "m"], "--llm-model: give --llm-base-url too"),
    (["--ray-address", "127.0.0.1:6379"], "--ray-address: for --executor ray"),
    (["--provider-config", "BLOCK"], "the block for 'mem0' must be a JSON object"),
], ids=["model-without-endpoint", "ray-address-local", "provider-block-not-object"])
def test_cli_an_option_the_run_would_ignore_is_refused(locomo_file, tmp_path, args, said):
    """An option the run would silently not use (a model with no endpoint, a Ray address
    for the local executor) or a block of the wrong shape is one line, before --out."""
    block = tmp_path / "blocks.json"
    block.write_text(json.dumps({"mem0": "not a block"}))
    out = tmp_path / "x"
    result = CliRunner().invoke(app, [
        "bench", "--dataset", str(locomo_file), "--providers", "no_memory", "--out", str(out),
        *[str(block) if a == "BLOCK" else a for a in args]])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert said in line, line


def test_cli_bench_json_and_verify(locomo_file, tmp_path):
    out = tmp_path / "cli"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "--dataset",
            str(locomo_file),
            "--providers",
            "no_memory,full_history",
            "--budget-tokens",
            "200",
            "--out",
            str(out),
            "--test-points",
            "last",
            "--verify",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    assert results["providers"]["full_history"]["asks"] == 8  # last point only
    assert "verified" in result.stderr
    bad = CliRunner().invoke(
        app,
        ["bench", "--dataset", str(locomo_file), "--providers", "full_histroy", "--out", str(out)],
    )
    assert bad.exit_code == 2 and "did you mean 'full_history'" in bad.stderr


def test_cli_bench_verify_compares_the_whole_recall_block(locomo_file, tmp_path, monkeypatch):
    from nanobot_memory_adapters.harness import metrics

    real = metrics.recompute_from_traces

    def one_category_off(path, budget=None):
        again = real(path, budget)
        again["full_history"]["by_category"]["2"]["count"] += 1  # overall untouched
        return again

    monkeypatch.setattr(metrics, "recompute_from_traces", one_category_off)
    args = ["bench", "--dataset", str(locomo_file), "--providers", "full_history"]
    args += ["--budget-tokens", "200", "--test-points", "last", "--verify"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "cli")])
    assert result.exit_code == 1, result.output
    assert "differs for: full_history" in result.stderr and "verified" not in result.stderr


def test_seeded_ids_repeat_per_unit_and_restore_uuid4():
    import uuid

    real = uuid.uuid4
    with SeededIds(3) as ids:
        ids.reseed("a/x")
        first = [uuid.uuid4() for _ in range(3)]
        ids.reseed("b/x")
        other = uuid.uuid4()
        ids.reseed("a/x")
        assert [uuid.uuid4() for _ in range(3)] == first
        assert other not in first and len(set(first)) == 3 and first[0].version == 4
        # another module's draws (an SDK's other thread, a server in this process) do not
        # shift this module's ids
        ids.reseed("a/x")
        sdk: dict = {"__name__": "some.sdk", "uuid": uuid}
        exec("def draw():\n    return uuid.uuid4()", sdk)
        mixed = []
        for _ in range(3):
            sdk["draw"]()
            mixed.append(uuid.uuid4())
        assert mixed == first
    assert uuid.uuid4 is real
    # a module that imported uuid4 by name before the run draws seeded ids during it,
    # and real ones after it
    import sys
    import types

    early = types.ModuleType("early_sdk_for_test")
    early.uuid4 = real  # type: ignore[attr-defined]
    exec("def draw():\n    return uuid4()", early.__dict__)
    sys.modules[early.__name__] = early
    try:
        with SeededIds(3) as ids:
            ids.reseed("a/x")
            seeded = early.draw()  # type: ignore[attr-defined]
            ids.reseed("a/x")
            assert early.draw() == seeded  # type: ignore[attr-defined]
        assert early.draw() != seeded  # type: ignore[attr-defined]
    finally:
        del sys.modules[early.__name__]


@pytest.mark.skipif(not mem0_installed(), reason="mem0 extra not installed")
async def test_simple_rag_on_synthetic(locomo_file, tmp_path):
    out = tmp_path / "rag"
    outcome = await run_bench(config(locomo_file, out, ["no_memory", "simple_rag", "mem0"]))
    results = outcome.results
    rag = results["providers"]["simple_rag"]
    assert rag["recall"]["overall"]["turn"] > 0.5 and rag["ingest_mode"] == ["bulk"]
    assert sum(rag["failures"].values()) == 0
    # mem0 without an LLM would only be simple_rag under another name: skipped, said why.
    assert "runs as 'simple_rag'" in {s["name"]: s["reason"] for s in results["skipped"]}["mem0"]
    assert_recall_recomputes(out, results)
    assert_within_budget(out, results)
    # mem0 names memories with uuid4 and shows the id in the context (20-33 tokens each):
    # seeded ids make a second run identical, even at a tight budget.
    again = await run_bench(config(locomo_file, tmp_path / "rag2", ["simple_rag"]))
    assert again.results["metrics_sha256"] == metrics_sha256({"simple_rag": rag})


@pytest.mark.skipif(not LOCOMO7.exists(), reason="locomo7.json not present")
async def test_conv26_conditions_at_2000_tokens(tmp_path):
    out = tmp_path / "conv26"
    outcome = await run_bench(
        BenchConfig(
            dataset=LOCOMO7,
            out=out,
            providers=["no_memory", "full_history"],
            conversations=["conv-26"],
            budget_tokens=2000,
            test_points="every:6",
        )
    )
    results = outcome.results
    fh = results["providers"]["full_history"]
    assert (
        fh["recall"]["overall"]["turn"]
        > 0
        == results["providers"]["no_memory"]["recall"]["overall"]["turn"]
    )
    assert fh["context_tokens"]["mean"] > 1500  # it fills the budget
    assert_recall_recomputes(out, results)
    assert_within_budget(out, results)


async def test_a_unit_embeds_its_conversation_ahead_in_one_batch_with_the_same_results(
    locomo_file, tmp_path, monkeypatch
):
    """simple_rag declares ``ingest_lookahead``: a unit embeds each conversation's turns in
    one batch before its first session (one ``embed_batch`` per unit, where one per
    session before), its ingest time counts it, and every metric is what it is without
    it (the metrics hash)."""
    pytest.importorskip("mem0")
    from nanobot_memory_adapters.backends.mem0.embedder import OnnxMem0Embedding
    from nanobot_memory_adapters.harness import locomo_ingest

    batches: list[int] = []
    plain = OnnxMem0Embedding.embed_batch

    def counted(self, texts, memory_action="add"):
        batches.append(len(texts))
        return plain(self, texts, memory_action)

    monkeypatch.setattr(OnnxMem0Embedding, "embed_batch", counted)
    ahead = await run_bench(config(locomo_file, tmp_path / "ahead", ["simple_rag"]))
    conversations = load_locomo(locomo_file)
    assert len(batches) == len(conversations)
    assert batches == [len({t.content for t in c.turns}) for c in conversations]
    timing = ahead.results["providers"]["simple_rag"]["timing"]
    assert 0 < timing["ingest_lookahead_s"] <= timing["ingest_s"]

    real_supports = locomo_ingest.supports

    def never_lookahead(adapter, capability):  # no provider offers the lookahead
        return capability != "ingest_lookahead" and real_supports(adapter, capability)

    batches.clear()
    monkeypatch.setattr(locomo_ingest, "supports", never_lookahead)
    without = await run_bench(config(locomo_file, tmp_path / "without", ["simple_rag"]))
    assert len(batches) == sum(len(c.sessions) for c in conversations)
    assert "ingest_lookahead_s" not in without.results["providers"]["simple_rag"]["timing"]
    assert ahead.results["metrics_sha256"] == without.results["metrics_sha256"]


async def test_resumed_simple_rag_unit_equals_an_uninterrupted_one(locomo_file, tmp_path):
    """mem0 keeps history rows keyed by the run's seeded ids after ``delete_all``; a unit
    re-run after an interruption must not collide with them (it used to fail 'UNIQUE
    constraint failed: history.id' on every re-added memory and change the metrics)."""
    pytest.importorskip("mem0")
    providers = ["simple_rag"]
    clean = await run_bench(config(locomo_file, tmp_path / "clean", providers))
    out = tmp_path / "resumed"
    # simple_rag syn-1 has 3 sessions: stop after its 2nd (its writes are in the store).
    with pytest.raises(KeyboardInterrupt):
        await run_bench(config(locomo_file, out, providers), progress=Interrupt(after=2))
    resumed = await run_bench(config(locomo_file, out, providers))
    failures = resumed.results["providers"]["simple_rag"]["failures"]
    assert failures["record"] == 0, failures
    assert resumed.results["metrics_sha256"] == clean.results["metrics_sha256"]
    assert_recall_recomputes(out, resumed.results)


class Notes(Interrupt):
    """A progress sink that keeps what the units said."""

    def __init__(self) -> None:
        super().__init__(after=-1)
        self.notes: list[tuple[int, str]] = []

    def advanced(self, key: str, steps: int, note: str) -> None:
        self.notes.append((steps, note))


@pytest.mark.parametrize("speakers", ["single", "dual"])
async def test_an_interrupted_unit_goes_on_after_its_last_finished_session(
    locomo_file, tmp_path, speakers
):
    """A unit whose provider checks replays (simple_rag: mem0's get_all by event id)
    and whose store stays in ``out/stores`` resumes after its last finished session: the
    sessions before it are not recorded or asked again, the trace lines written after it
    are cut, and the results and contexts equal an uninterrupted run's."""
    pytest.importorskip("mem0")
    providers = ["simple_rag"]
    clean = await run_bench(config(locomo_file, tmp_path / "clean", providers, speakers=speakers))
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):  # syn-1 has 3 sessions: stop after the 2nd
        await run_bench(config(locomo_file, out, providers, speakers=speakers),
                        progress=Interrupt(after=2))
    part = out / "units" / "simple_rag__syn-1.jsonl"
    progress = json.loads(progress_path(part).read_text())
    assert progress["session"] == 2
    kept = part.read_bytes()[: progress["trace_bytes"]]
    with part.open("ab") as f:  # what a crash in session 3 leaves: a line cut short
        f.write(b'{"trace": {"trace_id": "cut sh')
    notes = Notes()
    resumed = await run_bench(config(locomo_file, out, providers, speakers=speakers),
                              progress=notes)
    assert resumed.resumed_mid_unit == 1 and resumed.resumed_units == 0
    assert notes.notes[0] == (2, "syn-1 resumed after s2")
    convs = load_locomo(locomo_file)
    assert [n for _, n in notes.notes[1:]] == [  # nothing before it again
        f"{c.sample_id} s{s.number}" for c in convs for s in c.sessions][2:]
    assert resumed.results["metrics_sha256"] == clean.results["metrics_sha256"]
    assert_recall_recomputes(out, resumed.results)
    assert (out / "traces.jsonl").read_bytes().startswith(kept)
    traces = read_traces(out / "traces.jsonl")
    records = [r["event_id"] for r in traces if r.get("kind") == "record"]
    copies = 2 if speakers == "dual" else 1  # each session once per speaker's persona
    assert len(records) == len(set(records)) == copies * sum(
        len(s.turns) for c in convs for s in c.sessions)
    ids = [r["trace"]["trace_id"] for r in traces]
    assert len(ids) == len(set(ids))  # resuming drew no id the first attempt drew
    # cut at a session's end: the sessions after it draw the ids an uninterrupted run
    # draws, so every context is the same text
    def contexts(path: Path) -> list[tuple[str, int, str]]:
        return [(r["question_id"], r["point"], r["context_sha256"])
                for r in read_traces(path) if r.get("kind") == "ask"]
    assert contexts(out / "traces.jsonl") == contexts(tmp_path / "clean" / "traces.jsonl")
    unit = json.loads((out / "checkpoint.json").read_text())["units"]["simple_rag::syn-1"]
    assert unit["resumed_after_sessions"] == [2]
    assert "replayed_cut_sessions" not in unit  # cut at a session's end: nothing replayed
    assert "replayed_cut_sessions" not in resumed.results["timing"]
    assert "resume" not in resumed.results["notes"]
    timing = resumed.results["providers"]["simple_rag"]["timing"]
    assert timing["resumed_after_sessions"] == {"syn-1": [2]}
    assert unit["wall_s"] > progress["elapsed_s"] > 0  # both attempts' time counted
    assert unit["events"] == copies * sum(len(s.turns) for s in convs[0].sessions)
    assert not list((out / "units").glob("*.progress.json"))  # gone with finished units


class KeepFirstProgress(Interrupt):
    """Interrupts after ``after`` steps, keeping a copy of the unit's progress file as it
    stood at the first step (after the unit's first session)."""

    def __init__(self, after: int, part: Path) -> None:
        super().__init__(after)
        self.part, self.first = part, b""

    def advanced(self, key: str, steps: int, note: str) -> None:
        if not self.first:
            self.first = progress_path(self.part).read_bytes()
        super().advanced(key, steps, note)


async def test_a_session_recorded_before_the_crash_is_replayed_without_clobbering(
    locomo_file, tmp_path
):
    """The crash came after session 2 was stored but before its progress was saved: the
    resumed unit records session 2 again (mem0 answers each turn from its store), any
    turn it must add drawing ids from a replay stream of its own. Drawing session 2's
    ids again would hand new memories the ids stored ones have, and Qdrant's upsert
    would overwrite them."""
    pytest.importorskip("mem0")
    providers = ["simple_rag"]
    clean = await run_bench(config(locomo_file, tmp_path / "clean", providers))
    out = tmp_path / "resumed"
    part = out / "units" / "simple_rag__syn-1.jsonl"
    display = KeepFirstProgress(after=2, part=part)
    with pytest.raises(KeyboardInterrupt):
        await run_bench(config(locomo_file, out, providers), progress=display)
    # As if the crash came in session 2 after its first turns were stored: the store
    # loses the later turns' memories, and the progress is session 1's (the unit marked
    # session 2 as begun before writing it).
    second = [r for r in read_traces(part) if r.get("kind") == "record" and r["session"] == 2]
    lost = second[len(second) // 2:]
    assert lost and all(r["trace"]["native_ids"] for r in lost)
    store = load_provider(provider_source("simple_rag"),
                          data_dir=out / "stores" / "simple_rag" / "syn-1")
    try:
        scope = MemoryScope(run_id="locomo", persona_id="syn-1", agent_id="nanobot")
        for r in lost:
            for native_id in r["trace"]["native_ids"]:
                await store.native_mutation(scope, "delete", {"native_id": native_id})
    finally:
        await store.aclose()
    first = json.loads(display.first)
    assert first["session"] == 1 and not first["next_started"]
    progress_path(part).write_text(json.dumps({**first, "next_started": True}))
    resumed = await run_bench(config(locomo_file, out, providers))
    assert resumed.resumed_mid_unit == 1
    # The replayed memories carry other ids, and ids order equal scores: syn-1 says
    # "Thanks!" in both sessions, so which of the two a tied ask shows may differ from the
    # uninterrupted run. Everything else is the same ask for ask.
    texts = {r["event_id"]: r["text"] for r in read_traces(tmp_path / "clean" / "traces.jsonl")
             if r.get("kind") == "record"}
    clean_asks = {(r["question_id"], r["point"]): r for r in read_traces(
        tmp_path / "clean" / "traces.jsonl") if r.get("kind") == "ask"}
    resumed_asks = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "ask"]
    assert len(resumed_asks) == len(clean_asks)
    for ask in resumed_asks:
        was = clean_asks[(ask["question_id"], ask["point"])]
        if ask["shown_sources"] != was["shown_sources"]:
            assert sorted(texts[e] for s in ask["shown_sources"] for e in s) == sorted(
                texts[e] for s in was["shown_sources"] for e in s)
    for name, metrics in clean.results["providers"].items():
        assert resumed.results["providers"][name]["recall"] == metrics["recall"]
    replayed = [r for r in read_traces(out / "traces.jsonl") if r.get("kind") == "record"
                and r["conversation"] == "syn-1" and r["session"] == 2]
    held = [any("already in mem0" in w for w in r["trace"]["warnings"]) for r in replayed]
    assert held == [True] * (len(second) - len(lost)) + [False] * len(lost)
    unit = json.loads((out / "checkpoint.json").read_text())["units"]["simple_rag::syn-1"]
    assert unit["resumed_after_sessions"] == [1]
    # its ids differ from an uninterrupted run's, so its metrics hash need not hold: the
    # outputs say which units
    assert unit["replayed_cut_sessions"] == [2]
    assert resumed.results["timing"]["replayed_cut_sessions"] == {"simple_rag::syn-1": [2]}
    assert "can differ" in resumed.results["notes"]["resume"]


@pytest.mark.servers  # a process pool
def test_cli_bench_workers_and_budget_sweep(locomo_file, tmp_path):
    """The flags themselves: two worker processes and a two-budget sweep from the command
    line give one block per budget, verify per budget, and the same metrics as one worker;
    bad values are one line."""
    def run(out: str, workers: str) -> dict:
        result = CliRunner().invoke(app, [
            "bench", "--dataset", str(locomo_file), "--providers", "full_history",
            "--budget-tokens", "200,100", "--workers", workers, "--out",
            str(tmp_path / out), "--test-points", "last", "--verify", "--json"])
        assert result.exit_code == 0, result.output
        assert "verified" in result.stderr
        return json.loads(result.stdout)

    two = run("w2", "2")
    assert [b["budget_tokens"] for b in two["budgets"]] == [200, 100]
    # each unit's process CPU (a worker runs one unit at a time): a run's CPU-hours
    for block in two["budgets"]:
        cpu = block["providers"]["full_history"]["timing"]["unit_cpu_s"]
        assert len(cpu) == 2 and all(c > 0 for c in cpu), cpu  # two conversations
    assert two["metrics_sha256"] == run("w1", "1")["metrics_sha256"]
    for args, said in ((["--workers", "0"], "--workers 0"),
                       (["--executor", "dask"], "--executor 'dask'"),
                       (["--budget-tokens", "200,abc"], "--budget-tokens")):
        bad = CliRunner().invoke(app, ["bench", "--dataset", str(locomo_file), "--providers",
                                       "full_history", "--out", str(tmp_path / "bad"), *args])
        assert bad.exit_code == 2 and said in bad.stderr, bad.output
        assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.output


def _windows(log: list[tuple[str, ...]]) -> list[tuple[list[str], list[str]]]:
    """(announced ids, recorded ids) per window, in order; fails on a record outside a
    window or a window left open."""
    out: list[tuple[list[str], list[str]]] = []
    open_ = False
    for entry in log:
        if entry[0] == "open":
            assert not open_, "a window opened inside another"
            out.append((list(entry[1:]), []))
            open_ = True
        elif entry[0] == "close":
            assert open_
            open_ = False
        else:
            assert open_, f"{entry[1]} recorded outside a window"
            out[-1][1].append(entry[1])
    assert not open_, "a window was left open"
    return out


@pytest.mark.parametrize("speakers", ["single", "dual"])
async def test_lookahead_windows_cover_whole_sessions_before_they_are_recorded(
    locomo_file, tmp_path, fake_providers, monkeypatch, speakers
):
    """Windows of whole sessions up to LOOKAHEAD_TURNS (one session at least), each opened
    before its first session is recorded and closed before the next opens: every turn is
    announced (for every persona) by the window it is recorded in, and nothing else is."""
    from nanobot_memory_adapters.harness import locomo_ingest
    from tests.harness.fakes import LookaheadAdapter

    conversations = load_locomo(locomo_file)
    longest = max(len(s.turns) for c in conversations for s in c.sessions)
    monkeypatch.setattr(locomo_ingest, "LOOKAHEAD_TURNS", longest + 1)
    monkeypatch.setattr(LookaheadAdapter, "LOG", [])
    outcome = await run_bench(config(locomo_file, tmp_path / "out", ["lookahead"],
                                     speakers=speakers))
    assert sum(outcome.results["providers"]["lookahead"]["failures"].values()) == 0
    windows = _windows(LookaheadAdapter.LOG)
    sessions = sum(len(c.sessions) for c in conversations)
    assert len(conversations) <= len(windows) < sessions  # some windows hold two sessions
    for announced, recorded in windows:
        assert sorted(announced) == sorted(recorded)
    recorded = [e for _, r in windows for e in r]
    assert len(recorded) == len(set(recorded)) == outcome.results["providers"][
        "lookahead"]["events_recorded"]


def test_a_lookahead_window_is_the_same_wherever_recording_starts(monkeypatch):
    """The windows are cut from the conversation's first session, so a unit resumed at
    session N embeds the batch an uninterrupted run embedded for it (a batch's padding
    changes a vector's last bits; a window cut from N on held other texts)."""
    from datetime import datetime

    from nanobot_memory_adapters.harness import locomo_ingest
    from nanobot_memory_adapters.harness.datasets.locomo import Session, Turn

    at = datetime(2023, 5, 8)

    def session(number: int, turns: int) -> Session:
        return Session(number, "", at, tuple(
            Turn(f"D{number}:{i}", number, i, "A", "t", "t", at, False) for i in range(turns)))

    sessions = [session(n, t) for n, t in [(1, 3), (2, 2), (3, 4), (4, 1), (5, 5)]]
    monkeypatch.setattr(locomo_ingest, "LOOKAHEAD_TURNS", 5)
    windows = [[s.number for s in locomo_ingest.lookahead_window(sessions, n)]
               for n in range(1, 6)]
    assert windows == [[1, 2], [1, 2], [3, 4], [3, 4], [5]]
    assert locomo_ingest.lookahead_window(sessions, 9) == []


@pytest.mark.parametrize("fail", ["call", "enter", "exit"])
async def test_a_failing_lookahead_is_only_logged_and_changes_no_result(
    locomo_file, tmp_path, fake_providers, monkeypatch, fail
):
    """A lookahead that cannot be called, opened or closed fails no unit: every session is
    recorded as without it, with the same metrics, and a window that failed to open is not
    retried for each of its sessions."""
    from tests.harness.fakes import LookaheadAdapter

    monkeypatch.setattr(LookaheadAdapter, "LOG", [])
    plain = await run_bench(config(locomo_file, tmp_path / "plain", ["lookahead"]))
    monkeypatch.setattr(LookaheadAdapter, "FAIL", fail)
    opened: list[int] = []
    real = LookaheadAdapter.ingest_lookahead

    def counted(self, events):  # type: ignore[no-untyped-def]
        opened.append(len(events))
        return real(self, events)

    monkeypatch.setattr(LookaheadAdapter, "ingest_lookahead", counted)
    failing = await run_bench(config(locomo_file, tmp_path / "failing", ["lookahead"]))
    rows = failing.results["providers"]["lookahead"]
    assert sum(rows["failures"].values()) == 0
    assert rows["events_recorded"] == plain.results["providers"]["lookahead"]["events_recorded"]
    assert failing.results["metrics_sha256"] == plain.results["metrics_sha256"]
    assert len(opened) == len(load_locomo(locomo_file))  # one window per conversation


async def test_a_question_of_two_people_composes_from_the_rendered_lines(
    locomo_file, tmp_path, fake_providers
):
    """Dual speakers: each person's section is composed from the lines its provider
    rendered (``section_lines``), under one frame with one heading each; a provider whose
    result has no lines fails the question with a line that says so, instead of having
    its rendered text cut apart."""
    out = await run_bench(config(locomo_file, tmp_path / "ok", ["lookahead"], speakers="dual"))
    assert out.results["providers"]["lookahead"]["failures"]["retrieve"] == 0
    asks = [r for r in read_traces(tmp_path / "ok" / "traces.jsonl") if r.get("kind") == "ask"]
    composed = [r["context"] for r in asks if r.get("context") and r.get("composed_of")]
    assert composed
    for text in composed:
        lines = text.split("\n")
        assert lines[0].startswith('<memory-context backend="lookahead"')
        assert lines[-1] == "</memory-context>"
        assert text.count("<memory-context") == 1
        assert lines[1].startswith("## ") and lines[1].endswith("memory")
    bad = await run_bench(config(locomo_file, tmp_path / "bad", ["unsectioned"],
                                 speakers="dual"))
    failed = [r for r in read_traces(tmp_path / "bad" / "traces.jsonl")
              if r.get("kind") == "ask" and r.get("failed")]
    assert bad.results["providers"]["unsectioned"]["failures"]["retrieve"] == len(asks)
    assert all("no section_lines" in r["failed"] for r in failed)
