"""The harness's commands, mounted on the ``nanobot-memory`` app: ``swap`` and ``bench``
(cli.py), ``demo`` (demo.py, which reuses the bench's runner) and ``preferences``. Kept
apart from cli.py so the demo can import the bench's runner without a cycle."""

from __future__ import annotations

import typer

from nanobot_memory_adapters.harness.cli import bench_command, swap_command
from nanobot_memory_adapters.harness.demo import demo_command
from nanobot_memory_adapters.harness.preferences.cli import prefs_app


def register(app: typer.Typer) -> None:
    app.command("swap")(swap_command)
    app.command("bench")(bench_command)
    app.command("demo")(demo_command)
    app.add_typer(prefs_app, name="preferences")
