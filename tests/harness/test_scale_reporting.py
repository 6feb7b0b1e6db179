"""Scale reporting (issue 30): while a bench runs, an ETA and tokens ingested per second;
in results.json, tokens and tokens/s per provider under ``timing``, outside the metrics
hash (two runs give the same hash whatever their speed)."""

from __future__ import annotations

import io
import json

from rich.console import Console
from rich.progress import Progress

from nanobot_memory_adapters.harness import progress as progress_mod
from nanobot_memory_adapters.harness.metrics import metrics_sha256, strip_timing
from nanobot_memory_adapters.harness.timeline import BenchConfig, run_bench
from nanobot_memory_adapters.tokens import count_tokens
from tests.harness.conftest import synthetic_locomo


def _sent_tokens(providers_units: int = 1) -> int:
    """Tokens of every turn the synthetic file records (text plus image caption)."""
    from nanobot_memory_adapters.harness.datasets.locomo import _turn_content

    return providers_units * sum(
        count_tokens(_turn_content(t))
        for item in synthetic_locomo()
        for k, turns in item["conversation"].items()
        if k.startswith("session_") and isinstance(turns, list) for t in turns)


async def test_results_carry_tokens_per_second_outside_the_metrics_hash(locomo_file, tmp_path):
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        await run_bench(BenchConfig(dataset=locomo_file, out=out, budget_tokens=160,
                                    providers=["no_memory", "full_history"]))
        runs.append(json.loads((out / "results.json").read_text()))
    for results in runs:
        for m in results["providers"].values():
            timing = m["timing"]
            assert timing["ingest_tokens"] == _sent_tokens()
            assert timing["ingest_s"] > 0
            assert timing["ingest_tokens_per_s"] > 0
            assert abs(timing["ingest_tokens_per_s"]
                       - timing["ingest_tokens"] / timing["ingest_s"]) \
                <= 0.01 * timing["ingest_tokens_per_s"] + 1e-6
            assert "ingest_tokens" not in json.dumps(strip_timing(m))
    a, b = runs
    # the speeds differ from run to run; the hash does not
    assert a["metrics_sha256"] == b["metrics_sha256"] == metrics_sha256(a["providers"])


class _Recorder(progress_mod.UnitsProgress):
    def __init__(self) -> None:
        self.console_file = io.StringIO()
        bar = Progress(*progress_mod.units_bar().columns,
                       console=Console(file=self.console_file, width=120,
                                       force_terminal=False))
        super().__init__(bar)


async def test_the_bench_display_gets_each_units_tokens_and_shows_tok_per_s(
        locomo_file, tmp_path):
    display = _Recorder()
    await run_bench(BenchConfig(dataset=locomo_file, out=tmp_path / "run", budget_tokens=160,
                                providers=["no_memory"]), progress=display)
    assert display.tokens_task is not None
    assert sum(sum(v) for v in display.session_tokens.values()) == _sent_tokens()
    task = display.progress.tasks[display.tokens_task]
    assert task.completed == task.total == _sent_tokens()  # every session's tokens counted
    assert task.fields["note"].endswith(" tok/s")
    assert display.ingested == _sent_tokens()


def test_resumed_sessions_leave_the_total_not_the_rate():
    display = _Recorder()
    display.planned(1, 0)
    display.sizes({"p::c": [100, 200, 300]})
    display.started("p::c", 3)
    display.advanced("p::c", 2, "c resumed after s2")  # ingested by an earlier run
    display.advanced("p::c", 1, "c s3")
    task = display.progress.tasks[display.tokens_task]
    assert display.ingested == 300 and task.total == 300 and task.completed == 300
    with display.progress:
        display.progress.refresh()
    shown = display.console_file.getvalue()
    assert "tok/s" in shown and "eta" in shown


def test_the_tokens_row_of_a_ten_million_token_run_fits_80_columns():
    import io as _io

    f = _io.StringIO()
    bar = Progress(*progress_mod.units_bar().columns, console=Console(file=f, width=80))
    display = progress_mod.UnitsProgress(bar)
    display.planned(500, 0)
    display.sizes({"graphiti::e47be3e9_abs": [10_000_000]})
    display.started("graphiti::e47be3e9_abs", 1)
    bar.update(display.tokens_task, completed=1_234_567, note="123k tok/s")
    with bar:
        pass
    lines = f.getvalue().splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines)
    tokens = next(line for line in lines if line.startswith("tokens"))
    assert "1.2M/10.0M" in tokens and "123k tok/s" in tokens and "…" not in tokens
