"""Bulk ingest: ``add_episode_bulk`` per scope, falling back to one ``add_episode`` per
event when the all-or-nothing bulk call fails."""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

from graphiti_core.nodes import EpisodeType
from graphiti_core.utils.bulk_utils import RawEpisode

from nanobot_memory_adapters.backends.graphiti.config import GraphitiConfig
from nanobot_memory_adapters.backends.graphiti.graph import GraphitiGraph
from nanobot_memory_adapters.backends.graphiti.ids import (
    episode_name,
    source_description,
)
from nanobot_memory_adapters.backends.graphiti.writes import GraphitiWrites
from nanobot_memory_adapters.base import NativeWrite
from nanobot_memory_adapters.contract import (
    MemoryEvent,
)
from nanobot_memory_adapters.diagnostics import native_diagnostics


class GraphitiBulk:
    """The store's bulk ingest hooks: which events share a call, and the call."""

    def __init__(
        self, store: GraphitiGraph, writes: GraphitiWrites,
        config: GraphitiConfig,
    ) -> None:
        self.store = store
        self.writes = writes
        self.config = config

    def batch_key(self, event: MemoryEvent) -> Hashable:
        """One Graphiti group per bulk call (sessions may share it)."""
        return self.store.group_id(event.scope())

    async def record_batch(
        self, batch: list[MemoryEvent]
    ) -> list[NativeWrite | Exception]:
        """``add_episode_bulk`` for the batch. It is all-or-nothing (it saves the episodes
        first, then one failed extraction discards every other result), so on failure
        each event is written with ``add_episode`` on its own: ``GraphitiWrites.record``
        processes the episode the bulk call already saved in place (by its uuid), never
        a duplicate."""
        if self.config.ingest.bulk == "native":
            group = self.store.group_id(batch[0].scope())
            try:
                results = await self._bulk(group, batch)
            except Exception as exc:
                raw, _ = native_diagnostics(exc)
                note = (f"add_episode_bulk failed ({raw.get('type')}: "
                        f"{str(raw.get('message'))[:200]}); wrote each event on its own")
                return await self._per_event(batch, fallback_note=note)
            out: list[NativeWrite | Exception] = []
            for event, episode in zip(batch, results.episodes, strict=True):
                edges = [e.uuid for e in results.edges if episode.uuid in e.episodes]
                out.append(NativeWrite(
                    "committed", [episode.uuid, *edges], "graphiti.add_episode_bulk",
                    {"group_id": group, "episodes_in_call": len(batch), "name": episode.name,
                     "reference_time": event.timestamp.isoformat()},
                ))
            return out
        return await self._per_event(batch)

    async def _per_event(
        self, batch: list[MemoryEvent], fallback_note: str | None = None
    ) -> list[NativeWrite | Exception]:
        out: list[NativeWrite | Exception] = []
        for event in batch:
            started = time.perf_counter()
            try:
                native = await self.writes.record(event)
            except Exception as exc:  # in the event's place: the wrapper wraps and reports it
                out.append(exc)
                continue
            native.latency_ms = (time.perf_counter() - started) * 1000
            if fallback_note:
                native.warnings.append(fallback_note)
            out.append(native)
        return out

    async def _bulk(self, group: str, events: list[MemoryEvent]) -> Any:
        graphiti = await self.store.graphiti()
        raw = [
            RawEpisode(
                name=episode_name(e),
                content=self.writes.episode_body(e),
                source_description=source_description(e),
                source=EpisodeType.message,
                reference_time=e.timestamp,
            )
            for e in events
        ]
        kwargs = self.writes.episode_kwargs()
        async with self.store.lock_for(group):
            return await graphiti.add_episode_bulk(raw, group_id=group, **kwargs)
