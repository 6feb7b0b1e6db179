"""Query embeddings computed once per (model, text) in a process.

A bench asks the same question at every test point of a unit, and the same questions in
every unit of a run; mem0 embeds each again (``embedding_model.embed(query, "search")``).
This proxy wraps mem0's own configured embedder and memoizes only that call (for texts
up to ``MAX_CACHED_CHARS``): the vector is the one mem0's embedder returned the first
time (a copy is handed out), so search results are identical with and without it.
Writes (``add``/``update``, batches) always go to the embedder.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

#: Distinct query texts kept. A vector is a list of 384 Python floats: ~12.2 KiB
#: (measured with sys.getsizeof, list and floats), so 4,096 of them hold ~50 MiB.
MAX_QUERIES = 4096
#: Longer texts are embedded every time, never kept: a bench asks short questions again,
#: while a long query (a pasted document) is rarely repeated and would make the keys,
#: not the vectors, the cache's size (4,096 keys of at most 1,000 characters: <= ~4 MiB).
MAX_CACHED_CHARS = 1000

_cache: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
_lock = threading.Lock()


class CachedQueryEmbedder:
    """mem0's embedder with ``embed(text, "search")`` memoized per (model, text)."""

    def __init__(self, embedder: Any, model_key: str) -> None:
        self._embedder = embedder
        self._model_key = model_key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed(self, text: Any, memory_action: Any = None) -> Any:
        if (memory_action != "search" or not isinstance(text, str)
                or len(text) > MAX_CACHED_CHARS):
            return self._embedder.embed(text, memory_action)
        key = (self._model_key, text)
        with _lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return list(hit)
        vector = self._embedder.embed(text, memory_action)
        with _lock:
            _cache[key] = list(vector)
            while len(_cache) > MAX_QUERIES:
                _cache.popitem(last=False)
        return vector


def cache_query_embeddings(memory: Any, model_key: str) -> None:
    """Wrap ``memory.embedding_model`` (once) with the per-process query cache."""
    if not isinstance(memory.embedding_model, CachedQueryEmbedder):
        memory.embedding_model = CachedQueryEmbedder(memory.embedding_model, model_key)


def clear() -> None:
    with _lock:
        _cache.clear()
