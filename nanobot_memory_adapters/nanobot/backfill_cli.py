"""``nanobot-memory backfill``: replay nanobot's session files into a provider, from a
terminal (``/memory-mode NAME --backfill`` in chat).

Reads the sessions of the nanobot config given (nanobot's own ``SessionManager``),
queues their turns in the plugin's outbox beside ``memory.json`` and delivers them with
a progress bar, through bulk ingest where the provider has it. Interrupted, the same
command resumes; run twice, the second adds nothing. Stop nanobot first when the
provider keeps an embedded store (local Qdrant, Kuzu) that nanobot holds open.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress

from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.console import EXIT_PENDING, console, existing_file, fail
from nanobot_memory_adapters.contract import AdapterError
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import backfill as backfill_steps
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.outbox_cli import known_provider, open_outbox
from nanobot_memory_adapters.nanobot.settings import (
    LoadedSettings,
    data_dir_for,
    load_settings,
    parse_settings,
    with_provider,
)
from nanobot_memory_adapters.nanobot.state import OUTBOX_FILE
from nanobot_memory_adapters.nanobot_llm import load_nanobot_config, resolve_nanobot_llm
from nanobot_memory_adapters.redaction import redact_text


def _settings_for(memory_json: Path, provider: str | None) -> LoadedSettings:
    settings = load_settings(memory_json)
    if not settings.exists:
        raise fail(f"--config {memory_json}: no such file; give the plugin's memory.json")
    if settings.error and not settings.raw:  # unreadable: its data_dir is unknown too
        raise fail(f"--config {memory_json}: {settings.error}")
    if provider is not None:
        settings = parse_settings(memory_json, with_provider(settings.raw, provider,
                                                             known_provider(provider).kind))
    if settings.error or settings.memory is None:
        raise fail(f"--config {memory_json}: {settings.error or 'no memory block'}")
    if settings.plugin.read_only:
        raise fail(f"--config {memory_json}: memory is read-only; a backfill writes, turn "
                   "read-only off first")
    return settings


def backfill(
    nanobot_config: Annotated[Path, typer.Option(
        "--nanobot-config", help="nanobot's config.json (its sessions are read).")] =
    Path("~/.nanobot/config.json"),
    provider: Annotated[str | None, typer.Option(
        help="Provider to fill (default: the one memory.json selects).")] = None,
    since: Annotated[str | None, typer.Option(
        help="Only turns at or after this date/time (ISO, e.g. 2026-01-31).")] = None,
    session: Annotated[str | None, typer.Option(
        help="Only this nanobot session (its key, e.g. telegram:12345).")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="The plugin's memory.json (default: beside the nanobot "
        "config).")] = None,
    wait_s: Annotated[float, typer.Option(
        help="How long to wait for the provider's readiness at the end.")] = 120.0,
    batch: Annotated[int, typer.Option(min=1, max=1000,
                                       help="Turns per bulk write.")] = backfill_steps.BATCH,
    include_forgotten: Annotated[bool, typer.Option(
        "--include-forgotten", help="Also replay the turns of scopes that were forgotten "
        "(/memory-forget, `nanobot-memory forget`); skipped by default.")] = False,
) -> None:
    """Replay nanobot's sessions, in order and with their own times, into a provider."""
    nanobot_path = existing_file(nanobot_config, "--nanobot-config",
                                 "give nanobot's config.json", "config.json")
    if not (math.isfinite(wait_s) and wait_s >= 0):  # a negative or nan wait never ends well
        raise fail(f"--wait-s {wait_s:g}: give a number of seconds, 0 or more (e.g. 120)")
    start: datetime | None = None
    if since is not None:
        try:
            start = datetime.fromisoformat(since)
        except ValueError:
            raise fail(f"--since {since!r}: not an ISO date; e.g. 2026-01-31 or "
                       "2026-01-31T18:00") from None
        start = start if start.tzinfo else start.replace(tzinfo=UTC)
    settings = _settings_for((config or nanobot_path.parent / "memory.json").expanduser(),
                             provider)
    memory = settings.memory
    assert memory is not None
    name = memory.provider_name
    try:
        load_nanobot_config(nanobot_path)  # one line naming what is wrong in it
    except ConfigError as exc:
        raise fail(str(exc)) from None
    try:
        manager = seams.session_manager_for(nanobot_path)
    except Exception as exc:
        raise fail(f"--nanobot-config {nanobot_config}: nanobot cannot load it ({exc})") from None
    if session is not None and not any(s["key"] == session for s in manager.list_sessions()):
        raise fail(f"--session {session}: nanobot has no such session; see `nanobot` "
                   "sessions in its WebUI or the sessions/ folder")
    outbox = open_outbox(data_dir_for(settings) / OUTBOX_FILE)
    try:
        plan = backfill_steps.plan_backfill(manager, memory, outbox, name, since=start,
                                            session=session,
                                            include_forgotten=include_forgotten)
        queued = backfill_steps.enqueue(outbox, name, plan,
                                        include_forgotten=include_forgotten)
        pending = outbox.stats(name).pending
        console.print(f"{plan.turns} turn(s) in {plan.sessions} session(s): {queued} newly "
                      f"queued, {plan.already_delivered} already delivered, "
                      f"{plan.already_queued} already queued, {pending} pending for "
                      f"'{name}'", highlight=False, soft_wrap=True)
        for note in plan.notes():
            console.print(f"note: {note}", highlight=False, soft_wrap=True)
        delivered, failed, readiness = asyncio.run(_deliver(settings, outbox, name, pending,
                                                            wait_s, batch, nanobot_path))
        left = outbox.stats(name).pending
    finally:
        outbox.close()
    console.print(f"delivered {delivered}, failed {failed}, still pending {left}",
                  highlight=False)
    for line in readiness:
        console.print(line, highlight=False)
    if failed or left:
        raise typer.Exit(1)
    if not backfill_steps.all_ready(readiness):  # stored, but not all readable yet
        raise typer.Exit(EXIT_PENDING)


