"""What every ``nanobot-memory`` command shares: its consoles, the one-line error exit, and
the ``--config`` / ``--backend`` / ``--condition`` choice."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["EXIT_FAILURES", "EXIT_PENDING", "console", "err_console", "existing_file", "fail",
           "memory_config_source", "wide_console"]

# Exit codes every command that stores or measures shares (0 ok, 1 not done, 2 bad input)
EXIT_PENDING = 3  # a readiness wait timed out (results measured on pending memory)
EXIT_FAILURES = 4  # a record, retrieve, mode switch or reset failed, a gate leaked, or a
# provider asked for was skipped (its results are missing)

# No markup unless a call asks for it (``markup=True``, its dynamic parts escaped): text
# the package prints holds install commands (``pip install '...[graphiti]'``), ids and
# error bodies whose brackets rich would take for style tags and drop.
console = Console(markup=False)
err_console = Console(stderr=True, markup=False)


def wide_console() -> Console:
    """The console for a results table: a pipe or log file gets the full table instead
    of an 80-column squeeze."""
    return console if console.is_terminal else Console(width=200, markup=False)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one ``error:`` line naming the input and the fix; raise the returned Exit.
    Keys and URL passwords in it are redacted: an error often quotes the input, and the
    input can be a key (the line's prose is kept: it names settings such as api_key)."""
    from nanobot_memory_adapters.redaction import redact_shapes

    err_console.print(f"[red]error:[/red] {escape(redact_shapes(message))}", highlight=False,
                      soft_wrap=True, markup=True)
    return typer.Exit(code)


def existing_file(path: Path, option: str, fix: str, name: str | None = None) -> Path:
    """``path`` expanded, when it is a file; else one error line naming ``option``, saying
    whether nothing or a folder is there, and ``fix`` (for a folder: the file ``name`` in
    it). A missing or misspelt file must stop the command: the files beside it would be
    read (or written) in its place."""
    full = path.expanduser()
    if full.is_dir():
        hint = f"give the file in it, e.g. {path / name}" if name else fix
        raise fail(f"{option} {path}: is a directory, not a file; {hint}")
    if not full.is_file():
        raise fail(f"{option} {path}: no such file; {fix}")
    return full


def memory_config_source(
    config: Path | None, backend: str | None, condition: str | None
) -> dict[str, Any] | Path:
    """``--config`` or exactly one of ``--backend``/``--condition`` (built-in defaults)."""
    given = [x for x in (config, backend, condition) if x]
    if len(given) != 1:
        raise fail("give exactly one of --config PATH, --backend NAME, --condition NAME")
    if config:
        return config
    return {"backend": backend} if backend else {"condition": condition}


NanobotConfigOpt = Annotated[
    Path | None,
    typer.Option("--nanobot-config", help='nanobot\'s config.json: a provider\'s "llm": '
                 '"nanobot" uses the model, endpoint and key configured there.'),
]

