"""The benchmark scripts as a user starts them: ``--help`` works for every one (a script
that crashes at import, e.g. on an API that moved, fails here, not at the next
measurement), and a bad argument is a usage error (exit 2, its last line naming the
argument or file and the fix), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))

# each starts a Python process (cheap: arguments are checked before models load)
pytestmark = pytest.mark.servers


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "MEM0_TELEMETRY": "False", "GRAPHITI_TELEMETRY_ENABLED": "false"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env, check=False)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_answers_help(script):
    """Importing a script runs its module-level code: bench_floor.py computed its top_k
    with a ContextBudget method that had moved to sizing.py, so it and bench_lme_cost.py
    (which imports it) died with an AttributeError even for --help."""
    done = run(str(BENCHMARKS / script), "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() and "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad-inputs")
    (root / "invalid.json").write_text("{not json")
    (root / "not-utf8.json").write_bytes(b"\xff\xfe[]")
    (root / "other-shape.json").write_text(json.dumps([{"question": 1}]))
    from tests.harness.conftest import synthetic_locomo

    (root / "locomo.json").write_text(json.dumps(synthetic_locomo()))
    return {"root": root, "missing": root / "missing.json",
            **{p.stem: p for p in root.glob("*.json")}}


# (script, its arguments with {name} for a file above, what the error line names)
CASES = [
    ("dense_session_recall.py", [], "the following arguments are required: file"),
    ("dense_session_recall.py", ["{locomo}", "abc"], "argument K: 'abc'"),
    ("dense_session_recall.py", ["{locomo}", "0"], "argument K: '0'"),
    ("dense_session_recall.py", ["{missing}"], "{missing}: not found"),
    ("dense_session_recall.py", ["{invalid}"], "{invalid}: is not valid JSON"),
    ("dense_session_recall.py", ["{locomo}"], "{locomo}: question #0 is not LongMemEval's"),
    ("longmemeval_gen.py", ["{root}"], "{root} is a directory"),
    ("longmemeval_gen.py", ["{root}/no/such/set.json"], "the folder {root}/no/such does not"),
    ("longmemeval_gen.py", ["{root}/g.json", "--questions", "-3"], "--questions -3"),
    ("longmemeval_gen.py", ["{root}/g.json", "--sessions", "0"], "--sessions 0"),
    ("longmemeval_gen.py", ["{root}/g.json", "--turns", "3"], "--turns 3: give an even"),
    ("embed_floor.py", ["{missing}"], "{missing}: LongMemEval-format set not found"),
    ("embed_floor.py", ["{invalid}"], "{invalid}: is not valid JSON"),
    ("embed_floor.py", ["{not-utf8}"], "{not-utf8}: is not UTF-8 text"),
    ("embed_floor.py", ["{other-shape}"], "{other-shape}: question #0 is not LongMemEval"),
    ("bench_recall_scale.py", ["--cap", "mem0"], "--cap 'mem0': give PROVIDER=N"),
    ("bench_recall_scale.py", ["--cap", "mem0=abc"], "--cap 'mem0=abc': give PROVIDER=N"),
    ("bench_recall_scale.py", ["--own", "1,x"], "argument --own: '1,x'"),
    ("bench_prepared_recall.py", ["--sizes", "abc"], "argument --sizes: 'abc'"),
    ("bench_prepared_recall.py", ["--sizes", "30,,x"], "argument --sizes: '30,,x'"),
    ("bench_phases.py", ["--data", "{missing}"], "--data {missing}: not found"),
    ("bench_phases.py", ["--data", "{invalid}"], "--data {invalid}: is not valid JSON"),
    ("bench_phases.py", ["--data", "{locomo}", "--sample", "nosuch"],
     "--sample nosuch: conversations not in locomo.json"),
    ("bench_floor.py", ["--data", "{locomo}", "--sample", "nosuch"], "--sample nosuch"),
    ("bench_floor.py", ["--data", "{root}"], "--data {root} is a directory"),
    ("bench_lme_cost.py", ["{invalid}"], "{invalid}: is not valid JSON"),
    ("bench_lme_m.py", ["--turns", "3"], "--turns 3: give an even"),
    ("side_by_side.py", ["run", "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m",
                         "--llm-api-key-env", "sk-test-SECRET123456abcdef"],
     "--llm-api-key-env takes the NAME of an environment variable"),
]


@pytest.mark.parametrize(("script", "args", "said"), CASES,
                         ids=[f"{s}-{' '.join(a) or 'no-args'}" for s, a, _ in CASES])
def test_a_bad_argument_is_a_usage_error_naming_it(files, script, args, said):
    names = {k: str(v) for k, v in files.items()}
    done = run(str(BENCHMARKS / script), *(a.format(**names) for a in args))
    assert done.returncode == 2, (done.stdout[-500:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{script}: error: ") and said.format(**names) in last, last
    assert not (files["root"] / "g.json").exists()  # a refused set is not written
