"""Checks of the harness's command-line options: each bad value becomes one line naming
the option and the fix (exit 2), before anything runs."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.console import fail


def provider_configs(path: Path | None, nanobot_config: Path | None = None
                     ) -> dict[str, dict[str, Any]]:
    """``--provider-config``'s blocks, each checked before anything runs (with
    ``--nanobot-config``, ``"llm": "nanobot"`` resolved first)."""
    from nanobot_memory_adapters.nanobot_llm import cli_blocks

    if path is None:
        return cli_blocks({}, nanobot_config)  # still refuses a missing --nanobot-config
    from nanobot_memory_adapters.config import ConfigError, read_json_file

    try:
        data = read_json_file(path, what="JSON file", fix="fix the file")
    except ConfigError as exc:
        raise fail(f"--provider-config {exc}") from None
    if not isinstance(data, dict):
        raise fail(f'--provider-config {path}: must be a JSON object '
                   '{"provider": {block...}}')
    for name, block in data.items():
        if not isinstance(block, dict):
            raise fail(f"--provider-config {path}: the block for {name!r} must be a JSON "
                       'object of that provider\'s settings, e.g. {"mem0": {"llm": {...}}}')
    from nanobot_memory_adapters.config import _suggest
    from nanobot_memory_adapters.registry import available_providers

    known = list(available_providers())
    for name in data:  # a misspelt block would be ignored and its provider run on defaults
        if name.split("+", 1)[0] not in known:
            raise fail(f"--provider-config {path}: no provider is called {name!r} — "
                       f"{_suggest(name, known)}")
    data = cli_blocks(data, nanobot_config)
    for name, block in data.items():
        check_provider_block(path, name.split("+", 1)[0], block)
    return data


def check_provider_block(path: Path, name: str, block: dict[str, Any]) -> None:
    """A block's settings checked before anything runs: a misspelt or out-of-range setting
    would otherwise skip its provider after the dataset is loaded, and a long run would
    exit 4 with one provider missing; a provider's own settings code that raises is one
    line, not a traceback. A backend whose extra is not installed is left to the run,
    which skips it and says so."""
    from pydantic import ValidationError

    from nanobot_memory_adapters.config import ConfigError, validation_to_config_error
    from nanobot_memory_adapters.harness import manifest as mf
    from nanobot_memory_adapters.nanobot_llm import resolve_block

    try:
        resolve_block(name, block, None)  # "llm": "nanobot" left unresolved: say how
        mf.native_config(mf.provider_source(name, block))
    except ConfigError as exc:
        raise fail(f"--provider-config {path}: {exc}") from None
    except ValidationError as exc:
        raise fail(f"--provider-config {path}: "
                   f"{validation_to_config_error(exc, prefix=name)}") from None
    except ImportError:
        return
    except Exception as exc:  # a third party's settings code may raise anything
        from nanobot_memory_adapters.harness.trace_sink import error_text

        raise fail(f"--provider-config {path}: {name}'s settings could not be read "
                   f"({error_text(exc)[:300]}); fix the block, or report it to the "
                   "provider's author if the block is right") from None


def provider_names(text: str, base: Any = None) -> list[str]:
    """``--providers a,b`` -> ["a", "b"]: not empty, each once, each registered (``base``
    maps a listed name to the registered one, e.g. ``mem0+feedback`` -> ``mem0``)."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise fail(f"--providers {text!r} names no provider; give a comma-separated list "
                   "such as no_memory,full_history")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise fail(f"--providers lists {', '.join(twice)} more than once; give each once")
    check_names([base(n) for n in names] if base else names)
    return names


def check_budget(tokens: int, option: str = "--budget-tokens") -> None:
    from nanobot_memory_adapters.contract import MAX_BUDGET_TOKENS

    if not 0 < tokens <= MAX_BUDGET_TOKENS:
        raise fail(f"{option} {tokens}: give a whole number of tokens from 1 to "
                   f"{MAX_BUDGET_TOKENS}")


