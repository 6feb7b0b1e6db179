"""``embedding_runtime: "onnx"`` (the default for the bundled MiniLM): the model exported
once from the bundled weights and run on ONNX Runtime gives sentence-transformers' vectors
within float noise, mem0 on it finds what mem0 on sentence-transformers finds, a fresh
process never loads torch, and what it cannot run it refuses in one line that names the
fix. Real mem0, local Qdrant, real MiniLM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nanobot_memory_adapters.backends.mem0 import Mem0Store
from nanobot_memory_adapters.backends.mem0.config import Mem0Config, SimpleRagConfig
from nanobot_memory_adapters.backends.mem0.embedder import OnnxMem0Embedding
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    ContextBudget,
    RetrieveRequest,
)
from nanobot_memory_adapters.local_models import bundled_minilm_path
from nanobot_memory_adapters.onnx_embedder import (
    BATCH_SIZE,
    BATCH_TOKENS,
    OnnxEmbedderError,
    OnnxSentenceEmbedder,
    SentenceModelLayout,
    _batches,
    export_dir_for,
    forget_sessions,
    load_onnx_embedder,
)
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.store import StoreProvider
from tests.backends.test_mem0_batch_embed import QUESTIONS, TURNS, _events, _scope

pytest.importorskip("onnxruntime")

MODEL = Path(bundled_minilm_path(extra="mem0", setting="test"))
#: longer than MiniLM's 256-token window: both runtimes must cut it at the same place
LONG = "Caroline went to the support group and talked about adoption agencies. " * 40


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export per worker (exporting loads torch: seconds), shared by this module."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    load_onnx_embedder(MODEL, cache_dir=cache)
    return cache


@pytest.fixture
def cache_env(onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NANOBOT_MEMORY_CACHE_DIR", str(onnx_cache))
    return onnx_cache


def test_onnx_vectors_match_sentence_transformers_one_by_one_and_in_batches(onnx_cache):
    from sentence_transformers import SentenceTransformer

    texts = [*TURNS, *QUESTIONS, LONG, ""]
    onnx = load_onnx_embedder(MODEL, cache_dir=onnx_cache)
    reference = SentenceTransformer(str(MODEL), device="cpu")
    expected = reference.encode(texts, convert_to_numpy=True)
    batched = onnx.encode(texts)
    single = np.concatenate([onnx.encode([t]) for t in texts])
    assert batched.shape == single.shape == (len(texts), 384)
    assert np.abs(batched - expected).max() < 1e-5
    assert np.abs(single - expected).max() < 1e-5
    # not a constant or a copy: different texts give different unit vectors
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert float(batched[0] @ batched[1]) < 0.9


def test_batches_keep_padding_low_and_cover_every_text_once():
    """A batch runs at its longest text's width: mixed lengths split, equal ones fill up."""
    lengths = sorted([120, 95, 90, 40, 38, 12, 11, 10, 9, 5], reverse=True)
    runs = _batches(lengths)
    assert [i for a, b in runs for i in range(a, b)] == list(range(len(lengths)))
    for a, b in runs:
        assert all(n >= 0.8 * lengths[a] for n in lengths[a:b]) or b - a == 1
    assert runs[0] == (0, 1)  # 95 < 0.8 x 120: the longest text goes alone
    equal = [10] * (2 * BATCH_SIZE + 3)
    assert _batches(equal) == [(0, BATCH_SIZE), (BATCH_SIZE, 2 * BATCH_SIZE),
                               (2 * BATCH_SIZE, 2 * BATCH_SIZE + 3)]
    assert _batches([]) == []


def test_long_texts_run_in_small_batches():
    """At most BATCH_TOKENS padded tokens per batch; a text longer than that goes alone."""
    per = BATCH_TOKENS // 200
    assert _batches([200] * 5) == [(i, min(i + per, 5)) for i in range(0, 5, per)]
    assert _batches([BATCH_TOKENS + 1] * 3) == [(0, 1), (1, 2), (2, 3)]
    lengths = [256] * 7 + [12] * 70  # long turns, then short ones: these still fill up
    runs = _batches(lengths)
    assert [i for a, b in runs for i in range(a, b)] == list(range(len(lengths)))
    assert all(b - a <= BATCH_SIZE and (b - a) * lengths[a] <= BATCH_TOKENS for a, b in runs)
    assert max(b - a for a, b in runs) == BATCH_SIZE


