"""The one place where the harness turns ids into folder names and deletes files.

Ids come from datasets and scenario files (LoCoMo ``sample_id``, preference persona and
scenario ids) and from the provider registry: none of them may choose where the harness
writes or what it removes. ``safe_name`` maps any id to one path component (no ``/``,
no ``..``, not absolute), injectively: two different ids never share a folder.
``remove_tree`` and ``remove_file`` delete only inside the run's own folder
(``ensure_inside``); every ``rmtree`` and ``unlink`` of the harness goes through them.
``claim_run_folder`` keeps a run from deleting or overwriting files that only share a
name with its outputs (a folder a user chose as ``--out`` that never held a run).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
#: longer names end in a digest (file systems cap a name at 255 bytes)
MAX_NAME = 120
_LONG_MARK = "%~"  # never produced by the escaping below, so long names stay apart


class UnsafePath(ValueError):
    """A path the harness was about to delete lies outside the folder it owns."""


def safe_name(identifier: str) -> str:
    """``identifier`` as one folder or file name: letters, digits, ``_``, ``.`` and ``-``
    stay (``conv-26`` is ``conv-26``); any other character, and a leading ``.``, becomes
    ``%XX`` per UTF-8 byte (``%`` itself too), so the mapping is injective and the name
    can never be ``.``, ``..``, absolute or hold a separator. A name longer than
    ``MAX_NAME`` keeps its start and ends in a SHA-256 digest of the whole id."""
    if not isinstance(identifier, str) or not identifier:
        raise ValueError(f"id {identifier!r}: give a non-empty name")
    parts: list[str] = []
    for i, ch in enumerate(identifier):
        if ch in _PLAIN and not (i == 0 and ch == "."):
            parts.append(ch)
        else:
            parts.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    name = "".join(parts)
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return name[: MAX_NAME - len(digest) - len(_LONG_MARK)] + _LONG_MARK + digest


def joined_name(first: str, second: str) -> str:
    """Two ids as one name, ``first__second``, still injective: ``first``'s ``_`` that
    would touch the separator is escaped (``full_history__conv-26`` stays readable)."""
    head = safe_name(first)
    head = "".join("%5F" if ch == "_" and (i + 1 == len(head) or head[i + 1] == "_")
                   else ch for i, ch in enumerate(head))
    return f"{head}__{safe_name(second)}"


#: a folder name ``safe_name`` never gives (it escapes a leading ``.``)
PROBE_DIR = ".probe"


def ensure_inside(root: Path, path: Path) -> Path:
    """``path`` resolved, if it lies strictly inside ``root`` (symbolic links followed);
    otherwise ``UnsafePath`` naming both."""
    base = Path(root).resolve()
    target = Path(path).resolve()
    if target == base or base not in target.parents:
        raise UnsafePath(
            f"refusing to delete {str(path)!r}: it is not inside {str(root)!r} (the folder "
            "this run owns); an id or a path in the input points outside it"
        )
    return target


def remove_tree(root: Path, path: Path) -> None:
    """Delete the folder ``path`` (if there) when it lies inside ``root``; a symbolic link
    is unlinked, never followed."""
    if os.path.islink(path):
        _link_inside(root, Path(path))
        Path(path).unlink()
        return
    if not Path(path).exists():
        return
    shutil.rmtree(ensure_inside(root, path), ignore_errors=True)


def remove_file(root: Path, path: Path) -> None:
    """Delete the file ``path`` (if there) when it lies inside ``root``."""
    if os.path.islink(path):
        _link_inside(root, Path(path))
    elif not Path(path).exists():
        return
    else:
        ensure_inside(root, path)
    Path(path).unlink(missing_ok=True)


def _link_inside(root: Path, link: Path) -> None:
    """The symbolic link ``link`` itself (not what it points at) lies inside ``root``."""
    base, folder = Path(root).resolve(), link.parent.resolve()
    if folder != base and base not in folder.parents:
        raise UnsafePath(f"refusing to delete {str(link)!r}: it is not inside {str(root)!r}")


#: written into an output folder when a run first claims it; a folder with it (or with a
#: run's ``checkpoint.json``) holds a run of this tool
RUN_MARKER = ".nanobot-memory-run"


RUN_LOCK = ".nanobot-memory-run.lock"


class FolderInUse(ValueError):
    """Another run holds the output folder."""


@contextlib.contextmanager
def run_lock(out: Path, option: str = "--out") -> Iterator[None]:
    """Hold ``out`` for this run (an advisory lock on ``<out>/.nanobot-memory-run.lock``
    holding the pid): a second run into the same folder is refused in one line naming the
    first run's pid, before it reads the checkpoint or writes anything. Released when the
    run ends (or its process dies)."""
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    path = out / RUN_LOCK
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the run
    held = False
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise FolderInUse(
                f"{option} {out} is in use by another run (pid {holder}); wait for it to "
                "finish, or give another folder") from None
        held = True
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        if held:  # nothing of the lock is left behind (a refused run leaves no folder)
            path.unlink(missing_ok=True)
        handle.close()
        if held and created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when the run wrote nothing there


class NotARunFolder(ValueError):
    """An output folder holds files with a run's names that no run of this tool wrote."""


def claim_run_folder(out: Path, names: Sequence[str], option: str = "--out") -> None:
    """Claim ``out`` for a run that may delete or overwrite ``names`` in it: refuse (one
    line, nothing touched) when some of them are there but the folder never held a run
    (no marker, no ``checkpoint.json``); otherwise mark it as a run's folder."""
    marker = out / RUN_MARKER
    if not marker.is_file() and not (out / "checkpoint.json").is_file():
        found = sorted(name for name in names if os.path.lexists(out / name))
        if found:
            raise NotARunFolder(
                f"{option} {out} holds {', '.join(found)}, but no run of nanobot-memory "
                "wrote them; nothing was deleted: give an empty or new folder"
            )
    out.mkdir(parents=True, exist_ok=True)
    marker.touch()
