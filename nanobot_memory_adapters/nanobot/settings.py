"""Where the plugin's config lives and what it holds.

nanobot 0.3.5 cannot hold the memory settings in ``config.json`` cleanly:

- an unknown top-level key (``"memory": {...}``) makes nanobot refuse to start
  ("Unknown setting" ConfigLoadError);
- ``agents.defaults.memory`` and ``tools.memory`` are silently dropped on load and erased
  by nanobot's own ``save_config`` (onboard, WebUI settings);
- ``channels`` keeps extra keys, but that namespace belongs to chat channels.

So the settings live in a sibling file, ``memory.json``, next to the active config file
(``~/.nanobot/memory.json`` by default; next to the file given with ``-c`` otherwise).
nanobot never reads or rewrites it. ``NANOBOT_MEMORY_CONFIG`` overrides the path.

File shape (a bare memory block without the ``"memory"`` wrapper is also accepted)::

    {
      "memory": {"backend": "mem0", "budget": {"max_tokens": 1500}, "mem0": {...}},
      "nanobot": {"recall_timeout_s": 5}
    }
"""

from __future__ import annotations

import json
import os
import re
import string
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from nanobot_memory_adapters.config import (
    ConfigError,
    MemoryConfig,
    validation_to_config_error,
)
from nanobot_memory_adapters.json_files import (
    SETTINGS_BYTES,
    JsonFileError,
    load_json_file,
    regular_file_problem,
)

FILE_NAME = "memory.json"
ENV_PATH = "NANOBOT_MEMORY_CONFIG"
DATA_DIR_NAME = "memory-adapters"
_TOP_LEVEL = ("memory", "nanobot")
# Fields the templates may use besides string request attributes.
TEMPLATE_FIELDS = ("channel", "chat_id", "sender_id", "session_key")


# Turns that skip recall (``trivial_prompts``): see ``turn_line.is_trivial``.
DEFAULT_TRIVIAL = [
    r"(ok|okay|k|kk|thanks|thank you|thx|ty|cool|great|nice|sure|yes|no|yep|nope|"
    r"got it|alright|fine|done|lol|hi|hello|bye)[.!?\s]*",
    # slash commands (nanobot's own run before recall; the rest land here), not paths
    r"/[A-Za-z][\w-]*(?:\s.*)?",
    r"[\W_]+",  # only punctuation or emoji
]

