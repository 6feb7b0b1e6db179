"""Input that must not reach outside the run's folder or pass unseen (issue 28): dataset
and provider ids never choose what the harness deletes, a duplicate sample id, an --out
under a file, a provider that exits, and malformed questions."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from nanobot_memory_adapters.cli import app
from nanobot_memory_adapters.harness.safe_paths import (
    UnsafePath,
    ensure_inside,
    joined_name,
    remove_file,
    remove_tree,
    safe_name,
)
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench
from nanobot_memory_adapters.harness.units import part_name, unit_key
from tests.harness.conftest import synthetic_locomo

PKG = Path(__file__).resolve().parents[2] / "nanobot_memory_adapters"


def victim(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "precious.txt").write_text("mine\n")
    return folder


def dataset(tmp_path: Path, ids: list[str]) -> Path:
    samples = synthetic_locomo()
    items = []
    for i, sample_id in enumerate(ids):
        item = json.loads(json.dumps(samples[i % len(samples)]))
        item["sample_id"] = sample_id
        items.append(item)
    path = tmp_path / "data" / "locomo.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


async def test_dataset_ids_never_delete_outside_out(tmp_path):
    """An absolute sample id and one that climbs out of --out: before the fix the unit's
    store (removed before each unfinished unit) was the victim folder itself."""
    absolute = victim(tmp_path, "absolute-victim")
    climbing = victim(tmp_path, "climbing-victim")
    out = tmp_path / "deep" / "run"
    ids = [str(absolute), "../../../climbing-victim", "..", "."]
    outcome = await run_bench(BenchConfig(dataset=dataset(tmp_path, ids), out=out,
                                          providers=["full_history"], budget_tokens=160,
                                          test_points="last"))
    for folder in (absolute, climbing):
        assert (folder / "precious.txt").read_text() == "mine\n", folder
    stores = out / "stores" / "full_history"
    assert sorted(p.name for p in stores.iterdir() if p.name != ".probe") == sorted(
        safe_name(i) for i in ids)
    assert all(stores in (stores / safe_name(i)).resolve().parents for i in ids)
    # every id is its own unit: the results count each conversation's questions once
    assert outcome.results["providers"]["full_history"]["asks"] > 0
    # a rerun with --fresh clears only what the run wrote
    await run_bench(BenchConfig(dataset=dataset(tmp_path, ids), out=out, fresh=True,
                                providers=["full_history"], budget_tokens=160,
                                test_points="last"))
    for folder in (absolute, climbing):
        assert (folder / "precious.txt").exists(), folder


def test_a_store_linked_outside_out_is_never_followed(tmp_path):
    outside = victim(tmp_path, "linked-victim")
    out = tmp_path / "out"
    (out / "stores" / "p").mkdir(parents=True)
    link = out / "stores" / "p" / "conv"
    link.symlink_to(outside, target_is_directory=True)
    remove_tree(out, link)  # the link goes, what it points at stays
    assert not link.exists() and (outside / "precious.txt").exists()
    with pytest.raises(UnsafePath, match="not inside"):
        remove_tree(out, out / ".." / "linked-victim")
    with pytest.raises(UnsafePath):
        remove_file(out, outside / "precious.txt")
    with pytest.raises(UnsafePath):
        ensure_inside(out, out)  # the root itself is not "inside"
    assert (outside / "precious.txt").exists()


_ID = st.text(st.characters(codec="utf-8"), min_size=1, max_size=200)


@given(a=_ID, b=_ID)
def test_safe_name_is_one_plain_component_and_injective(a, b):
    name = safe_name(a)
    assert name not in (".", "..") and "/" not in name and "\\" not in name
    assert "\x00" not in name and len(name.encode()) <= 255
    assert not Path(name).is_absolute() and len(Path(name).parts) == 1
    if a != b:
        assert safe_name(a) != safe_name(b)


@given(p1=_ID, c1=_ID, p2=_ID, c2=_ID)
def test_unit_file_names_are_injective(p1, c1, p2, c2):
    if (p1, c1) != (p2, c2):
        assert part_name(unit_key(p1, c1)) != part_name(unit_key(p2, c2))
    assert joined_name("full_history", "conv-26") == "full_history__conv-26"  # readable
    if (p1, c1) != (p2, c2):
        assert unit_key(p1, c1) != unit_key(p2, c2)


def test_a_colon_in_a_provider_name_keeps_units_apart():
    """Hypothesis found ``:`` as a provider name breaking the key (``:::0``)."""
    assert part_name(unit_key(":", "0")) == "%3A__0.jsonl"
    assert unit_key("a::b", "c") != unit_key("a", "b::c")
    assert part_name(unit_key("a::b", "c")) != part_name(unit_key("a", "b::c"))
    assert part_name(unit_key("%3A", "c")) != part_name(unit_key(":", "c"))
    assert unit_key("full_history", "conv-26") == "full_history::conv-26"  # readable


def test_plain_ids_keep_their_names():
    assert safe_name("conv-26") == "conv-26" and safe_name("full_history") == "full_history"
    assert safe_name("../x") == "%2E.%2Fx" and safe_name("/etc") == "%2Fetc"


def test_every_deletion_in_the_harness_goes_through_safe_paths():
    """``shutil.rmtree``, ``Path.unlink`` and ``os.remove`` appear in safe_paths.py only:
    any other module of the harness deletes through ``remove_tree``/``remove_file``."""
    offenders = []
    for path in (PKG / "harness").rglob("*.py"):
        if path.name == "safe_paths.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and (
                    node.attr in ("rmtree", "unlink", "rmdir", "removedirs")
                    or (node.attr == "remove" and isinstance(node.value, ast.Name)
                        and node.value.id == "os")):
                offenders.append(f"{path.relative_to(PKG)}:{node.lineno} .{node.attr}")
    assert not offenders, offenders


# -- bad input: one line ----------------------------------------------------------------------

def _bench(*args: str):
    return CliRunner().invoke(app, ["bench", *args])


def _one_line(result, code: int, *needles: str) -> str:
    assert result.exit_code == code, (result.exit_code, result.output[-2000:])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def test_duplicate_sample_id_is_refused_naming_it(tmp_path):
    path = dataset(tmp_path, ["dup-1", "other", "dup-1"])
    out = tmp_path / "out"
    _one_line(_bench("--dataset", str(path), "--providers", "no_memory", "--out", str(out)),
              2, "'dup-1'", "twice")
    assert not (out / "traces.jsonl").exists()


def test_out_under_a_file_is_one_line(tmp_path):
    path = dataset(tmp_path, ["s-1"])
    blocker = tmp_path / "afile"
    blocker.write_text("a file\n")
    _one_line(_bench("--dataset", str(path), "--providers", "no_memory",
                     "--out", str(blocker / "x")), 2, "--out", "is a file")
    assert blocker.read_text() == "a file\n"


def test_a_provider_that_exits_is_reported_as_one_not_as_pending(tmp_path, fake_providers):
    """Exit 3 is the bench's "readiness pending": a provider's sys.exit(3) must not pass
    for it; the run stops with exit 4 and a line naming the provider."""
    path = dataset(tmp_path, ["s-1"])
    line = _one_line(_bench("--dataset", str(path), "--providers", "exits",
                            "--out", str(tmp_path / "out"), "--test-points", "last"),
                     4, "'exits'", "sys.exit(3)")
    assert "readiness" not in line


def test_malformed_questions_are_counted_everywhere(tmp_path):
    items = synthetic_locomo()[:1]
    qa = items[0]["qa"]
    qa.append({"answer": "x", "evidence": ["D1:1"], "category": 1})  # no question
    qa.append({"question": "What?", "evidence": ["D1:1"], "category": 2})  # no answer
    qa.append({"question": "Who?", "answer": "y", "evidence": ["D1:1"], "category": 9})
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["bench", "--dataset", str(path), "--providers",
                                      "no_memory", "--out", str(out), "--test-points", "last"])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert results["evidence_parsing"]["malformed_questions"] == 3
    assert manifest["dataset"]["evidence_parsing"]["malformed_questions"] == 3
    examples = results["evidence_parsing"]["examples"]
    assert any("no question text" in e for e in examples)
    assert "3 malformed" in " ".join(result.output.split())


@pytest.mark.parametrize(("option", "value"), [
    ("--llm-base-url", "sk-proj-Zq8xY2kL9mN4pR7tV1wB3cD5fG6hJ0aE"),
    ("--llm-base-url", "llm.local:8000/v1"),
    ("--llm-model", "sk-proj-Zq8xY2kL9mN4pR7tV1wB3cD5fG6hJ0aE"),
])
def test_llm_options_refuse_a_key_or_a_non_url_without_echoing_it(tmp_path, option, value):
    path = dataset(tmp_path, ["s-1"])
    args = {"--llm-base-url": "http://127.0.0.1:9/v1", "--llm-model": "m", option: value}
    line = _one_line(_bench("--dataset", str(path), "--providers", "no_memory",
                            "--out", str(tmp_path / "out"),
                            *[x for kv in args.items() for x in kv]), 2, option)
    assert value not in line and "Zq8xY2kL9" not in line


# -- an --out folder of the user's: never deleted, never overwritten ---------------------------

def users_folder(root: Path) -> Path:
    """A folder a user might give as --out: files that share names with a run's outputs."""
    out = root / "mine"
    (out / "stores").mkdir(parents=True)
    (out / "stores" / "thesis.txt").write_text("chapter 1\n")
    (out / "results.json").write_text('{"mine": true}\n')
    (out / "scenarios.json").write_text('{"mine": true}\n')
    (out / "notes.txt").write_text("notes\n")
    return out


