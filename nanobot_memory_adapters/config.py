"""The memory config: exactly one provider (``backend`` XOR ``condition``) plus its block.

Every mistake becomes a ``ConfigError`` naming the key and the fix, in one line.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from nanobot_memory_adapters.contract import (
    MAX_BUDGET_ITEMS,
    MAX_BUDGET_TOKENS,
    ContextBudget,
    budget_problem,
)
from nanobot_memory_adapters.json_files import SETTINGS_BYTES, JsonFileError, load_json_file
from nanobot_memory_adapters.redaction import looks_like_a_key, names_a_secret, redact_text
from nanobot_memory_adapters.scope import ScopeTemplates


class ConfigError(ValueError):
    """A config problem, with the offending key and how to fix it."""

    def __init__(self, key: str, problem: str, fix: str | None = None) -> None:
        self.key = key
        self.problem = problem
        self.fix = fix
        # "api_key: refers to ..." reads to every redactor as a credential and its value;
        # "api_key (secret): ..." keeps the explanation whole through one
        named = f"{key} (secret)" if names_a_secret(key) else key
        super().__init__(f"{named}: {problem}" + (f" — {fix}" if fix else ""))


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens: StrictInt = Field(default=2000, gt=0, le=MAX_BUDGET_TOKENS)
    min_tokens: StrictInt | None = Field(default=None, ge=0, le=MAX_BUDGET_TOKENS)
    max_items: StrictInt | None = Field(default=None, gt=0, le=MAX_BUDGET_ITEMS)

    @model_validator(mode="after")
    def _min_below_max(self) -> BudgetConfig:
        # checked when the config is read, not at the first recall of a chat
        problem = budget_problem(self.max_tokens, self.min_tokens)
        if problem:
            raise ValueError(problem)
        return self

    def to_budget(self) -> ContextBudget:
        return ContextBudget(
            max_tokens=self.max_tokens, min_tokens=self.min_tokens, max_items=self.max_items
        )


class MemoryConfig(BaseModel):
    """Top-level memory settings; provider blocks sit beside them under their own names."""

    model_config = ConfigDict(extra="allow")

    enabled: bool = True
    backend: str | None = None
    condition: str | None = None
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    scope: ScopeTemplates = Field(default_factory=ScopeTemplates)
    data_dir: str | None = Field(
        default=None, description="Where embedded stores, the outbox and traces live."
    )
    trace_file: str | None = None
    readiness_timeout_s: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> MemoryConfig:
        if self.backend and self.condition:
            raise ValueError(
                "both 'backend' and 'condition' are set; keep exactly one of them"
            )
        if not self.backend and not self.condition:
            raise ValueError("neither 'backend' nor 'condition' is set; set exactly one")
        return self

    @property
    def provider_name(self) -> str:
        return (self.backend or self.condition) or ""

    def provider_block(self) -> dict[str, Any]:
        extra = self.model_extra or {}
        block = extra.get(self.provider_name, {})
        if not isinstance(block, dict):
            raise ConfigError(
                f"memory.{self.provider_name}", "must be an object", "use {\"key\": value, ...}"
            )
        return block

    def resolved_data_dir(self) -> Path:
        if self.data_dir:
            return Path(self.data_dir).expanduser()
        env = os.environ.get("NANOBOT_MEMORY_HOME")
        return Path(env).expanduser() if env else Path.home() / ".nanobot" / "memory-adapters"


def read_json_file(path: Path, *, what: str, fix: str) -> Any:
    """The JSON of a file the user named, or a ConfigError that says what is wrong with it
    (missing, a directory, a FIFO or device, too large, unreadable, not UTF-8, not JSON,
    nested too deep: ``json_files``)."""
    try:
        return load_json_file(path, what=what, fix=fix, max_bytes=SETTINGS_BYTES)
    except JsonFileError as exc:
        raise ConfigError(exc.path, exc.problem, exc.fix) from None


def read_config_source(source: dict[str, Any] | str | Path) -> dict[str, Any]:
    """A memory config from a dict or a JSON file; a file may wrap it in ``{"memory": ...}``."""
    if isinstance(source, dict):
        data = source
    else:
        path = Path(source).expanduser()
        data = read_json_file(path, what="JSON config file", fix="fix the JSON")
    if isinstance(data, dict) and isinstance(data.get("memory"), dict):
        data = data["memory"]
    if not isinstance(data, dict):
        raise ConfigError("memory", "must be a JSON object", 'e.g. {"condition": "no_memory"}')
    return data


def parse_memory_config(data: dict[str, Any], known_providers: list[str]) -> MemoryConfig:
    """Validate ``data``; unknown keys and provider names are reported with suggestions."""
    try:
        config = MemoryConfig.model_validate(data)
    except ValidationError as exc:
        raise validation_to_config_error(exc, prefix="memory") from None
    for key in config.model_extra or {}:
        if key not in known_providers:
            raise ConfigError(
                f"memory.{key}",
                "unknown setting",
                _suggest(key, [*MemoryConfig.model_fields, *known_providers]),
            )
    return config


def validation_to_config_error(exc: ValidationError, prefix: str) -> ConfigError:
    errors = exc.errors()  # a misspelt key explains a 'field required' beside it: name it
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in error["loc"])
    key = f"{prefix}.{loc}" if loc else prefix
    msg = error["msg"].removeprefix("Value error, ")
    fix = None
    if error["type"] == "extra_forbidden":
        msg, fix = "unknown setting", "remove it or check the spelling"
    elif error["type"] in ("greater_than", "greater_than_equal"):
        fix = "use a positive number"
    elif error["type"] in ("less_than", "less_than_equal"):
        fix = "use a smaller number"
    elif error["type"] == "int_type":  # the value quoted, unless it may be a key
        msg = f"must be a whole number, not {redact_text(repr(error.get('input')))}"
        fix = "write it without quotes, e.g. 2000"
    return ConfigError(key, msg, fix)


def url_problem(value: str) -> str | None:
    """Why ``value`` is not an endpoint URL (``http(s)://host[:port][/path]``), or None.
    Never quotes the value: a pasted key must not reach the error line."""
    if looks_like_a_key(value):
        return "holds what looks like an API key"
    if any(ch.isspace() or ord(ch) < 32 for ch in value):
        return "contains spaces or control characters"
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https"):
        return "is not an http:// or https:// URL"
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError:
        return "has a port that is not a number from 1 to 65535"
    if not parts.hostname:
        return "has no host"
    return None


def check_endpoint_fields(data: Any, prefix: str, *, env_refs: bool = False) -> None:
    """Every ``base_url``/``*_base_url`` in a provider block is an http(s) URL with a host,
    and no ``model``/``*_model`` holds an API key: else one ConfigError naming the key and
    the fix (and never the value). ``env_refs``: a value holding a ``${NAME}`` is left for
    when it is read (a block checked before its variables are set)."""
    if isinstance(data, list):
        for i, item in enumerate(data):
            check_endpoint_fields(item, f"{prefix}[{i}]", env_refs=env_refs)
        return
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        where = f"{prefix}.{key}"
        if isinstance(value, dict | list):
            check_endpoint_fields(value, where, env_refs=env_refs)
        elif env_refs and isinstance(value, str) and _ENV_REF.search(value):
            continue  # "${LLM_URL}/v1", "http://localhost:${PORT}/v1": checked once read
        elif isinstance(value, str) and isinstance(key, str):
            if key == "base_url" or key.endswith("_base_url"):
                problem = url_problem(value)
                if problem:
                    raise ConfigError(where, problem, "give the endpoint as "
                                      "http(s)://host:port/path (port and path optional), e.g. "
                                      "http://127.0.0.1:8000/v1; a key goes in api_key or "
                                      "its environment variable")
            elif (key == "model" or key.endswith("_model")) and looks_like_a_key(value):
                raise ConfigError(where, "holds what looks like an API key, not a model name",
                                  "put the model's name here and the key in api_key (or "
                                  "its environment variable)")


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"{hint}valid: {', '.join(sorted(set(choices)))}"


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def env_reference(name: str) -> str:
    """How a secret is written in a config file: ``${NAME}``, read when the provider is built."""
    return "${" + name + "}"


def expand_env(value: Any, key: str) -> Any:
    """``value`` with every ``${NAME}`` in its strings replaced by that environment variable.

    The file keeps the reference; the secret exists only in memory, when the provider is
    built. An unset variable is a ConfigError naming the key and the variable.
    """
    if isinstance(value, dict):
        return {k: expand_env(v, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, f"{key}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def one(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if found is None:
            raise ConfigError(key, f"refers to ${{{match.group(1)}}}, which is not set",
                              f"export {match.group(1)}=... in the environment nanobot "
                              "starts from")
        return found

    return _ENV_REF.sub(one, value)