class PluginSettings(BaseModel):
    """The plugin's own knobs (how it drives the provider inside nanobot)."""

    model_config = ConfigDict(extra="forbid")

    recall_timeout_s: float = Field(
        default=5.0, gt=0, description="Longest a turn waits for retrieval before going on."
    )
    startup_timeout_s: float = Field(
        default=120.0, gt=0, description="Longest the first turn waits for the provider to "
        "start (e.g. loading a local embedding model)."
    )
    read_your_writes_s: float = Field(
        default=0.0, ge=0, description="Before retrieving, wait up to this long for the "
        "session's previous turns to reach the backend (0: never; the reply path then "
        "never waits on a write)."
    )
    prepare_recall: bool = Field(
        default=True, description="Once a turn's writes land, retrieve the session's next "
        "section in the background and serve it to the next turn while the store is "
        "unchanged; only for providers whose recall ignores the message and that report "
        "a store version (full_history)."
    )
    write_timeout_s: float = Field(
        default=600.0, gt=0, description="Per record_event call (in the background; an "
        "extracting backend on a small local model needs minutes for a cold prompt)."
    )
    exit_delivery_s: float = Field(
        default=3.0, ge=0, description="When nanobot closes (a one-shot `nanobot agent -m`, "
        "Ctrl-C), keep delivering queued turns this long; what is left stays in the outbox "
        "for the next process."
    )
    health_timeout_s: float = Field(
        default=10.0, gt=0, description="Longest a health check may run (in the background; "
        "its result is kept and shown with its age)."
    )
    session_end_timeout_s: float = Field(
        default=30.0, ge=0, description="Before nanobot archives or compacts a session "
        "(/new, /compact, idle compaction), wait up to this long for its queued turns to "
        "reach the backend, and as long again for a provider's session-end call (0: do "
        "not wait, and make no session-end call)."
    )
    health_live_s: float = Field(
        default=0.5, gt=0, description="How long /memory-health waits for a live health "
        "check before answering with the last known one (and what the plugin is doing)."
    )
    retry_initial_s: float = Field(default=1.0, gt=0, description="First outbox retry delay.")
    retry_max_s: float = Field(default=60.0, gt=0, description="Longest outbox retry delay.")
    outbox_poll_s: float = Field(
        default=2.0, gt=0, description="While this process holds the provider, how often it "
        "looks whether another process (a `nanobot agent -m` beside a gateway) queued turns "
        "it cannot deliver itself, and delivers them (an SQLite version read; no query when "
        "nothing changed).")
    turn_line: bool = Field(
        default=False, description="Add one line to each reply saying what memory did "
        "(provider, items shown, tokens, latency, or skipped/unavailable). Shown to the user "
        "only, never saved in the session or recorded."
    )
    turn_line_channels: list[str] = Field(
        default_factory=list, description="Channels that get the per-turn line (empty: all)."
    )
    trivial_prompts: list[str] = Field(
        default_factory=lambda: list(DEFAULT_TRIVIAL), description="Regular expressions "
        "(case-insensitive, matched against the whole message) for turns that skip recall: "
        "acknowledgements, slash commands. [] recalls on every turn."
    )

    @field_validator("trivial_prompts")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"trivial_prompts: {pattern!r} is not a regular expression "
                                 f"({exc}); fix or remove it") from None
        return patterns
    read_only: bool = Field(
        default=False, description="Start in read-only mode (/memory-mode read-only on|off)."
    )
    include_tool_messages: bool = Field(
        default=False, description="Also record tool results of a turn (default: user and "
        "assistant text only)."
    )
    install_skill: bool = Field(
        default=False, description="Keep the memory-context skill (the memory guide: how to "
        "read the memory section, the /memory-* commands) in the workspace's skills/, for "
        "the model to read when it needs it; the guidance in every prompt then names it. "
        "Off by default: nanobot re-reads every listed skill on each turn (about 10 ms a "
        "reply on 2 cores); the memory_guide tool offers the same text for ~84 tokens of "
        "schema per request."
    )
    guide_tool: bool = Field(
        default=True, description="Offer the model the read-only memory_guide tool (the "
        "memory guide, on demand); the guidance in every prompt names it unless the skill "
        "is installed."
    )
    search_tool: bool = Field(
        default=True, description="Offer the model the read-only memory_search tool."
    )
    keep_delivered: int = Field(
        default=10000, ge=0, description="Delivered outbox rows kept for idempotency."
    )
    group_recall: Literal["none", "group", "personal"] = Field(
        default="none",
        description="Memory in a shared (group) chat. none (default): no personal memory "
        "is recalled or searched there; each speaker's turns go to their own scope. group: "
        "the chat has its own scope — its turns are recorded there and recalled (and "
        "searched) from it, never from anyone's personal memory. personal: the speaker's "
        "own memory, in the system prompt of that turn only (never in the group's session "
        "history). See 'Users and scopes' in docs/nanobot-plugin.md.",
    )
    direct_chats: list[str] = Field(
        default_factory=list,
        description="Session keys (shell-style patterns, e.g. 'matrix:!abc*') the operator "
        "declares one person's: for channels that do not mark direct chats (Matrix). Any "
        "other chat is one person's only when a turn shows it; unknown means shared (no "
        "personal recall). Declare a chat only if nobody else can read it.",
    )
    context_placement: Literal["system_prompt", "user_message"] = Field(
        default="user_message",
        description="Where the <memory-context> goes. user_message (default): appended to "
        "the current user message as a nanobot runtime-context block, after everything "
        "stable (system text, tools, history), so an LLM server's prefix cache survives a "
        "new recall (llama.cpp: 12x fewer prompt tokens read, docs/nanobot-plugin.md); "
        "nanobot keeps the block in the session history, so earlier recalls stay in later "
        "prompts (cached, but they use the context window). system_prompt: in nanobot's "
        "memory slot (replacing MEMORY.md); every new recall invalidates the prefix from "
        "there on (tool definitions and history re-read each turn).",
    )


@dataclass
class LoadedSettings:
    path: Path
    exists: bool
    memory: MemoryConfig | None
    plugin: PluginSettings
    raw: dict[str, Any]
    error: str | None = None  # why the plugin is disabled, when it is

    @property
    def configured(self) -> bool:
        return self.exists and self.memory is not None and self.error is None


def settings_path(config_dir: Path) -> Path:
    env = os.environ.get(ENV_PATH)
    return Path(env).expanduser() if env else config_dir / FILE_NAME


def data_dir_for(settings: LoadedSettings) -> Path:
    """``memory.data_dir`` (relative to memory.json) or ``<config dir>/memory-adapters``."""
    base = settings.path.parent
    if settings.memory is not None and settings.memory.data_dir:
        path = Path(settings.memory.data_dir).expanduser()
        return path if path.is_absolute() else base / path
    return base / DATA_DIR_NAME


