"""What the mem0 mixins (native requests, native operations) use of the adapter they are
mixed into, declared once for the type checker; ``Mem0Adapter`` provides all of it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.backends.mem0.config import SimpleRagConfig
from nanobot_memory_adapters.contract import MemoryScope


class Mem0Host:
    config: SimpleRagConfig
    backend_name: str
    infer: bool

    if TYPE_CHECKING:  # provided by Mem0Adapter (scope_ids by Mem0Requests)
        async def _native(self) -> Any: ...
        async def _call(self, operation: str, fn: Any, *, retryable: bool | None = None) -> Any:
            ...
        def _trace(self, operation: str, **fields: Any) -> Any: ...
        def _emit(self, trace: Any) -> None: ...
        def scope_ids(self, scope: MemoryScope, operation: str = "scope") -> dict[str, str]: ...
        @property
        def mode(self) -> Any: ...
