"""``nanobot-memory status | off | on``: which memory nanobot uses, and a switch for it.

Like Hermes Agent's ``hermes memory status`` / ``off``: ``status`` reads memory.json (the
one next to nanobot's config) and the outbox beside it without changing either; ``off``
sets ``"enabled": false`` and keeps everything else, so ``on`` (or ``setup``) undoes it.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.console import console, fail
from nanobot_memory_adapters.nanobot.settings import (
    FILE_NAME,
    LoadedSettings,
    data_dir_for,
    load_settings,
    read_json,
    write_settings,
)
from nanobot_memory_adapters.nanobot.setup_cli import (
    DEFAULT_NANOBOT_CONFIG,
    NanobotConfig,
    checked,
    memory_json_for,
    nanobot_config_file,
)
from nanobot_memory_adapters.nanobot.state import OUTBOX_FILE
from nanobot_memory_adapters.nanobot_llm import NANOBOT
from nanobot_memory_adapters.redaction import redact


def _describe_llm(block: dict[str, Any]) -> str | None:
    llm = block.get("llm")
    if llm is None:
        return None
    if llm == NANOBOT or (isinstance(llm, dict) and llm.get("from") == NANOBOT):
        return "nanobot's own model"
    if isinstance(llm, dict):
        return f"{llm.get('model')} at {llm.get('base_url')}"
    return str(llm)[:80]


def _outbox_counts(settings: LoadedSettings, provider: str) -> dict[str, Any] | None:
    """The outbox's counts; ``{"error": <describe_failure's line>}`` when it cannot be read."""
    from nanobot_memory_adapters.nanobot.outbox import OUTBOX_ERRORS, Outbox, describe_failure

    outbox_path = data_dir_for(settings) / OUTBOX_FILE
    if not outbox_path.exists():  # never create one just to count it
        return None
    outbox = Outbox(outbox_path)
    try:
        stats = outbox.stats(provider)
    except OUTBOX_ERRORS as exc:
        return {"error": describe_failure(outbox_path, exc)}
    finally:
        with contextlib.suppress(*OUTBOX_ERRORS):
            outbox.close()
    return {"pending": stats.pending, "failed": stats.failed, "delivered": stats.delivered,
            "last_error": stats.last_error}


def _given_config(nanobot_config: Path) -> Path:
    """The nanobot config whose memory.json these commands read and write: one given that
    is missing or a folder is refused (a typo must not select the memory.json beside it);
    the default path is used as it is (memory.json may be set before nanobot onboards)."""
    if nanobot_config == DEFAULT_NANOBOT_CONFIG and not nanobot_config.expanduser().exists():
        return nanobot_config.expanduser()
    return nanobot_config_file(nanobot_config)


def status(
    nanobot_config: NanobotConfig = DEFAULT_NANOBOT_CONFIG,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Which memory nanobot uses: the provider, memory.json's path, on/off, the outbox."""
    path = memory_json_for(_given_config(nanobot_config))
    settings = load_settings(path)
    data: dict[str, Any] = {"memory_json": str(path), "exists": settings.exists}
    if not settings.exists:
        data.update(state="nanobot's own memory (no memory.json)", provider=None)
    elif settings.error or settings.memory is None:
        data.update(state="disabled (memory.json is broken)", provider=None,
                    error=settings.error)
    else:
        memory = settings.memory
        name = memory.provider_name
        passive = name == "rolling_summary"
        data.update(
            provider=name, kind="backend" if memory.backend else "condition",
            enabled=memory.enabled,
            state=("off — nanobot's own memory" if not memory.enabled
                   else "on — nanobot's own memory (rolling_summary)" if passive else "on"),
            llm=_describe_llm(memory.provider_block()), data_dir=str(data_dir_for(settings)),
            outbox=_outbox_counts(settings, name),
        )
    data = redact(data)  # an llm URL's password or ?api_key=, a key in an error line
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        table = Table(title="nanobot memory", show_header=False)
        for key, value in data.items():
            if isinstance(value, dict) and "error" in value:
                value = "unreadable (the error below)"
            if value is not None and key != "exists":
                table.add_row(key, value if isinstance(value, str) else json.dumps(value))
        console.print(table)
        if settings.exists and settings.memory is not None and settings.memory.enabled:
            config = shlex.quote(str(nanobot_config))  # a path with a space stays one word
            console.print(f"live check: nanobot agent -c {config} -m /memory-health",
                          highlight=False)
        elif not settings.exists:
            console.print("choose one: nanobot-memory setup", highlight=False)
    if settings.exists and settings.error:
        raise typer.Exit(1)
    outbox = data.get("outbox")
    if isinstance(outbox, dict) and outbox.get("error"):
        raise fail(str(outbox["error"]), code=1)


def _switch(nanobot_config: Path, enabled: bool) -> None:
    config = _given_config(nanobot_config)  # never the memory.json beside a typo
    path = memory_json_for(config)
    if not path.exists():
        if not enabled:
            console.print(f"no {FILE_NAME} at {path}: nanobot already uses its own memory",
                          highlight=False)
            return
        raise fail(f"{path}: no such file, nothing to turn on — run 'nanobot-memory setup'")
    try:
        raw = read_json(path)
    except ConfigError as exc:
        raise fail(f"{exc}; or move it aside and run 'nanobot-memory setup'") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("memory", raw), dict):
        raise fail(f"{path}: not a memory config object; run 'nanobot-memory setup'")
    block = raw.get("memory", raw)
    block["enabled"] = enabled
    if enabled:  # the plugin's own checks at start, so 'on' never turns on a broken file
        checked(path, raw, config, expand=False,
                 where=f" (in {path}); fix it or run 'nanobot-memory setup'")
    write_settings(path, raw)
    if enabled:
        console.print(f"memory on ({block.get('backend') or block.get('condition')}) in {path}; "
                      "nanobot uses it from its next start", highlight=False)
    else:
        console.print(f"memory off in {path}: nanobot uses its own memory from its next start "
                      "(everything else in the file is kept; 'nanobot-memory on' undoes it)",
                      highlight=False)


def off(nanobot_config: NanobotConfig = DEFAULT_NANOBOT_CONFIG) -> None:
    """Turn the provider off ("enabled": false); the rest of memory.json is kept."""
    _switch(nanobot_config, False)


def on(nanobot_config: NanobotConfig = DEFAULT_NANOBOT_CONFIG) -> None:
    """Turn the configured provider back on ("enabled": true)."""
    _switch(nanobot_config, True)
