"""The contract suite as a pytest base class (model: LangGraph's checkpoint conformance).

    from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget

    class TestMyAdapter(ContractSuite):
        @pytest.fixture
        def contract_target(self, tmp_path):
            async def make():
                return MyAdapter(path=tmp_path / "store")
            async def make_failing():
                return MyAdapter(url="http://127.0.0.1:9")   # nothing listens there
            return SuiteTarget(make=make, make_failing=make_failing)

Every item is one test, named by its group and item, ``test_<group>_item_NN_<name>``:
``base`` for what every provider must pass, a capability's name for its own items
(``suite.GROUPS``; ``-k base`` runs the base level only). An item that does not apply to
the provider (item 7 without a native backend, a capability it does not declare) is
skipped, not passed. ``nanobot-memory conformance`` runs the same items and prints the
level they reach. Needs pytest-asyncio.
"""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.testing.suite import ITEMS, SuiteTarget, group_of, run_item


def _make_test(number: int, name: str, title: str):  # type: ignore[no-untyped-def]
    @pytest.mark.asyncio
    async def test(self, contract_target: SuiteTarget) -> None:  # type: ignore[no-untyped-def]
        result = await run_item(number, contract_target)
        if result.status == "not_applicable":
            pytest.skip(f"contract item {number} ({name}) not applicable: {result.detail}")
        assert result.status != "failed", f"contract item {number} ({name}): {result.detail}"

    test.__name__ = f"test_{group_of(number)}_item_{number:02d}_{name}"
    test.__doc__ = title
    return test


class ContractSuite:
    """Subclass it and provide a ``contract_target`` fixture returning a SuiteTarget."""


for _number, _name, _title, _check in ITEMS:
    _test = _make_test(_number, _name, _title)
    setattr(ContractSuite, _test.__name__, _test)
