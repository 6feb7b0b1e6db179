"""``nanobot-memory outbox status | requeue``: the plugin's durable outbox from a terminal.

The outbox lives beside nanobot's ``memory.json`` (``<data_dir>/nanobot-outbox.sqlite3``);
every process on that config directory shares it. ``requeue`` puts a provider's failed
rows back to pending: the next nanobot process (or turn) that can open the store delivers
them. The same as ``/memory-mode retry-failed`` in chat.

``status`` only reads (SQLite opened read-only; the file stays byte-identical). A file
that cannot be read or written (garbage, truncated, a directory, a read-only or full
disk, another process's write lock) gets one line naming it and the remedy (the same
line ``/memory-health`` and ``/memory-mode retry-failed`` give) and exit code 1.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from nanobot_memory_adapters.console import console, fail
from nanobot_memory_adapters.nanobot.outbox import OUTBOX_ERRORS, Outbox, describe_failure
from nanobot_memory_adapters.nanobot.settings import data_dir_for, load_settings
from nanobot_memory_adapters.nanobot.state import OUTBOX_FILE

outbox_app = typer.Typer(no_args_is_help=True, add_completion=False)

ConfigOption = Annotated[
    Path,
    typer.Option("--config", "-c", help="nanobot's memory.json (default: ~/.nanobot/memory.json)."),
]
ProviderOption = Annotated[
    str | None, typer.Option(help="Provider whose rows to act on (default: the configured one).")
]


def known_provider(provider: str) -> Any:
    """The registered provider ``--provider`` names (its spec); else one line listing the
    names: an unknown one has no rows, and would read as an empty, healthy outbox."""
    from nanobot_memory_adapters.registry import available_providers

    specs = available_providers()
    if provider not in specs:
        raise fail(f"--provider {provider}: unknown; available: {', '.join(sorted(specs))}")
    return specs[provider]


def _provider_with_rows(outbox: Outbox, provider: str) -> None:
    """``--provider`` names a registered provider or one with rows here: a provider whose
    plugin was uninstalled keeps its turns, and they can still be counted or requeued."""
    from nanobot_memory_adapters.registry import available_providers

    specs = available_providers()
    if provider in specs:
        return
    held = outbox.providers()
    if provider not in held:
        names = sorted(set(specs) | held)
        raise fail(f"--provider {provider}: unknown and no rows here; available: "
                   f"{', '.join(names)}")


def open_outbox(path: Path, *, read_only: bool = False) -> Outbox:
    """The outbox at ``path``, opened now; a file that cannot be used ends the command
    with ``describe_failure``'s line (the file and the remedy) and exit code 1."""
    outbox = Outbox(path, read_only=read_only)
    try:
        outbox.check()
    except OUTBOX_ERRORS as exc:
        with contextlib.suppress(*OUTBOX_ERRORS):
            outbox.close()
        raise fail(describe_failure(path, exc), code=1) from None
    return outbox


@contextlib.contextmanager
def _opened(config: Path, provider: str | None, *, read_only: bool = False
            ) -> Iterator[tuple[Outbox, str]]:
    """The outbox beside ``config`` and the provider whose rows to act on; closed after.
    A failure to read or write the file ends the command with one line and exit code 1."""
    settings = load_settings(config.expanduser())
    if not settings.exists:
        raise fail(f"--config {config}: no such file; give nanobot's memory.json")
    if settings.error and provider is None:
        raise fail(f"--config {config}: {settings.error}; or name the rows with --provider")
    name = provider or (settings.memory.provider_name if settings.memory else None)
    if not name:
        raise fail(f"--config {config} selects no provider; name one with --provider")
    path = data_dir_for(settings) / OUTBOX_FILE
    if not path.exists():
        raise fail(f"no outbox at {path}: the plugin has not run with this memory.json yet")
    outbox = Outbox(path, read_only=read_only)
    try:
        if provider is not None:
            _provider_with_rows(outbox, provider)
        yield outbox, name
    except OUTBOX_ERRORS as exc:
        raise fail(describe_failure(path, exc), code=1) from None
    finally:
        with contextlib.suppress(*OUTBOX_ERRORS):
            outbox.close()


@outbox_app.command()
def status(
    config: ConfigOption = Path("~/.nanobot/memory.json"),
    provider: ProviderOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Pending, failed and delivered turns for a provider, and the last failed row's error."""
    with _opened(config, provider, read_only=True) as (outbox, name):
        stats = outbox.stats(name)
    data = {"provider": name, "pending": stats.pending, "failed": stats.failed,
            "delivered": stats.delivered, "pending_other_providers":
            stats.pending_other_providers, "last_failed_error": stats.last_failed_error}
    if as_json:
        print(json.dumps(data, indent=2))
        return
    console.print(f"outbox for '{name}': {stats.pending} pending, {stats.failed} failed, "
                  f"{stats.delivered} delivered", highlight=False)
    if stats.failed:
        console.print(f"last failed row's error: {stats.last_failed_error or 'not recorded'}",
                      highlight=False, soft_wrap=True)


@outbox_app.command()
def requeue(
    config: ConfigOption = Path("~/.nanobot/memory.json"),
    provider: ProviderOption = None,
) -> None:
    """Put a provider's failed turns back to pending; the next nanobot turn delivers them."""
    with _opened(config, provider) as (outbox, name):
        count = outbox.requeue_failed(name, wait_s=5.0)
    console.print(f"requeued {count} failed turn(s) for '{name}'"
                  + ("; the next nanobot process that can open the store delivers them"
                     if count else ""), highlight=False)
