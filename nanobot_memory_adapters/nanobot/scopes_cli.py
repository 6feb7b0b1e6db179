"""``nanobot-memory migrate-scopes``: re-file turns recorded under old scope names.

See ``migrate.py`` for what moves and why; docs/nanobot-plugin.md, "Users and scopes".
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.console import console, existing_file, fail
from nanobot_memory_adapters.contract import AdapterError
from nanobot_memory_adapters.nanobot.migrate import Migration, migrate
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.outbox_cli import ConfigOption, ProviderOption, _opened
from nanobot_memory_adapters.nanobot.settings import LoadedSettings, data_dir_for, load_settings
from nanobot_memory_adapters.nanobot_llm import resolve_nanobot_llm


def migrate_scopes(
    config: ConfigOption = Path("~/.nanobot/memory.json"),
    provider: ProviderOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count, queue nothing.")] = False,
    reset_shared: Annotated[bool, typer.Option(
        "--reset-shared", help="Empty each old scope that is still someone's and also holds "
        "other people's turns (the provider's own deletion), then queue its owner's turns "
        "into it again. Stop nanobot first when it holds an embedded store.")] = False,
    nanobot_config: Annotated[Path | None, typer.Option(
        "--nanobot-config", help="nanobot's config.json, for a provider whose llm is "
        '"nanobot" (default: config.json beside memory.json).')] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Queue the turns the outbox holds under an old scope name (before ids were made
    injective; a Telegram username) under the scope their sender has now."""
    if nanobot_config is not None:  # given, it must be there: never a silent default
        existing_file(nanobot_config, "--nanobot-config", "give nanobot's config.json, or "
                      "leave the option out to use the one beside memory.json", "config.json")
    settings = load_settings(config.expanduser())
    if settings.memory is None:
        raise fail(f"--config {config}: {settings.error or 'no memory block; fix it first'}")
    if reset_shared and not dry_run and settings.plugin.read_only:
        raise fail(f"--config {config}: memory is read-only; --reset-shared deletes, turn "
                   "read-only off first")
    with _opened(config, provider) as (outbox, name):
        if name != settings.memory.provider_name and reset_shared:
            raise fail(f"--reset-shared works on the configured provider "
                       f"'{settings.memory.provider_name}', not --provider {name}")
        try:
            result = asyncio.run(_run(outbox, settings, name, dry_run=dry_run,
                                      reset=reset_shared, nanobot_config=nanobot_config,
                                      config=config))
        except (AdapterError, ConfigError) as exc:
            raise fail(f"migrate-scopes in '{name}' failed: {exc} (stop nanobot if it holds "
                       "the store, then run this again; a second run adds nothing twice)"
                       ) from None
    data = {"provider": name, "dry_run": dry_run, "moved": result.moved,
            "already_moved": result.already, "unchanged": result.unchanged,
            "not_a_person": result.no_person, "unreadable": result.unreadable,
            "forgotten": result.forgotten,
            "old_scopes": {old: sorted(new) for old, new in sorted(result.old_scopes.items())},
            "shared_old_scopes": {old: len(ev) for old, ev in sorted(result.shared.items())},
            "reset": result.reset, "resumed": result.resumed, "refiled": result.refiled}
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    verb = "would queue" if dry_run else "queued"
    console.print(f"'{name}': {verb} {result.moved} turn(s) under their new scope "
                  f"({result.already} moved before, {result.unchanged} already in place, "
                  f"{result.no_person} cron/system turn(s) left where they are, "
                  f"{result.forgotten} of scopes forgotten since: not filed back)",
                  highlight=False, soft_wrap=True)
    for old, new in sorted(result.old_scopes.items()):
        console.print(f"  {old} -> {', '.join(sorted(new))}", highlight=False,
                      soft_wrap=True)
    for old in result.reset:
        console.print(f"  {old}: emptied, its owner's {len(result.shared[old])} turn(s) "
                      "queued into it again", highlight=False, soft_wrap=True)
    for old in result.resumed:
        console.print(f"  {old}: emptied by an earlier run that stopped part-way; its "
                      f"owner's {len(result.shared[old])} missing turn(s) {verb} into it",
                      highlight=False, soft_wrap=True)
    for old, owners in sorted(result.shared.items()):
        if old not in result.reset and old not in result.resumed:
            console.print(f"  {old} is still a person's scope and holds other people's "
                          f"turns; run with --reset-shared to empty it and re-file its "
                          f"owner's {len(owners)} turn(s)", highlight=False, soft_wrap=True)
    if result.old_scopes and not dry_run:
        console.print("nanobot delivers the queued turns at its next start (a running "
                      "gateway: at its next turn). The old scopes still hold them; delete "
                      "one with: nanobot-memory forget --persona <old persona> --yes",
                      highlight=False, soft_wrap=True)


async def _run(outbox: Outbox, settings: LoadedSettings, name: str, *, dry_run: bool,
               reset: bool, nanobot_config: Path | None, config: Path) -> Migration:
    from nanobot_memory_adapters.registry import load_provider

    assert settings.memory is not None
    if not reset or dry_run:
        return await migrate(outbox, settings.memory, name, dry_run=dry_run)
    path = (nanobot_config or config.expanduser().parent / "config.json").expanduser()
    built = resolve_nanobot_llm(settings.memory, path if path.is_file() else None)
    adapter = await asyncio.to_thread(load_provider, built, data_dir=data_dir_for(settings))
    try:
        return await migrate(outbox, settings.memory, name, adapter=adapter)
    finally:
        await adapter.aclose()
