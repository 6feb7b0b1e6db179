"""Dataset identity: a file's sha256 named when it matches a known upstream release.

The manifest always records the sha256 of ``--dataset``; two labs compare that. A name
is added only for a hash we have checked against the upstream release ourselves
(LoCoMo ``locomo10.json``; LongMemEval ``longmemeval_s.json``, ``_m``, ``_oracle`` and
the ``-cleaned`` re-release). None is verified yet: the list is empty, and every file
is reported as ``unverified`` rather than named by a guess (docs/harness.md).
"""

from __future__ import annotations

from typing import Any

# sha256 -> {"name": ..., "source": ...}; add an entry only after hashing the upstream file.
KNOWN_RELEASES: dict[str, dict[str, str]] = {}


def known_release(sha256: str) -> dict[str, Any]:
    """``{"name", "source", "matched": True}`` for a known release, else unverified."""
    hit = KNOWN_RELEASES.get(sha256.lower())
    if hit is not None:
        return {**hit, "matched": True}
    return {"matched": False, "name": None,
            "note": "not a release this harness has verified; compare sha256 directly"}
