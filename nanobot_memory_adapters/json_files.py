"""Reading a JSON file the user named, safely: the one reader every command uses.

A user's file can be anything: a FIFO (reading it blocks forever), a link to
``/dev/zero`` (reading it never ends), a multi-gigabyte file, JSON nested deeper than
Python's parser recurses (a ``RecursionError`` traceback), or text in another encoding.
Each is one ``JsonFileError`` naming the file, what is wrong and the fix; callers turn it
into their own one-line error (``ConfigError``, ``DatasetError``).

The one writer (``write_json_atomic``) is for a run's own files: whole or not at all.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_BYTES = 4 * 1024**3  # a dataset file (LongMemEval-M's is under 3 GB)
SETTINGS_BYTES = 16 * 1024**2  # memory.json, a provider block, a preferences file
MAX_DEPTH = 100  # LoCoMo, BEAM, LongMemEval and memory.json nest fewer than 10 levels

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class JsonFileError(ValueError):
    """One line: the file, what is wrong with it, and what to do."""

    def __init__(self, path: Path | str, problem: str, fix: str) -> None:
        self.path, self.problem, self.fix = str(path), problem, fix
        super().__init__(f"{path}: {problem}; {fix}")


def regular_file_problem(path: Path) -> str | None:
    """Why ``path`` (links followed) is not a regular file to read, or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "not found"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "is a directory"
    for test, name in _KINDS:
        if test(mode):
            return f"is {name}, not a regular file"
    return None


def read_text(path: Path, *, what: str = "file", max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file, read in at most ``max_bytes`` (raises
    ``JsonFileError``)."""
    problem = regular_file_problem(path)
    if problem == "not found":
        raise JsonFileError(path, f"{what} not found", f"pass the path of a {what}")
    if problem == "is a directory":
        raise JsonFileError(path, problem, f"pass the path of a {what} inside it")
    if problem is not None:
        raise JsonFileError(path, problem, f"pass the path of a {what}")
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise JsonFileError(path, f"cannot be read ({exc.strerror or exc})",
                            "check the file's permissions") from None
    if len(data) > max_bytes:
        raise JsonFileError(path, f"is larger than {max_bytes // 1024**2} MiB",
                            f"pass a {what} of at most that size")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonFileError(path, f"is not UTF-8 text (byte {exc.start})",
                            "save it as UTF-8") from None


def depth_over(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children
                         if isinstance(child, dict | list))
    return False


def loads(text: str, path: Path | str, *, fix: str = "fix the JSON") -> Any:
    """``json.loads`` with every failure one ``JsonFileError``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonFileError(path, f"is not valid JSON ({exc.msg} at line {exc.lineno}, "
                            f"column {exc.colno})", fix) from None
    except RecursionError:
        raise JsonFileError(path, "nests deeper than the JSON parser can read",
                            f"{fix} (at most {MAX_DEPTH} levels)") from None
    if depth_over(value):
        raise JsonFileError(path, f"nests more than {MAX_DEPTH} levels deep",
                            f"{fix} (at most {MAX_DEPTH} levels)")
    return value


def load_json_file(path: Path | str, *, what: str = "JSON file", fix: str = "fix the JSON",
                   max_bytes: int = MAX_BYTES) -> Any:
    """A JSON file the user named: regular, bounded, UTF-8, valid, not absurdly deep."""
    p = Path(path).expanduser()
    return loads(read_text(p, what=what, max_bytes=max_bytes), p, fix=fix)


def written_by_us(path: Path, is_ours: Callable[[dict[str, Any]], bool], *,
                  max_bytes: int = SETTINGS_BYTES) -> bool:
    """Whether an existing file may be replaced: a JSON object (up to ``max_bytes``) that
    ``is_ours`` recognises as this tool's own output. Anything else is the user's, and a
    command that writes to a path the user named refuses to overwrite it."""
    try:
        data = load_json_file(path, max_bytes=max_bytes)
    except (JsonFileError, OSError):
        return False
    return isinstance(data, dict) and is_ours(data)


def write_json_atomic(path: Path, data: Any, *, indent: int | None = None) -> None:
    """Write ``data`` as JSON so that ``path`` is always whole: the old file or the new
    one, never half of one (a run stopped, or a second signal, while it is written)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent, ensure_ascii=False)
                   + ("\n" if indent is not None else ""), encoding="utf-8")
    os.replace(tmp, path)
