"""The ``mcp`` provider against real MCP memory servers started by the test over stdio:
the official reference server (``@modelcontextprotocol/server-memory``, npm) and
``mcp-memory-service`` (PyPI). The contract suite on both, the tool mapping's edges, and
config errors as one clear line."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nanobot_memory_adapters.backends.mcp import McpAdapter, McpConfig, scope_tag
from nanobot_memory_adapters.backends.mcp.adapter import query_terms
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    AdapterError,
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
    SupportsReadiness,
    capabilities_of,
)
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget
from tests.backends.mcp_servers import mcp_memory_service_command, server_memory_command

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture(scope="module")
def server_memory() -> list[str]:
    command, why = server_memory_command()
    if command is None:
        pytest.skip(why)
    return command


@pytest.fixture(scope="module")
def memory_service() -> list[str]:
    command, why = mcp_memory_service_command()
    if command is None:
        pytest.skip(why)
    return command


def reference_block(command: list[str]) -> dict:
    return {"preset": "server-memory", "command": command}


def service_block(command: list[str]) -> dict:
    # No embedding model may be downloaded here: the server runs on its own hash-embedding
    # fallback, which it refuses on a store that already holds memories unless told.
    return {"preset": "mcp-memory-service", "command": command,
            "env": {"MCP_MEMORY_ALLOW_HASH_EMBEDDINGS": "1"}}


def _adapter(block: dict, data_dir: Path) -> McpAdapter:
    return McpAdapter(McpConfig.model_validate(block), data_dir=data_dir)


def _scope(persona: str = "alice", run: str | None = None) -> MemoryScope:
    return MemoryScope(run_id=run or f"t-{uuid.uuid4().hex[:8]}", persona_id=persona,
                       agent_id="nanobot")


def _event(scope: MemoryScope, user: str, n: int = 1) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"{scope.run_id}-{scope.persona_id}-{n}", run_id=scope.run_id,
        user_id=scope.persona_id, agent_id="nanobot", session_id="s1", turn_id=str(n),
        timestamp=T0 + timedelta(minutes=n),
        messages=[Message(role="user", content=user), Message(role="assistant", content="Ok.")],
    )


def _request(scope: MemoryScope, query: str, max_tokens: int = 1500) -> RetrieveRequest:
    return RetrieveRequest(query=query, scope=scope, budget=ContextBudget(max_tokens=max_tokens))


class TestReferenceServerContract(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path, server_memory):
        block = reference_block(server_memory)

        async def make():
            return _adapter(block, tmp_path / "store")

        async def make_failing():
            return _adapter({**block, "command": [str(tmp_path / "no-such-server")]},
                            tmp_path / "failing")

        return SuiteTarget(make=make, make_failing=make_failing)


class TestMemoryServiceContract(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path, memory_service):
        block = service_block(memory_service)

        async def make():
            return _adapter(block, tmp_path / "store")

        async def make_failing():
            return _adapter({**block, "command": [str(tmp_path / "no-such-server")]},
                            tmp_path / "failing")

        return SuiteTarget(make=make, make_failing=make_failing)