def split_file(data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(memory block, plugin block) from the file's JSON."""
    if not isinstance(data, dict):
        raise ConfigError("memory.json", "must be a JSON object", '{"memory": {...}}')
    if "memory" in data:
        unknown = [k for k in data if k not in _TOP_LEVEL]
        if unknown:
            raise ConfigError(
                f"memory.json: {unknown[0]}", "unknown top-level key",
                "allowed: " + ", ".join(_TOP_LEVEL),
            )
        memory, plugin = data["memory"], data.get("nanobot", {})
    else:
        memory = {k: v for k, v in data.items() if k != "nanobot"}
        plugin = data.get("nanobot", {})
    if not isinstance(memory, dict):
        raise ConfigError("memory", "must be a JSON object", '{"condition": "no_memory"}')
    if not isinstance(plugin, dict):
        raise ConfigError("nanobot", "must be a JSON object", '{"recall_timeout_s": 5}')
    return memory, plugin


def check_templates(memory: MemoryConfig) -> None:
    """Parse every scope template so a typo fails at load, not mid-conversation.

    Fields are ``channel``, ``chat_id``, ``sender_id``, ``session_key`` or the name of a
    string request attribute (``Nanobot.run(..., attributes={"persona": "p1"})``).
    """
    for name in ("run_id", "persona_id", "agent_id", "session_id"):
        template = getattr(memory.scope, name)
        try:
            parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template)
                      if f is not None]
        except ValueError as exc:
            raise ConfigError(f"memory.scope.{name}", f"bad template {template!r}: {exc}") from None
        for field, spec, conversion in parsed:
            if spec or conversion:
                # {sender_id:.3} keeps 3 characters, so everyone whose id starts alike
                # would share one memory; a conversion (!r, !s, !a) changes the id's text
                shown = "{" + field + (f"!{conversion}" if conversion else "") \
                    + (f":{spec}" if spec else "") + "}"
                raise ConfigError(
                    f"memory.scope.{name}",
                    f"template field {shown} has a format spec or conversion, which can "
                    "give two people the same id",
                    f"write {{{field}}} without ':' or '!'",
                )
            if not field.isidentifier():
                raise ConfigError(
                    f"memory.scope.{name}",
                    f"template field {{{field}}} is not a plain name",
                    "use " + ", ".join(f"{{{f}}}" for f in TEMPLATE_FIELDS)
                    + " or a request attribute name",
                )


def read_json(path: Path) -> Any:
    """The file's JSON, or ConfigError naming the file (not JSON, not UTF-8, unreadable:
    a directory, a FIFO or device, no permission, too large, nested too deep)."""
    try:
        return load_json_file(path, what="settings file", max_bytes=SETTINGS_BYTES)
    except JsonFileError as exc:
        raise ConfigError(exc.path, exc.problem, exc.fix) from None


def load_settings(path: Path) -> LoadedSettings:
    """Read and validate; never raises — a problem becomes ``error`` (plugin disabled)."""
    if not path.exists():
        return LoadedSettings(path, False, None, PluginSettings(), {})
    try:
        raw = read_json(path)
    except ConfigError as exc:
        return LoadedSettings(path, True, None, PluginSettings(), {}, error=str(exc))
    return parse_settings(path, raw)


def parse_settings(path: Path, raw: Any) -> LoadedSettings:
    """Validate the file's JSON; a problem becomes ``error``."""
    from nanobot_memory_adapters.registry import resolve_config

    keep = raw if isinstance(raw, dict) else {}
    try:
        memory_block, plugin_block = split_file(raw)
        try:
            plugin = PluginSettings.model_validate(plugin_block)
        except ValidationError as exc:
            raise validation_to_config_error(exc, prefix="nanobot") from None
        memory, _spec = resolve_config(memory_block)
        check_templates(memory)
    except ConfigError as exc:
        return LoadedSettings(path, True, None, PluginSettings(), keep, error=str(exc))
    return LoadedSettings(path, True, memory, plugin, keep)


def write_settings(path: Path, raw: dict[str, Any]) -> None:
    """Atomic write (temp file + replace) so a crash never leaves a truncated file. A
    symbolic link is written through (its target is replaced, the link stays); anything
    but a regular file (a FIFO, a device) is refused with OSError, never replaced."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists():
        problem = regular_file_problem(path)
        if problem is not None:
            raise OSError(f"{path} {problem}; memory.json must be a regular file")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".memory-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(raw, f, indent=2, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def with_provider(raw: dict[str, Any], name: str, kind: str) -> dict[str, Any]:
    """A copy of the file's JSON with ``name`` as the one active provider."""
    data = json.loads(json.dumps(raw)) if raw else {}
    wrapped = "memory" in data
    block = data["memory"] if wrapped else data
    if not isinstance(block, dict):
        return data  # not a memory block: left as written, ``split_file`` names it
    block.pop("backend", None)
    block.pop("condition", None)
    block[kind] = name
    return data if wrapped else block


def with_plugin_option(raw: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(raw)) if raw else {}
    if "memory" not in data:  # normalise to the wrapped form when adding plugin options
        plugin = data.pop("nanobot", {})
        data = {"memory": data, "nanobot": plugin}
    data.setdefault("nanobot", {})[key] = value
    return data
