"""The reference store (``testing/reference.py``, the newcomer's one example) behind the one
provider wrapper keeps the contract: the suite runs on it here, as it would on yours."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.store import StoreProvider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget
from nanobot_memory_adapters.testing.reference import ReferenceStore


class TestReferenceProvider(ContractSuite):
    @pytest.fixture
    def contract_target(self) -> SuiteTarget:
        async def make() -> StoreProvider:
            return StoreProvider(ReferenceStore())

        # what the class declares (no native backend: item 7 n/a), as the CLI reads it
        return SuiteTarget.for_class(ReferenceStore, make)
