"""The conversation a benchmark script measures, or one usage error naming the option:
a typo in ``--data`` or ``--sample`` is the user's, not a traceback."""

from __future__ import annotations

import argparse
from pathlib import Path

from nanobot_memory_adapters.harness.datasets.locomo import (
    Conversation,
    DatasetError,
    load_locomo,
)


def load_conversation(task: str, data: Path, sample: str | None) -> Conversation:
    """The LoCoMo conversation or LongMemEval haystack ``sample`` (default: the first)."""
    if task == "longmemeval":
        from nanobot_memory_adapters.harness.datasets.longmemeval import load_longmemeval

        return load_longmemeval(data, [sample] if sample else None)[0]
    return load_locomo(data, [sample or "conv-26"])[0]


def load_or_refuse(parser: argparse.ArgumentParser, task: str, data: Path,
                   sample: str | None) -> Conversation:
    """``load_conversation``, or ``parser.error`` naming --data or --sample."""
    if data.is_dir():
        parser.error(f"--data {data} is a directory; give the JSON file in it")
    if not data.is_file():
        layout = "LongMemEval" if task == "longmemeval" else "LoCoMo"
        parser.error(f"--data {data}: not found; give a {layout} JSON file")
    try:
        return load_conversation(task, data, sample)
    except DatasetError as exc:
        unknown = str(exc).startswith(("conversations not in", "questions not in"))
        parser.error(f"--sample {sample}: {exc}" if unknown else f"--data {exc}")