def untouched(out: Path) -> None:
    assert (out / "stores" / "thesis.txt").read_text() == "chapter 1\n"
    assert (out / "results.json").read_text() == '{"mine": true}\n'
    assert (out / "scenarios.json").read_text() == '{"mine": true}\n'
    # the CLI's debug log is the only addition (appended to, never replaced)
    assert sorted(p.name for p in out.iterdir() if p.name != "debug.log") == [
        "notes.txt", "results.json", "scenarios.json", "stores"]


@pytest.mark.parametrize("fresh", [False, True])
def test_bench_refuses_a_folder_of_the_users_files(tmp_path, fresh):
    """Before: --fresh deleted stores/ and results.json of a folder that never held a run,
    and without it the run overwrote results.json; both exited 0 or said nothing."""
    path = dataset(tmp_path, ["s-1"])
    out = users_folder(tmp_path)
    _one_line(_bench("--dataset", str(path), "--providers", "no_memory", "--out", str(out),
                     *(["--fresh"] if fresh else [])),
              2, str(out), "results.json", "stores", "nothing was deleted")
    untouched(out)


def test_bad_input_is_refused_before_a_fresh_run_clears_its_folder(tmp_path):
    """A run's own folder, started over with a conversation the file does not hold: the
    refusal comes first and the earlier run's files stay."""
    path = dataset(tmp_path, ["s-1"])
    out = tmp_path / "run"
    first = _bench("--dataset", str(path), "--providers", "no_memory", "--out", str(out),
                   "--test-points", "last")
    assert first.exit_code == 0, first.output
    before = (out / "results.json").read_bytes()
    _one_line(_bench("--dataset", str(path), "--providers", "no_memory", "--out", str(out),
                     "--fresh", "--conversations", "nope"), 2, "nope")
    _one_line(_bench("--dataset", str(path), "--providers", "no_memory", "--out", str(out),
                     "--fresh", "--test-points", "every:abc"), 2, "every:abc", "whole number")
    assert (out / "results.json").read_bytes() == before
    # and the run's own folder is still its own: a fresh start there works
    again = _bench("--dataset", str(path), "--providers", "no_memory", "--out", str(out),
                   "--test-points", "last", "--fresh")
    assert again.exit_code == 0, again.output