async def _deliver(settings: LoadedSettings, outbox: Outbox, name: str, pending: int,
                   wait_s: float, batch: int, nanobot_path: Path) -> tuple[int, int, list[str]]:
    from nanobot_memory_adapters.registry import load_provider

    assert settings.memory is not None
    try:
        memory = resolve_nanobot_llm(settings.memory, nanobot_path)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if not pending:
        return 0, 0, []
    async with outbox.drain_lock_waiting(wait_s=5.0) as mine:
        if not mine:
            # A running nanobot is delivering this outbox: the queued turns are its to
            # deliver (two drainers could store a row twice).
            return 0, 0, ["another process (a running nanobot) is delivering this outbox; "
                          "it delivers the queued turns when its provider is "
                          f"'{name}' (or run this again once it has stopped)"]
        adapter = load_provider(memory, data_dir=data_dir_for(settings))
        try:
            try:
                with Progress(console=console, transient=True) as bar:
                    task = bar.add_task(f"backfill into {name}", total=pending or None)
                    delivered, failed, scopes = await backfill_steps.deliver(
                        adapter, outbox, name, batch=batch,
                        progress=lambda n: bar.update(task, completed=n))
            except AdapterError as exc:
                raise fail(f"backfill into '{name}' stopped: {exc} (the rest stays queued; "
                           "run the same command again)", 1) from None
            # every turn is delivered: a failed wait is the readiness line's, not a stop
            readiness = (await backfill_steps.wait_ready(adapter, scopes, wait_s)
                         if scopes else [])
            return delivered, failed, readiness
        finally:
            try:
                await adapter.aclose()
            except Exception as exc:  # never in place of the outcome (or its exit code)
                logger.warning("closing '{}' failed: {}", name, redact_text(str(exc)))