def test_the_export_is_made_once_and_keyed_by_the_model_files(onnx_cache, tmp_path):
    layout = SentenceModelLayout.read(MODEL)
    target = export_dir_for(layout, onnx_cache)
    stamp = (target / "model.onnx").stat().st_mtime_ns
    again = load_onnx_embedder(MODEL, cache_dir=onnx_cache)
    assert again.export_path == target
    assert (target / "model.onnx").stat().st_mtime_ns == stamp  # reused, not re-exported
    meta = json.loads((target / "export.json").read_text())
    assert meta["dims"] == 384 and meta["max_seq_length"] == 256 and meta["normalize"]
    assert len(meta["weights_sha256"]) == 64
    # MiniLM's six layers were fused by ONNX Runtime's BERT optimizer (the faster graph)
    assert meta["fused"]["Attention"] == 6 and meta["fused"]["SkipLayerNormalization"] == 12
    # other weights name another export: a copy, and the same copy once touched
    copy = tmp_path / "model"
    shutil.copytree(MODEL, copy)
    before = SentenceModelLayout.read(copy).digest()
    weights = copy / layout.weights.name
    os.utime(weights, ns=(stamp, weights.stat().st_mtime_ns + 1_000_000))
    assert SentenceModelLayout.read(copy).digest() != before
    assert export_dir_for(SentenceModelLayout.read(copy), onnx_cache) != target


def test_a_process_shares_one_session_until_it_forgets_it(onnx_cache):
    """Adapters share a loaded session; ``forget_sessions`` (what bench_floor calls before
    each unit) makes the next load a new one, from the same export, with the same vectors."""
    first = load_onnx_embedder(MODEL, cache_dir=onnx_cache)
    assert load_onnx_embedder(MODEL, cache_dir=onnx_cache) is first
    forget_sessions()
    fresh = load_onnx_embedder(MODEL, cache_dir=onnx_cache)
    assert fresh is not first and fresh.export_path == first.export_path
    assert np.array_equal(fresh.encode(["a turn"]), first.encode(["a turn"]))


def test_a_model_it_cannot_run_is_refused_with_the_fix(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OnnxEmbedderError, match="embedding_runtime") as no_weights:
        SentenceModelLayout.read(empty)
    assert str(empty) in str(no_weights.value)
    cls_pooled = tmp_path / "cls"
    shutil.copytree(MODEL, cls_pooled)
    pooling = cls_pooled / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    with pytest.raises(OnnxEmbedderError, match=r"mean pooling.*sentence_transformers"):
        SentenceModelLayout.read(cls_pooled)


