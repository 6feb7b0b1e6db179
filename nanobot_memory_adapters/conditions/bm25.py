"""bm25: a lexical control -- every turn kept verbatim, ranked by BM25 against the query.

The control that asks "does plain keyword search already do this?". Turns are stored as
full_history stores them (the same SQLite transcript table, its own file); a retrieve
ranks every turn of the scope with ``bm25s`` (Lucene BM25, English stopwords, built per
retrieve from the scope's turns, Snowball English stemming: no state to drift from the
store) and returns the best ``top_k`` in rank order (turns sharing no term with the query
last, newest first); the section shows them in that order until the budget is spent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

# imported here, not when first ranking: without the [bm25] extra the provider must not
# load (setup would offer it and its health say ok, then every recall fail)
import bm25s
import Stemmer
from pydantic import BaseModel, ConfigDict, Field

from nanobot_memory_adapters.base import NativeRetrieval
from nanobot_memory_adapters.conditions.full_history import SELECT_TURNS, FullHistory, turn_item
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.formatting import RenderedContext, render_context
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.tracing import TraceSink

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


class Bm25Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = None  # default: <data_dir>/bm25.sqlite3
    top_k: int = Field(default=100, gt=0, description="Ranked turns returned per retrieve.")


def bm25_rank(texts: list[str], query: str, k: int) -> list[tuple[int, float]]:
    """(index, score) of the ``k`` best texts for ``query``, best first. Every text is
    ranked: after those sharing a (stemmed) term with the query come the rest, score 0,
    newest first -- so the section is filled like every other control's, never empty
    because the question's words differ from the turns'."""
    if not texts:
        return []
    stem = Stemmer.Stemmer("english")
    corpus = bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False)
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    q = bm25s.tokenize([query], stopwords="en", stemmer=stem, show_progress=False)
    scored: list[tuple[int, float]] = []
    if any(len(ids) for ids in getattr(q, "ids", q)):
        docs, scores = index.retrieve(q, k=len(texts), show_progress=False)
        scored = [(int(i), float(s)) for i, s in zip(docs[0], scores[0], strict=True) if s > 0]
    hit = {i for i, _ in scored}
    rest = [(i, 0.0) for i in reversed(range(len(texts))) if i not in hit]
    return (scored + rest)[:k]


class Bm25(FullHistory):
    """full_history's store, BM25's ranking (the store is shared code, not a copy)."""

    config_model = Bm25Config

    def __init__(self, path: str | Path, *, top_k: int = 100,
                 trace_sink: TraceSink | None = None) -> None:
        super().__init__(path, trace_sink=trace_sink)
        self.info, self.backend_name = INFO, INFO.name
        self.top_k = top_k

    @classmethod
    def from_config(cls, config: Bm25Config, env: ProviderEnv) -> Bm25:  # type: ignore[override]
        path = Path(config.path).expanduser() if config.path else env.data_dir / "bm25.sqlite3"
        return cls(path, top_k=config.top_k, trace_sink=env.trace_sink)

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        rows = await asyncio.to_thread(
            self._run, SELECT_TURNS + "e.ts, e.rowid", (request.scope.key,))
        k = min(self.top_k, request.budget.max_items or self.top_k)
        # ranked over the whole transcript (the speaker's name included, as before)
        ranked = await asyncio.to_thread(bm25_rank, [r[4] for r in rows], request.query, k)
        items = [turn_item(rows[i], score) for i, score in ranked]
        raw: dict[str, Any] = {"total_events": len(rows), "ranked": len(items)}
        return NativeRetrieval(items=items, raw=raw, native_operation="bm25s.BM25.retrieve",
                               native_request={"k": k, "method": "lucene",
                                               "stopwords": "en", "stemmer": "snowball-english"})

    def render(self, scope: MemoryScope | str, items: list[RetrievedItem],
               budget: ContextBudget) -> RenderedContext:
        """In rank order, until the budget is spent (not full_history's chronology)."""
        key = scope.key if isinstance(scope, MemoryScope) else scope
        return render_context(backend=self.backend_name, scope=key, items=items, budget=budget)