def test_demo_refuses_bad_input_and_a_users_folder_before_touching_it(tmp_path):
    path = dataset(tmp_path, ["s-1"])
    out = users_folder(tmp_path)
    for extra in (["--conversation", "nope"], ["--conversation", "s-1"]):
        result = CliRunner().invoke(app, ["demo", "--dataset", str(path), "--out", str(out),
                                          "--no-preferences", "--no-probe", *extra])
        _one_line(result, 2, "nope" if "nope" in extra else "nothing was deleted")
        untouched(out)


def test_preferences_refuses_its_own_input_folder(tmp_path):
    """``--out`` the folder that holds the scenario file: never deleted or rewritten."""
    out = users_folder(tmp_path)
    result = CliRunner().invoke(app, ["preferences", "run", "--dataset",
                                      str(out / "scenarios.json"), "--out", str(out),
                                      "--providers", "no_memory", "--fresh"])
    assert result.exit_code != 0
    untouched(out)


def test_a_bad_setting_is_refused_before_the_run(tmp_path):
    """Before: a block with an unknown setting skipped its provider after the dataset
    was loaded (first as a raw pydantic dump, then as exit 4 with one provider missing);
    now it is one line naming the setting, before anything runs. A misspelt key is named
    even when it leaves a required field missing beside it."""
    path = dataset(tmp_path, ["s-1"])
    blocks = tmp_path / "blocks.json"
    blocks.write_text(json.dumps({"full_history": {"bogus": 1}}))
    line = _one_line(_bench("--dataset", str(path), "--providers", "full_history,no_memory",
                            "--provider-config", str(blocks), "--out", str(tmp_path / "out"),
                            "--test-points", "last"),
                     2, "full_history.bogus: unknown setting", "spelling")
    assert "errors.pydantic.dev" not in line
    assert not (tmp_path / "out" / "results.json").exists()
    blocks.write_text(json.dumps({"mem0": {"llm": {"base_url": "http://127.0.0.1:9/v1",
                                                   "modle": "m"}}}))
    _one_line(_bench("--dataset", str(path), "--providers", "no_memory",
                     "--provider-config", str(blocks), "--out", str(tmp_path / "out")),
              2, "mem0.llm.modle: unknown setting")
    blocks.write_text(json.dumps({"mem0": {"llm": "nanobot"}}))  # nanobot's model, unknown
    _one_line(_bench("--dataset", str(path), "--providers", "no_memory",
                     "--provider-config", str(blocks), "--out", str(tmp_path / "out")),
              2, 'mem0.llm: is "nanobot"', "--nanobot-config")


