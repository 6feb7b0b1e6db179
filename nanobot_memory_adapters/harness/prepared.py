"""Providers of a bench: built through the registry, or skipped with the reason."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from nanobot_memory_adapters.config import ConfigError, validation_to_config_error
from nanobot_memory_adapters.contract import (
    MemoryAdapter,
)
from nanobot_memory_adapters.harness import manifest as mf
from nanobot_memory_adapters.harness.bench_config import ProviderExited
from nanobot_memory_adapters.harness.safe_paths import safe_name
from nanobot_memory_adapters.harness.trace_sink import AnnotatingSink, error_text
from nanobot_memory_adapters.tracing import JsonlTraceWriter

if TYPE_CHECKING:
    from nanobot_memory_adapters.harness.bench_config import BenchConfig

@dataclass
class Prepared:
    name: str
    kind: str
    block: dict[str, Any]
    adapter: MemoryAdapter
    sink: AnnotatingSink


async def prepare_provider(
    name: str, cfg: BenchConfig, writer: JsonlTraceWriter, *, label: str | None = None,
    block: dict[str, Any] | None = None, data_dir: Path | None = None,
) -> tuple[Prepared | None, str | None]:
    """Build one provider, or say why it is skipped (needs an LLM, missing extra, down).

    ``label`` names a variant of the provider (an experiment group) with a store of its
    own; ``block`` overrides the provider's block from ``cfg.provider_configs``;
    ``data_dir`` is where its embedded store lives (default ``<out>/stores/<label>``)."""
    from nanobot_memory_adapters.registry import load_provider

    block = block if block is not None else cfg.provider_configs.get(name)
    source = mf.provider_source(name, block)
    sink = AnnotatingSink(writer)
    store = safe_name(label or name)
    try:
        _, kind, native_block = mf.native_config(source)
        adapter = load_provider(
            source, data_dir=data_dir or cfg.out / "stores" / store, trace_sink=sink
        )
    except ConfigError as exc:
        return None, f"config: {exc}"
    except ValidationError as exc:  # the provider's block, said as one setting and its fix
        return None, f"config: {validation_to_config_error(exc, prefix=name)}"
    except ImportError as exc:
        return None, f"not installed: {exc}"
    except Exception as exc:  # a provider that cannot even be built is skipped, not fatal
        return None, f"could not be built: {error_text(exc)[:300]}"
    except SystemExit as exc:
        raise ProviderExited.of(label or name, exc, "while being built") from None
    if adapter.info.requires_llm and not block:
        await adapter.aclose()
        return None, (
            "needs an LLM (ProviderInfo.requires_llm); configure one in its block "
            "via --provider-config to include it"
        )
    if adapter.info.name != name:
        await adapter.aclose()
        return None, (
            f"runs as '{adapter.info.name}' with this config (e.g. no LLM configured); "
            f"benchmark '{adapter.info.name}' under its own name or configure {name} fully"
        )
    try:
        health = await adapter.health()
    except Exception as exc:  # health must report, not raise; a third party may not
        await adapter.aclose()
        return None, f"health() raised: {error_text(exc)[:300]}"
    except SystemExit as exc:
        raise ProviderExited.of(label or name, exc, "in health()") from None
    if health.status == "unavailable":
        await adapter.aclose()
        return None, f"unavailable: {json.dumps(health.details, default=str)[:300]}"
    return Prepared(label or name, kind, native_block, adapter, sink), None


