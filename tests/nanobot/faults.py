"""Real faults for tests: a second process holding SQLite's write lock, and a tmpfs of a
few hundred KB (a disk that fills) that can be remounted read-only. Mounting needs root
(CAP_SYS_ADMIN); tests skip with the reason when it is refused."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def small_disk(path: Path, size: str = "512k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (created), unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {path} (needs root/CAP_SYS_ADMIN): "
                    f"{done.stderr.strip()}")
    try:
        yield path
    finally:
        if _run("umount", str(path)).returncode != 0:
            _run("umount", "-l", str(path))


def remount(path: Path, mode: str) -> None:
    """``mode``: "ro" or "rw"."""
    done = _run("mount", "-o", f"remount,{mode}", str(path))
    assert done.returncode == 0, done.stderr


def fill(path: Path) -> Path:
    """Fill the filesystem holding ``path`` until it refuses more bytes; returns the file
    to delete to free it again."""
    filler = path / "filler.bin"
    with filler.open("wb", buffering=0) as out:
        for size in (65536, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * size)
    return filler


def hold_write_lock(db_path: Path) -> subprocess.Popen[str]:
    """A real second process holding SQLite's write lock on ``db_path`` (an open
    ``BEGIN IMMEDIATE``) until it is killed."""
    code = ("import sqlite3, sys\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(db_path)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc
