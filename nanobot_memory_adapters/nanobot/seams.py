"""Every touch of nanobot internals the plugin needs, in one place, behind a version check.

nanobot 0.3.x has no memory-plugin API. The public seams it does have are used directly
elsewhere in this package: the ``nanobot.tools`` entry point (``Tool`` / ``ToolContext``),
``Tool.runtime_context_provider``, ``current_request_context()``, the SDK's
``RuntimeClient`` (``add_context_provider``, ``on_session_turn_persisted``), ``ctx.sessions``,
``CommandRouter.exact/prefix`` and ``AgentLoop.schedule_background``.

What is *not* public lives here, and only here:

- reaching the ``AgentLoop`` from a ``ToolContext`` (``runtime_control``'s private target);
- replacing ``loop.context.memory`` (the ``MemoryStore`` whose ``read_memory()`` the
  system prompt reads) with a view that serves the plugin's cached ``<memory-context>``;
- registering slash commands: ``AgentLoop.__init__`` builds its ``CommandRouter`` *after*
  loading tools, so the plugin wraps the ``register_builtin_commands`` name the loop module
  calls, and appends its two specs to ``BUILTIN_COMMAND_SPECS`` so ``/help`` lists them;
- reading a turn's start time from its ``turn_id`` and the ``_command`` / hidden-history
  markers on session messages;
- finding the active config directory from the session store's location.

``check_compatibility()`` verifies the version (0.3.x) and the shape of each of these
before anything is touched; on any mismatch the plugin logs one line saying so and stays
disabled, so a nanobot upgrade degrades to "plugin disabled", never to a crash or to
silently wrong memory. When upstream lands an official memory seam (open PR #5570 adds a
``MemoryBackend``), this module is the one to rewrite.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import inspect
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.formatting import SECTION_TAG
from nanobot_memory_adapters.logs import logger

SUPPORTED_SERIES = "0.3."
LOG_PREFIX = "nanobot-memory-adapters"
COMMAND_MARKER = "_command"  # session messages produced by slash commands
HIDDEN_MARKER_FALLBACK = "_hidden_history"  # summary checkpoints (not user speech)

_compat_cache: tuple[bool, str] | None = None
_compat_lock = threading.Lock()


def nanobot_version() -> str:
    try:
        return version("nanobot-ai")
    except PackageNotFoundError:
        return "unknown"


def _shape_problems() -> list[str]:
    """What this module relies on and the installed nanobot no longer has."""
    problems: list[str] = []
    try:
        from nanobot.agent import loop as loop_mod
        from nanobot.agent.context import ContextBuilder
        from nanobot.agent.memory import MemoryStore
        from nanobot.agent.tools import runtime_control
        from nanobot.agent.tools.context import current_request_context  # noqa: F401
        from nanobot.bus.runtime_events import SessionTurnPersisted  # noqa: F401
        from nanobot.command import builtin
        from nanobot.command.router import CommandRouter
        from nanobot.runtime_context import public_history_message  # noqa: F401
        from nanobot.sdk.clients import RuntimeClient
    except ImportError as exc:
        return [f"import failed: {exc}"]
    for name in ("add_context_provider", "on_session_turn_persisted"):
        if not callable(getattr(RuntimeClient, name, None)):
            problems.append(f"RuntimeClient.{name} is gone")
    if not callable(getattr(loop_mod, "register_builtin_commands", None)):
        problems.append("nanobot.agent.loop.register_builtin_commands is gone")
    if not hasattr(loop_mod.AgentLoop, "schedule_background"):
        problems.append("AgentLoop.schedule_background is gone")
    try:
        init_src = inspect.getsource(loop_mod.AgentLoop.__init__)
        if "register_builtin_commands(self.commands)" not in init_src:
            problems.append("AgentLoop.__init__ no longer calls register_builtin_commands")
    except (OSError, TypeError):
        pass  # no source available: rely on the attribute checks
    try:
        prompt_src = inspect.getsource(ContextBuilder.build_system_prompt)
        if "self.memory.read_memory()" not in prompt_src:
            problems.append("ContextBuilder.build_system_prompt no longer reads self.memory")
    except (OSError, TypeError):
        pass
    if not callable(getattr(MemoryStore, "read_memory", None)):
        problems.append("MemoryStore.read_memory is gone")
    if not hasattr(runtime_control, "AgentRuntimeControl"):
        problems.append("AgentRuntimeControl is gone")
    if not isinstance(getattr(builtin, "BUILTIN_COMMAND_SPECS", None), tuple):
        problems.append("BUILTIN_COMMAND_SPECS is not a tuple")
    if not hasattr(builtin, "BuiltinCommandSpec"):
        problems.append("BuiltinCommandSpec is gone")
    for name in ("exact", "prefix"):
        if not callable(getattr(CommandRouter, name, None)):
            problems.append(f"CommandRouter.{name} is gone")
    return problems


def check_compatibility() -> tuple[bool, str]:
    """(ok, reason). Logged once per process when not ok."""
    global _compat_cache
    with _compat_lock:
        if _compat_cache is not None:
            return _compat_cache
        found = nanobot_version()
        if not found.startswith(SUPPORTED_SERIES):
            result = (False, f"nanobot-ai {found} is not supported (this plugin needs 0.3.x)")
        else:
            problems = _shape_problems()
            result = (
                (False, f"nanobot-ai {found} changed shape: " + "; ".join(problems))
                if problems
                else (True, f"nanobot-ai {found}")
            )
        if not result[0]:
            logger.error(
                "{}: plugin disabled — {}. nanobot runs with its own memory; "
                "upgrade nanobot-memory-adapters or pin nanobot-ai<0.4.",
                LOG_PREFIX,
                result[1],
            )
        _compat_cache = result
        return result


# -- the AgentLoop ------------------------------------------------------------------------
def agent_loop_of(ctx: Any) -> Any | None:
    """The AgentLoop that is loading this tool (``ToolContext`` only carries a control facade)."""
    from nanobot.agent.loop import AgentLoop

    control = getattr(ctx, "runtime_control", None)
    target = getattr(control, "_AgentRuntimeControl__target", None)
    return target if isinstance(target, AgentLoop) else None


def schedule_background(loop: Any, coro: Any) -> None:
    """Tracked by nanobot and awaited by ``AgentLoop.aclose()`` (so ``agent -m`` flushes)."""
    loop.schedule_background(coro)


def on_loop_start(loop: Any, start: Callable[[], None]) -> None:
    """Call ``start`` once an event loop runs: now, when the AgentLoop is built inside one
    (``Nanobot.from_config``, tests), else when ``AgentLoop.run()`` begins (the gateway,
    interactive ``nanobot agent``: they build the loop before ``asyncio.run``). Wraps the
    instance's ``run``; ``process_direct`` callers get ``start`` from the first turn."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        start()
        return
    original = loop.run

    async def run(*args: Any, **kwargs: Any) -> Any:
        start()
        return await original(*args, **kwargs)

    loop.run = run


