"""bm25: a lexical control -- every turn kept verbatim, ranked by BM25 against the query.

The control that asks "does plain keyword search already do this?". Turns are stored as
full_history stores them (the same SQLite transcript table, its own file); a retrieve
ranks every turn of the scope with ``bm25s`` (Lucene BM25, English stopwords, Snowball
English stemming) and returns the best ``top_k`` in rank order (turns sharing no term
with the query last, newest first); the section shows them in that order until the
budget is spent.

Each scope keeps its own index (``ScopeIndex``), labelled with the store's version of
that scope (``FullHistory.store_version``): a retrieve whose scope has not changed asks
the index it has; one whose scope this process wrote to reads only the new turns,
tokenizes only them, and has ``bm25s`` index the scope's corpus again (``bm25s`` cannot
add a document to an index: its IDF is over the whole corpus); anything else (a reset,
another process's commit) reads the scope again. Other scopes' turns cost nothing.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

# imported here, not when first ranking: without the [bm25] extra the provider must not
# load (setup would offer it and its health say ok, then every recall fail)
import bm25s
import Stemmer
from pydantic import BaseModel, ConfigDict, Field

from nanobot_memory_adapters.base import NativeRetrieval
from nanobot_memory_adapters.conditions.full_history import (
    TURN_COLUMNS,
    TURNS_FROM,
    FullHistory,
    turn_item,
)
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.formatting import RenderedContext, render_context
from nanobot_memory_adapters.provider import ProviderEnv

INFO = ProviderInfo(
    name="bm25",
    condition_kind="control",
    consistency_model="immediate",
    stores_events=True,
    tag_mapping="metadata",
    memory_form="verbatim",
    item_fields=("native_id", "event_at", "score", "source_event_ids"),
    native_ingest_modes=("transcript",),
    # declared: none of the optional capabilities (full_history's store: one insert per
    # turn, immediately readable, no native ids beyond the event's, no diagnostics)
    capabilities=(),
    description="Every turn kept verbatim; BM25 (bm25s) ranks them against the query.",
)


# A scope's turns after a rowid, in full_history's order, each with its rowid last.
_SELECT_AFTER = (f"SELECT {TURN_COLUMNS}, e.rowid {TURNS_FROM}"
                 "WHERE e.scope = ? AND e.rowid > ? ORDER BY e.ts, e.rowid")


class Bm25Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = None  # default: <data_dir>/bm25.sqlite3
    top_k: int = Field(default=100, gt=0, description="Ranked turns returned per retrieve.")


def _tokenizer() -> Any:
    return Stemmer.Stemmer("english")


def _stems(texts: list[str], stemmer: Any) -> list[list[str]]:
    """Each text's stemmed terms, as ``bm25s.tokenize`` makes them (one text's terms do
    not depend on the others', so a corpus can be tokenized a part at a time)."""
    terms = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, return_ids=False,
                           show_progress=False)
    assert isinstance(terms, list)
    return terms


class ScopeIndex:
    """One scope's turns (in store order), their terms and the ``bm25s`` index over them.

    Terms are kept as ids into a vocabulary of the scope's own; bm25s's scores do not
    depend on which id a term has (``bm25s.tokenize`` numbers a corpus's terms in set
    order), so an index built from turns tokenized a part at a time ranks as one built
    from the whole corpus at once."""
    def __init__(self, stemmer: Any) -> None:
        self.stemmer = stemmer
        self.rows: list[tuple] = []  # SELECT_TURNS columns + rowid, in (ts, rowid) order
        self.version: str | None = None
        self._vocab: dict[str, int] = {}
        self._ids: dict[int, list[int]] = {}  # rowid -> term ids
        self._index: Any = None

    @property
    def last_rowid(self) -> int:
        return max(self._ids, default=0)

    def add(self, rows: list[tuple]) -> None:
        """Take in new turns (``rows``, each ending in its rowid) and index again."""
        fresh = [r for r in rows if r[-1] not in self._ids]
        for row, terms in zip(fresh, _stems([r[4] for r in fresh], self.stemmer), strict=True):
            self._ids[row[-1]] = [self._vocab.setdefault(t, len(self._vocab)) for t in terms]
        self.rows = sorted([*self.rows, *fresh], key=lambda r: (r[3], r[-1]))
        self._index = None
        if self.rows:
            self._index = bm25s.BM25()
            # a copy: index() adds its empty-document token to the vocabulary it is given
            self._index.index(([self._ids[r[-1]] for r in self.rows], dict(self._vocab)),
                              show_progress=False)

    def rank(self, query: str, k: int) -> list[tuple[int, float]]:
        """(row index, score) of the ``k`` best turns for ``query``, best first. Every
        turn is ranked: after those sharing a (stemmed) term with the query come the
        rest, score 0, newest first -- so the section is filled like every other
        control's, never empty because the question's words differ from the turns'."""
        n = len(self.rows)
        if not n or self._index is None:
            return []
        q = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False)
        scored: list[tuple[int, float]] = []
        if any(len(ids) for ids in getattr(q, "ids", q)):
            docs, scores = self._index.retrieve(q, k=n, show_progress=False)
            scored = [(int(i), float(s)) for i, s in zip(docs[0], scores[0], strict=True)
                      if s > 0]
        hit = {i for i, _ in scored}
        rest = [(i, 0.0) for i in reversed(range(n)) if i not in hit]
        return (scored + rest)[:k]


