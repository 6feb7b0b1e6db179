"""The LLM meter: a proxy at the HTTP boundary that passes every call through unchanged
and counts calls and usage tokens per caller label (the side-by-side's cost columns)."""

from __future__ import annotations

import json

import httpx
import pytest

from nanobot_memory_adapters.harness.llm_meter import LLMMeter, read_log, summarize, usage_of


def _chat(stream: bool = False) -> dict:
    return {"model": "double", "stream": stream,
            "messages": [{"role": "user", "content": "Say something about tea."}]}


@pytest.mark.servers
def test_calls_pass_through_and_are_counted_per_label(tmp_path, llm_double):
    log = tmp_path / "meter.jsonl"
    with LLMMeter(llm_double.base_url, log) as meter:
        direct = httpx.post(f"{llm_double.base_url}/chat/completions", json=_chat()).json()
        via = httpx.post(f"{meter.url_for('mem0')}/chat/completions", json=_chat())
        assert via.status_code == 200
        assert via.json()["choices"] == direct["choices"]  # the body, unchanged
        with httpx.stream("POST", f"{meter.url_for('mem0')}/chat/completions",
                          json=_chat(stream=True)) as resp:
            assert "text/event-stream" in resp.headers["content-type"]
            lines = [line for line in resp.iter_lines() if line.startswith("data:")]
        assert lines[-1] == "data: [DONE]" and len(lines) >= 3
        emb = httpx.post(f"{meter.url_for('honcho')}/embeddings",
                         json={"model": "double-embed", "input": ["a", "b"],
                               "dimensions": 8}).json()
        assert len(emb["data"]) == 2 and len(emb["data"][0]["embedding"]) == 8
        assert httpx.get(f"{meter.url_for('honcho')}/models").status_code == 200
        assert httpx.get(f"http://127.0.0.1:{meter.port}/v1/models").status_code == 404
        # the SDK every in-process backend uses, with the meter as its base URL
        from openai import OpenAI

        sdk = OpenAI(base_url=meter.url_for("sdk"), api_key="k")
        reply = sdk.chat.completions.create(model="double", messages=_chat()["messages"])
        assert reply.choices[0].message.content == direct["choices"][0]["message"]["content"]
        stats = httpx.get(f"http://127.0.0.1:{meter.port}/meter/stats").json()
    assert stats["mem0"]["chat_calls"] == 2
    assert stats["mem0"]["chat_prompt_tokens"] == 2 == stats["mem0"]["chat_completion_tokens"]
    assert stats["mem0"]["calls_without_usage"] == 0  # the stream's last usage chunk counted
    assert stats["honcho"]["embedding_calls"] == 1 and stats["honcho"]["other_calls"] == 1
    assert stats["sdk"]["chat_calls"] == 1
    calls = list(read_log(log))
    assert len(calls) == 5 and {c["label"] for c in calls} == {"mem0", "honcho", "sdk"}
    assert not any("tea" in json.dumps(c) for c in calls)  # no bodies in the log
    # a window keeps only the calls that started inside it
    first = calls[0]["started"]
    assert summarize(calls, [(first, first)])["mem0"]["chat_calls"] == 1


def test_an_upstream_that_is_down_is_a_failed_call(tmp_path):
    log = tmp_path / "meter.jsonl"
    with LLMMeter("http://127.0.0.1:9/v1", log) as meter:
        resp = httpx.post(f"{meter.url_for('x')}/chat/completions", json=_chat())
    assert resp.status_code == 502 and "upstream" in resp.json()["error"]["message"]
    assert summarize(read_log(log))["x"] == pytest.approx(
        {"chat_calls": 1, "chat_prompt_tokens": 0, "chat_completion_tokens": 0,
         "embedding_calls": 0, "embedding_tokens": 0, "other_calls": 0, "failed_calls": 1,
         "calls_without_usage": 1})


def test_usage_is_read_from_a_body_or_the_last_usage_chunk_of_a_stream():
    body = json.dumps({"usage": {"prompt_tokens": 7, "completion_tokens": 3,
                                 "total_tokens": 10}}).encode()
    assert usage_of(body, False) == {"prompt_tokens": 7, "completion_tokens": 3,
                                     "total_tokens": 10}
    sse = (b'data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}\n\n'
           b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n'
           b"data: [DONE]\n\n")
    assert usage_of(sse, True) == {"prompt_tokens": 5, "completion_tokens": 2}
    assert usage_of(b"not json", False) is None and usage_of(b"data: [DONE]\n", True) is None
    with pytest.raises(ValueError, match="one path segment"):
        LLMMeter("http://x/v1", log=None).url_for("a/b")  # type: ignore[arg-type]


@pytest.mark.servers
def test_embeddings_can_go_to_an_upstream_of_their_own(tmp_path, llm_double):
    """One base URL for a caller that takes one for chat and embeddings alike (Honcho),
    with the embeddings served elsewhere (a model server started for them)."""
    from tests.llm_double.server import LLMDouble

    with LLMDouble(embedding_dim=16) as embedder, LLMMeter(
            llm_double.base_url, tmp_path / "m.jsonl", embed_upstream=embedder.base_url
    ) as meter:
        base = meter.url_for("honcho")
        emb = httpx.post(f"{base}/embeddings", json={"model": "e", "input": ["a"]}).json()
        chat = httpx.post(f"{base}/chat/completions", json=_chat())
        served = len(embedder.requests)
    assert len(emb["data"][0]["embedding"]) == 16  # the embedder's dimension, not 384
    assert chat.status_code == 200 and served == 1
    stats = summarize(read_log(tmp_path / "m.jsonl"))["honcho"]
    assert stats["embedding_calls"] == 1 and stats["chat_calls"] == 1
