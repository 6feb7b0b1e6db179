"""Optional LLM parts of a run, kept apart from the judge-free metrics.

- ``Answerer`` / ``Judge``: answer a LoCoMo question from the memory context, then score
  the answer against the gold one. ``LLMAnswerer`` and ``LLMJudge`` do it through any
  OpenAI-compatible endpoint; nothing in the harness requires them.
- ``Simulator`` / ``OutcomeJudge`` / ``BehaviouralSession``: a behavioural test session
  (a simulated user talks to the agent, an outcome judge scores the transcript) that
  plugs into the same timeline: it runs at each test point, inside the same read-only
  window, retrieves with the same budget, and its writes go through the same gate.
  ``SimulatedUserSession`` is the stock one; write your own by implementing ``run``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import httpx
from pydantic import Field

from nanobot_memory_adapters.contract import (
    ContextBudget,
    Message,
    RetrieveResult,
    WriteReceipt,
)
from nanobot_memory_adapters.llm_endpoint import OpenAICompatibleEndpoint
from nanobot_memory_adapters.redaction import redact_text

VerdictLabel = Literal["correct", "wrong", "unparsed", "error"]


@dataclass(frozen=True)
class Verdict:
    label: VerdictLabel
    score: float | None
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Answerer(Protocol):
    async def answer(self, question: str, context: str) -> str: ...


@runtime_checkable
class Judge(Protocol):
    async def judge(
        self, question: str, gold: str | None, answer: str, *, category: int | None = None
    ) -> Verdict: ...


@runtime_checkable
class Simulator(Protocol):
    """A simulated user: the next user message given the transcript so far, or None to end."""

    async def next_turn(self, transcript: Sequence[Message]) -> str | None: ...


@runtime_checkable
class OutcomeJudge(Protocol):
    async def judge_session(self, transcript: Sequence[Message], goal: str) -> Verdict: ...


# -- the OpenAI-compatible client ----------------------------------------------------


class LLMEndpoint(OpenAICompatibleEndpoint):
    """Where answers and verdicts come from: the project's one endpoint model, with the
    judge's call settings. The key is read from ``api_key_env``; ``describe`` (what the
    manifest and results record) never holds a key."""

    base_url: str = Field()  # pyright: ignore[reportIncompatibleVariableOverride]
    model: str = Field()  # pyright: ignore[reportIncompatibleVariableOverride]
    api_key_env: str = "OPENAI_API_KEY"  # pyright: ignore[reportIncompatibleVariableOverride]
    timeout_s: float = 60.0
    temperature: float = 0.0
    seed: int = 0

    def describe(self) -> dict[str, Any]:
        return {
            "base_url": redact_text(self.base_url),  # no user:password@ in any output
            "model": self.model,
            "api_key_env": self.api_key_env,
            "temperature": self.temperature,
            "seed": self.seed,
        }


class OpenAICompatibleClient:
    def __init__(self, endpoint: LLMEndpoint) -> None:
        self.endpoint = endpoint
        key = endpoint.resolved_api_key() or "not-needed"
        self._client = httpx.AsyncClient(
            base_url=endpoint.base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"},
            timeout=endpoint.timeout_s,
        )

    async def chat(self, messages: list[dict[str, str]], max_tokens: int = 256) -> str:
        body = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": self.endpoint.temperature,
            "seed": self.endpoint.seed,
            "max_tokens": max_tokens,
        }
        r = await self._client.post("/chat/completions", json=body)
        r.raise_for_status()
        data = r.json()
        return (data["choices"][0]["message"].get("content") or "").strip()

    async def aclose(self) -> None:
        await self._client.aclose()


ANSWER_SYSTEM = (
    "You answer questions about a long conversation using only the memory context below. "
    "Answer in a short phrase. If the context does not contain the answer, say "
    "'Not mentioned in the conversation'.\n\n{context}"
)
JUDGE_PROMPT = (
    "Grade an answer to a question about a conversation.\n"
    "Question: {question}\nGold answer: {gold}\nGiven answer: {answer}\n"
    "The given answer is CORRECT if it means the same as the gold answer (be generous with "
    "wording and date formats), otherwise WRONG. Reply with one word: CORRECT or WRONG."
)
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


def _verdict(raw: str) -> Verdict:
    """The first CORRECT / WRONG in a model's reply (any case); ``unparsed`` if neither."""
    m = _LABEL.search(raw.upper())
    if not m:
        return Verdict("unparsed", None, raw)
    return Verdict("correct", 1.0, raw) if m.group(1) == "CORRECT" else Verdict("wrong", 0.0, raw)


class LLMAnswerer:
    """Answers a question from the memory context, through ``client``. Each benchmark's
    judge module names its own system prompt (a ``{context}`` slot), what stands for an
    empty context, and the reply length; the defaults are LoCoMo's."""

    def __init__(self, client: OpenAICompatibleClient, *, system: str = ANSWER_SYSTEM,
                 empty: str = "(no memory context)", max_tokens: int = 128) -> None:
        self.client = client
        self.system, self.empty, self.max_tokens = system, empty, max_tokens

    async def answer(self, question: str, context: str) -> str:
        system = self.system.format(context=context or self.empty)
        return await self.client.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": question}],
            max_tokens=self.max_tokens,
        )


