from __future__ import annotations

from nanobot_memory_adapters.llm_endpoint import probe_models


async def test_probe_reports_unreachable_and_malformed_endpoints_without_raising():
    down = await probe_models("http://127.0.0.1:9/v1", timeout_s=2.0)
    assert not down.reachable and down.status_code is None and down.error
    malformed = await probe_models("http://[not-a-host/v1", timeout_s=2.0)
    assert not malformed.reachable and malformed.error


def test_every_llm_block_is_the_one_endpoint_model(monkeypatch):
    """mem0's, Graphiti's and rolling_summary's LLM blocks are one model
    (``OpenAICompatibleEndpoint``): the key is resolved one way everywhere."""
    from nanobot_memory_adapters.backends.graphiti.config import LLMSettings as GraphitiLLM
    from nanobot_memory_adapters.backends.mem0.config import LLMSettings as Mem0LLM
    from nanobot_memory_adapters.conditions.rolling_summary import DreamLLM
    from nanobot_memory_adapters.llm_endpoint import OpenAICompatibleEndpoint

    monkeypatch.setenv("ACME_LLM_KEY", "sk-from-env")
    for block in (Mem0LLM, GraphitiLLM, DreamLLM):
        assert issubclass(block, OpenAICompatibleEndpoint)
        llm = block.model_validate(
            {"base_url": "http://127.0.0.1:8000/v1", "model": "m", "api_key_env": "ACME_LLM_KEY"}
        )
        assert llm.resolved_api_key() == "sk-from-env"
        assert llm.configured
        assert "sk-from-env" not in repr(llm)