def on_loop_close(loop: Any, closing: Callable[[], None]) -> None:
    """Call ``closing`` when ``AgentLoop.aclose()`` begins, before it awaits the background
    tasks (the plugin bounds its delivery then). Wraps the instance's ``aclose``."""
    original = loop.aclose

    async def aclose(*args: Any, **kwargs: Any) -> Any:
        try:
            closing()
        except Exception:  # never stand in the way of nanobot's shutdown
            logger.exception("{}: preparing for shutdown failed", LOG_PREFIX)
        return await original(*args, **kwargs)

    loop.aclose = aclose


def routed_chat(channel: str, chat_id: str) -> tuple[str, str]:
    """The chat a turn is delivered to, as nanobot routes it (0.3.5's
    ``TurnDeliveryFactory._default_route``): a ``system`` message (a session message from
    another session, a session timeout) names its target as ``channel:chat_id``; the
    turn's recall sees that route, and its record must file under the same chat."""
    if channel != "system":
        return channel, chat_id
    head, sep, tail = chat_id.partition(":")
    return (head, tail) if sep else ("cli", chat_id)


#: the turn whose reply is being assembled: (its session key, its turn id)
_REPLYING: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "nanobot_memory_replying", default=None)


def amend_replies(loop: Any, line_for: Callable[[str, str, str], str | None]) -> None:
    """Append ``line_for(channel, session_key, turn_id)`` (when not None) to the reply of
    an LLM turn, after nanobot has saved the session: the user sees it, the session
    history and memory never do. Private seams: wraps the instance's ``_prepare_outbound``
    (its ``TurnContext`` names the turn: its real session key and turn id; the message it
    assembles from carries ``channel:chat_id``, which is not the session of an API or SDK
    turn) and ``_assemble_outbound`` (0.3.5; commands build their replies elsewhere and
    get no line). A reply nanobot already streamed to its own terminal (the ``cli``
    channel: ``nanobot agent``) is on screen and its final message is not printed again,
    so the line is printed after it there."""
    prepare = getattr(loop, "_prepare_outbound", None)
    original = getattr(loop, "_assemble_outbound", None)
    if original is None or prepare is None:
        logger.warning("{}: this nanobot has no _prepare_outbound/_assemble_outbound; the "
                       "per-turn memory line is not shown", LOG_PREFIX)
        return

    async def prepare_outbound(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        key, turn_id = getattr(ctx, "session_key", None), getattr(ctx, "turn_id", None)
        token = _REPLYING.set((str(key), str(turn_id)) if key and turn_id else None)
        try:
            return await prepare(ctx, *args, **kwargs)
        finally:
            _REPLYING.reset(token)

    def assemble(msg: Any, *args: Any, **kwargs: Any) -> Any:
        outbound = original(msg, *args, **kwargs)
        turn = _REPLYING.get()
        if turn is None:  # not a turn nanobot prepared: no line (fails closed)
            return outbound
        try:
            line = line_for(msg.channel, *turn)
            if outbound is not None and line:
                content = outbound.content or ""
                outbound.content = f"{content}\n\n[{line}]" if content else f"[{line}]"
                streamed = kwargs.get("streamed_content", args[2] if len(args) > 2 else False)
                if msg.channel == "cli" and streamed:
                    print(f"[{line}]", flush=True)  # on nanobot's own terminal
        except Exception:  # the line is a courtesy: never fail the reply
            logger.exception("{}: the per-turn memory line failed", LOG_PREFIX)
        return outbound

    loop._prepare_outbound = prepare_outbound
    loop._assemble_outbound = assemble


def _consolidator_method(consolidator: Any, name: str, without: str) -> Any | None:
    """The consolidator's bound ``name`` to wrap, or None, logged with what is lost."""
    method = getattr(consolidator, name, None)
    if method is None:
        logger.warning("{}: this nanobot has no Consolidator.{}; {}", LOG_PREFIX, name, without)
    return method


def before_session_archive(loop: Any, hook: Callable[[str], Awaitable[None]]) -> None:
    """Await ``hook(session_key)`` before nanobot archives a session's messages: ``/new``
    (in the background), ``/compact`` and idle auto-compaction all go through
    ``Consolidator.archive_session`` in 0.3.5. Private seam: wraps the instance's
    ``loop.consolidator.archive_session``; a hook failure never stops the archive."""
    consolidator = getattr(loop, "consolidator", None)
    original = _consolidator_method(
        consolidator, "archive_session", "queued turns are not delivered before it archives "
        "a session, and an archive's prompt may carry MEMORY.md")
    if consolidator is None or original is None:
        return

    async def archive_session(session: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            await hook(session.key)
        except Exception:
            logger.exception("{}: delivering before the archive failed", LOG_PREFIX)
        token = _ARCHIVING.set(True)
        try:
            # nanobot's archive reads the session without changing it; its summary goes to
            # the workspace-wide history.jsonl (Dream folds it into files every chat
            # loads, /dream-log shows it in any chat): it reads a copy without recall
            view = copy.copy(session)
            view.messages, _ = without_memory(list(session.messages),
                                              placeholder=SUMMARISED_TOOL_RESULT)
            return await original(view, *args, **kwargs)
        finally:
            _ARCHIVING.reset(token)

    consolidator.archive_session = archive_session


#: set while nanobot archives a session (``/new``, ``/compact``, idle compaction): its
#: summariser's prompt is built outside any turn, where the memory slot would be MEMORY.md
_ARCHIVING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nanobot_memory_archiving", default=False)


def archiving() -> bool:
    """Whether this task is inside nanobot's archive of a session (``before_session_archive``
    installed the wrapper that says so)."""
    return _ARCHIVING.get()


def summaries_without_system_prompt(loop: Any, when: Callable[[], bool]) -> None:
    """While ``when()`` (the current turn's prompt carries memory its session may not
    keep), nanobot's in-turn compaction summarises without the system prompt: 0.3.5's
    archiver sends the whole accepted history, system prompt included, to the model whose
    summary is saved in the session (and ``history.jsonl``). Only the transcript is
    summarised either way; what is lost is the cached prefix. Always, the transcript goes
    without recalled memory (``transcript_without_memory``): ``history.jsonl`` is the
    workspace's, not the chat's. Private seam: wraps the instance's
    ``loop.consolidator.summarize_transcript`` (provider compaction goes through it too)."""
    consolidator = getattr(loop, "consolidator", None)
    original = _consolidator_method(consolidator, "summarize_transcript",
                                    "a turn's compaction may summarise its prompt-only memory")
    if consolidator is None or original is None:
        return

    async def summarize_transcript(accepted_messages: list[dict[str, Any]], *args: Any,
                                   **kwargs: Any) -> Any:
        try:
            strip = when()
        except Exception:  # unknown: fail closed
            logger.exception("{}: compaction check failed", LOG_PREFIX)
            strip = True
        if strip:
            accepted_messages = [m for m in accepted_messages
                                 if m.get("role") not in ("system", "developer")]
        # the summary is saved in the session and in the workspace-wide history.jsonl
        return await original(transcript_without_memory(accepted_messages), *args, **kwargs)

    consolidator.summarize_transcript = summarize_transcript


# -- system-prompt memory -------------------------------------------------------------------
class MemoryView:
    """Stands in for ``loop.context.memory``: ``read_memory()`` asks the plugin first.

    ``text_for_prompt()`` returns ``None`` to mean "nanobot's own MEMORY.md" (plugin
    disabled, passthrough condition, outside a turn, Dream sessions). Everything else
    (Dream prompts, history, git, cursors) goes to the real ``MemoryStore``.
    """

    def __init__(self, store: Any, text_for_prompt: Callable[[], str | None]) -> None:
        object.__setattr__(self, "_store", store)
        object.__setattr__(self, "_text_for_prompt", text_for_prompt)

    @property
    def wrapped_store(self) -> Any:
        return self._store

    def read_memory(self) -> str:
        try:
            text = self._text_for_prompt()
        except Exception:  # never break prompt building, and never fall open: MEMORY.md
            # is built from every chat, and this turn's audience is unknown here
            logger.exception("{}: memory view failed; no memory in this prompt", LOG_PREFIX)
            return ""
        return self._store.read_memory() if text is None else text

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._store, name, value)


def install_memory_view(loop: Any, text_for_prompt: Callable[[], str | None]) -> MemoryView:
    """Put a MemoryView in front of the ContextBuilder's store (idempotent).

    The consolidator and archiver keep their own reference to the real store, and Dream
    reaches the real store through the view, so nanobot's own housekeeping is unchanged.
    """
    current = loop.context.memory
    if isinstance(current, MemoryView):
        return current
    view = MemoryView(current, text_for_prompt)
    loop.context.memory = view
    return view


def native_memory_summary(loop: Any) -> list[str]:
    """MEMORY.md size and history.jsonl entries of nanobot's own (real) store."""
    store = getattr(loop.context.memory, "wrapped_store", loop.context.memory)
    lines = []
    try:
        text = store.read_memory()
        lines.append(f"MEMORY.md: {len(text)} chars ({store.memory_file})")
        history = Path(store.history_file)
        with history.open(encoding="utf-8") if history.exists() else _empty() as f:
            count = sum(1 for line in f if line.strip())
        lines.append(f"history.jsonl: {count} entries")
    except Exception as exc:
        lines.append(f"native memory: unreadable ({exc})")
    return lines


def _empty() -> Any:
    import io

    return io.StringIO("")


def hide_tool(loop: Any, name: str) -> None:
    """Drop the entry point's carrier tool from the model-visible tool list."""
    tools = getattr(loop, "tools", None)
    if tools is not None and tools.get(name) is not None:
        tools.unregister(name)


def lists_skill(loop: Any, name: str) -> bool | None:
    """Whether nanobot's skills loader lists the skill ``name`` (its ``disabledSkills``
    honoured); None when the loop has no loader of the known shape."""
    skills = getattr(getattr(loop, "context", None), "skills", None)
    lister = getattr(skills, "list_skills", None)
    if not callable(lister):
        return None
    try:  # without the requirement checks: a listing, no front matter parsed
        entries: Any = lister(filter_unavailable=False)
        return any(entry.get("name") == name for entry in entries)
    except Exception:
        return None


def runtime_context_block(text: str) -> Any:
    """A nanobot runtime-context block carrying the memory section (appended to the user
    message by nanobot, marked so ``public_message`` strips it again)."""
    from nanobot.runtime_context import RuntimeContextBlock

    return RuntimeContextBlock(source=LOG_PREFIX, content=text)


def session_manager_for(config_path: Path) -> Any:
    """nanobot's own session reader for a config file, built as ``AgentLoop.from_config``
    builds it (sessions under the runtime data dir when nanobot has one)."""
    from nanobot.config.loader import load_config
    from nanobot.session.manager import SessionManager

    config = load_config(config_path)
    data_dir = config.runtime_data_dir
    return SessionManager(config.workspace_path,
                          sessions_root=data_dir / "sessions" if data_dir is not None else None)


def current_request() -> Any | None:
    """nanobot's per-turn request context (channel, chat, sender, session), if any."""
    from nanobot.agent.tools.context import current_request_context

    return current_request_context()


def register_tool(loop: Any, tool: Any) -> None:
    """Offer a tool to the model (nanobot's tool registry)."""
    tools = getattr(loop, "tools", None)
    if tools is not None:
        tools.register(tool)


def current_session_key() -> str | None:
    from nanobot.agent.tools.context import current_request_context

    ctx = current_request_context()
    return ctx.session_key if ctx is not None else None


# -- slash commands ---------------------------------------------------------------------------
CommandInstaller = Callable[[Any], None]  # receives the CommandRouter
_pending: dict[int, list[tuple[weakref.ref[Any], CommandInstaller]]] = {}
_pending_lock = threading.Lock()
_hook_installed = False
_specs_added: set[str] = set()


def _install_register_hook() -> None:
    global _hook_installed
    if _hook_installed:
        return
    from nanobot.agent import loop as loop_mod

    original = loop_mod.register_builtin_commands

    def register_builtin_commands(router: Any) -> None:
        original(router)
        with _pending_lock:
            waiting = _pending.pop(threading.get_ident(), [])
        for loop_ref, installer in waiting:
            agent_loop = loop_ref()
            if agent_loop is not None and getattr(agent_loop, "commands", None) is router:
                installer(router)
            elif agent_loop is not None:  # not this loop's router: keep waiting
                with _pending_lock:
                    _pending.setdefault(threading.get_ident(), []).append((loop_ref, installer))

    register_builtin_commands.__wrapped__ = original  # type: ignore[attr-defined]
    loop_mod.register_builtin_commands = register_builtin_commands
    _hook_installed = True


def register_commands(loop: Any, installer: CommandInstaller) -> None:
    """Install commands on ``loop.commands`` now if it exists, else when the loop builds it."""
    router = getattr(loop, "commands", None)
    if router is not None:
        installer(router)
        return
    with _pending_lock:
        _install_register_hook()
        _pending.setdefault(threading.get_ident(), []).append((weakref.ref(loop), installer))


def add_help_specs(specs: list[dict[str, Any]]) -> None:
    """Append command specs to nanobot's /help (and WebUI palette) list, once."""
    from nanobot.command import builtin

    new = []
    for spec in specs:
        if spec["command"] in _specs_added or any(
            s.command == spec["command"] for s in builtin.BUILTIN_COMMAND_SPECS
        ):
            continue
        new.append(builtin.BuiltinCommandSpec(**spec))
        _specs_added.add(spec["command"])
    if new:
        builtin.BUILTIN_COMMAND_SPECS = (*builtin.BUILTIN_COMMAND_SPECS, *new)


def outbound(ctx: Any, content: str) -> Any:
    from nanobot.bus.events import OutboundMessage

    return OutboundMessage(
        channel=ctx.msg.channel,
        chat_id=ctx.msg.chat_id,
        content=content,
        metadata={**dict(ctx.msg.metadata or {}), "render_as": "text"},
    )


# -- sessions and turns ---------------------------------------------------------------------
def config_dir_of(sessions: Any) -> Path | None:
    """The directory of the active config file (so ``-c`` is followed).

    nanobot keeps sessions in ``<config dir>/sessions/<workspace id>/``, both for the CLI
    (``-c``) and for ``Nanobot.from_config(path)``.
    """
    sessions_dir = getattr(sessions, "sessions_dir", None)
    if sessions_dir is None:
        return None
    path = Path(sessions_dir)
    if path.parent.name == "sessions":
        return path.parent.parent
    return None


def nanobot_config_path(sessions: Any) -> Path | None:
    """The config file the running nanobot was started with: the one nanobot's loader
    remembers when it lies in the sessions' config directory, else ``config.json`` there."""
    from nanobot.config.loader import get_config_path

    config_dir = config_dir_of(sessions)
    if config_dir is None:
        return None
    current = get_config_path()
    if current.is_file() and current.parent == config_dir:
        return current
    path = config_dir / "config.json"
    return path if path.is_file() else None


def default_config_dir() -> Path:
    from nanobot.config.loader import get_config_path

    return get_config_path().expanduser().parent


def session_of(sessions: Any, key: str) -> Any | None:
    if sessions is None:
        return None
    session = sessions.get_cached(key) if hasattr(sessions, "get_cached") else None
    return session if session is not None else sessions.get_or_create(key)


def session_persists(sessions: Any, key: str) -> bool:
    session = sessions.get_cached(key) if hasattr(sessions, "get_cached") else None
    policy = getattr(session, "policy", None)
    return bool(getattr(policy, "persist", True))


def turn_started_at(turn_id: str) -> datetime | None:
    """nanobot 0.3.5 turn ids are ``"<session key>:<time.time_ns()>"``."""
    _, _, tail = turn_id.rpartition(":")
    if not tail.isdigit() or len(tail) < 16:
        return None
    return datetime.fromtimestamp(int(tail) / 1e9)  # naive local, like message timestamps


def hidden_marker() -> str:
    try:
        from nanobot.session.history_visibility import HIDDEN_HISTORY_META

        return HIDDEN_HISTORY_META
    except ImportError:
        return HIDDEN_MARKER_FALLBACK


def public_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message without runtime-context blocks (memory or otherwise) appended to it."""
    from nanobot.runtime_context import public_history_message

    return public_history_message(message)


def is_internal_message(message: Mapping[str, Any]) -> bool:
    return bool(message.get(COMMAND_MARKER) or message.get(hidden_marker()))


#: the runtime-context source nanobot 0.3.5's ``send_session_message`` tool gives the
#: block it adds to a message it delivers ("Message from @x. Reply with ...")
SESSION_MESSAGE_SOURCE = "session_message"


def is_session_message(message: Mapping[str, Any]) -> bool:
    """A saved user message another session's model sent (``send_session_message``), as
    its runtime-context marker says: typed by no one here, so never recorded as the
    session's person's words (the saved message keeps no envelope to say whose)."""
    from nanobot.runtime_context import RUNTIME_CONTEXT_HISTORY_META

    marker = message.get(RUNTIME_CONTEXT_HISTORY_META)
    return (message.get("role") == "user" and isinstance(marker, Mapping)
            and SESSION_MESSAGE_SOURCE in (marker.get("sources") or ()))


RECOVERY_MARKER = "_recovery_interrupted"  # nanobot's crash-recovery placeholders
MAX_ITERATIONS_PREFIX = "I reached the maximum number of tool call iterations"
_placeholder_cache: frozenset[str] | None = None


def _placeholders() -> frozenset[str]:
    """nanobot's synthetic assistant texts that carry no marker (model errors, an empty
    final answer): the same constants nanobot writes, read from nanobot itself."""
    global _placeholder_cache
    if _placeholder_cache is None:
        found: set[str] = set()
        try:
            from nanobot.agent import runner

            for name in ("_PERSISTED_MODEL_ERROR_PLACEHOLDER", "_DEFAULT_ERROR_MESSAGE",
                         "_ARREARAGE_ERROR_MESSAGE"):
                value = getattr(runner, name, None)
                if isinstance(value, str):
                    found.add(value.strip())
        except ImportError:
            pass
        try:
            from nanobot.utils.runtime import EMPTY_FINAL_RESPONSE_MESSAGE

            found.add(EMPTY_FINAL_RESPONSE_MESSAGE.strip())
        except ImportError:
            pass
        _placeholder_cache = frozenset(found)
    return _placeholder_cache


def is_synthetic_message(message: Mapping[str, Any]) -> bool:
    """A message nanobot wrote itself in someone's place: the crash-recovery placeholder
    ("Error: Task interrupted before a response was generated."), a model-error or empty
    final answer, the iteration-limit notice. Not conversation: never memory."""
    if message.get(RECOVERY_MARKER):
        return True
    if message.get("role") not in ("assistant", "tool"):
        return False
    content = message.get("content")
    if not isinstance(content, str):
        return False
    text = content.strip()
    return text in _placeholders() or text.startswith(MAX_ITERATIONS_PREFIX)


# -- who a turn belongs to ------------------------------------------------------------------
_AUTOMATION_FALLBACK = ("_cron_trigger", "_local_trigger")


def _automation_keys() -> tuple[str, ...]:
    """The inbound metadata keys nanobot puts on turns it starts itself (a cron job, a
    local trigger): such a turn was typed by nobody."""
    keys: list[str] = []
    try:
        from nanobot.cron.session_turns import CRON_TRIGGER_META

        keys.append(CRON_TRIGGER_META)
    except ImportError:
        keys.append(_AUTOMATION_FALLBACK[0])
    try:
        from nanobot.triggers.local_session_turns import LOCAL_TRIGGER_META

        keys.append(LOCAL_TRIGGER_META)
    except ImportError:
        keys.append(_AUTOMATION_FALLBACK[1])
    return tuple(keys)


def is_automation_turn(metadata: Mapping[str, Any] | None) -> bool:
    return any((metadata or {}).get(key) for key in _automation_keys())


def session_message_source(metadata: Mapping[str, Any] | None) -> str | None:
    """The session a turn came from when nanobot's ``send_session_message`` tool sent it
    (its envelope's ``source_session_key``), else None. Such a turn is typed by another
    session's model, on behalf of whoever spoke there."""
    try:
        from nanobot.session.session_messages import session_message_envelope
    except ImportError:
        raw = (metadata or {}).get("_session_message")  # nanobot 0.3.5's key
        source = raw.get("source_session_key") if isinstance(raw, Mapping) else None
        return source if isinstance(source, str) and source else None
    envelope = session_message_envelope(metadata)
    if envelope is None:
        return None
    return envelope["source_session_key"]


def without_memory(messages: list[dict[str, Any]],
                   tool_names: frozenset[str] = frozenset({"memory_search"}),
                   placeholder: str = "") -> tuple[list[dict[str, Any]], int]:
    """The messages with the plugin's runtime-context blocks (recalled memory) taken off
    saved user messages and its memory tools' results withdrawn, one for one (indexes
    keep their meaning); and how many changed. What nanobot keeps beyond one chat (its
    workspace-wide ``history.jsonl``, which Dream folds into the files every chat loads)
    and a chat that is not one person's are built from these."""
    from nanobot.runtime_context import RUNTIME_CONTEXT_HISTORY_META

    out: list[dict[str, Any]] = []
    changed = 0
    for message in messages:
        marker = message.get(RUNTIME_CONTEXT_HISTORY_META)
        if isinstance(marker, Mapping) and LOG_PREFIX in (marker.get("sources") or ()):
            public = public_message(message)
            # nanobot drops the marker but keeps the text when the content no longer ends
            # in the recorded blocks: the sections go by their tags then
            public["content"] = _without_sections(public.get("content"))
            out.append(public)
            changed += 1
        elif (message.get("role") == "tool" and message.get("name") in tool_names
              and message.get("content") != (placeholder or WITHDRAWN_TOOL_RESULT)):
            out.append({**message, "content": placeholder or WITHDRAWN_TOOL_RESULT})
            changed += 1
        else:
            out.append(message)
    return out, changed


_SECTION = re.compile(rf"<{SECTION_TAG}[\s>].*?</{SECTION_TAG}>", re.S)


def _without_sections(content: Any) -> Any:
    if isinstance(content, str):
        return _SECTION.sub("", content)
    if isinstance(content, list):
        return [{**part, "text": _SECTION.sub("", part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str) else part
                for part in content]
    return content


def transcript_without_memory(messages: list[dict[str, Any]],
                              tool_names: frozenset[str] = frozenset({"memory_search"})
                              ) -> list[dict[str, Any]]:
    """A turn's transcript (as the model got it: history replayed without its markers)
    with every ``<memory-context>`` section cut out of its text and the memory tools'
    results withdrawn. The section's items are escaped when rendered, so a section ends
    at its own closing tag."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "tool" and message.get("name") in tool_names:
            out.append({**message, "content": SUMMARISED_TOOL_RESULT})
        elif "content" in message:
            out.append({**message, "content": _without_sections(message["content"])})
        else:
            out.append(message)
    return out


def strip_memory_blocks(sessions: Any, session_key: str,
                        tool_names: frozenset[str] = frozenset({"memory_search"})) -> int:
    """Remove the plugin's runtime-context blocks (recalled memory) from a session's saved
    user messages, and the results of its memory tools (``tool_names``), so a shared
    chat's history never replays one person's memory to another. A provider's saved
    conversation state (OpenAI's Responses API: the exact earlier input, blocks included,
    which nanobot replays instead of the history) is dropped with them, so the next request
    is built from the stripped history. Returns how many messages changed (the session is
    saved when any did)."""
    session = session_of(sessions, session_key)
    if session is None:
        return 0
    messages, changed = without_memory(session.messages, tool_names)
    if changed:
        session.messages[:] = messages
        if getattr(session, "provider_state", None) is not None:
            session.provider_state = None
        sessions.save(session)
    return changed


#: a memory tool's result as a summary's model sees it (kept out of the summary)
SUMMARISED_TOOL_RESULT = "[memory result left out: memory is recalled afresh each turn]"
WITHDRAWN_TOOL_RESULT = ("[memory result withdrawn: this chat is not known to be one "
                         "person's, so memory is not kept in its history]")
