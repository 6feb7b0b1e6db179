"""Graphiti's local embedder on ONNX Runtime (the default for the bundled MiniLM): the
vectors of sentence-transformers within float noise, the runtime recorded in the config
and in health, and a process that remembers and recalls through Graphiti without loading
torch. Real Graphiti on embedded Kuzu; the LLM is the double."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from nanobot_memory_adapters.backends.graphiti.config import EmbedderSettings
from nanobot_memory_adapters.backends.graphiti.models import LocalEmbedder
from nanobot_memory_adapters.local_models import bundled_minilm_path

pytest.importorskip("onnxruntime")

MODEL = bundled_minilm_path(extra="graphiti", setting="test")
TEXTS = ["Alice adopted a grey cat called Pixel.", "Bob works as a pilot in Porto.",
         "The book club meets on Thursdays at the library. " * 30]


def test_the_runtime_is_onnx_for_the_bundled_model_only(tmp_path):
    assert EmbedderSettings().runtime == "onnx"
    assert EmbedderSettings(model_path=str(tmp_path)).runtime == "sentence_transformers"
    assert EmbedderSettings(provider="openai").runtime is None  # no local model at all
    dumped = EmbedderSettings().model_dump(mode="json")
    assert dumped["runtime"] == "onnx"  # recorded in the run manifest's config block


async def test_onnx_and_sentence_transformers_give_the_same_vectors():
    onnx = LocalEmbedder(MODEL, runtime="onnx")
    st = LocalEmbedder(MODEL, runtime="sentence_transformers")
    got = np.array(await onnx.create_batch(TEXTS))
    want = np.array(await st.create_batch(TEXTS))
    assert got.shape == want.shape == (len(TEXTS), 384)
    assert np.abs(got - want).max() < 1e-5
    single = np.array(await onnx.create(TEXTS[0]))
    assert np.abs(single - want[0]).max() < 1e-5
    assert onnx.config.embedding_dim == 384


async def test_int8_is_graphitis_option_too_with_close_but_other_vectors():
    """``runtime: "onnx_int8"`` reaches Graphiti's embedder slot: the int8 export, vectors
    close to the float ones and never equal (docs/mem0.md, "int8 weights")."""
    assert EmbedderSettings(runtime="onnx_int8").model_dump(mode="json")["runtime"] == \
        "onnx_int8"
    int8 = LocalEmbedder(MODEL, runtime="onnx_int8")
    got = np.array(await int8.create_batch(TEXTS))
    want = np.array(await LocalEmbedder(MODEL, runtime="onnx").create_batch(TEXTS))
    assert got.shape == want.shape == (len(TEXTS), 384)
    cosine = (got * want).sum(axis=1)
    assert cosine.min() > 0.95 and not np.allclose(got, want, atol=1e-3)
    assert int8._model.runtime == "onnx_int8"


FRESH_PROCESS = """
import asyncio, json, sys
from datetime import datetime, UTC
from nanobot_memory_adapters.contract import (ContextBudget, MemoryEvent, MemoryScope,
                                              RetrieveRequest)
from nanobot_memory_adapters.registry import load_provider

async def main():
    memory = load_provider(json.loads(sys.argv[2]), data_dir=sys.argv[1])
    scope = MemoryScope(run_id="r1", persona_id="alice", agent_id="nanobot")
    receipt = await memory.record_event(MemoryEvent(
        event_id="e1", run_id="r1", user_id="alice", agent_id="nanobot", session_id="s1",
        turn_id="1", timestamp=datetime(2024, 1, 1, 9, tzinfo=UTC),
        messages=[{"role": "user", "content": "I adopted a grey cat called Pixel."}]))
    result = await memory.retrieve(RetrieveRequest(
        query="What is my cat called?", scope=scope, budget=ContextBudget(max_tokens=800)))
    health = await memory.health()
    await memory.aclose()
    print(json.dumps({"status": receipt.status, "texts": [i.text for i in result.items],
                      "runtime": health.details.get("embedder_runtime"),
                      "torch": "torch" in sys.modules}))

asyncio.run(main())
"""


@pytest.mark.servers
def test_a_graphiti_process_remembers_on_onnx_without_loading_torch(llm_double, tmp_path):
    config = {"backend": "graphiti",
              "graphiti": {"llm": {"base_url": llm_double.base_url, "model": "double-chat"}}}
    done = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(tmp_path / "data"), json.dumps(config)],
        capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "committed"
    assert any("Pixel" in t for t in out["texts"])
    assert out["runtime"] == "onnx" and out["torch"] is False