class Bm25(FullHistory):
    """full_history's store, BM25's ranking (the store is shared code, not a copy)."""
    query_independent = False  # ranks by the query (FullHistory's is True)
    config_model = Bm25Config

    def __init__(self, path: str | Path, *, top_k: int = 100) -> None:
        super().__init__(path)
        self.info = INFO
        self.top_k = top_k
        self._indexes: dict[str, ScopeIndex] = {}
        self._index_lock = threading.Lock()  # one build of a scope's index at a time

    @classmethod
    def from_config(cls, config: Bm25Config, env: ProviderEnv) -> Bm25:  # type: ignore[override]
        path = Path(config.path).expanduser() if config.path else env.data_dir / "bm25.sqlite3"
        return cls(path, top_k=config.top_k)

    def _scope_index(self, key: str) -> tuple[ScopeIndex, bool]:
        """The scope's index, brought up to the store's version of the scope: (index,
        whether it had to change). Only this process's own writes to the scope moved the
        version: the turns after the last one indexed are read (rows are only ever
        added, except by a reset, which drops the index); any other change (another
        connection's commit, a reopened file): the scope is read again."""
        with self._index_lock:
            version = self._version(key)  # before reading: a write after it re-reads later
            index = self._indexes.get(key)
            if index is not None and index.version == version:
                return index, False
            same_handle = index is not None and index.version is not None and (
                index.version.rsplit(".", 1)[0] == version.rsplit(".", 1)[0])
            if index is None or not same_handle:
                index = ScopeIndex(index.stemmer if index is not None else _tokenizer())
            rows = self._run(_SELECT_AFTER, (key, index.last_rowid))
            index.add(rows)
            index.version = version
            self._indexes[key] = index
            return index, True

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        index, rebuilt = await asyncio.to_thread(self._scope_index, request.scope.key)
        rows = index.rows
        k = min(self.top_k, request.budget.max_items or self.top_k)
        # ranked over the whole transcript (the speaker's name included, as before)
        ranked = await asyncio.to_thread(index.rank, request.query, k)
        items = [turn_item(rows[i][:-1], score) for i, score in ranked]
        raw: dict[str, Any] = {"total_events": len(rows), "ranked": len(items),
                               "index_updated": rebuilt}
        return NativeRetrieval(items=items, raw=raw, native_operation="bm25s.BM25.retrieve",
                               native_request={"k": k, "method": "lucene",
                                               "stopwords": "en", "stemmer": "snowball-english"})

    async def reset(self, scope: MemoryScope) -> str | None:
        try:
            return await super().reset(scope)
        finally:
            with self._index_lock:
                self._indexes.pop(scope.key, None)

    async def aclose(self) -> None:
        with self._index_lock:
            self._indexes.clear()
        await super().aclose()

    def render(self, scope: MemoryScope | str, items: list[RetrievedItem],
               budget: ContextBudget) -> RenderedContext:
        """In rank order, until the budget is spent (not full_history's chronology)."""
        key = scope.key if isinstance(scope, MemoryScope) else scope
        return render_context(backend=self.info.name, scope=key, items=items, budget=budget)