def parse_budgets(text: str, option: str = "--budget-tokens") -> list[int]:
    """``2000`` or a sweep ``500,1000,2000,4000`` (the first is the headline) -> tokens."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        budgets = [int(p) for p in parts]
    except ValueError:
        raise fail(f"{option} {text!r}: give whole numbers of tokens, e.g. 2000 or "
                   "500,1000,2000,4000") from None
    if not budgets:
        raise fail(f"{option} {text!r}: give a budget, e.g. 2000")
    for tokens in budgets:
        check_budget(tokens, option)
    twice = sorted({b for b in budgets if budgets.count(b) > 1})
    if twice:
        raise fail(f"{option} lists {', '.join(map(str, twice))} more than once; give each once")
    return budgets


def check_workers(workers: int, executor: str, ray_address: str | None = None) -> None:
    from nanobot_memory_adapters.harness.executors import EXECUTORS

    if executor not in EXECUTORS:
        raise fail(f"--executor {executor!r}: use one of {', '.join(EXECUTORS)}")
    if workers < 1:
        raise fail(f"--workers {workers}: give 1 or more")
    if ray_address and executor != "ray":  # else silently run locally, the address unused
        raise fail("--ray-address: for --executor ray (add it, or drop --ray-address)")


def check_llm_options(base_url: str | None, model: str | None, what: str = "llm",
                      key_env: str | None = None) -> None:
    """``--<what>-base-url`` is an http(s) URL, ``--<what>-model`` is not an API key and
    ``--<what>-api-key-env`` names a variable (a key pasted there would be recorded in the
    run's manifest and report as a "name"); the line never quotes any of them."""
    from nanobot_memory_adapters.config import url_problem
    from nanobot_memory_adapters.redaction import is_variable_name, looks_like_a_key

    if model and not base_url:  # else the run goes on without the model it was given
        raise fail(f"--{what}-model: give --{what}-base-url too (the endpoint serving it)")
    problem = url_problem(base_url) if base_url else None
    if problem:
        raise fail(f"--{what}-base-url {problem}; give the endpoint as http(s)://host:port/path "
                   "(port and path optional), e.g. http://127.0.0.1:8000/v1 (the key goes in "
                   f"the environment variable named by --{what}-api-key-env)")
    if model and looks_like_a_key(model):
        raise fail(f"--{what}-model holds what looks like an API key, not a model name; give "
                   "the model's name (the key goes in the environment variable named by "
                   f"--{what}-api-key-env)")
    if key_env is not None and not is_variable_name(key_env):
        raise fail(f"--{what}-api-key-env takes the NAME of an environment variable (letters, "
                   "digits, _), not its value, e.g. OPENAI_API_KEY (an unset name shaped like "
                   "a key is taken for one: export it first)")


def check_out_dir(out: Path, option: str = "--out") -> None:
    """``out`` is a directory, or can be created: no file where a folder of it must be."""
    if out.exists() and not out.is_dir():
        raise fail(f"{option} {out} is a file; give a directory (it is created if missing)")
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise fail(f"{option} {out}: {existing} is a file, so the directory cannot be "
                   "created; give a path under a directory")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise fail(f"{option} {out}: {existing} is not writable; give a writable directory")


def check_run_id(run_id: str, option: str = "--run-id") -> None:
    """``--run-id`` is a scope id every backend accepts (the scopes' own check), refused
    before ``--out`` is claimed: else a raw validation dump once the run has begun."""
    from nanobot_memory_adapters.scope import check_scope_id

    if not run_id.strip():
        raise fail(f"{option} is empty; give a run id such as locomo (the default)")
    try:
        check_scope_id(run_id, field=option)
    except ValueError as exc:
        raise fail(str(exc)) from None


def check_seconds(value: float | None, option: str = "--readiness-timeout") -> None:
    """A wait in seconds: a positive, finite number (``None``: the config's own)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise fail(f"{option} {value}: give a positive number of seconds, e.g. 120")


def check_names(names: list[str]) -> None:
    from nanobot_memory_adapters.config import _suggest
    from nanobot_memory_adapters.registry import available_providers

    specs = available_providers()
    for n in names:
        if n not in specs:
            raise fail(f"--providers: unknown provider '{n}' — {_suggest(n, list(specs))}")


def parse_persona_caps(values: list[str], providers: list[str], personas: int,
                       option: str = "--persona-cap") -> dict[str, int]:
    """``NAME=N`` options: the provider (named as in --providers, ``+feedback`` included)
    runs on the scenario's first N personas only (a slow one beside fast ones on one
    model). A name not in the run, a name given twice, or an N outside 1..personas is
    refused with one line."""
    caps: dict[str, int] = {}
    for value in values:
        name, sep, count = (part.strip() for part in value.partition("="))
        if not sep or not count.isdecimal() or not count.isascii():
            raise fail(f"{option} {value!r}: use PROVIDER=N with N >= 1 (e.g. mem0=4)")
        if name not in providers:
            raise fail(f"{option} {value!r}: {name!r} is not in --providers "
                       f"({', '.join(providers)}; a feedback group is capped by its full "
                       "name, e.g. mem0+feedback=4)")
        if name in caps:
            raise fail(f"{option} {value!r}: {name} is capped twice; give one cap each")
        if not 1 <= int(count) <= personas:
            raise fail(f"{option} {value!r}: the scenario has {personas} personas; use "
                       f"N from 1 to {personas}")
        caps[name] = int(count)
    return caps
