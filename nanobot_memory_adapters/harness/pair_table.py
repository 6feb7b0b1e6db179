"""One terminal table for pairwise verdicts (LoCoMo questions, preference tests): a row per
pair of providers, a column per metric, each cell the difference, its interval and the
verdict, rendered by the caller."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table


def verdict_word(distinguishable: bool, difference: float) -> str:
    """``not dist.`` when the interval covers 0, else which side is ahead."""
    if not distinguishable:
        return "not dist."
    return "A > B" if difference > 0 else "B > A"


def pair_table(
    title: str,
    columns: Sequence[tuple[str, str]],
    cells: dict[tuple[str, str], dict[str, str]],
    caption: str,
) -> Table | None:
    """``cells[(a, b)][key]``, one row per pair in insertion order; ``columns`` are
    ``(key, label)``; a missing cell reads ``n/a``; None when there is no pair."""
    if not cells:
        return None
    table = Table(title=title, box=box.SIMPLE_HEAD)
    table.add_column("A / B", justify="left")
    for _, label in columns:
        table.add_column(label, justify="right")
    for (a, b), row in cells.items():
        table.add_row(f"A {a}\nB {b}", *(row.get(key, "n/a") for key, _ in columns))
    table.caption = caption
    return table
