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

        # An in-memory dict has no native backend that could be unreachable: item 7 skips.
        return SuiteTarget(make=make, no_native_backend="an in-memory dict cannot fail")
