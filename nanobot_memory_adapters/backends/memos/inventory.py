"""MemOS diagnostics (``native_query``): a cube's memory inventory by native type.

Diagnostics only: traced, logged by the caller, never put in a prompt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nanobot_memory_adapters.contract import AdapterError, MemoryScope

QUERIES = ("inventory",)


class MemOSInventory:
    """``native_query`` for MemOS. ``inventory``: ``POST /product/get_all`` (MemOS
    2.0.33, ``memory_type="text_mem"``, the scope's cube) answers the cube's textual
    memories with ``memory_statistics``, MemOS's own count of every node of the cube by
    ``memory_type`` (counted before MemOS samples the tree it also returns down to 200
    nodes, so the counts are exact). Only ``text_mem`` has an inventory there: MemOS
    answers ``act_mem``/``para_mem`` with nothing ("not implemented yet")."""

    def __init__(
        self,
        *,
        backend_name: str,
        native_ids: Callable[[MemoryScope, str], dict[str, str]],
        request: Callable[..., Awaitable[dict[str, Any]]],
    ) -> None:
        self.backend_name = backend_name
        self.native_ids = native_ids
        self._request = request

    @staticmethod
    def inventory_request(ids: dict[str, str]) -> dict[str, Any]:
        """The ``/product/get_all`` body (``GetMemoryPlaygroundRequest``) for one cube."""
        return {"user_id": ids["user_id"], "memory_type": "text_mem",
                "mem_cube_ids": [ids["cube_id"]]}

    def parse_inventory(self, cube: str, body: dict[str, Any]) -> dict[str, Any]:
        """Counts by native memory type from the cube's own bucket (another cube's bucket,
        should a server answer one, is never counted)."""
        buckets = body.get("data")
        if not isinstance(buckets, list):
            raise AdapterError(
                "MemOS /product/get_all answered no list of cubes",
                backend_name=self.backend_name, operation="native_query",
                raw={"body": body},
            )
        own = [b for b in buckets if isinstance(b, dict) and b.get("cube_id") == cube]
        stats = [s for b in own if isinstance(s := b.get("memory_statistics"), dict)]
        if not own or len(stats) != len(own):
            # MemOS answers every text_mem request with the cube's bucket, an empty cube
            # too (``memory_statistics: {}``): anything else is not an inventory of 0
            raise AdapterError(
                f"MemOS /product/get_all answered no memory_statistics for cube {cube}",
                backend_name=self.backend_name, operation="native_query",
                raw={"buckets": [{k: v for k, v in b.items() if k != "memories"}
                                 if isinstance(b, dict) else b for b in buckets]},
            )
        types: dict[str, int] = {}
        for counts in stats:
            for kind, count in counts.items():
                types[str(kind)] = types.get(str(kind), 0) + int(count)
        return {"native_operation": "POST /product/get_all", "cube_id": cube,
                "group": "text_mem", "memory_types": dict(sorted(types.items())),
                "total": sum(types.values())}

    async def native_query(
        self, scope: MemoryScope, query: str, **options: Any
    ) -> dict[str, Any]:
        """Diagnostics only (traced, never put in a prompt): ``inventory``."""
        if query not in QUERIES:
            raise AdapterError(
                f"unknown diagnostic {query!r}; memos answers {', '.join(QUERIES)}",
                backend_name=self.backend_name, operation="native_query",
                raw={"query": query, "options": options},
            )
        ids = self.native_ids(scope, "native_query")
        body = self.inventory_request(ids)
        result = await self._request("native_query", "POST", "/product/get_all", json=body)
        out = self.parse_inventory(ids["cube_id"], result)
        # what the wrapper's trace of this answer records
        return {**out, "native_request": body, "retrieved_count": out["total"]}
