"""Config errors name the key and the fix; the registry finds built-ins and plugins."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pydantic import ValidationError

import nanobot_memory_adapters as nma
from nanobot_memory_adapters import registry
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.scope import MemoryScope


def test_unknown_name_lists_valid_names_and_suggests():
    with pytest.raises(ConfigError) as err:
        nma.load_provider({"condition": "full_histroy"})
    msg = str(err.value)
    assert msg.startswith("memory.condition: unknown condition 'full_histroy'")
    assert "did you mean 'full_history'" in msg and "no_memory" in msg


def test_backend_and_condition_together_is_rejected():
    with pytest.raises(ConfigError, match="keep exactly one"):
        nma.load_provider({"backend": "mem0", "condition": "no_memory"})


def test_neither_is_rejected():
    with pytest.raises(ConfigError, match="set exactly one"):
        nma.load_provider({})


def test_negative_budget_names_the_key():
    with pytest.raises(ConfigError) as err:
        nma.load_provider({"condition": "no_memory", "budget": {"max_tokens": -5}})
    assert str(err.value).startswith("memory.budget.max_tokens:")
    assert "positive" in str(err.value)


def test_a_budget_whose_min_is_above_its_max_is_refused_when_read():
    """Not at the first recall of a chat: the config's budget block keeps the contract's
    rule."""
    with pytest.raises(ConfigError) as err:
        nma.load_provider({"condition": "no_memory",
                           "budget": {"max_tokens": 100, "min_tokens": 500}})
    assert str(err.value).startswith("memory.budget:")
    assert "min_tokens (500) is above max_tokens (100)" in str(err.value)


def test_an_endpoint_holding_a_variable_is_checked_once_read():
    """setup --skip-test and `on` check a block before its variables are set: a URL that
    holds a ${NAME} anywhere is left for when it is read; one without is checked now."""
    from nanobot_memory_adapters.config import check_endpoint_fields

    for url in ("${LLM_URL}/v1", "http://localhost:${PORT}/v1"):
        check_endpoint_fields({"llm": {"base_url": url}}, "memory.mem0", env_refs=True)
        with pytest.raises(ConfigError, match=r"memory\.mem0\.llm\.base_url"):
            check_endpoint_fields({"llm": {"base_url": url}}, "memory.mem0")
    with pytest.raises(ConfigError, match="is not an http"):
        check_endpoint_fields({"llm": {"base_url": "notaurl"}}, "memory.mem0", env_refs=True)


def test_condition_name_used_as_backend():
    with pytest.raises(ConfigError, match='use "condition": "no_memory"'):
        nma.load_provider({"backend": "no_memory"})


def test_unknown_top_level_key_and_unknown_provider_key():
    with pytest.raises(ConfigError, match=r"memory\.bugdet: unknown setting — did you mean"):
        nma.load_provider({"condition": "no_memory", "bugdet": {}})
    with pytest.raises(ConfigError, match=r"memory\.full_history\.pth: unknown setting"):
        nma.load_provider({"condition": "full_history", "full_history": {"pth": "x"}})


def test_file_source_with_nanobot_style_wrapper(tmp_path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps({"memory": {"condition": "full_history"}}))
    adapter = nma.load_provider(path, data_dir=tmp_path)
    assert adapter.backend_name == "full_history"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        nma.load_provider(bad)


def test_missing_extra_names_the_extra(monkeypatch):
    spec = registry.ProviderSpec("ghost", "backend", "no_such_module_xyz:Adapter", "ghost")
    with pytest.raises(ConfigError) as err:
        registry.provider_class(spec)
    assert "pip install 'nanobot-memory-adapters[ghost]'" in str(err.value)


def test_entry_point_plugins_are_discovered(monkeypatch):
    class FakeEP:
        name = "acme"
        module = "nanobot_memory_adapters.conditions.no_memory"
        attr = "NoMemory"
        value = f"{module}:{attr}"
        extras: list[str] = []  # noqa: RUF012
        dist = None

    class Shadow(FakeEP):
        name = "condition.full_history"  # a built-in's name: the built-in keeps it

    real = registry.entry_points
    monkeypatch.setattr(
        registry,
        "entry_points",
        lambda group: [Shadow(), FakeEP(), *real(group=group)]
        if group == registry.ENTRY_POINT_GROUP else real(group=group),
    )
    specs = registry.available_providers()
    assert specs["acme"].kind == "backend" and specs["acme"].origin == "?"
    assert nma.load_provider({"backend": "acme"}).backend_name == "no_memory"
    assert specs["full_history"].origin == "nanobot-memory-adapters"


def test_built_ins_are_registered_as_entry_points_with_their_extras():
    from importlib.metadata import entry_points

    own = {ep.name: ep for ep in entry_points(group=registry.ENTRY_POINT_GROUP)
           if ep.dist is not None and ep.dist.name == "nanobot-memory-adapters"}
    assert set(own) >= {"mem0", "graphiti", "honcho", "memos", "condition.no_memory",
                        "condition.simple_rag", "condition.oracle_ipas"}
    specs = registry.available_providers()
    assert specs["mem0"].extra == "mem0" and specs["simple_rag"].extra == "mem0"
    assert specs["no_memory"].extra is None and specs["no_memory"].kind == "condition"


@pytest.mark.servers
def test_backends_are_imported_lazily():
    import subprocess
    import sys

    code = (
        "import sys, nanobot_memory_adapters as n; n.load_provider({'condition': 'no_memory'});"
        "print(any(m.startswith(('mem0', 'graphiti_core', 'honcho')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("timestamp", datetime(2024, 1, 1), "timestamp is naive"),
        ("messages", [], "messages is empty"),
        ("messages", [{"role": "robot", "content": "x"}], "role"),
        ("user_id", "*", "wildcard"),
        ("user_id", "  ", "user_id is empty"),
        ("run_id", "", "run_id is empty"),
    ],
)
def test_event_validation_names_the_field(field, value, needle):
    from datetime import UTC

    data = dict(
        event_id="e",
        run_id="r",
        user_id="u",
        agent_id="a",
        session_id="s",
        turn_id="1",
        timestamp=datetime(2024, 1, 1, tzinfo=UTC),
        messages=[{"role": "user", "content": "hi"}],
    )
    data[field] = value
    with pytest.raises(ValidationError) as err:
        nma.MemoryEvent(**data)
    assert field in str(err.value) and needle.split()[0] in str(err.value)


def test_scope_rejects_wildcards():
    with pytest.raises(ValidationError, match="wildcard"):
        MemoryScope(run_id="r", persona_id="al*ce")
    with pytest.raises(ValidationError, match="persona_id"):
        MemoryScope(run_id="r", persona_id="")


def test_budget_validation():
    with pytest.raises(ValidationError, match="min_tokens"):
        nma.ContextBudget(max_tokens=10, min_tokens=20)
    from nanobot_memory_adapters.sizing import top_k

    assert top_k(nma.ContextBudget(max_tokens=600)) == 15  # 600 // (LABEL_TOKENS 7 + 30 + 1)
    assert top_k(nma.ContextBudget(max_tokens=600, max_items=3)) == 3
    assert top_k(nma.ContextBudget(max_tokens=600), 100, ceiling=4) == 4


def test_config_example_blocks_validate_against_their_providers(tmp_path):
    """config.example.json must stay true: every provider block parses with its model
    (an ``"llm": "nanobot"`` once resolved from a nanobot config), and its plugin block
    with the plugin's settings model."""
    from pathlib import Path

    from nanobot_memory_adapters.nanobot.settings import PluginSettings
    from nanobot_memory_adapters.nanobot_llm import resolve_block

    nanobot = tmp_path / "config.json"
    nanobot.write_text(json.dumps({
        "agents": {"defaults": {"model": "gpt-4o-mini", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "k", "apiBase": "http://127.0.0.1:8000/v1"}}}))
    path = Path(__file__).resolve().parents[1] / "config.example.json"
    data = json.loads(path.read_text())
    PluginSettings.model_validate(data["nanobot"])
    specs = registry.available_providers()
    config = registry.parse_memory_config(data["memory"], list(specs))
    checked = []
    for name, block in (config.model_extra or {}).items():
        cls = registry.provider_class(specs[name])
        cls.config_model.model_validate(resolve_block(name, block, nanobot))
        checked.append(name)
    assert {"mem0", "graphiti", "honcho", "memos", "mcp", "bm25"} <= set(checked)


