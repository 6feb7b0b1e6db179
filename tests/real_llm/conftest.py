"""The real-model lane: a real OpenAI-compatible model (CI: the shared Qwen2.5-Coder-1.5B
on llama.cpp, CPU) instead of the deterministic double.

Every test here is marked ``real_llm`` and skipped unless ``NANOBOT_MEMORY_TEST_LLM_URL``
names the server's base URL (``http://127.0.0.1:8081/v1``). The model is slow and not
smart: tests assert only what must hold whatever it answers (receipts never lie, budgets,
gates, errors), plus the one fact a turn states plainly reaching the next session.
"""

from __future__ import annotations

import os

import pytest

URL_ENV = "NANOBOT_MEMORY_TEST_LLM_URL"
# nanobot aborts a stream idle for 90 s; a CPU model reading a cold prompt takes longer.
os.environ.setdefault("NANOBOT_STREAM_IDLE_TIMEOUT_S", "1800")
MODEL_ENV = "NANOBOT_MEMORY_TEST_LLM_MODEL"


# tryfirst: the group must exist before xdist's own hook reads it.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason=f"no real model: set {URL_ENV} (see tests/real_llm)")
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.real_llm)
            item.add_marker(pytest.mark.servers)  # it needs a model server: never "fast"
            # One model server with one slot, whose prompt cache helps only when a
            # backend's items run one after another: the whole lane on one worker.
            item.add_marker(pytest.mark.xdist_group("real_llm"))
            if not os.environ.get(URL_ENV):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def real_llm() -> dict[str, str]:
    return {
        "base_url": os.environ[URL_ENV],
        "model": os.environ.get(MODEL_ENV, "qwen2.5-coder-1.5b-instruct"),
        "api_key": "not-needed",
    }
