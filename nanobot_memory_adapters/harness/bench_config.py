"""A bench's settings and the words its modules share: ``BenchConfig`` (what to run),
``ExecutionPlan`` (where units run), ``Progress`` (what the driver reports) and the
unit errors.

These live below every driver module (timeline, executors, units, the LoCoMo unit,
the manifest), so each of them imports the settings without importing the driver:
no import cycle in the harness."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from nanobot_memory_adapters.contract import ContextBudget, MemoryScope
from nanobot_memory_adapters.harness.judge import BehaviouralSession, JudgeSetup, LLMEndpoint
from nanobot_memory_adapters.harness.locomo_mapping import SpeakerProtocol, personas

if TYPE_CHECKING:
    from nanobot_memory_adapters.harness.datasets.locomo import Conversation

__all__ = ["EXECUTORS", "BenchConfig", "ExecutionPlan", "ExecutorName", "Progress",
           "ProviderExited", "UnitFailed", "unit_scope"]

ExecutorName = Literal["local", "ray"]
EXECUTORS: tuple[str, ...] = ("local", "ray")


@dataclass
class ExecutionPlan:
    """How a run executes; recorded in results.json's ``timing`` (not in any hash)."""

    executor: ExecutorName = "local"
    workers: int = 1
    ray_address: str | None = None
    limits: dict[str, int] = field(default_factory=dict)  # provider -> max concurrent units

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"executor": self.executor, "workers": self.workers}
        if self.executor == "ray":
            out["ray_address"] = self.ray_address or "local instance"
        if self.limits:
            out["provider_limits"] = dict(self.limits)
        return out


@dataclass
class BenchConfig:
    dataset: Path
    out: Path
    providers: list[str]
    conversations: list[str] | None = None
    budget_tokens: int = 2000
    test_points: str = "every"
    run_id: str = "locomo"
    agent_id: str = "nanobot"
    seed: int = 0
    readiness_timeout_s: float = 120.0
    provider_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    gate_probe: bool = True
    fresh: bool = False
    deterministic_ids: bool = True
    judge: JudgeSetup | None = None
    sessions: list[BehaviouralSession] = field(default_factory=list)
    speakers: SpeakerProtocol = "single"
    max_sessions: int | None = None  # only each conversation's first N sessions
    # A recall-vs-budget sweep: every question at each of these budgets (the first is
    # ``budget_tokens``, the headline). Empty: one budget, ``budget_tokens``.
    budgets: list[int] = field(default_factory=list)
    # The judge as an endpoint, so worker processes and Ray tasks can build their own.
    judge_endpoint: LLMEndpoint | None = None
    execution: ExecutionPlan = field(default_factory=ExecutionPlan)
    task: str = "locomo"  # locomo | longmemeval | beam (lme_task.py, beam_task.py)
    gold_corrections: Path | None = None  # audited LoCoMo (datasets/gold_corrections.py)
    # Providers of the run not run this time (not in the manifest's hash, like workers):
    # results list them as skipped, their finished units stay in the checkpoint and a
    # run without the option resumes them. For a provider too slow for the time at hand.
    leave_out: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.budgets:
            if len(set(self.budgets)) != len(self.budgets):
                raise ValueError(f"budgets {self.budgets}: each budget once")
            self.budget_tokens = self.budgets[0]
            if len(self.budgets) == 1:
                self.budgets = []

    @property
    def budget(self) -> ContextBudget:
        return ContextBudget(max_tokens=self.budget_tokens)

    @property
    def all_budgets(self) -> list[int]:
        """Every budget a question is asked at, the headline first."""
        return list(self.budgets) or [self.budget_tokens]


class Progress(Protocol):
    def start(self, provider: str, total: int) -> None: ...
    def advance(self, provider: str, steps: int, note: str) -> None: ...


def unit_scope(cfg: BenchConfig, conv: Conversation) -> MemoryScope:
    """The first (in single mode the only) scope a conversation is recorded into."""
    return personas(conv, cfg.speakers, cfg.run_id, cfg.agent_id)[0].scope


class UnitFailed(RuntimeError):
    """The unit's provider could not be built where the unit ran, or it exited."""


class ProviderExited(UnitFailed):
    """Provider code called ``sys.exit`` (raised ``SystemExit``) inside the harness: the
    run stops and says so, instead of exiting with the provider's code (which could read
    as one of the bench's own exit codes)."""

    @classmethod
    def of(cls, provider: str, exc: SystemExit, where: str) -> ProviderExited:
        return cls(f"provider {provider!r} exited (sys.exit({exc.code!r})) {where}; the run "
                   "stopped (finished units are checkpointed): fix or remove the provider")
