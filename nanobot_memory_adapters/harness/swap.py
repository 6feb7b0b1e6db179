"""The backend swap flow (docs/design.md), one gate at a time, each reported.

    identity -> instantiate -> health -> setup -> capabilities -> smoke_write ->
    readiness -> isolation -> write_read -> read_only -> manifest

The smoke writes come before the readiness gate because both smoke reads depend on it.
A gate that fails stops the flow (later gates are reported ``skipped``). The readiness
gate reports ``pending`` when the backend has not derived the writes in time — never a
green. Smoke scopes live in their own run id and are reset before and after.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

from nanobot_memory_adapters.contract import (
    ACCEPTED_WRITE_STATUSES,
    STORED_WRITE_STATUSES,
    AdapterError,
    AdapterMode,
    ContextBudget,
    MemoryAdapter,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
    capabilities_of,
    supports,
)
from nanobot_memory_adapters.harness import manifest as mf
from nanobot_memory_adapters.redaction import redact, redact_text

GateStatus = Literal["passed", "failed", "pending", "not_applicable", "skipped"]
GATES = (
    "identity",
    "instantiate",
    "health",
    "setup",
    "capabilities",
    "smoke_write",
    "readiness",
    "isolation",
    "write_read",
    "read_only",
    "manifest",
)
_GREEN = {"passed", "not_applicable"}

_NAMES = (
    "Quetzal",
    "Marigold",
    "Tamarind",
    "Bramble",
    "Juniper",
    "Saffron",
    "Cobalt",
    "Pemberton",
    "Obsidian",
    "Wisteria",
    "Halcyon",
    "Zephyrine",
)
_PLACES = (
    "Reykjavik",
    "Montevideo",
    "Valparaiso",
    "Tromso",
    "Ulaanbaatar",
    "Zanzibar",
    "Timbuktu",
    "Nairobi",
    "Kyoto",
    "Lisbon",
    "Quito",
    "Hobart",
)


@dataclass
class Gate:
    name: str
    status: GateStatus
    detail: str = ""
    seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a gate's detail and data are printed and written: no credential in them
        self.detail = redact_text(self.detail)
        self.data = redact(self.data)


@dataclass
class SwapReport:
    provider: str | None
    gates: list[Gate] = field(default_factory=list)
    manifest: dict[str, Any] | None = None
    manifest_path: str | None = None
    cleanup: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(g.status in _GREEN for g in self.gates)

    @property
    def failed_gate(self) -> Gate | None:
        return next((g for g in self.gates if g.status not in _GREEN), None)

    @property
    def exit_code(self) -> int:
        """0 all green, 1 a gate failed, 3 the readiness gate is pending."""
        gate = self.failed_gate
        if gate is None:
            return 0
        return 3 if gate.status == "pending" else 1

    def to_dict(self) -> dict[str, Any]:
        failed = self.failed_gate
        return {
            "provider": self.provider,
            "ok": self.ok,
            "failed_gate": failed.name if failed else None,
            "gates": [asdict(g) for g in self.gates],
            "manifest_path": self.manifest_path,
            "manifest": self.manifest,
            "cleanup": self.cleanup,
        }


class _GateFailed(Exception):
    status: GateStatus

    def __init__(self, status: GateStatus, detail: str, data: dict[str, Any] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.data = data or {}


def _err(exc: BaseException) -> str:
    if isinstance(exc, AdapterError):
        return f"{exc} (raw: {exc.raw.get('type', '?')})"
    return f"{type(exc).__name__}: {exc}"


class _Flow:
    def __init__(self, report: SwapReport, on_gate: Callable[[Gate], None] | None) -> None:
        self.report = report
        self.on_gate = on_gate
        self.stopped = False

    async def gate(
        self, name: str, fn: Callable[[], Awaitable[tuple[str, dict[str, Any]]]]
    ) -> bool:
        if self.stopped:
            self._add(Gate(name, "skipped", "an earlier gate did not pass"))
            return False
        started = time.perf_counter()
        status: GateStatus
        try:
            detail, data = await fn()
            status = cast(GateStatus, data.pop("_status", "passed"))
        except _GateFailed as exc:
            status, detail, data = exc.status, exc.detail, exc.data
        except ImportError as exc:  # an extra not installed: the caller may run without it
            status, detail, data = "failed", _err(exc), {"not_installed": True}
        except Exception as exc:
            status, detail, data = "failed", _err(exc), {}
        gate = Gate(name, status, detail, round(time.perf_counter() - started, 3), data)
        self._add(gate)
        if status not in _GREEN:
            self.stopped = True
        return not self.stopped

    def _add(self, gate: Gate) -> None:
        self.report.gates.append(gate)
        if self.on_gate:
            self.on_gate(gate)


async def run_swap(
    source: dict[str, Any] | str | Path,
    *,
    data_dir: str | Path | None = None,
    seed: int = 0,
    readiness_timeout_s: float | None = None,
    manifest_path: str | Path | None = None,
    run_id: str | None = None,
    budget_tokens: int | None = None,
    adapter_factory: Callable[[], MemoryAdapter] | None = None,
    on_gate: Callable[[Gate], None] | None = None,
) -> SwapReport:
    """Run the swap flow for one provider config; never raises for a provider's fault."""
    from nanobot_memory_adapters.registry import load_provider, resolve_config

    rng = random.Random(seed)
    marker_a, marker_b = rng.sample(_NAMES, 2)
    place_a, place_b = rng.sample(_PLACES, 2)
    run = run_id or f"swap-smoke-{seed}"
    scope_a = MemoryScope(run_id=run, persona_id="smoke-alice", agent_id="nanobot")
    scope_b = MemoryScope(run_id=run, persona_id="smoke-bob", agent_id="nanobot")
    scope_c = MemoryScope(run_id=f"{run}-other", persona_id="smoke-alice", agent_id="nanobot")
    report = SwapReport(provider=None)
    flow = _Flow(report, on_gate)
    state: dict[str, Any] = {}

    async def identity() -> tuple[str, dict[str, Any]]:
        return f"run={run} persona={scope_a.persona_id} agent=nanobot seed={seed}", {
            "run_id": run,
            "persona_id": scope_a.persona_id,
            "agent_id": "nanobot",
            "seed": seed,
        }

    async def instantiate() -> tuple[str, dict[str, Any]]:
        if adapter_factory is not None:
            adapter = adapter_factory()
            name, kind, block = adapter.backend_name, "injected", {}
            timeout, budget = readiness_timeout_s or 30.0, budget_tokens or 2000
        else:
            config, _spec = resolve_config(source)
            name, kind, block = mf.native_config(source)
            report.provider = name
            adapter = load_provider(source, data_dir=data_dir)
            timeout = readiness_timeout_s or config.readiness_timeout_s
            budget = budget_tokens or config.budget.max_tokens
        report.provider = name
        state.update(
            adapter=adapter,
            name=name,
            kind=kind,
            block=block,
            timeout=timeout,
            budget=ContextBudget(max_tokens=budget),
        )
        runs_as = adapter.info.name
        note = f"; with this config it runs as '{runs_as}'" if runs_as != name else ""
        return f"{name} ({kind}) built through the registry{note}", {
            "provider": name,
            "kind": kind,
            "runs_as": runs_as,
            "config_sha256": mf.config_sha256(name, block),
        }

    async def health() -> tuple[str, dict[str, Any]]:
        h = await state["adapter"].health()
        data = {"status": h.status, "latency_ms": h.latency_ms, "warnings": h.warnings}
        if h.status == "unavailable":
            raise _GateFailed("failed", f"unavailable: {h.details}", data)
        detail = h.status + (f" — {'; '.join(h.warnings)}" if h.warnings else "")
        return detail, data

    async def setup() -> tuple[str, dict[str, Any]]:
        adapter: MemoryAdapter = state["adapter"]
        for s in (scope_a, scope_b, scope_c):
            await adapter.setup_scope(s)
            await adapter.reset_scope(s)  # leftovers of an earlier, interrupted swap
        return f"scopes {scope_a.key}, {scope_b.key}, {scope_c.key} ready", {}

    async def capabilities() -> tuple[str, dict[str, Any]]:
        adapter: MemoryAdapter = state["adapter"]
        info = adapter.info
        caps = capabilities_of(adapter)
        data = {
            "capabilities": caps,
            "consistency_model": info.consistency_model,
            "native_memory_types": list(info.native_memory_types),
            "native_ingest_modes": list(info.native_ingest_modes),
            "tag_mapping": info.tag_mapping,
            "stores_events": info.stores_events,
            "requires_llm": info.requires_llm,
        }
        warn = ""
        if info.consistency_model != "immediate" and "readiness" not in caps:
            warn = " (eventual consistency without a readiness capability: reads are polled)"
        return (
            f"{', '.join(caps) or 'no optional capabilities'}; {info.consistency_model}{warn}",
            data,
        )

    def event(scope: MemoryScope, n: int, text: str) -> MemoryEvent:
        return MemoryEvent(
            event_id=f"{scope.run_id}-{scope.persona_id}-{n}",
            run_id=scope.run_id,
            user_id=scope.persona_id,
            agent_id=scope.agent_id or "nanobot",
            session_id=f"{scope.persona_id}-smoke",
            turn_id=str(n),
            timestamp=datetime(2024, 5, 8, 13, 56, tzinfo=UTC) + timedelta(minutes=n),
            messages=[
                Message(role="user", content=text),
                Message(role="assistant", content="Noted."),
            ],
            metadata={"harness": "swap-smoke"},
        )

    fact_a = f"My pet axolotl is called {marker_a} and I live in {place_a}."
    fact_b = f"My pet axolotl is called {marker_b} and I live in {place_b}."
    query = "What is my pet axolotl called and where do I live?"

    async def smoke_write() -> tuple[str, dict[str, Any]]:
        adapter: MemoryAdapter = state["adapter"]
        stores = adapter.info.stores_events
        allowed = STORED_WRITE_STATUSES if stores else ACCEPTED_WRITE_STATUSES
        statuses = {}
        for scope, n, text in ((scope_a, 1, fact_a), (scope_b, 1, fact_b)):
            receipt = await adapter.record_event(event(scope, n, text))
            statuses[scope.key] = receipt.status
            if receipt.status not in allowed:
                raise _GateFailed(
                    "failed",
                    f"record_event in {scope.key} returned "
                    f"{receipt.status!r}, expected one of {sorted(allowed)}",
                    {"statuses": statuses},
                )
        return f"receipts {statuses}", {"statuses": statuses}

    async def retrieve(scope: MemoryScope, q: str = query) -> str:
        result = await state["adapter"].retrieve(
            RetrieveRequest(
                query=q, scope=scope, session_id=f"{scope.persona_id}-smoke", budget=state["budget"]
            )
        )
        return result.formatted_context.lower()

    async def readiness() -> tuple[str, dict[str, Any]]:
        adapter: MemoryAdapter = state["adapter"]
        timeout: float = state["timeout"]
        if supports(adapter, "readiness"):
            started = time.perf_counter()
            results = {}
            for scope in (scope_a, scope_b):
                left = max(0.1, timeout - (time.perf_counter() - started))
                r = await adapter.wait_until_ready(scope, left)
                results[scope.key] = r.status
                if r.status != "ready":
                    # a blank reason reads as a cut-off line: say that none was given
                    why = r.detail or ("the provider gave no reason (its warnings, or "
                                       "--log-file, may say why; a slow one needs a longer "
                                       "--readiness-timeout)")
                    raise _GateFailed(
                        "pending",
                        f"{scope.key} still {r.status} after {timeout:.0f}s: {why}",
                        {"readiness": results, "waited_s": round(time.perf_counter() - started, 3)},
                    )
            waited = round(time.perf_counter() - started, 3)
            return f"ready after {waited}s", {"readiness": results, "waited_s": waited}
        if adapter.info.consistency_model == "immediate" or not adapter.info.stores_events:
            return "immediate consistency: nothing to wait for", {"_status": "not_applicable"}
        # Eventual consistency without a readiness API: poll the read itself.
        started = time.perf_counter()
        while time.perf_counter() - started < timeout:
            if marker_a.lower() in await retrieve(scope_a):
                waited = round(time.perf_counter() - started, 3)
                return f"visible after {waited}s (polled)", {"waited_s": waited}
            await asyncio.sleep(0.5)
        raise _GateFailed("pending", f"smoke write not visible after {timeout:.0f}s (polled)")

    async def isolation() -> tuple[str, dict[str, Any]]:
        leaks = []
        if marker_a.lower() in await retrieve(scope_b):
            leaks.append(f"{scope_b.key} (same run, other persona) saw {scope_a.key}'s write")
        if marker_a.lower() in await retrieve(scope_c):
            leaks.append(f"{scope_c.key} (same persona, other run) saw {scope_a.key}'s write")
        if marker_b.lower() in await retrieve(scope_a):
            leaks.append(f"{scope_a.key} saw {scope_b.key}'s write")
        if leaks:
            raise _GateFailed("failed", "; ".join(leaks))
        return "no cross-scope results (other persona, other run)", {}

    async def write_read() -> tuple[str, dict[str, Any]]:
        adapter: MemoryAdapter = state["adapter"]
        ctx = await retrieve(scope_a)
        if not adapter.info.stores_events:
            if marker_a.lower() in ctx:
                raise _GateFailed("failed", "a provider that stores nothing returned the write")
            return "provider stores nothing by design", {"_status": "not_applicable"}
        if marker_a.lower() not in ctx:
            raise _GateFailed(
                "failed", f"the smoke write was not retrieved (context: {ctx[:300]!r})"
            )
        return f"smoke write retrieved in {scope_a.key}", {}

    async def read_only() -> tuple[str, dict[str, Any]]:
        adapter: MemoryAdapter = state["adapter"]
        probe = "Rutherford"
        await adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
        try:
            receipt = await adapter.record_event(
                event(scope_a, 2, f"My pet axolotl is now called {probe}.")
            )
        finally:
            await adapter.set_mode(AdapterMode(read_only=False, reason="test_session_end"))
        if receipt.status != "skipped_read_only":
            raise _GateFailed("failed", f"a read-only write returned {receipt.status!r}")
        if supports(adapter, "readiness"):
            await adapter.wait_until_ready(scope_a, state["timeout"])
        if probe.lower() in await retrieve(scope_a):
            raise _GateFailed("failed", "a read-only write became retrievable")
        return "writes skipped while read-only (test sessions)", {}

    async def manifest() -> tuple[str, dict[str, Any]]:
        adapter: MemoryAdapter = state["adapter"]
        m: dict[str, Any] = {
            "kind": "swap",
            "provider": mf.provider_entry(
                state["name"], state["kind"], state["block"], adapter, scope_a
            ),
            "seed": seed,
            "gates": {g.name: g.status for g in report.gates},
        }
        mf.finalize(m)
        report.manifest = m
        if manifest_path is not None:
            report.manifest_path = str(mf.write_manifest(m, manifest_path))
        return f"manifest {m['manifest_sha256'][:12]}" + (
            f" -> {report.manifest_path}" if report.manifest_path else ""
        ), {"manifest_sha256": m["manifest_sha256"]}

    steps = (
        identity,
        instantiate,
        health,
        setup,
        capabilities,
        smoke_write,
        readiness,
        isolation,
        write_read,
        read_only,
        manifest,
    )
    try:
        for name, fn in zip(GATES, steps, strict=True):
            await flow.gate(name, fn)
    finally:
        adapter = state.get("adapter")
        if adapter is not None:
            cleanup = []
            for s in (scope_a, scope_b, scope_c):
                try:
                    await adapter.set_mode(AdapterMode(read_only=False, reason="swap_cleanup"))
                    cleanup.append((await adapter.reset_scope(s)).status)
                except Exception as exc:
                    cleanup.append(f"failed: {_err(exc)}")
            report.cleanup = cleanup
            with contextlib.suppress(Exception):
                await adapter.aclose()
    return report
