"""Bulk ingest: ``add_episode_bulk`` per scope, falling back to one ``add_episode`` per
event when the all-or-nothing bulk call fails."""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from graphiti_core.nodes import EpisodeType
from graphiti_core.utils.bulk_utils import RawEpisode

from nanobot_memory_adapters.backends.graphiti.host import GraphitiHost
from nanobot_memory_adapters.base import NativeWrite
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryEvent,
)
from nanobot_memory_adapters.diagnostics import native_diagnostics


@dataclass(frozen=True)
class SavedEpisode:
    """An episode Graphiti already holds for an event: processed when ``add_episode``
    finished it (it saves the episode with its entities and facts in one step), or only
    saved by a bulk call that failed before extraction."""

    uuid: str
    edges: list[str]
    mentions: int

    @property
    def processed(self) -> bool:
        return bool(self.edges or self.mentions)


class GraphitiBulk(GraphitiHost):

    # -- SupportsBulkIngest ----------------------------------------------------------------
    def _batch_key(self, event: MemoryEvent) -> Hashable:
        """One Graphiti group per bulk call (sessions may share it)."""
        return self.group_id(event.scope())

    async def _record_batch(
        self, batch: list[MemoryEvent]
    ) -> list[NativeWrite | AdapterError]:
        """``add_episode_bulk`` for the batch. It is all-or-nothing (it saves the episodes
        first, then one failed extraction discards every other result), so on failure
        each event is written with ``add_episode`` on its own: ``_record`` processes the
        episode the bulk call already saved in place (by its uuid), never a duplicate."""
        if self.config.ingest.bulk == "native":
            group = self.group_id(batch[0].scope())
            try:
                results = await self._bulk(group, batch)
            except Exception as exc:
                raw, _ = native_diagnostics(exc)
                note = (f"add_episode_bulk failed ({raw.get('type')}: "
                        f"{str(raw.get('message'))[:200]}); wrote each event on its own")
                return await self._per_event(batch, fallback_note=note)
            out: list[NativeWrite | AdapterError] = []
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
    ) -> list[NativeWrite | AdapterError]:
        out: list[NativeWrite | AdapterError] = []
        for event in batch:
            started = time.perf_counter()
            try:
                native = await self._call(
                    "record_events", lambda e=event: self._record(e), retryable=True,
                )
            except AdapterError as exc:
                out.append(exc)
                continue
            native.latency_ms = (time.perf_counter() - started) * 1000
            if fallback_note:
                native.warnings.append(fallback_note)
            out.append(native)
        return out

    async def _saved_episode(self, event: MemoryEvent) -> SavedEpisode | None:
        """This event's episode if its group holds one (by name, checked against the event
        id in ``source_description``), with the facts already extracted from it."""
        graphiti = await self.graphiti()
        group = self.group_id(event.scope())
        driver = self._driver_for(graphiti, group)
        records, _, _ = await driver.execute_query(
            "MATCH (e:Episodic) WHERE e.group_id = $group_id AND e.name = $name "
            "OPTIONAL MATCH (e)-[:MENTIONS]->(n:Entity) "
            "RETURN e.uuid AS uuid, e.source_description AS source, "
            "e.entity_edges AS edges, count(n) AS mentions",
            group_id=group, name=self.episode_name(event), routing_="r",
        )
        for record in records:
            if self.event_id_of(record["source"]) in (event.event_id, None):
                return SavedEpisode(uuid=str(record["uuid"]),
                                    edges=[str(e) for e in record["edges"] or []],
                                    mentions=int(record["mentions"] or 0))
        return None

    async def _bulk(self, group: str, events: list[MemoryEvent]) -> Any:
        graphiti = await self.graphiti()
        raw = [
            RawEpisode(
                name=self.episode_name(e),
                content=self.episode_body(e),
                source_description=self.source_description(e),
                source=EpisodeType.message,
                reference_time=e.timestamp,
            )
            for e in events
        ]
        kwargs = self._episode_kwargs()
        async with self._lock_for(group):
            return await graphiti.add_episode_bulk(raw, group_id=group, **kwargs)

