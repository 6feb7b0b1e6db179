"""``"llm": "nanobot"``: a provider extracts with the model nanobot is configured with.

A user's nanobot already has a provider, an API base, a key and a model; a memory
provider's ``llm`` block may say ``"nanobot"`` (or ``{"from": "nanobot", "model": ...,
<other settings>}`` for another model name at the same endpoint, or other limits) instead
of repeating them. The endpoint is read from nanobot's config at run time, through
nanobot's own resolution (``Config.get_provider_name`` / ``get_api_base`` /
``get_api_key`` and the provider's own model-name rule), and handed to the provider in
memory only: ``memory.json`` keeps ``"nanobot"``, and nothing the plugin writes (outbox,
traces, health) carries the key.

Only nanobot providers that speak the OpenAI-compatible API (``openai_compat``: OpenAI,
OpenRouter, DeepSeek, Ollama, vLLM, custom, ... — 39 of nanobot's 46) can serve;
the others (Anthropic, Azure OpenAI, Bedrock, GitHub Copilot, Codex, Grok) are refused
with a line naming the setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nanobot_memory_adapters.config import ConfigError, MemoryConfig
from nanobot_memory_adapters.redaction import redact_text

NANOBOT = "nanobot"
# Providers whose block takes an OpenAI-compatible ``llm`` block.
TAKES_LLM = frozenset({"mem0", "graphiti", "rolling_summary"})
# Providers that extract with nanobot's model when their block names no ``llm`` at all.
DEFAULT_TO_NANOBOT = frozenset({"mem0", "graphiti"})


def _wants_nanobot(llm: Any) -> bool:
    return llm == NANOBOT or (isinstance(llm, dict) and llm.get("from") == NANOBOT)


def load_nanobot_config(config_path: Path) -> Any:
    """nanobot's ``Config`` from ``config_path`` (nanobot's own loader), or ConfigError
    naming the file, what nanobot found wrong (never a value from it) and the fix."""
    from nanobot.config.errors import ConfigLoadError, validation_issues
    from nanobot.config.loader import load_config
    from pydantic import ValidationError

    try:
        return load_config(config_path)
    except ConfigLoadError as exc:
        problem, issues = exc.summary, exc.issues
    except ValidationError as exc:  # not wrapped by nanobot: its message holds the values
        problem, issues = "invalid settings", validation_issues(exc)
    shown = "; ".join(f"{issue.location} {_lower_first(issue.message.rstrip('.'))}"
                      for issue in issues[:3])
    more = f"; {len(issues) - 3} more" if len(issues) > 3 else ""
    detail = redact_text(problem.rstrip(".") + (f": {shown}{more}" if shown else ""))
    raise ConfigError("--nanobot-config", f"nanobot cannot load {config_path} ({detail})",
                      "fix that file (nanobot itself will not start with it), or give "
                      "another with --nanobot-config PATH") from None


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def nanobot_endpoint(config_path: Path, model: str | None = None) -> dict[str, Any]:
    """``{"base_url", "api_key", "model"}`` of the chat model nanobot's config selects."""
    from nanobot.providers.openai_compat_provider import OpenAICompatProvider
    from nanobot.providers.registry import find_by_name

    if not config_path.is_file():
        raise ConfigError("llm", f'is "nanobot" but there is no nanobot config at {config_path}',
                          "give the path with --nanobot-config, or an llm block with "
                          "base_url, model and api_key")
    try:
        config = load_nanobot_config(config_path)
    except ConfigError as exc:
        raise ConfigError("llm", f'is "nanobot" but {exc.problem}', exc.fix) from None
    preset = config.resolve_preset()
    chosen = model or preset.model
    name = config.get_provider_name(preset.model, preset=preset)
    spec = find_by_name(name) if name else None
    if spec is None:
        raise ConfigError("llm", f'is "nanobot" but nanobot\'s config at {config_path} has no '
                          f"provider for model {preset.model!r}",
                          "configure a provider in nanobot, or give an llm block")
    if spec.backend != "openai_compat":
        raise ConfigError("llm", f'is "nanobot" but nanobot\'s provider {name!r} speaks '
                          f"{spec.backend}, not an OpenAI-compatible API",
                          "give the llm block its own base_url, model and api_key")
    base = config.get_api_base(preset.model, preset=preset)
    if not base:
        raise ConfigError("llm", f'is "nanobot" but nanobot\'s provider {name!r} has no API '
                          "base", f"set providers.{name}.apiBase in nanobot's config")
    key = config.get_api_key(preset.model, preset=preset)
    # nanobot's own rule for the model name its endpoint expects (prefix stripping)
    request_model = OpenAICompatProvider(api_key=key, api_base=base, default_model=chosen,
                                         spec=spec)._request_model_name(chosen)
    return {"base_url": base, "api_key": key or "not-needed", "model": request_model}