def test_without_onnxruntime_it_names_the_extra_before_exporting(onnx_cache, monkeypatch,
                                                                  tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    target = export_dir_for(SentenceModelLayout.read(MODEL), onnx_cache)
    with pytest.raises(OnnxEmbedderError, match=r"nanobot-memory-adapters\[mem0\]"):
        OnnxSentenceEmbedder(target)
    fresh = tmp_path / "fresh-cache"
    with pytest.raises(OnnxEmbedderError, match="sentence_transformers"):
        load_onnx_embedder(MODEL, cache_dir=fresh)
    assert not fresh.exists()  # refused before any export was begun


def test_an_unwritable_cache_is_one_line_naming_the_setting(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(OnnxEmbedderError, match="NANOBOT_MEMORY_CACHE_DIR") as refused:
        load_onnx_embedder(MODEL, cache_dir=blocker)
    assert "\n" not in str(refused.value) and str(blocker) in str(refused.value)


def test_the_runtime_is_onnx_for_the_bundled_model_only_and_always_recorded(tmp_path):
    """Manifests hash the config dump: the runtime in use is always in it."""
    assert SimpleRagConfig().embedding_runtime == "onnx"
    assert Mem0Config().model_dump(mode="json")["embedding_runtime"] == "onnx"
    own = Mem0Config(embedding_model=str(tmp_path))  # a model of the user's own
    assert own.model_dump(mode="json")["embedding_runtime"] == "sentence_transformers"
    chosen = Mem0Config(embedding_model=str(tmp_path), embedding_runtime="onnx")
    assert Mem0Config.model_validate(chosen.model_dump()).embedding_runtime == "onnx"
    with pytest.raises(ConfigError, match="embedding_runtime"):
        load_provider({"condition": "simple_rag", "simple_rag": {"embedding_runtime": "gpu"}})


async def test_simple_rag_on_onnx_finds_what_sentence_transformers_finds(cache_env, tmp_path):
    st = SimpleRagConfig(embedding_runtime="sentence_transformers")
    default = StoreProvider(Mem0Store(tmp_path / "st", st))
    onnx = StoreProvider(Mem0Store(tmp_path / "onnx"))  # the default for the bundled model
    try:
        scope = _scope()
        for adapter in (default, onnx):
            receipts = await adapter.record_events(_events(scope))
            assert [r.status for r in receipts] == ["committed"] * len(TURNS)
        memory = await onnx.store._native()
        assert isinstance(memory.embedding_model._embedder, OnnxMem0Embedding)
        for question in QUESTIONS:
            got = [await adapter.retrieve(RetrieveRequest(
                query=question, scope=scope, budget=ContextBudget(max_tokens=1000)))
                for adapter in (default, onnx)]
            assert got[0].items
            assert [i.text for i in got[1].items] == [i.text for i in got[0].items]
            assert [i.score for i in got[1].items] == pytest.approx(
                [i.score for i in got[0].items], abs=1e-5)
        health = await onnx.health()
        embedder = health.details["embedder"]
        assert embedder["provider"] == "onnx" and embedder["status"] == "loaded"
        assert embedder["dims"] == 384 and Path(embedder["export"]).parent.parent == cache_env
        assert (await default.health()).details["embedder"]["provider"] == "huggingface"
    finally:
        await default.aclose()
        await onnx.aclose()


FRESH_PROCESS = """
import asyncio, json, sys
import nanobot_memory_adapters as nma
from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest

async def main():
    memory = nma.load_provider({"condition": "simple_rag", "data_dir": sys.argv[1]})
    scope = MemoryScope(run_id="r1", persona_id="alice", agent_id="nanobot")
    from nanobot_memory_adapters.contract import MemoryEvent
    from nanobot_memory_adapters.events import Message
    from datetime import datetime, UTC
    receipt = await memory.record_event(MemoryEvent(
        event_id="e1", run_id="r1", user_id="alice", agent_id="nanobot", session_id="s",
        turn_id="1", timestamp=datetime(2024, 1, 1, tzinfo=UTC),
        messages=[Message(role="user", content="My sister Ana lives in Porto.")]))
    result = await memory.retrieve(RetrieveRequest(
        query="Where does my sister live?", scope=scope,
        budget=ContextBudget(max_tokens=500)))
    await memory.aclose()
    print(json.dumps({"status": receipt.status, "texts": [i.text for i in result.items],
                      "torch": "torch" in sys.modules,
                      "sentence_transformers": "sentence_transformers" in sys.modules}))

asyncio.run(main())
"""


@pytest.mark.servers
def test_a_fresh_process_on_onnx_remembers_without_loading_torch(cache_env, tmp_path):
    env = {**os.environ, "NANOBOT_MEMORY_CACHE_DIR": str(cache_env)}
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(tmp_path / "data")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "committed"
    assert any("Porto" in t for t in out["texts"])
    assert out["torch"] is False and out["sentence_transformers"] is False


def test_int8_is_a_quantized_export_of_its_own_with_other_vectors(onnx_cache):
    """``onnx_int8`` quantizes the float export once into a folder of its own (recorded as
    quantized), runs ~the same model with int8 weights: close to the float vectors, never
    equal to them (so it is an option with its own results, never the float runtime
    under another name)."""
    plain = load_onnx_embedder(MODEL, cache_dir=onnx_cache)
    int8 = load_onnx_embedder(MODEL, cache_dir=onnx_cache, runtime="onnx_int8")
    assert int8.export_path == plain.export_path.with_name(plain.export_path.name + "-int8pc")
    assert (plain.runtime, int8.runtime) == ("onnx", "onnx_int8")
    assert int8.metadata["quantized"]["weights"] == "int8"
    assert int8.metadata["quantized"]["per_channel"] is True
    assert int8.metadata["weights_sha256"] == plain.metadata["weights_sha256"]
    small, big = ((e.export_path / "model.onnx").stat().st_size for e in (int8, plain))
    assert small < big / 3  # int8 weights: a quarter of float32's bytes
    texts = [t for t in TURNS] + [LONG, "hi"]
    a, b = plain.encode(texts), int8.encode(texts)
    cosine = (a * b).sum(axis=1)
    assert cosine.min() > 0.95 and cosine.mean() > 0.98
    assert not np.allclose(a, b, atol=1e-3)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    again = load_onnx_embedder(MODEL, cache_dir=onnx_cache, runtime="onnx_int8")
    assert again is int8  # made once, loaded once per process
    with pytest.raises(ValueError, match="sentence_transformers"):
        load_onnx_embedder(MODEL, cache_dir=onnx_cache, runtime="sentence_transformers")


async def test_simple_rag_on_int8_is_chosen_in_config_and_says_so(cache_env, tmp_path):
    config = SimpleRagConfig(embedding_runtime="onnx_int8")
    assert Mem0Config.model_validate(
        Mem0Config(embedding_runtime="onnx_int8").model_dump()).embedding_runtime == "onnx_int8"
    adapter = StoreProvider(Mem0Store(tmp_path / "int8", config))
    try:
        scope = _scope()
        receipts = await adapter.record_events(_events(scope))
        assert [r.status for r in receipts] == ["committed"] * len(TURNS)
        memory = await adapter.store._native()
        wrapped = memory.embedding_model._embedder
        assert isinstance(wrapped, OnnxMem0Embedding) and wrapped.model.runtime == "onnx_int8"
        found = await adapter.retrieve(RetrieveRequest(
            query=QUESTIONS[0], scope=scope, budget=ContextBudget(max_tokens=1000)))
        assert found.items
        embedder = (await adapter.health()).details["embedder"]
        assert embedder["provider"] == "onnx_int8" and embedder["export"].endswith("-int8pc")
    finally:
        await adapter.aclose()
