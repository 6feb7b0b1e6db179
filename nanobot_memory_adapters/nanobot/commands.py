"""``/memory-mode`` and ``/memory-health``: handlers, router installation, /help specs."""

from __future__ import annotations

from typing import Any

from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.audience import Piece, release
from nanobot_memory_adapters.nanobot.people import operators_terminal
from nanobot_memory_adapters.nanobot.runtime import MemoryPlugin
from nanobot_memory_adapters.nanobot.switching import SwitchFailed
from nanobot_memory_adapters.redaction import redact_text

HELP_SPECS: list[dict[str, Any]] = [
    {
        "command": "/memory-mode",
        "title": "Memory mode",
        "description": "Show the memory provider, mode and scope; switch provider or "
        "read-only.",
        "icon": "brain",
        "arg_hint": "[read-only on|off | retry-failed | <provider> [--backfill]]",
        "accepts_args": True,
    },
    {
        "command": "/memory-forget",
        "title": "Forget me",
        "description": "Show what would be forgotten; '/memory-forget confirm' deletes this "
        "chat's memory in the active provider.",
        "icon": "trash",
        "arg_hint": "[confirm]",
        "accepts_args": True,
    },
    {
        "command": "/memory-health",
        "title": "Memory health",
        "description": "Memory backend health, capabilities, outbox depth, last error, "
        "latency.",
        "icon": "activity",
    },
]

USAGE = (
    "usage: /memory-mode                  show provider, mode and this chat's scope\n"
    "       /memory-mode read-only on|off stop/resume saving turns to memory\n"
    "       /memory-mode retry-failed     requeue turns the provider refused\n"
    "       /memory-mode <provider>       switch provider (saved to memory.json)\n"
    "       /memory-mode <provider> --backfill  switch and replay nanobot's sessions into it"
)
# Bringing forgotten memory back is the operator's, on the machine: in a gateway anyone
# who can type a command could bring back what another person asked to forget.
NO_FORGOTTEN_FROM_CHAT = (
    "--include-forgotten is not taken from chat (one person could bring back what another "
    "asked to forget); on the machine: nanobot-memory backfill --provider {name} "
    "--include-forgotten")

# nanobot's own memory keeps one MEMORY.md for every chat (Dream builds it from all of
# them, and it keeps running beside a provider): switched to from a chat, everyone's
# prompt would carry what the others said. The operator's, on nanobot's terminal.
NATIVE_NOT_FROM_CHAT = (
    "'{name}' is nanobot's own memory: one MEMORY.md, built from every chat, in every "
    "chat's prompt; it is not switched to from a chat. On the machine: nanobot agent -m "
    "\"/memory-mode {name}\" (it saves memory.json), then restart the gateway")


def _failed(command: str, exc: BaseException) -> list[Piece]:
    """A command that broke: its error text (which can quote a backend's body, or another
    user's turn) for the operator only."""
    logger.exception("{}: {} failed", seams.LOG_PREFIX, command)
    return [Piece.plain(f"{command} failed"),
            Piece.operator(str(exc), withheld="(the gateway's log has the details)")]


def make_installer(plugin: MemoryPlugin, tool_name: str | None = None) -> Any:
    """Registers both commands on a CommandRouter (and hides the carrier tool). Every
    reply goes through the audience gate (``audience.release``) for the chat it is sent
    to: replies are saved in the session, which everyone in that chat reads."""

    async def reply(ctx: Any, pieces: list[Piece]) -> Any:
        audience = await plugin.command_audience(ctx)
        return seams.outbound(ctx, redact_text(release(pieces, audience)))

    async def memory_mode(ctx: Any) -> Any:
        args = (ctx.args or "").strip()
        pieces: list[Piece] | None = None
        text = ""
        try:
            if not args:
                pieces = plugin.mode_report(ctx)
            else:
                words = args.split()
                read_only = words[0].lower() in ("read-only", "readonly", "ro")
                if read_only and len(words) == 2 and words[1].lower() in ("on", "off"):
                    text = await plugin.set_read_only(words[1].lower() == "on")
                elif read_only or words[0].startswith("-"):  # not a provider's name
                    text = USAGE
                elif len(words) == 1 and words[0].lower() in ("retry-failed", "retry"):
                    text = await plugin.requeue_failed()
                elif (words[0] and plugin.is_host_native(words[0])
                      and not operators_terminal(ctx.msg.channel, str(ctx.key),
                                                  ctx.msg.sender_id)):
                    text = NATIVE_NOT_FROM_CHAT.format(name=words[0])
                elif len(words) == 1:
                    text = await plugin.switch_provider(words[0])
                elif len(words) == 2 and words[1].lower() == "--backfill":
                    text = await plugin.switch_with_backfill(words[0])
                elif len(words) == 3 and [w.lower() for w in words[1:]] == [
                        "--backfill", "--include-forgotten"]:
                    text = NO_FORGOTTEN_FROM_CHAT.format(name=words[0])
                else:
                    text = USAGE
        except SwitchFailed as failed:
            pieces = failed.pieces()
        except Exception as exc:  # a command must answer, not crash the turn
            pieces = _failed("/memory-mode", exc)
        if pieces is None:
            pieces = [Piece.plain(text)]
        return await reply(ctx, pieces)

    async def memory_health(ctx: Any) -> Any:
        try:
            pieces = await plugin.health_report(ctx)
        except Exception as exc:
            pieces = _failed("/memory-health", exc)
        return await reply(ctx, pieces)

    async def memory_forget(ctx: Any) -> Any:
        args = (ctx.args or "").strip().lower()
        try:
            if not args:
                pieces = plugin.forget_preview(ctx)
            elif args == "confirm":
                pieces = await plugin.forget(ctx)
            else:
                pieces = [Piece.plain("usage: /memory-forget [confirm]")]
        except Exception as exc:
            pieces = _failed("/memory-forget", exc)
        return await reply(ctx, pieces)

    def install(router: Any) -> None:
        router.exact("/memory-mode", memory_mode)
        router.prefix("/memory-mode ", memory_mode)
        router.exact("/memory-health", memory_health)
        router.exact("/memory-forget", memory_forget)
        router.prefix("/memory-forget ", memory_forget)
        if tool_name is not None:
            # The tool is only the entry point's carrier; keep it out of the LLM's tool list.
            seams.hide_tool(plugin.loop, tool_name)

    return install
