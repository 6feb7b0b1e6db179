"""The reference provider (``testing/reference.py``, the newcomer's one example) keeps the
contract: the suite runs on it here, as it would on a provider of your own."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget
from nanobot_memory_adapters.testing.reference import ReferenceAdapter


class TestReferenceProvider(ContractSuite):
    @pytest.fixture
    def contract_target(self) -> SuiteTarget:
        async def make() -> ReferenceAdapter:
            return ReferenceAdapter()

        # what the class declares (no native backend: item 7 n/a), as the CLI reads it
        return SuiteTarget.for_class(ReferenceAdapter, make)