def resolve_nanobot_llm(memory: MemoryConfig, config_path: Path | None, *,
                        implicit: bool = True) -> MemoryConfig:
    """``memory`` with its provider's ``llm: "nanobot"`` replaced by nanobot's endpoint
    (and, ``implicit`` — the plugin's default —, for mem0 and Graphiti nanobot's endpoint
    when no ``llm`` is given and nanobot has an OpenAI-compatible provider). Raises
    ConfigError naming the setting."""
    name = memory.provider_name
    if name not in TAKES_LLM:
        return memory
    original = dict(memory.provider_block())
    block = resolve_block(name, original, config_path, implicit=implicit)
    if block == original:
        return memory
    return MemoryConfig.model_validate({**memory.model_dump(), name: block})


def resolve_block(name: str, block: dict[str, Any], config_path: Path | None, *,
                  implicit: bool = False) -> dict[str, Any]:
    """One provider block with ``llm: "nanobot"`` resolved (the CLI's ``--nanobot-config``
    resolves only what says ``"nanobot"``)."""
    if name not in TAKES_LLM:
        return block
    block = dict(block)
    llm = block.get("llm")
    explicit = _wants_nanobot(llm)
    if not explicit and not (implicit and llm is None and name in DEFAULT_TO_NANOBOT):
        return block
    if config_path is None:
        if explicit:
            raise ConfigError(f"memory.{name}.llm", 'is "nanobot" but no nanobot config is '
                              "known here", "name an endpoint in the llm block, or (CLI) give "
                              "--nanobot-config PATH")
        return block
    extra = {k: v for k, v in llm.items() if k not in ("from", "model")} \
        if isinstance(llm, dict) else {}
    wanted_model = llm.get("model") if isinstance(llm, dict) else None
    try:
        endpoint = nanobot_endpoint(config_path, wanted_model)
    except ConfigError as exc:
        if not explicit:
            return block  # no usable nanobot provider: the provider's own default stays
        raise ConfigError(f"memory.{name}.llm", exc.problem, exc.fix) from None
    block["llm"] = {**endpoint, **extra}
    return block


def source_with_nanobot_llm(source: dict[str, Any] | Path, nanobot_config: Path | None
                            ) -> dict[str, Any] | Path | MemoryConfig:
    """A CLI's memory config source with ``"llm": "nanobot"`` resolved (``--nanobot-config``)."""
    if nanobot_config is None:
        return source
    from nanobot_memory_adapters.registry import resolve_config

    config, _spec = resolve_config(source)
    return resolve_nanobot_llm(config, nanobot_config.expanduser(), implicit=False)


def cli_source(source: dict[str, Any] | Path, nanobot_config: Path | None) -> Any:
    """A command's memory config source with ``"llm": "nanobot"`` resolved from its
    ``--nanobot-config`` (one error line naming the setting when it cannot be)."""
    from nanobot_memory_adapters.console import existing_file, fail

    if nanobot_config is None:
        # memory.json lives beside nanobot's config.json (the plugin reads both there):
        # a block's "llm": "nanobot" uses it without --nanobot-config.
        beside = source.expanduser().parent / "config.json" if isinstance(source, Path) \
            else None
        if beside is None or not beside.is_file():
            _refuse_unresolved_nanobot_llm(source)
            return source
        nanobot_config = beside
    existing_file(nanobot_config, "--nanobot-config", "give nanobot's config.json",
                  "config.json")
    try:
        return source_with_nanobot_llm(source, nanobot_config)
    except ConfigError as exc:
        raise fail(str(exc)) from None


def _refuse_unresolved_nanobot_llm(source: dict[str, Any] | Path) -> None:
    """A block that says ``"llm": "nanobot"`` with no nanobot config known: one line
    saying to give ``--nanobot-config`` (not the provider's validation error)."""
    from nanobot_memory_adapters.console import fail
    from nanobot_memory_adapters.registry import resolve_config

    try:
        config, _spec = resolve_config(source)
    except ConfigError:
        return  # the command's own loading reports it
    if _wants_nanobot(config.provider_block().get("llm")):
        beside = f" (none beside {source})" if isinstance(source, Path) else ""
        raise fail(f'memory.{config.provider_name}.llm is "nanobot": give nanobot\'s '
                   f"config.json with --nanobot-config PATH{beside}")


def cli_blocks(blocks: dict[str, dict[str, Any]], nanobot_config: Path | None
               ) -> dict[str, dict[str, Any]]:
    """``bench --provider-config`` blocks with ``"llm": "nanobot"`` resolved."""
    from nanobot_memory_adapters.console import existing_file, fail

    if nanobot_config is None:
        return blocks
    path = existing_file(nanobot_config, "--nanobot-config", "give nanobot's config.json",
                         "config.json")
    try:
        return {name: resolve_block(name, block, path) for name, block in blocks.items()}
    except ConfigError as exc:
        raise fail(str(exc)) from None
