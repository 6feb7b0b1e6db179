"""What a result file under ``benchmarks/results/`` records about where it came from:
the machine, the commit (and whether the checkout was edited), and the command without
this machine's paths. Shared by the scripts that write result files."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def machine() -> dict[str, Any]:
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {"platform": platform.platform(), "cpus": os.cpu_count(), "memory_gb": mem,
            "python": platform.python_version()}


def commit() -> dict[str, Any]:
    """HEAD and whether the working tree differs from it (a result from an edited
    checkout says so)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True,
                              check=False).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}


def portable(command: str, run_out: Path | None = None) -> str:
    """The command without this machine's paths: the run's folder (if it has one) as
    ``OUT``, a file in the repository relative to it, any other absolute path as
    ``PATH``. Raises ``ValueError`` on a command with unbalanced quotes."""
    words = []
    out = run_out.resolve() if run_out else None  # --out may have been given relative
    for word in shlex.split(command):
        if word.startswith("/"):
            path = Path(word)
            word = ("OUT" + word[len(str(out)):] if out and path.is_relative_to(out)
                    else str(path.relative_to(REPO)) if path.is_relative_to(REPO)
                    else "PATH")
        words.append(word)
    return shlex.join(words)


def ci(c: dict[str, Any] | None) -> dict[str, Any] | None:
    """An interval as result files keep it (value, low, high, n)."""
    if not c:
        return None
    return {k: c.get(k) for k in ("value", "low", "high", "n")}