def test_settings_code_that_raises_is_one_line(tmp_path, fake_providers):
    """A provider's own settings code raising something pydantic does not wrap (here a
    RuntimeError quoting a key) was a traceback before the run; now one line naming the
    provider and the error, the key scrubbed, nothing run."""
    path = dataset(tmp_path, ["s-1"])
    blocks = tmp_path / "blocks.json"
    blocks.write_text(json.dumps({"broken_settings": {"x": 1}}))
    result = _bench("--dataset", str(path), "--providers", "no_memory",
                    "--provider-config", str(blocks), "--out", str(tmp_path / "out"))
    line = _one_line(result, 2, "broken_settings", "RuntimeError", "could not parse key")
    assert "BROKEN0123456789" not in result.output, line
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_skipped_provider_is_a_failure(tmp_path):
    """A provider skipped at run time (here: mem0 with no LLM configured, which
    would run as simple_rag) is a failure:
    exit 4, the others' results written; alone, "no provider ran" (it exited 0 once)."""
    path = dataset(tmp_path, ["s-1"])
    result = _bench("--dataset", str(path), "--providers", "mem0,no_memory",
                    "--out", str(tmp_path / "out"), "--test-points", "last")
    assert result.exit_code == 4, result.output
    assert "skipped mem0: runs as 'simple_rag'" in result.output
    assert "Traceback" not in result.output
    assert "results hold the other 1" in result.output
    alone = _bench("--dataset", str(path), "--providers", "mem0",
                   "--out", str(tmp_path / "out2"))
    assert alone.exit_code == 4 and "no provider ran" in alone.output, alone.output


def test_a_block_for_no_provider_is_refused_naming_it(tmp_path):
    path = dataset(tmp_path, ["s-1"])
    blocks = tmp_path / "blocks.json"
    blocks.write_text(json.dumps({"ful_history": {"budget": {"max_tokens": 100}}}))
    _one_line(_bench("--dataset", str(path), "--providers", "full_history",
                     "--provider-config", str(blocks), "--out", str(tmp_path / "out")),
              2, "'ful_history'", "full_history")
    assert not (tmp_path / "out" / "results.json").exists()


def test_an_error_line_never_quotes_a_key(tmp_path):
    config = tmp_path / "memory.json"
    config.write_text(json.dumps({"memory": {"condition": "full_history",
                                             "budget": {"max_tokens": "sk-test-SECRET123456"}}}))
    result = CliRunner().invoke(app, ["health", "--config", str(config)])
    line = _one_line(result, 2, "max_tokens", "whole number")
    assert "SECRET123456" not in result.output, line


@pytest.mark.parametrize("value", ["-1", "nan", "0"])
def test_a_wait_must_be_a_positive_number_of_seconds(tmp_path, value):
    path = dataset(tmp_path, ["s-1"])
    _one_line(_bench("--dataset", str(path), "--providers", "no_memory", "--out",
                     str(tmp_path / "out"), "--readiness-timeout", value),
              2, "--readiness-timeout", "positive number of seconds")
    _one_line(CliRunner().invoke(app, ["swap", "--condition", "full_history",
                                       "--readiness-timeout", value]),
              2, "--readiness-timeout")


def test_a_run_whose_unit_setup_raises_stops_in_one_line_with_exit_4(tmp_path, capsys):
    """A unit's setup that raised (a server gone between units: ``GET /health`` fails in
    ``setup_scope``) ended ``bench`` and ``preferences run`` with a traceback and exit 1;
    it is one line, exit 4 (failures), saying how to resume, with no secret in it."""
    import typer

    from nanobot_memory_adapters.contract import AdapterError
    from nanobot_memory_adapters.harness.progress import run_resumable

    class Cfg:
        out = tmp_path / "run"

    async def runner(cfg: object, display: object = None) -> object:
        raise AdapterError("GET http://bench:s3cretpass@127.0.0.1:1/health refused",
                           backend_name="memos", operation="setup", retryable=True)

    with pytest.raises(typer.Exit) as stopped:
        run_resumable(runner, Cfg(), quiet=True)
    assert stopped.value.exit_code == 4
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "the run stopped" in said[0] and "resume" in said[0], err
    assert "s3cretpass" not in err, err  # (the traceback goes to debug.log, not stderr)
