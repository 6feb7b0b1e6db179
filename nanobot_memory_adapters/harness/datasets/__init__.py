"""Dataset loaders for the timeline driver (LoCoMo-format files)."""

from nanobot_memory_adapters.harness.datasets.locomo import (
    Conversation,
    EvidenceStats,
    Question,
    Session,
    Turn,
    load_locomo,
)

__all__ = ["Conversation", "EvidenceStats", "Question", "Session", "Turn", "load_locomo"]
