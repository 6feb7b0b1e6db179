"""``nanobot-memory setup``: choose and check the plugin's memory (``status``/``off``/``on``:
``status_cli.py``).

``setup`` is a wizard driven by each provider's config model (``provider.py``): it lists
the installed backends and controls, asks only for the chosen one's required fields (and
its endpoint, key and extraction model when it has them), tests the connection with the
provider's own ``health()`` in a temporary data directory (the user's store and a running
nanobot's locks are never touched), then writes ``memory.json`` next to nanobot's config
through ``settings.write_settings``, keeping a backup of the previous file. Every question
is also a flag, so scripts need no TTY. Secrets are never written: a secret field holds a
``${ENV_NAME}`` reference, read when the provider is built (``config.expand_env``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ValidationError
from rich.markup import escape
from rich.prompt import Confirm, Prompt
from rich.table import Table

from nanobot_memory_adapters.config import (
    ConfigError,
    _suggest,
    check_endpoint_fields,
    env_reference,
    expand_env,
    validation_to_config_error,
)
from nanobot_memory_adapters.console import console, existing_file, fail
from nanobot_memory_adapters.nanobot.settings import (
    parse_settings,
    read_json,
    settings_path,
    split_file,
    with_provider,
    write_settings,
)
from nanobot_memory_adapters.nanobot_llm import NANOBOT, TAKES_LLM, resolve_nanobot_llm
from nanobot_memory_adapters.redaction import is_variable_name

DEFAULT_NANOBOT_CONFIG = Path("~/.nanobot/config.json")
# The last part of a field name that marks a secret (``api_key``, ``password``, ``token``);
# ``api_key_env`` names a variable and ``max_tokens`` counts, so neither is one.
_SECRET_PARTS = frozenset({"key", "apikey", "token", "password", "secret", "passphrase"})

NanobotConfig = Annotated[
    Path,
    typer.Option("--nanobot-config", "-c", help="nanobot's config.json; memory.json is written "
                 "next to it (NANOBOT_MEMORY_CONFIG overrides that path)."),
]


def is_secret(field: str) -> bool:
    return field.lower().split("_")[-1] in _SECRET_PARTS


def secret_env_name(provider: str, field: str) -> str:
    """The variable the wizard proposes for a secret field: ``NANOBOT_MEMORY_HONCHO_API_KEY``."""
    return re.sub(r"[^A-Z0-9_]", "_", f"NANOBOT_MEMORY_{provider}_{field}".upper())


def env_name(text: str, what: str, field: str, provider: str) -> str:
    """``text`` when it is a variable name; else one line that never repeats it (it may be
    the secret itself, pasted where its variable's name was asked)."""
    if not is_variable_name(text):
        # no "NAME=..." or "NAME: ..." after a secret's field name: the error line's
        # redaction would take the words that follow for its value
        raise fail(f"{what} takes the NAME of an environment variable (letters, digits, "
                   f"_), not its value, e.g. {secret_env_name(provider, field)}")
    return text


def nanobot_config_file(nanobot_config: Path) -> Path:
    """``--nanobot-config`` expanded, when it is a file; else one line (exit 2). memory.json
    is read and written beside it: a misspelt file or a folder must not select the
    memory.json of the folder it names."""
    return existing_file(nanobot_config, "--nanobot-config", "run 'nanobot onboard' first, "
                         "or give the config.json nanobot runs with", "config.json")


def memory_json_for(nanobot_config: Path) -> Path:
    """Where the plugin reads its settings for this nanobot config (``settings_path``)."""
    return settings_path(nanobot_config.expanduser().parent)


# -- the questions ---------------------------------------------------------------------

def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            shown = "" if flag == "--secret" else f" {item!r}"  # may be the secret itself
            # "--secret: ..." or "api_key=..." would lose its words to the line's redaction
            raise fail(f"{flag} takes FIELD=ENV_NAME (a secret field, then the name of the "
                       "variable that holds it)" if flag == "--secret" else
                       f"{flag}{shown} takes KEY=VALUE, e.g. {flag} base_url=http://127.0.0.1:8000")
        out[key.strip()] = value
    return out


def _value(text: str) -> Any:
    """A flag's value: JSON when it parses (numbers, true, objects), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _installed(specs: dict[str, Any]) -> dict[str, str | None]:
    """Provider name -> None when importable, else the line saying what to install."""
    from nanobot_memory_adapters.registry import provider_class

    found: dict[str, str | None] = {}
    for name, spec in specs.items():
        try:
            provider_class(spec)
            found[name] = None
        except ConfigError as exc:
            found[name] = exc.fix or exc.problem
        except Exception as exc:  # a third-party module that fails to import
            found[name] = f"cannot import: {type(exc).__name__}"
    return found


def _choose_provider(provider: str | None, yes: bool) -> tuple[str, Any]:
    from nanobot_memory_adapters.registry import available_providers, provider_class

    try:
        specs = available_providers()
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if provider is None:
        if yes:
            raise fail("--provider is required with --yes; e.g. --provider mem0 (valid: "
                       + ", ".join(sorted(specs)) + ")")
        state = _installed(specs)
        table = Table(title="memory providers", show_header=True)
        for col in ("name", "kind", "installed"):
            table.add_column(col)
        for name, spec in specs.items():
            table.add_row(name, "backend" if spec.kind == "backend" else "control",
                          "yes" if state[name] is None else f"no — {state[name]}")
        console.print(table)
        ready = [n for n, why in state.items() if why is None]
        provider = Prompt.ask("provider", choices=ready,
                              default="mem0" if "mem0" in ready else ready[0])
    if provider not in specs:
        raise fail(f"--provider {provider!r}: unknown provider — {_suggest(provider, list(specs))}")
    spec = specs[provider]
    try:
        cls = provider_class(spec)
    except ConfigError as exc:
        raise fail(f"--provider {provider}: {exc.problem} — {exc.fix}") from None
    return provider, cls


def _ask_llm(provider: str, llm: str | None, yes: bool, llm_model: str | None,
             llm_key_env: str | None) -> tuple[Any, str | None]:
    """``"nanobot"`` (nanobot's own model, the default) or an OpenAI-compatible endpoint."""
    if llm is None:
        llm = NANOBOT if yes else Prompt.ask(
            f"{provider}: the LLM it extracts with — 'nanobot' (the model nanobot uses) or "
            "an OpenAI-compatible base URL", default=NANOBOT)
    if llm == NANOBOT:
        if llm_key_env:
            raise fail("--llm-key-env: nanobot's own model uses nanobot's key; leave it out "
                       "with --llm nanobot")
        return ({"from": NANOBOT, "model": llm_model} if llm_model else NANOBOT), None
    if not re.match(r"https?://", llm):
        raise fail(f"--llm {llm!r}: give 'nanobot' or an http(s) base URL such as "
                   "http://127.0.0.1:8000/v1")
    model = llm_model or (None if yes else Prompt.ask("model name at that endpoint"))
    if not model:
        raise fail(f"--llm {llm}: the endpoint needs a model; give --llm-model NAME")
    block: dict[str, Any] = {"base_url": llm, "model": model}
    key_env = llm_key_env if llm_key_env is not None else (None if yes else Prompt.ask(
        "environment variable holding its API key (Enter: none)", default="",
        show_default=False))
    if key_env:
        block["api_key"] = env_reference(env_name(key_env, "--llm-key-env", "api_key",
                                                  provider))
    return block, key_env or None


def _clear_secret(key: str, value: Any) -> str | None:
    """The dotted key of a secret given in clear inside ``value`` (None when there is none)."""
    if isinstance(value, dict):
        for k, v in value.items():
            found = _clear_secret(str(k), v)
            if found:
                return f"{key}.{found}"
        return None
    if is_secret(key) and value not in (None, "") and not (
            isinstance(value, str) and re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", value)):
        return key
    return None


def _fields_to_ask(model: type[BaseModel]) -> list[str]:
    """Required fields, the endpoint, and secrets — what a provider cannot run without."""
    return [name for name, info in model.model_fields.items()
            if name != "llm" and (info.is_required() or name == "base_url" or is_secret(name))]


def _describe(model: type[BaseModel], name: str) -> str:
    info = model.model_fields[name]
    default = "" if info.is_required() or info.default is None else f" [default {info.default}]"
    return f"{name}{default}: {info.description}" if info.description else f"{name}{default}"


def build_block(provider: str, model: type[BaseModel], *, llm: str | None, llm_model: str | None,
                llm_key_env: str | None, sets: dict[str, str], secrets: dict[str, str],
                yes: bool) -> tuple[dict[str, Any], list[str]]:
    """The provider's block from flags and answers, and the env vars it refers to."""
    fields = model.model_fields
    for key in [*sets, *secrets]:
        if key not in fields:
            raise fail(f"memory.{provider}.{key}: unknown setting — "
                       f"{_suggest(key, list(fields))}")
    block: dict[str, Any] = {k: _value(v) for k, v in sets.items()}
    for key, value in block.items():
        clear = _clear_secret(key, value)
        if clear:
            raise fail(f"{clear} is a secret (given with --set) and is never written to "
                       f"memory.json; give --secret {key} with the NAME of a variable, e.g. "
                       f"{secret_env_name(provider, key)}, and export that variable")
    env_vars: list[str] = []
    for key, var in secrets.items():
        block[key] = env_reference(env_name(var, f"--secret {key}", key, provider))
        env_vars.append(var)
    if "llm" in fields and provider in TAKES_LLM and "llm" not in block:
        block["llm"], key_env = _ask_llm(provider, llm, yes, llm_model, llm_key_env)
        env_vars += [key_env] if key_env else []
    elif llm is not None and "llm" not in fields:
        raise fail(f"--llm: {provider} takes no llm (it does not extract with a model); "
                   "leave --llm out")
    for name in _fields_to_ask(model):
        if name in block:
            continue
        required = fields[name].is_required()
        if yes:
            if required:
                raise fail(f"memory.{provider}.{name}: required — give --set {name}=VALUE")
            continue
        console.print(_describe(model, name), highlight=False)
        if is_secret(name):
            var = Prompt.ask(f"environment variable holding {name}" + (
                "" if required else " (Enter: none)"), default=secret_env_name(provider, name)
                if required else "", show_default=required)
            if var:
                block[name] = env_reference(env_name(var, f"{name}'s variable", name, provider))
                env_vars.append(var)
        else:
            answer = Prompt.ask(name) if required else Prompt.ask(
                f"{name} (Enter: default)", default="", show_default=False)
            if answer:
                block[name] = _value(answer)
    return block, env_vars


VECTOR_STORES = ("local", "pgvector", "qdrant-server")


def ask_vector_store(provider: str, model: type[BaseModel], choice: str | None, yes: bool,
                     block: dict[str, Any]) -> list[str]:
    """mem0/simple_rag: where the vectors live (``vector_store``): the embedded Qdrant
    (nothing to write), PostgreSQL with pgvector (its connection string read from a
    variable: it may hold a password) or a Qdrant server. The env vars it refers to."""
    if "vector_store" not in model.model_fields or "vector_store" in block:
        if choice is not None and "vector_store" not in model.model_fields:
            raise fail(f"--vector-store: {provider} has no vector store to choose; leave it out")
        return []
    if choice is None:
        if yes:
            return []
        console.print("vector store: local (embedded Qdrant, one machine), pgvector "
                      "(PostgreSQL with pgvector >= 0.8) or qdrant-server", highlight=False)
        choice = Prompt.ask("vector store", choices=list(VECTOR_STORES), default="local")
    if choice not in VECTOR_STORES:
        raise fail(f"--vector-store {choice}: give one of {', '.join(VECTOR_STORES)}")
    if choice == "local":
        return []
    if choice == "pgvector":
        var = secret_env_name(provider, "pg_connection_string")
        if not yes:
            var = env_name(Prompt.ask("environment variable holding the PostgreSQL connection "
                                      "string", default=var), "the connection string's "
                           "variable", "connection_string", provider)
        block["vector_store"] = {"provider": "pgvector", "connection_string_env": var}
        return [var]
    url = "http://127.0.0.1:6333" if yes else Prompt.ask("Qdrant server URL",
                                                         default="http://127.0.0.1:6333")
    block["vector_store"] = {"provider": "qdrant", "url": url}
    key_var = "" if yes else Prompt.ask("environment variable holding its API key "
                                        "(Enter: none)", default="", show_default=False)
    if key_var:
        block["vector_store"]["api_key_env"] = env_name(key_var, "the API key's variable",
                                                        "api_key", provider)
        return [key_var]
    return []


# -- check, back up, write -------------------------------------------------------------

def _previous(path: Path) -> dict[str, Any]:
    """The current file's JSON (its other settings are kept), ``{}`` when there is none.
    A file that cannot be read, or is not a memory config object, is never replaced:
    one line names it."""
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        data = read_json(path)
        split_file(data)
    except ConfigError as exc:
        where = "" if str(exc).startswith(str(path)) else f"{path}: "
        raise fail(f"{where}{exc}; setup keeps the file as it is — fix it or move it aside, "
                   "then run setup again") from None
    return data


def _with_block(previous: dict[str, Any], provider: str, kind: str,
                block: dict[str, Any]) -> dict[str, Any]:
    raw = with_provider(previous, provider, kind)
    if "memory" not in raw:
        raw = {"memory": raw, **({"nanobot": raw.pop("nanobot")} if "nanobot" in raw else {})}
    raw["memory"][provider] = block
    raw["memory"]["enabled"] = True
    return raw


def checked(path: Path, raw: dict[str, Any], nanobot_config: Path, *, expand: bool,
             where: str = "") -> Any:
    """The memory config as the plugin will build it (llm resolved, ``${ENV}`` read), or
    one error line naming the setting (exit 2)."""
    from nanobot_memory_adapters.registry import provider_class, resolve_config

    settings = parse_settings(path, raw)
    if settings.error or settings.memory is None:
        raise fail((settings.error or "memory.json: not a memory config") + where)
    try:
        memory = resolve_nanobot_llm(settings.memory, nanobot_config)
        _config, spec = resolve_config(memory)
        block = memory.provider_block()
        data = expand_env(block, f"memory.{spec.name}") if expand else block
        # endpoints too, tested or not (--skip-test skips the connection, not the check)
        check_endpoint_fields(data, f"memory.{spec.name}", env_refs=not expand)
        provider_class(spec).config_model.model_validate(data)
    except ConfigError as exc:
        raise fail(str(exc) + where) from None
    except ValidationError as exc:
        error = validation_to_config_error(exc, prefix=f"memory.{settings.memory.provider_name}")
        raise fail(str(error) + where) from None
    return memory


def connection_test(memory: Any, timeout_s: float) -> Any:
    """The provider's own ``health()``, built in a temporary data directory."""
    from nanobot_memory_adapters.registry import load_provider

    async def run() -> Any:
        with tempfile.TemporaryDirectory(prefix="nanobot-memory-setup-") as tmp:
            adapter = load_provider(memory, data_dir=tmp)
            try:
                return await asyncio.wait_for(adapter.health(), timeout_s)
            finally:
                await adapter.aclose()

    try:
        with console.status(f"testing {memory.provider_name}..."):
            return asyncio.run(run())
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except TimeoutError:
        raise fail(f"{memory.provider_name}: no health answer within {timeout_s:g} s; raise "
                   "--test-timeout, or --skip-test to write without testing", 1) from None


def backup(path: Path) -> Path | None:
    """Copy the current file aside (``memory.json.bak-<UTC time>``) before replacing it."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while target.exists():
        target, n = path.with_name(f"{path.name}.bak-{stamp}-{n}"), n + 1
    shutil.copy2(path, target)
    return target


def print_health(result: Any) -> None:
    colour = {"ok": "green", "degraded": "yellow"}.get(result.status, "red")
    console.print(f"health: {escape(result.backend_name)} — [{colour}]{result.status}"
                  f"[/{colour}] ({result.latency_ms:.0f} ms)", highlight=False, markup=True)
    for warning in result.warnings:
        console.print(f"  warning: {warning}", highlight=False, soft_wrap=True)
    error = result.details.get("error") if isinstance(result.details, dict) else None
    if error:
        console.print(f"  error: {json.dumps(error, default=str)[:300]}", highlight=False)


def setup(
    provider: Annotated[str | None, typer.Option(help="Provider to use (asked when not given).")]
    = None,
    llm: Annotated[str | None, typer.Option(
        help="'nanobot' (nanobot's own model, the default) or an OpenAI-compatible base URL "
        "for the provider's extraction.")] = None,
    llm_model: Annotated[str | None, typer.Option(help="Model name for --llm.")] = None,
    llm_key_env: Annotated[str | None, typer.Option(
        help="Environment variable holding --llm's API key (stored as ${NAME}).")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="KEY=VALUE for the provider's block (JSON values parsed); repeatable.")]
    = None,
    secret: Annotated[list[str] | None, typer.Option(
        help="FIELD=ENV_NAME: a secret field read from that variable; repeatable.")] = None,
    vector_store: Annotated[str | None, typer.Option(
        help="mem0/simple_rag: local (embedded Qdrant, the default), pgvector (PostgreSQL; "
        "the connection string read from a variable) or qdrant-server (asked when not "
        "given).")] = None,
    nanobot_config: NanobotConfig = DEFAULT_NANOBOT_CONFIG,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accept defaults; ask nothing.")]
    = False,
    skip_test: Annotated[bool, typer.Option(
        help="Write without testing the connection (the values are still checked).")]
    = False,
    test_timeout: Annotated[float, typer.Option(help="Seconds the connection test may take.")]
    = 180.0,
) -> None:
    """Choose the memory provider, test it, and write memory.json (a backup of the old one)."""
    try:
        _setup(provider, llm, llm_model, llm_key_env, set_, secret, vector_store,
               nanobot_config, yes, skip_test, test_timeout)
    except EOFError:  # a question with no one to answer it: stdin closed or not a terminal
        raise fail("setup asked a question and its input ended (no terminal, or a pipe "
                   "with too few answers); nothing was written — run it in a terminal, or "
                   "ask nothing: --yes --provider NAME (with --llm/--set as the provider "
                   "needs)", 1) from None


def _setup(provider: str | None, llm: str | None, llm_model: str | None,
           llm_key_env: str | None, set_: list[str] | None, secret: list[str] | None,
           vector_store: str | None, nanobot_config: Path, yes: bool, skip_test: bool,
           test_timeout: float) -> None:
    config = nanobot_config_file(nanobot_config)
    if test_timeout <= 0:
        raise fail(f"--test-timeout {test_timeout:g}: give a positive number of seconds")
    path = memory_json_for(config)
    name, cls = _choose_provider(provider, yes)
    from nanobot_memory_adapters.registry import available_providers

    kind = available_providers()[name].kind
    block, env_vars = build_block(
        name, cls.config_model, llm=llm, llm_model=llm_model, llm_key_env=llm_key_env,
        sets=_pairs(set_ or [], "--set"), secrets=_pairs(secret or [], "--secret"), yes=yes)
    env_vars += ask_vector_store(name, cls.config_model, vector_store, yes, block)
    raw = _with_block(_previous(path), name, kind, block)
    missing = [v for v in env_vars if v not in os.environ]
    if missing and not skip_test:
        raise fail(f"{missing[0]}: not set in this shell, so the connection cannot be "
                   f"tested — export {missing[0]}=... and run setup again, or --skip-test")
    memory = checked(path, raw, config, expand=not skip_test)
    result = None
    if not skip_test:
        result = connection_test(memory, test_timeout)
        if result.status == "unavailable":
            print_health(result)
            raise fail(f"{name} is unavailable (above); {path} was not changed — fix the "
                       "setting it names, or --skip-test to write it anyway", 1)
    if not yes and not Confirm.ask(f"write {path}?", default=True):
        raise fail(f"{path}: not written (you declined)", 1)
    saved = backup(path)
    write_settings(path, raw)
    console.print(f"wrote {path}" + (f" (previous file kept as {saved.name})" if saved else ""),
                  highlight=False)
    for var in env_vars:
        console.print(f"set {var} in the environment nanobot starts from (the file holds "
                      f"{env_reference(var)}, never the value)", highlight=False)
    if result is not None:
        print_health(result)
