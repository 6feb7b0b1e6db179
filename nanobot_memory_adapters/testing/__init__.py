"""The reusable contract suite: run it on your own adapter to show it keeps the contract.

From pytest, subclass ``ContractSuite`` (see ``pytest_suite``); from code or the CLI,
``await run_contract_suite(SuiteTarget(make=...))`` returns a report of items 1-13.
"""

from nanobot_memory_adapters.testing.suite import (
    ITEMS,
    ItemResult,
    SuiteReport,
    SuiteTarget,
    run_contract_suite,
    run_item,
)

try:  # pytest is a test-time dependency only
    from nanobot_memory_adapters.testing.pytest_suite import ContractSuite
except ImportError:  # pragma: no cover
    ContractSuite = None  # type: ignore[assignment,misc]

__all__ = [
    "ITEMS",
    "ContractSuite",
    "ItemResult",
    "SuiteReport",
    "SuiteTarget",
    "run_contract_suite",
    "run_item",
]
