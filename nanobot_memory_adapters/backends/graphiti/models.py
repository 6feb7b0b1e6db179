"""Local models in Graphiti's slots: an embedder (the model on ONNX Runtime, or
sentence-transformers) and a sentence-transformers cross-encoder (no network; one model
object per path per process)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.embedder.client import EmbedderClient, EmbedderConfig

from nanobot_memory_adapters.onnx_embedder import (
    ONNX_RUNTIMES,
    EmbeddingRuntime,
    OnnxSentenceEmbedder,
    load_onnx_embedder,
)
from nanobot_memory_adapters.sdk_output import quiet_progress

_MODELS: dict[tuple[str, str, str], Any] = {}
_MODELS_LOCK = threading.Lock()


def _load_model(kind: str, path: str, device: str,
                runtime: EmbeddingRuntime = "sentence_transformers") -> Any:
    """One model object per (kind, path, device or runtime) per process; loading is slow.
    An embedder on ONNX Runtime imports neither torch nor transformers."""
    if kind == "embedder" and runtime in ONNX_RUNTIMES:
        key = (kind, path, runtime)
        with _MODELS_LOCK:
            if key not in _MODELS:
                _MODELS[key] = (load_onnx_embedder(path, runtime=runtime), threading.Lock())
            return _MODELS[key]
    key = (kind, path, device)
    with _MODELS_LOCK, quiet_progress():
        if key not in _MODELS:
            if kind == "embedder":
                from sentence_transformers import SentenceTransformer

                _MODELS[key] = (SentenceTransformer(path, device=device), threading.Lock())
            else:
                from sentence_transformers import CrossEncoder

                _MODELS[key] = (CrossEncoder(path, device=device), threading.Lock())
        return _MODELS[key]


class LocalEmbedder(EmbedderClient):
    """Graphiti's embedder slot filled by a local sentence-transformers model (no network),
    run by sentence-transformers (on ``device``) or, with ``runtime="onnx"`` (or
    ``"onnx_int8"``), by ONNX Runtime."""

    def __init__(self, model_path: str, device: str = "cpu",
                 runtime: EmbeddingRuntime = "sentence_transformers") -> None:
        self.model_path = model_path
        self.device = device
        self.runtime: EmbeddingRuntime = runtime
        self._model: Any = None
        self._lock: threading.Lock | None = None
        self.config = EmbedderConfig(embedding_dim=384)

    async def load(self) -> None:
        if self._model is None:
            model, lock = await asyncio.to_thread(_load_model, "embedder", self.model_path,
                                                  self.device, self.runtime)
            self._model, self._lock = model, lock
            size = getattr(model, "get_embedding_dimension", None)
            dim = (size or model.get_sentence_embedding_dimension)() or 384
            self.config = EmbedderConfig(embedding_dim=dim)

    def _encode(self, texts: list[str]) -> list[list[float]]:
        assert self._lock is not None
        with self._lock:
            if isinstance(self._model, OnnxSentenceEmbedder):
                vectors = self._model.encode(texts)
            else:
                vectors = self._model.encode(texts, convert_to_numpy=True,
                                             show_progress_bar=False)
        return [[float(x) for x in v] for v in vectors]

    async def create(self, input_data: Any) -> list[float]:
        await self.load()
        if isinstance(input_data, str):
            texts = [input_data]
        else:
            texts = list(input_data)
            if texts and not isinstance(texts[0], str):
                raise TypeError("LocalEmbedder embeds text, not token ids")
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


class NoCrossEncoder(CrossEncoderClient):
    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        raise RuntimeError(
            "no cross-encoder configured; set memory.graphiti.cross_encoder.provider"
        )


