"""mem0's native arguments: scope ids (refusing wildcards), search filters, add metadata."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nanobot_memory_adapters import sizing
from nanobot_memory_adapters.backends.mem0.config import (
    EXTRACTED_ITEM_TOKENS,
    IDENTITY_KEYS,
    VERBATIM_ITEM_TOKENS,
    SimpleRagConfig,
)
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryEvent,
    MemoryScope,
    RetrieveRequest,
)
from nanobot_memory_adapters.scope import check_scope_id


class Mem0Requests:
    """Builds mem0's native arguments from contract requests; calls nothing."""

    def __init__(self, config: SimpleRagConfig, *, backend_name: str, infer: bool) -> None:
        self.config = config
        self.backend_name = backend_name
        self.infer = infer

    def _id(self, value: str | None, field: str, operation: str) -> str:
        try:
            if value is None:
                raise ValueError(f"{field} is missing")
            check_scope_id(value, field=field)
            if any(c.isspace() for c in value):
                raise ValueError(
                    f"{field} {value!r} contains whitespace, which mem0 rejects; "
                    "use an id without spaces"
                )
        except ValueError as exc:
            raise AdapterError(
                f"refused scope id before calling mem0: {exc}",
                backend_name=self.backend_name,
                operation=operation,
                raw={"field": field, "value": value, "reason": str(exc)},
            ) from None
        return value

    def scope_ids(self, scope: MemoryScope, operation: str = "scope") -> dict[str, str]:
        """mem0 entity ids for a scope: always user_id and run_id, agent_id when scoped."""
        ids = {
            "user_id": self._id(scope.persona_id, "persona_id", operation),
            "run_id": self._id(scope.run_id, "run_id", operation),
        }
        if self.config.agent_scoped:
            ids["agent_id"] = self._id(scope.agent_id, "agent_id", operation)
        return ids

    def event_ids(self, event: MemoryEvent, operation: str) -> dict[str, str]:
        return self.scope_ids(
            MemoryScope.model_construct(
                run_id=event.run_id, persona_id=event.user_id, agent_id=event.agent_id,
            ),
            operation,
        )

    def search_arguments(self, request: RetrieveRequest) -> tuple[str, dict[str, Any]]:
        """The exact ``AsyncMemory.search`` arguments for a request (used by benchmarks)."""
        filters: dict[str, Any] = dict(self.scope_ids(request.scope, "retrieve"))
        extra = dict(request.filters)
        if self.config.tag_mapping == "filter":
            extra.update(request.tags())
        for key, value in extra.items():
            # mem0 merges AND sub-conditions into the top level (a nested user_id replaces
            # the scope's), so identity keys are refused at any depth, not just on top.
            if key in IDENTITY_KEYS or key in filters or _names_identity(value):
                raise AdapterError(
                    f"filter key {key!r} would override the scope; scope ids come from "
                    "request.scope only",
                    backend_name=self.backend_name, operation="retrieve",
                    raw={"filters": request.filters},
                )
            if _has_wildcard(value):
                raise AdapterError(
                    f"filter {key!r} contains '*', which mem0 reads as match-all",
                    backend_name=self.backend_name, operation="retrieve",
                    raw={"filters": request.filters},
                )
            filters[key] = value
        text_tokens = self.config.item_text_tokens or (
            EXTRACTED_ITEM_TOKENS if self.infer else VERBATIM_ITEM_TOKENS
        )
        top_k = sizing.top_k(request.budget, text_tokens, self.config.top_k_ceiling)
        return request.query, {
            "top_k": top_k,
            "filters": filters,
            "threshold": self.config.threshold,
            "rerank": self.config.rerank,
        }

    def metadata(self, events: Sequence[MemoryEvent]) -> dict[str, Any]:
        first, last = events[0], events[-1]
        metadata: dict[str, Any] = {
            "event_id": first.event_id,
            "session_id": first.session_id,
            "turn_id": first.turn_id,
            "timestamp": first.timestamp.isoformat(),
            **first.tags(),
        }
        if len(events) > 1:
            metadata["event_ids"] = [e.event_id for e in events]
            metadata["turn_ids"] = [e.turn_id for e in events]
            metadata["timestamp_end"] = last.timestamp.isoformat()
        extra = {e.event_id: e.metadata for e in events if e.metadata}
        if extra:
            metadata["event_metadata"] = (
                extra[first.event_id] if len(events) == 1 else extra
            )
        return metadata

    @staticmethod
    def messages(events: Sequence[MemoryEvent]) -> list[dict[str, str]]:
        out = []
        for event in events:
            for m in event.messages:
                msg = {"role": m.role, "content": m.content}
                if m.name:
                    msg["name"] = m.name
                out.append(msg)
        return out

    def add_kwargs(self, events: Sequence[MemoryEvent], operation: str) -> dict[str, Any]:
        return {
            **self.event_ids(events[0], operation),
            "metadata": self.metadata(events),
            "infer": self.infer,
        }



def _names_identity(value: Any) -> bool:
    """Whether a filter value (AND/OR/NOT lists, operator dicts) mentions a scope id key."""
    if isinstance(value, dict):
        return any(
            (isinstance(k, str) and k.lower() in IDENTITY_KEYS) or _names_identity(v)
            for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return any(_names_identity(v) for v in value)
    return False


def _has_wildcard(value: Any) -> bool:
    if isinstance(value, str):
        return value == "*"
    if isinstance(value, dict):
        return any(_has_wildcard(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_wildcard(v) for v in value)
    return False
