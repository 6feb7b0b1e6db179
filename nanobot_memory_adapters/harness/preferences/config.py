"""A preference run's settings (``PreferenceBenchConfig``) and the rubric judge they may
name: below both the driver and the unit, so neither imports the other to know them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from nanobot_memory_adapters.harness.judge import OpenAICompatibleClient, Verdict, _verdict
from nanobot_memory_adapters.harness.preferences.agent import AgentLLM, AgentTools
from nanobot_memory_adapters.harness.preferences.format import ScenarioSet, TestSession
from nanobot_memory_adapters.harness.preferences.reader import IdealReaderAgent
from nanobot_memory_adapters.harness.preferences.simulator import ScriptedUser

TestTags = Literal["context", "all", "none"]
RUBRIC_PROMPT = (
    "Grade an assistant's reply to a user.\nUser's request: {opening}\nAssistant's reply: "
    "{reply}\nRubric: {rubric}\nDoes the reply satisfy the rubric? Reply with one word: "
    "CORRECT or WRONG."
)  # the ground truth (rubric) only: the judge never sees the memory


class RubricJudge:
    """Open tasks: an LLM grades the reply against the test's rubric."""

    def __init__(self, client: OpenAICompatibleClient, description: dict[str, Any]) -> None:
        self.client = client
        self.description = description

    async def judge(self, test: TestSession, reply: str) -> Verdict:
        prompt = RUBRIC_PROMPT.format(opening=test.opening, reply=reply[:3000],
                                      rubric=test.rubric or "")
        return _verdict(await self.client.chat([{"role": "user", "content": prompt}],
                                               max_tokens=8))


@dataclass
class PreferenceBenchConfig:
    out: Path
    providers: list[str]
    scenario: ScenarioSet
    budget_tokens: int = 800
    run_id: str = "prefs"
    agent: AgentLLM | IdealReaderAgent | None = None
    agent_tools: AgentTools = "default"  # none: no tool offered in the test turns
    simulator: Any = field(default_factory=ScriptedUser)  # or simulator.LLMUser
    max_turns: int = 3
    # provider -> how many of the scenario's personas it runs on (the first N); others all
    persona_caps: dict[str, int] = field(default_factory=dict)
    # providers whose units run after every other provider's (scheduling only: not in the
    # manifest, so a run resumes with or without it)
    run_last: list[str] = field(default_factory=list)
    recognition: bool = True  # False: behaviour sessions only (half the model calls)
    judge: RubricJudge | None = None
    test_tags: TestTags = "context"
    placement: str = "user_message"
    provider_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    readiness_timeout_s: float = 120.0
    seed: int = 0
    fresh: bool = False
    gate_probe: bool = True
    closers: list[Any] = field(default_factory=list)
