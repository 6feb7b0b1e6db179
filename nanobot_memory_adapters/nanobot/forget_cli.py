"""``nanobot-memory forget``: /memory-forget from a terminal, for one user of the plugin.

Builds the provider ``memory.json`` selects (same data dir as the plugin), removes the
scope's rows from the shared outbox, deletes the scope through the provider's own
deletion — and in every other provider the outbox shows holding it — and checks that a
search returns nothing of it (``forget.forget_scope``). A scope nothing is stored for
(a typo) exits 1 and lists the scopes the outbox knows. Stop nanobot first when it
holds an embedded store (local Qdrant, Kuzu); the error then names the holder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from nanobot_memory_adapters.config import ConfigError, MemoryConfig
from nanobot_memory_adapters.console import console, existing_file, fail
from nanobot_memory_adapters.contract import AdapterError, MemoryScope
from nanobot_memory_adapters.diagnostics import mentions_lock_contention
from nanobot_memory_adapters.nanobot.forget import (
    ForgetOutcome,
    forget_scope,
    held_reply,
    provider_builder,
)
from nanobot_memory_adapters.nanobot.outbox_cli import open_outbox
from nanobot_memory_adapters.nanobot.settings import data_dir_for, load_settings
from nanobot_memory_adapters.nanobot.state import OUTBOX_FILE
from nanobot_memory_adapters.nanobot_llm import resolve_nanobot_llm
from nanobot_memory_adapters.scope import check_scope_id


def _default(memory: MemoryConfig, name: str, option: str) -> str:
    """A scope id whose template needs no per-chat values (``default``, ``nanobot``)."""
    try:
        return memory.scope.render(name, {})
    except ValueError:
        raise fail(f"scope.{name} depends on the chat; give it with {option}") from None


def forget(
    persona: Annotated[str, typer.Option(help="The user's scope id (as /memory-mode shows "
                                              "it: user=...).")],
    run: Annotated[str | None, typer.Option(help="Run id (default: memory.json's).")] = None,
    agent: Annotated[str | None, typer.Option(help="Agent id (default: memory.json's).")] = None,
    config: Annotated[Path, typer.Option("--config", "-c", help="nanobot's memory.json.")] =
    Path("~/.nanobot/memory.json"),
    nanobot_config: Annotated[Path | None, typer.Option(
        "--nanobot-config", help="nanobot's config.json, for a provider whose llm is "
        '"nanobot" (default: config.json beside memory.json).')] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do it (without: say what would go).")] =
    False,
) -> None:
    """Delete one user's memory in the configured provider (``/memory-forget`` in chat)."""
    from nanobot_memory_adapters.registry import load_provider

    if nanobot_config is not None:  # given, it must be there: never a silent default
        existing_file(nanobot_config, "--nanobot-config", "give nanobot's config.json, or "
                      "leave the option out to use the one beside memory.json", "config.json")
    settings = load_settings(config.expanduser())
    if not settings.exists:
        raise fail(f"--config {config}: no such file; give nanobot's memory.json")
    if settings.error or settings.memory is None:
        raise fail(f"--config {config}: {settings.error or 'no memory block'}")
    if settings.plugin.read_only:
        raise fail(f"--config {config}: memory is read-only; forgetting is a write, turn "
                   "read-only off first")
    memory = settings.memory
    ids = {"--persona": persona, "--run": run or _default(memory, "run_id", "--run"),
           "--agent": agent or _default(memory, "agent_id", "--agent")}
    for option, value in ids.items():
        try:
            check_scope_id(value, field=option)
        except ValueError as exc:
            raise fail(f"{option}: {exc}") from None
    scope = MemoryScope(run_id=ids["--run"], persona_id=persona, agent_id=ids["--agent"])
    name = memory.provider_name
    if not yes:
        console.print(f"would delete everything '{name}' holds for {scope.key} (agent "
                      f"{scope.agent_id}) and its queued outbox rows; add --yes to do it",
                      highlight=False)
        return

    nanobot_path = (nanobot_config or config.expanduser().parent / "config.json").expanduser()
    try:
        built = resolve_nanobot_llm(memory, nanobot_path if nanobot_path.is_file() else None)
    except ConfigError as exc:
        raise fail(str(exc)) from None

    data_dir = data_dir_for(settings)
    build = provider_builder(settings.raw, settings.path,
                             nanobot_path if nanobot_path.is_file() else None, exclude=name)

    outbox = open_outbox(data_dir / OUTBOX_FILE)  # a damaged file: one line, nothing done

    async def run_forget() -> ForgetOutcome:
        adapter = load_provider(built, data_dir=data_dir)
        try:
            return await forget_scope(adapter, outbox, scope, provider=name, build=build)
        finally:
            outbox.close()
            await adapter.aclose()

    try:
        outcome = asyncio.run(run_forget())
    except Exception as exc:
        if mentions_lock_contention(exc):
            raise fail(held_reply(name, data_dir, scope, in_chat=False)) from None
        if not isinstance(exc, AdapterError):
            raise
        raise fail(f"forget in '{name}' failed: {exc} (nothing more was deleted; stop "
                   "nanobot if it holds the store, then run this again)") from None
    active = outcome.active
    if active is not None and active.store_locked:
        raise fail(held_reply(name, data_dir, scope, in_chat=False))
    console.print(outcome.report(name, list_known=True).replace(
        "this chat's memory", f"{scope.key}'s memory"), highlight=False, soft_wrap=True)
    if not outcome.done:
        raise typer.Exit(1)
