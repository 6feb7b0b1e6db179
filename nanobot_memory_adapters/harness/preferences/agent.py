"""Test sessions through a real nanobot ``AgentLoop``.

The loop is built the way ``nanobot agent`` builds it, in a private home (config, a
neutral workspace, its own session store), with the memory plugin active on the provider
under test: the harness hands the plugin the very adapter instance it accumulated memory
into (``nanobot.tool.provided_memory``), read-only, with scope templates that resolve to
the unit's scope. Every provider therefore enters through the same prompt slot, and the
plugin's own recall builds the ``RetrieveRequest`` (the user's message as the query, the
test's tags and timeline time as request attributes). A request arrives on the test's
channel and chat (a work workspace, a family chat), as in a deployment.

The recall query is the user's turn alone. A recognition task's options join the prompt
only after recall, by a runner hook (``OptionsHook``); the answer is parsed from the
reply (small local models write tool calls as text, so a choice tool would measure the
model's tool use, not its memory). Each turn reports the exact query the plugin sent
(its recall cache entry), for the trace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from nanobot.agent.hook import AgentHook
from nanobot.agent.tools.registry import ToolRegistry
from pydantic import Field

from nanobot_memory_adapters.contract import MemoryAdapter, MemoryScope
from nanobot_memory_adapters.harness.preferences.format import TestSession
from nanobot_memory_adapters.harness.preferences.session import Said
from nanobot_memory_adapters.llm_endpoint import OpenAICompatibleEndpoint
from nanobot_memory_adapters.redaction import redact_text

# nanobot's own texts for a turn that produced no answer (a failed model call, an empty
# final response, a turn cut off and closed by session recovery): a reply starting with
# one of these is nanobot speaking, not the model acting on memory.
NO_ANSWER_PREFIXES = (
    "Sorry, I encountered an error",
    "Error: Task interrupted before a response was generated",
    "Task recovery was superseded by a newer message",
    "I completed the tool steps but couldn't produce a final answer",
)
# nanobot's stop reasons for a run that ended without an answer of the model's own
NO_ANSWER_STOPS = frozenset({"error", "empty_final_response", "max_iterations"})


#: what the test turns offer the model: ``default`` (nanobot's own tools and the plugin's
#: ``memory_search``, as a deployment offers them) or ``none`` (no tool at all: a small model
#: offered tools answers with a tool call printed as text, which reads as no act)
AgentTools = Literal["default", "none"]
AGENT_TOOLS: tuple[str, ...] = ("default", "none")


class NoTools(ToolRegistry):
    """A registry that offers nothing. nanobot 0.3.5 reads an empty registry as "use the
    loop's own" (``tools or self.tools``), so this one is empty but true: the turn's
    requests then carry no ``tools`` at all."""

    def __bool__(self) -> bool:
        return True


class NoAnswer(RuntimeError):
    """nanobot ended the turn without the model's answer: the test failed, it did not
    "act on nothing"."""


OPTION_INSTRUCTION = (
    "Options:\n{options}\n\nPick the one option that suits me best. Reply with its letter "
    "in parentheses first, e.g. (b), then one short sentence."
)


class AgentLLM(OpenAICompatibleEndpoint):
    """The model nanobot answers with in test sessions: the project's one endpoint model,
    with nanobot's call settings. ``describe`` (recorded in the manifest) holds no key."""

    base_url: str = Field()  # pyright: ignore[reportIncompatibleVariableOverride]
    model: str = Field()  # pyright: ignore[reportIncompatibleVariableOverride]
    api_key_env: str = "OPENAI_API_KEY"  # pyright: ignore[reportIncompatibleVariableOverride]
    max_tokens: int = 256
    temperature: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {"base_url": redact_text(self.base_url) if self.base_url else None,
                "model": self.model,
                "api_key_env": self.api_key_env,
                "max_tokens": self.max_tokens, "temperature": self.temperature}


def options_block(test: TestSession) -> str:
    options = "\n".join(f"({o.id}) {o.text}" for o in test.options)
    return OPTION_INSTRUCTION.format(options=options)


