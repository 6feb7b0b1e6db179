"""Which embedder mem0 gets: the model on ONNX Runtime (``embedding_runtime: "onnx"``, the
default for the bundled MiniLM, or ``"onnx_int8"``, its int8-quantized weights), or mem0's
own ``huggingface`` provider (sentence-transformers).

mem0's own ONNX embedder (``fastembed``) loads models only by name from a hub, so it cannot
run the bundled weights offline, and its ``huggingface`` module imports sentence-transformers
(and torch) as it loads; so for ONNX mem0 is configured with a placeholder OpenAI embedder
that is never called (no key, an unroutable local URL) and ``memory.embedding_model`` is
replaced by ``OnnxMem0Embedding`` right after ``AsyncMemory`` is built. mem0 only ever calls
``embed``/``embed_batch`` on it, so everything else mem0 does is its own.
"""

from __future__ import annotations

from typing import Any

from nanobot_memory_adapters.backends.mem0.config import SimpleRagConfig
from nanobot_memory_adapters.local_models import bundled_minilm_path
from nanobot_memory_adapters.onnx_embedder import (
    ONNX_RUNTIMES,
    OnnxSentenceEmbedder,
    load_onnx_embedder,
)

#: The placeholder's URL: port 9 (discard) on loopback, so a call that should never
#: happen fails at once instead of leaving the machine.
UNUSED_URL = "http://127.0.0.1:9/v1"


def model_path(config: SimpleRagConfig) -> str:
    return config.embedding_model or bundled_minilm_path(
        extra="mem0", setting="memory.mem0.embedding_model"
    )


def native_embedder(config: SimpleRagConfig) -> dict[str, Any]:
    """mem0's ``embedder`` block for this config."""
    if config.embedding_runtime in ONNX_RUNTIMES:
        return {"provider": "openai", "config": {
            "model": f"{config.embedding_runtime}:{model_path(config)}", "api_key": "unused",
            "openai_base_url": UNUSED_URL, "embedding_dims": config.embedding_dims,
        }}
    return {"provider": "huggingface", "config": {
        "model": model_path(config), "embedding_dims": config.embedding_dims,
        "model_kwargs": {"device": "cpu"},
    }}


class OnnxMem0Embedding:
    """mem0's embedder interface (``embed``, ``embed_batch``) over ``OnnxSentenceEmbedder``,
    returning what mem0's ``huggingface`` provider returns (lists of floats)."""

    def __init__(self, model: OnnxSentenceEmbedder, native_config: Any) -> None:
        self.model = model
        self.config = native_config

    def embed(self, text: Any, memory_action: Any = None) -> list[float]:
        return self.model.encode([text])[0].tolist()

    def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
        return self.model.encode(list(texts)).tolist() if texts else []


def install_runtime(memory: Any, config: SimpleRagConfig) -> None:
    """Give a freshly built ``AsyncMemory`` the configured runtime (no-op for the default)."""
    if config.embedding_runtime not in ONNX_RUNTIMES:
        return
    model = load_onnx_embedder(model_path(config), runtime=config.embedding_runtime)
    if model.dims != config.embedding_dims:
        from nanobot_memory_adapters.backends.mem0.config import Mem0Config

        block = "mem0" if isinstance(config, Mem0Config) else "simple_rag"  # whose block
        raise ValueError(
            f"the ONNX embedder gives {model.dims} dims but embedding_dims is "
            f"{config.embedding_dims}; set memory.{block}.embedding_dims to {model.dims}"
        )
    memory.embedding_model = OnnxMem0Embedding(model, memory.embedding_model.config)


def describe(config: SimpleRagConfig, memory: Any | None = None) -> dict[str, Any]:
    """The embedder as health reports it."""
    if config.embedding_runtime not in ONNX_RUNTIMES:
        return {"provider": "huggingface",
                "model": config.embedding_model or "bundled all-MiniLM-L6-v2",
                "dims": config.embedding_dims}
    details: dict[str, Any] = {"provider": config.embedding_runtime,
                               "model": config.embedding_model or "bundled all-MiniLM-L6-v2",
                               "dims": config.embedding_dims}
    model = getattr(getattr(memory, "embedding_model", None), "model", None)
    if isinstance(model, OnnxSentenceEmbedder):
        details.update(onnxruntime=model.onnxruntime_version, export=str(model.export_path))
    return details