def test_scope_key_is_injective():
    pairs = [
        (MemoryScope(run_id="team/bob", persona_id="alice"),
         MemoryScope(run_id="team", persona_id="bob/alice")),
        (MemoryScope(run_id="a/b", persona_id="c"),
         MemoryScope(run_id="a", persona_id="b/c")),
    ]
    for one, other in pairs:
        assert one.key != other.key
    assert MemoryScope(run_id="r", persona_id="alice").key == "r/alice"


async def test_full_history_keeps_slash_scopes_apart(tmp_path):
    from datetime import UTC

    from nanobot_memory_adapters.conditions.full_history import FullHistory
    from nanobot_memory_adapters.store import StoreProvider

    adapter = StoreProvider(FullHistory(tmp_path / "h.sqlite3"))
    one = MemoryScope(run_id="team/bob", persona_id="alice")
    other = MemoryScope(run_id="team", persona_id="bob/alice")
    await adapter.record_event(nma.MemoryEvent(
        event_id="e1", run_id=one.run_id, user_id=one.persona_id, agent_id="a", session_id="s",
        turn_id="1", timestamp=datetime(2024, 1, 1, tzinfo=UTC),
        messages=[{"role": "user", "content": "secret Zanzibar"}]))
    result = await adapter.retrieve(nma.RetrieveRequest(
        query="x", scope=other, budget=nma.ContextBudget(max_tokens=500)))
    await adapter.aclose()
    assert "Zanzibar" not in result.formatted_context