class NanobotAgent:
    """One nanobot AgentLoop for one unit (provider x persona)."""

    def __init__(
        self,
        llm: AgentLLM,
        adapter: MemoryAdapter,
        provider: str,
        kind: str,
        block: dict[str, Any],
        scope: MemoryScope,
        budget_tokens: int,
        home: Path,
        *,
        placement: str = "user_message",
        recall_timeout_s: float = 120.0,
        tools: AgentTools = "default",
    ) -> None:
        self.llm = llm
        self.tools = tools
        self.adapter = adapter
        self.scope = scope
        self.home = home
        self.memory_settings: dict[str, Any] = {
            "memory": {
                kind: provider,
                **({provider: block} if block else {}),
                "budget": {"max_tokens": budget_tokens},
                "scope": {"run_id": scope.run_id, "persona_id": scope.persona_id,
                          "agent_id": scope.agent_id or "nanobot",
                          "session_id": "{session_key}"},
            },
            # the memory guide pinned off (not left to the plugin's defaults, which
            # changed): a test's requests are not about memory, and a small model offered
            # one more tool answers with a call to it
            "nanobot": {"read_only": True, "recall_timeout_s": recall_timeout_s,
                        "startup_timeout_s": recall_timeout_s,
                        "context_placement": placement,
                        "guide_tool": False, "install_skill": False,
                        # each session is one simulated user's: declared one person's
                        # (the plugin's audience rule gives unknown chats no memory)
                        "direct_chats": ["*"],
                        # tools off: memory_search is not even registered
                        **({"search_tool": False} if tools == "none" else {})},
        }
        self.loop: Any = None
        self.plugin: Any = None

    async def start(self) -> NanobotAgent:
        from nanobot.agent.loop import AgentLoop
        from nanobot.config.loader import load_config
        from nanobot.session.manager import SessionManager

        from nanobot_memory_adapters.hosting import provided_memory
        from nanobot_memory_adapters.nanobot import plugin_for

        workspace = self.home / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        config_path = self.home / "config.json"
        key = self.llm.resolved_api_key() or "not-needed"
        config_path.write_text(json.dumps({
            "agents": {"defaults": {
                "workspace": str(workspace), "model": self.llm.model, "provider": "custom",
                "maxTokens": self.llm.max_tokens, "temperature": self.llm.temperature,
                # nanobot over-estimates prompts of custom providers (BACKENDS.md): a small
                # window would refuse turns that fit.
                "contextWindowTokens": 200000,
            }},
            "providers": {"custom": {"apiKey": "${NANOBOT_MEMORY_AGENT_KEY}",
                                     "apiBase": self.llm.base_url}},
        }))
        os.environ["NANOBOT_MEMORY_AGENT_KEY"] = key  # the key never lands in a file
        # nanobot aborts a stream that sends nothing for 90 s; a CPU model reading a cold
        # prompt does exactly that (nanobot's own setting, raised unless the user set it).
        os.environ.setdefault("NANOBOT_STREAM_IDLE_TIMEOUT_S", "1800")
        config = load_config(config_path)
        sessions = SessionManager(workspace, sessions_root=self.home / "sessions")
        with provided_memory(self.adapter, self.memory_settings):
            self.loop = AgentLoop.from_config(config, tool_registry=ToolRegistry(),
                                              session_manager=sessions)
        self.plugin = plugin_for(self.loop)
        if self.plugin is None or self.plugin.status != "active":
            reason = getattr(self.plugin, "reason", "the plugin did not attach")
            await self.aclose()
            raise RuntimeError(f"memory plugin not active in the test agent: {reason}")
        return self

    async def say(self, test: TestSession, session_key: str, text: str,
                  attributes: dict[str, str], *, options: bool,
                  user_turns: list[str]) -> Said:
        """One user turn through nanobot. The plugin recalls with ``text`` (nanobot's user
        message); with ``options`` the option list joins the prompt after that recall, by
        a runner hook, so it never reaches the retrieval query."""
        from nanobot_memory_adapters.nanobot.turns import tags_from

        outcome = RunOutcomeHook()
        hooks: list[AgentHook] = [outcome, *([OptionsHook(test)] if options else [])]
        out = await self.loop.process_direct(
            text, session_key=session_key, channel=test.channel or "bench",
            chat_id=test.chat_id or session_key, sender_id=self.scope.persona_id,
            attributes={**attributes, "as_of": test.at.isoformat()}, hooks=hooks,
            tools=NoTools() if self.tools == "none" else None,
        )
        reply = (out.content if out is not None else "") or ""
        why = outcome.no_answer(reply)
        if why:
            raise NoAnswer(f"nanobot gave no answer ({why})")
        context, query, recall_error = self._context(session_key)
        return Said(reply, context, query, recall_error, tags=tags_from(attributes))

    def _context(self, session_key: str) -> tuple[str, str | None, str | None]:
        """The memory section the plugin put into this turn's prompt, the exact query its
        recall sent, and why the section is not a fresh one when it is not."""
        entry = self.plugin.cache.get(session_key) if self.plugin is not None else None
        if entry is None or self.plugin is None:
            return "", None, "the plugin made no recall for this turn"
        if entry.stale:
            last = self.plugin.last_error
            return entry.text, entry.query, f"recall failed: {last.message if last else 'unknown'}"
        return entry.text, entry.query, None

    async def aclose(self) -> None:
        if self.loop is not None:
            await self.loop.aclose()
        if self.plugin is not None:
            await self.plugin.aclose()  # a provided adapter stays open (the harness owns it)
        self.loop = self.plugin = None


class RunOutcomeHook(AgentHook):
    """Keeps how nanobot's runner ended the turn (its stop reason and error), so a turn
    without the model's answer is told apart from an answer that acts on nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.stop_reason: str | None = None
        self.error: str | None = None

    async def after_iteration(self, context: Any) -> None:
        self.stop_reason = context.stop_reason or self.stop_reason
        self.error = context.error or self.error

    async def after_run(self, context: Any) -> None:
        # the run-level stop reason (max_iterations is set only after the loop)
        self.stop_reason = context.stop_reason or self.stop_reason
        self.error = context.error or self.error

    def no_answer(self, reply: str) -> str | None:
        """Why ``reply`` is not the model's answer, or None when it is."""
        if self.stop_reason in NO_ANSWER_STOPS:
            return f"stop reason {self.stop_reason}"
        if not reply.strip():
            return "empty reply"
        if reply.startswith(NO_ANSWER_PREFIXES):
            return f"nanobot's placeholder: {reply[:60]!r}"
        return None


class OptionsHook(AgentHook):
    """Adds a recognition task's options to the prompt's last user message, after the
    plugin's recall (nanobot resolves runtime context before the runner's first
    iteration), so the retrieval query is the user's request alone."""

    def __init__(self, test: TestSession) -> None:
        super().__init__()
        self.block = options_block(test)

    async def before_iteration(self, context: Any) -> None:
        if context.iteration != 0:
            return
        for message in reversed(context.messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                message["content"] = f"{content}\n\n{self.block}"
            elif isinstance(content, list):
                message["content"] = [*content, {"type": "text", "text": self.block}]
            return
