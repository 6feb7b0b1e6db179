"""Query embeddings computed once per (model, text) in a process.

A bench asks the same question at every test point of a unit, and the same questions in
every unit of a run; mem0 embeds each again (``embedding_model.embed(query, "search")``).
This proxy wraps mem0's own configured embedder and memoizes only that call (for texts
up to ``MAX_CACHED_CHARS``): the vector is the one mem0's embedder returned the first
time (a copy is handed out), so search results are identical with and without it.

Bulk ingest (``infer=False``) embeds its turns in one batch: ``hold`` asks mem0's own
embedder for ``embed_batch(texts, "add")`` once, and mem0's per-message
``embed(text, "add")`` inside that bulk call is served from it; the adapter's
``ingest_lookahead`` holds a whole conversation's turns the same way, so the bulk calls
inside it find their texts held and embed nothing. A batched vector is
not always bit-identical to a single one (padding and kernel order: up to ~3e-7 per
component measured on LoCoMo conv-26, MiniLM); the vectors, the stored points and the
search results are otherwise the same, and the demo's metrics hash does not change.
Any other ``add``/``update`` goes to the embedder.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
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
        # texts of bulk calls in progress -> (vector, how many open prefills hold it)
        self._batch: dict[str, list[float]] = {}
        self._holders: Counter[str] = Counter()
        self._batch_lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def hold(self, texts: Sequence[str]) -> list[str]:
        """Embed ``texts`` in one ``embed_batch(texts, "add")`` of mem0's embedder; until
        ``release``, ``embed(text, "add")`` of any of them is served from that batch.
        Returns the handle for ``release`` (the distinct texts held)."""
        wanted = list(dict.fromkeys(t for t in texts if isinstance(t, str)))
        with self._batch_lock:
            todo = [t for t in wanted if t not in self._batch]
        vectors = list(self._embedder.embed_batch(todo, "add")) if todo else []
        if len(vectors) != len(todo):
            raise ValueError(f"embed_batch returned {len(vectors)} vectors for {len(todo)} texts")
        with self._batch_lock:
            for text, vector in zip(todo, vectors, strict=True):
                self._batch.setdefault(text, list(vector))
            self._holders.update(wanted)
        return wanted

    def release(self, held: Sequence[str]) -> None:
        """Drop what ``hold`` kept, unless another bulk call in progress holds it too."""
        with self._batch_lock:
            self._holders.subtract(held)
            for text in held:
                if self._holders[text] <= 0:
                    del self._holders[text]
                    self._batch.pop(text, None)

    def embed(self, text: Any, memory_action: Any = None) -> Any:
        if memory_action == "add" and isinstance(text, str):
            with self._batch_lock:
                hit = self._batch.get(text)
            if hit is not None:
                return list(hit)
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
