"""The public write unit: a nanobot runtime event (one turn), not a universal memory item."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nanobot_memory_adapters.scope import MemoryScope, ScopeId, refuse_control_chars

Role = Literal["user", "assistant", "system", "tool"]
TAG_FIELDS = ("scenario", "context", "attribute")


def set_tags(obj: Any) -> dict[str, str]:
    """The scenario/context/attribute of an event or request that are set."""
    return {name: value for name in TAG_FIELDS if (value := getattr(obj, name, None))}


class Message(BaseModel):
    """One chat message of a turn, in OpenAI shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    content: str
    name: str | None = None
    tool_call_id: str | None = None


class MemoryEvent(BaseModel):
    """A turn as nanobot saw it; adapters keep every field as traceable metadata."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: ScopeId
    run_id: ScopeId
    user_id: ScopeId
    agent_id: ScopeId
    session_id: ScopeId
    turn_id: str = Field(min_length=1)
    timestamp: datetime
    messages: list[Message] = Field(min_length=1)
    scenario: str | None = None
    context: str | None = None
    attribute: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("turn_id")
    @classmethod
    def _single_line_turn(cls, value: str) -> str:
        return refuse_control_chars(value, field="turn_id")

    @field_validator("timestamp")
    @classmethod
    def _tz_aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise ValueError(
                "timestamp is naive; give a timezone-aware datetime, "
                "e.g. datetime.now(timezone.utc)"
            )
        return value

    @field_validator("messages", mode="before")
    @classmethod
    def _non_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("messages is empty; an event needs at least one message")
        return value

    def scope(self) -> MemoryScope:
        """The scope this event belongs to."""
        return MemoryScope(run_id=self.run_id, persona_id=self.user_id, agent_id=self.agent_id)

    def tags(self) -> dict[str, str]:
        """scenario/context/attribute that are set, for tag-aware backends."""
        return set_tags(self)

    def transcript(self) -> str:
        """The turn as plain text, one ``role: content`` line per message."""
        return "\n".join(f"{m.name or m.role}: {m.content}" for m in self.messages)