class LLMJudge:
    """LoCoMo-style correctness. Category 5 (adversarial): correct means declining."""

    def __init__(self, client: OpenAICompatibleClient) -> None:
        self.client = client

    async def judge(
        self, question: str, gold: str | None, answer: str, *, category: int | None = None
    ) -> Verdict:
        if category == 5:
            gold = "Not mentioned in the conversation (the question is a trap)"
        prompt = JUDGE_PROMPT.format(question=question, gold=gold or "", answer=answer)
        return _verdict(await self.client.chat([{"role": "user", "content": prompt}], max_tokens=8))


@dataclass
class JudgeSetup:
    """Answer generation + judge, run at the final test point of each conversation."""

    answerer: Answerer
    judge: Judge
    description: dict[str, Any] = field(default_factory=dict)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def aclose(self) -> None:
        for close in self.closers:
            await close()


def llm_judge_setup(endpoint: LLMEndpoint) -> JudgeSetup:
    client = OpenAICompatibleClient(endpoint)
    return JudgeSetup(
        answerer=LLMAnswerer(client),
        judge=LLMJudge(client),
        description={"kind": "openai-compatible", **endpoint.describe(), "at": "final_point"},
        closers=[client.aclose],
    )


# -- behavioural test sessions ---------------------------------------------------------


@dataclass
class SessionContext:
    """What a behavioural session may do at a test point (the driver supplies it).

    ``retrieve`` uses the run's ``ContextBudget`` and is traced like a question;
    ``record`` goes through the provider's read-only gate (a test session writes nothing
    retrievable; the receipt says ``skipped_read_only``).
    """

    provider: str
    conversation: str
    point: int
    budget: ContextBudget
    retrieve: Callable[[str], Awaitable[RetrieveResult]]
    record: Callable[[Sequence[Message]], Awaitable[WriteReceipt]]


@runtime_checkable
class BehaviouralSession(Protocol):
    name: str

    def describe(self) -> dict[str, Any]: ...

    async def run(self, ctx: SessionContext) -> dict[str, Any]: ...


class SimulatedUserSession:
    """A simulated user talks to an agent that sees the memory context; a judge scores it."""

    def __init__(
        self,
        name: str,
        simulator: Simulator,
        agent: Answerer,
        judge: OutcomeJudge,
        goal: str,
        max_turns: int = 4,
    ) -> None:
        self.name = name
        self.simulator = simulator
        self.agent = agent
        self.outcome_judge = judge
        self.goal = goal
        self.max_turns = max_turns

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "simulated_user",
            "goal": self.goal,
            "max_turns": self.max_turns,
        }

    async def run(self, ctx: SessionContext) -> dict[str, Any]:
        transcript: list[Message] = []
        writes: list[str] = []
        tokens: list[int] = []
        for _ in range(self.max_turns):
            user = await self.simulator.next_turn(transcript)
            if user is None:
                break
            result = await ctx.retrieve(user)
            tokens.append(result.trace.token_count or 0)
            reply = await self.agent.answer(user, result.formatted_context)
            turn = [Message(role="user", content=user), Message(role="assistant", content=reply)]
            receipt = await ctx.record(turn)
            writes.append(receipt.status)
            transcript.extend(turn)
        verdict = await self.outcome_judge.judge_session(transcript, self.goal)
        return {
            "turns": len(transcript) // 2,
            "writes": writes,
            "context_tokens": tokens,
            "verdict": verdict.to_dict(),
        }


class ScriptedSimulator:
    """A simulated user reading from a script (useful offline and in tests)."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)

    async def next_turn(self, transcript: Sequence[Message]) -> str | None:
        n = sum(1 for m in transcript if m.role == "user")
        return self.lines[n] if n < len(self.lines) else None


def verdict_summary(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Count, accuracy (mean of the scored verdicts) with its 95 % interval and n
    (``stats.mean_ci``: Wilson for 0/1 scores, bootstrap otherwise), and the labels.
    Unscored verdicts (errors, unparsed) are counted, never scored."""
    from nanobot_memory_adapters.harness.estimates import estimate

    labels = [v["label"] for v in verdicts]
    scored = [float(v["score"]) for v in verdicts if v.get("score") is not None]
    return {
        "count": len(verdicts),
        "accuracy": round(sum(scored) / len(scored), 6) if scored else None,
        "interval": estimate(scored),
        "labels": {k: labels.count(k) for k in sorted(set(labels))},
    }


# What each task's judged headline is over, and what it reports apart.
HEADLINE_NOTE = {
    "locomo": "overall = categories 1-4, category 5 (adversarial) apart",
    "longmemeval": "overall = answerable questions; abstention (_abs) questions apart",
    "beam": "overall = every ability but abstention; abstention apart",
}


def split_headline(task: str, judged: list[dict[str, Any]]
                   ) -> tuple[list[dict[str, Any]], tuple[str, list[dict[str, Any]]]]:
    """(the headline's judged rows, (name, the rows reported apart)) for a task: a provider
    that stores nothing must score nothing on the headline, so questions that reward
    "I don't know" (abstention) or rest on a false premise (LoCoMo 5) stay out of it."""
    def apart(c: int) -> bool:
        if task == "longmemeval":
            from nanobot_memory_adapters.harness.datasets.longmemeval import ABSTENTION_OFFSET

            return c > ABSTENTION_OFFSET
        if task == "beam":
            from nanobot_memory_adapters.harness.datasets.beam import ability_of

            return ability_of(c) == "abstention"
        return not 1 <= c <= 4
    name = {"longmemeval": "abstention", "beam": "abstention"}.get(task, "category_5")
    rows = [j for j in judged if not apart(int(j["category"]))]
    return rows, (name, [j for j in judged if apart(int(j["category"]))])


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
