"""The ``mem0`` and ``simple_rag`` config blocks and what each provider declares."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nanobot_memory_adapters.contract import Capability, ProviderInfo
from nanobot_memory_adapters.llm_endpoint import OpenAICompatibleEndpoint
from nanobot_memory_adapters.onnx_embedder import EmbeddingRuntime, default_runtime

#: Text tokens of one mem0 memory shown in a section, which size the native ``top_k``: an
#: extracted fact, 18.6-21.0 on average (conv-26, the shared 1.5B model); a verbatim chat
#: message, the median LoCoMo turn (24-28 tokens; its mean is 26-31). Sized by the mean, a
#: verbatim ``top_k`` (50 at 2,000 tokens) left the budget unfilled whenever the best turns
#: were short (conv-26: 1,335 of 1,930 asks showed every result, 1,878 tokens on
#: average); by the median it asks for 60 and the packer keeps what fits.
#: benchmarks/bench_context_labels.py measures both.
EXTRACTED_ITEM_TOKENS = 20
VERBATIM_ITEM_TOKENS = 25
ITEM_FIELDS = ("native_id", "score", "created_at", "updated_at", "source_event_ids")
IDENTITY_KEYS = frozenset({"user_id", "agent_id", "run_id", "actor_id"})

_MEM0_CAPABILITIES: tuple[Capability, ...] = (
    "bulk_ingest", "readiness", "native_mutation", "provenance", "native_query")

MEM0_INFO = ProviderInfo(
    name="mem0",
    condition_kind="architecture",
    consistency_model="immediate",
    stores_events=True,
    tag_mapping="filter",
    memory_form="derived",
    item_fields=ITEM_FIELDS,
    native_memory_types=("memory",),
    native_ingest_modes=("add(infer=True)", "add(multi-message, infer=True)"),
    requires_llm=True,
    capabilities=_MEM0_CAPABILITIES,
    description="mem0 AsyncMemory: LLM extraction (additive) into local Qdrant, semantic search.",
)

# The same adapter without extraction: a labelled control, never presented as mem0.
SIMPLE_RAG_INFO = MEM0_INFO.model_copy(
    update={
        "name": "simple_rag",
        "condition_kind": "control",
        "memory_form": "verbatim",
        "native_memory_types": ("message",),
        "native_ingest_modes": ("add(infer=False)", "add(multi-message, infer=False)"),
        "requires_llm": False,
        # the turns are what it embeds, so a whole conversation can be embedded ahead
        "capabilities": (*_MEM0_CAPABILITIES, "ingest_lookahead"),
        "description": "mem0 with infer=False: messages stored verbatim, semantic search "
        "(ablation).",
    }
)



class LLMSettings(OpenAICompatibleEndpoint):
    """An OpenAI-compatible chat endpoint for mem0's extraction (``base_url`` and ``model``
    required; no key: ``api_key_env``, else $OPENAI_API_KEY, else a placeholder)."""

    base_url: str = Field(  # pyright: ignore[reportIncompatibleVariableOverride]
        min_length=1, description="e.g. http://127.0.0.1:8000/v1"
    )
    model: str = Field(min_length=1)  # pyright: ignore[reportIncompatibleVariableOverride]
    temperature: float = Field(default=0.1, ge=0, le=2)
    max_tokens: int = Field(
        default=4000, gt=0,
        description="Cap on one extraction answer; an answer cut here is a failed write.",
    )
    timeout_s: float = Field(
        default=600.0, gt=0,
        description="Seconds one extraction call may take (a small CPU model reading "
        "mem0's ~8k-token prompt cold needs minutes).",
    )
    max_retries: int = Field(default=1, ge=0, description="openai client retries per call.")


class VectorStoreSettings(BaseModel):
    """Where mem0 keeps the vectors: ``qdrant`` (the default: Qdrant's local mode under
    ``path``, or a Qdrant server at ``url``) or ``pgvector`` (PostgreSQL with pgvector, for
    a store that outgrows one process). Either way one collection (table) per scope."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["qdrant", "pgvector"] = "qdrant"
    url: str | None = Field(
        default=None, description="qdrant: a Qdrant server, e.g. http://127.0.0.1:6333 "
        "(default: local mode under path).")
    api_key_env: str | None = Field(
        default=None, description="qdrant server: the environment variable holding its key.")
    connection_string: str | None = Field(
        default=None, description="pgvector: a libpq URI or key=value string, e.g. "
        "postgresql://mem0@127.0.0.1:5432/mem0 (a password is better in "
        "connection_string_env).")
    connection_string_env: str | None = Field(
        default=None, description="pgvector: the environment variable holding the "
        "connection string.")
    hnsw: bool = Field(default=True, description="pgvector: mem0's HNSW index per table.")
    ef_search: int = Field(
        default=100, gt=0, description="pgvector: hnsw.ef_search; searches scan iteratively "
        "in strict order (hnsw.iterative_scan), so a result list is never cut at it.")
    max_connections: int = Field(default=5, gt=0, description="pgvector: pool size.")

    @model_validator(mode="after")
    def _fits_provider(self) -> VectorStoreSettings:
        pg = ("connection_string", "connection_string_env")
        if self.provider == "pgvector":
            if not (self.connection_string or self.connection_string_env):
                raise ValueError("vector_store.provider 'pgvector' needs connection_string "
                                 "or connection_string_env")
            if self.url or self.api_key_env:
                raise ValueError("url and api_key_env are for provider 'qdrant'")
        elif any(getattr(self, k) for k in pg):
            raise ValueError("connection_string(_env) is for provider 'pgvector'")
        return self

    def resolved_connection_string(self) -> str:
        import os

        value = self.connection_string or (
            os.environ.get(self.connection_string_env) if self.connection_string_env else None)
        if not value:
            raise ValueError(f"vector_store.connection_string_env: ${self.connection_string_env}"
                             " is not set")
        return value


