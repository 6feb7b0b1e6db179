"""A nanobot home (config.json + memory.json + workspace) driven by a real AgentLoop.

nanobot talks to the session-wide LLM double over HTTP (``providers.custom.apiBase``);
the memory plugin is loaded by nanobot itself through the ``nanobot.tools`` entry point.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from nanobot_memory_adapters.nanobot.skill import guidance
from tests.llm_double.server import ChatRequest

VENV_BIN = Path(sys.executable).parent


@dataclass
class Home:
    root: Path
    base_url: str
    loops: list[Any] = field(default_factory=list)

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    @property
    def memory_path(self) -> Path:
        return self.root / "memory.json"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def data_dir(self) -> Path:
        return self.root / "memory-adapters"

    def config_data(self) -> dict[str, Any]:
        return {
            "agents": {"defaults": {"workspace": str(self.workspace), "model": "double",
                                    "provider": "custom"}},
            "providers": {"custom": {"apiKey": "test-key", "apiBase": self.base_url}},
        }

    def write_config(self) -> None:
        self.config_path.write_text(json.dumps(self.config_data(), indent=2))

    def write_memory(self, data: Any) -> None:
        text = data if isinstance(data, str) else json.dumps(data, indent=2)
        self.memory_path.write_text(text)

    def read_memory(self) -> dict[str, Any]:
        return json.loads(self.memory_path.read_text())

    def loop(self) -> Any:
        """A fresh AgentLoop, as ``nanobot agent -c config.json`` builds it."""
        from nanobot.agent.loop import AgentLoop
        from nanobot.agent.tools.registry import ToolRegistry
        from nanobot.config.loader import load_config

        config = load_config(self.config_path)
        loop = AgentLoop.from_config(config, tool_registry=ToolRegistry())
        self.loops.append(loop)
        return loop

    async def close(self, loop: Any) -> None:
        from nanobot_memory_adapters.nanobot import plugin_for

        await loop.aclose()
        plugin = plugin_for(loop)
        if plugin is not None:
            await plugin.aclose()
        if loop in self.loops:
            self.loops.remove(loop)

    def cli(self, message: str, *, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
               "MEM0_TELEMETRY": "False", "NO_COLOR": "1", "COLUMNS": "200"}
        env.pop("NANOBOT_MEMORY_CONFIG", None)
        return subprocess.run(
            [str(VENV_BIN / "nanobot"), "agent", "-c", str(self.config_path), "-m", message,
             "--no-markdown"],
            capture_output=True, text=True, timeout=timeout, env=env, cwd=self.root,
        )


@pytest.fixture
async def home(tmp_path, llm_double) -> Any:
    root = tmp_path / "nanobot-home"
    root.mkdir()
    h = Home(root=root, base_url=llm_double.base_url)
    h.write_config()
    yield h
    for loop in list(h.loops):
        await h.close(loop)


async def say(loop: Any, who: str, text: str) -> str:
    """One user turn from ``who`` in their own Telegram-like chat."""
    reply = await loop.process_direct(
        text, session_key=f"telegram:{who}", channel="telegram", chat_id=who, sender_id=who
    )
    return reply.content if reply is not None else ""


async def cli_turn(loop: Any, text: str) -> str:
    """One turn on nanobot's own terminal channel (``cli``: the machine's operator)."""
    reply = await loop.process_direct(text, session_key="cli:direct", channel="cli",
                                      chat_id="direct", sender_id="user")
    return reply.content if reply is not None else ""


def agent_request(double: Any, user_text: str) -> ChatRequest:
    """The (last) nanobot agent request whose current user message is ``user_text``."""
    found = [r for r in double.chat_requests()
             if r.tools and r.last_user.strip().startswith(user_text)]
    assert found, f"no agent request for {user_text!r}"
    return found[-1]


def long_term_memory(req: ChatRequest) -> str:
    """The memory this request carried ('' when none): the '## Long-term Memory' part of
    nanobot's system prompt (``system_prompt`` placement) or the section appended to the
    current user message (``user_message`` placement, the default)."""
    system = req.system
    marker = "## Long-term Memory\n"
    if marker in system:
        slot = system.split(marker, 1)[1].split("\n\n---\n\n", 1)[0]
        for told in (guidance(guide, saving) for guide in ("skill", "tool", None)
                     for saving in (True, False)):  # the plugin's guidance opens it
            if slot.startswith(told):
                slot = slot[len(told):].removeprefix("\n\n")
                break
        if slot:
            return slot
    found = re.search(r"<memory-context .*?</memory-context>", req.last_user, re.S)
    return found.group(0) if found else ""


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO")
    yield lines
    logger.remove(sink)
