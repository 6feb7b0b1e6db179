"""The LLM double records its own time on a chat call, without the configured delay:
``bench_plugin.py`` subtracts it to show what nanobot and the plugin add."""

from __future__ import annotations

import httpx

from tests.llm_double import LLMDouble


def test_a_chat_call_records_the_doubles_own_time_without_its_delay() -> None:
    with LLMDouble(delay_s=0.3) as double:
        reply = httpx.post(f"{double.base_url}/chat/completions", timeout=10, json={
            "model": "double", "messages": [{"role": "user", "content": "hello there"}]})
        assert reply.status_code == 200
        (record,) = [r for r in double.requests if r["path"].endswith("completions")]
        assert 0.0 <= record["handled_s"] < 0.3  # the 0.3 s delay is not the double's work