class SimpleRagConfig(BaseModel):
    """The ``simple_rag`` block (also the base of the ``mem0`` block)."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(
        default=None, description="Directory for Qdrant and history (default <data_dir>/mem0)."
    )
    collection_name: str | None = Field(
        default=None,
        description="Qdrant collection (default 'mem0' with inference, 'simple_rag' without).",
    )
    history_db_path: str | None = None
    vector_store: VectorStoreSettings = Field(default_factory=VectorStoreSettings)
    embedding_model: str | None = Field(
        default=None, description="Local sentence-transformers path (default: bundled MiniLM)."
    )
    embedding_dims: int = Field(default=384, gt=0)
    embedding_runtime: EmbeddingRuntime | None = Field(
        default=None,
        description="How the embedder runs: 'onnx' (the model on ONNX Runtime, exported "
        "once into the cache; no torch in the process), 'onnx_int8' (the same export with "
        "int8 weights, quantized locally once: ~2.4x less embedding CPU, other vectors and "
        "so other results; docs/mem0.md) or 'sentence_transformers' (mem0's own "
        "huggingface provider). Default: 'onnx' for the bundled MiniLM (its vectors equal "
        "sentence-transformers' within float noise), 'sentence_transformers' for an "
        "embedding_model of your own.",
    )
    agent_scoped: bool = Field(
        default=False, description="Also write and filter by agent_id (scope.agent_id)."
    )
    threshold: float = Field(default=0.1, ge=0, le=1, description="mem0 search threshold.")
    rerank: bool = False
    reranker: dict[str, Any] | None = Field(
        default=None, description="mem0 reranker block {provider, config}; needed for rerank."
    )
    tag_mapping: Literal["filter", "metadata"] = "filter"
    item_text_tokens: int | None = Field(
        default=None, gt=0, description="Typical tokens of one memory's text; with the "
        "label estimate it turns the budget into the search's top_k (default: 20 for an "
        "extracted fact, 25 for a stored chat message: VERBATIM_ITEM_TOKENS).",
    )
    top_k_ceiling: int = Field(default=100, gt=0)
    bulk_max_messages: int | None = Field(
        default=None, gt=0,
        description="Messages per bulk add call (default 2 with extraction, as mem0's own "
        "LoCoMo evaluation batches: one LLM call per 2 messages keeps the extraction answer "
        "short and provenance per turn pair; without extraction one event per add, so each "
        "stored message names exactly its own turn — a larger value gives every message of "
        "the batch the whole batch as its source).",
    )

    @model_validator(mode="after")
    def _resolve_runtime(self) -> SimpleRagConfig:
        """The runtime is always concrete after validation, so manifests record it."""
        if self.embedding_runtime is None:
            self.embedding_runtime = default_runtime(self.embedding_model)
        return self

    @model_validator(mode="after")
    def _rerank_needs_reranker(self) -> SimpleRagConfig:
        if self.rerank and not self.reranker:
            raise ValueError(
                "rerank is true but no reranker is configured; mem0 would silently skip "
                "reranking — add a 'reranker' block or set rerank to false"
            )
        return self


class Mem0Config(SimpleRagConfig):
    """The ``mem0`` block. Without ``llm`` it runs infer=False and reports ``simple_rag``."""
    llm: LLMSettings | None = None
    infer: bool = Field(default=True, description="Use mem0 extraction when an LLM is set.")
    custom_instructions: str | None = Field(
        default=None, description="mem0's own custom extraction instructions."
    )


