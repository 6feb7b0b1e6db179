"""Dataset identity: a file's sha256 named when it matches a known upstream release.

The manifest always records the sha256 of ``--dataset``; two labs compare that. A name
is added only for a hash whose upstream origin is documented: LoCoMo's ``locomo10.json``
as the locomo-audit project publishes it (its README: a byte-for-byte match with the
official upstream file, verified by the audit in February 2026; we hashed the audit's
copy). LongMemEval's files (``longmemeval_s.json``, ``_m``, ``_oracle``, the ``-cleaned``
re-release) are hosted where this machine cannot reach, so they are not named yet; any
other file is reported as ``unverified`` rather than named by a guess (docs/harness.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# sha256 -> {"name": ..., "source": ...}; add an entry only after hashing the upstream file.
KNOWN_RELEASES: dict[str, dict[str, str]] = {
    "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4": {
        "name": "LoCoMo locomo10.json",
        "source": "snap-research/locomo data/locomo10.json, as published byte-identical by "
                  "dial481/locomo-audit (data/locomo10.json, verified by the audit Feb 2026)",
    },
}


def known_release(sha256: str) -> dict[str, Any]:
    """``{"name", "source", "matched": True}`` for a known release, else unverified."""
    hit = KNOWN_RELEASES.get(sha256.lower())
    if hit is not None:
        return {**hit, "matched": True}
    return {"matched": False, "name": None,
            "note": "not a release this harness has verified; compare sha256 directly"}


def folder_sha256(folder: Path) -> str:
    """A dataset folder's identity (BEAM): sha256 over each file's relative path and
    sha256, in path order."""
    import hashlib

    from nanobot_memory_adapters.harness.datasets.locomo import file_sha256

    digest = hashlib.sha256()
    for f in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        digest.update(f"{f.relative_to(folder).as_posix()}\0{file_sha256(f)}\n".encode())
    return digest.hexdigest()
