"""A provider from another distribution, registered only through its entry point
(tests/thirdparty: a package plus its dist-info), keeps the contract like the built-ins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nanobot_memory_adapters import registry
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget

THIRDPARTY = Path(__file__).resolve().parent / "thirdparty"


@pytest.fixture(autouse=True)
def installed(monkeypatch):
    """'pip install acme-memory': its directory (package + dist-info) on the path."""
    monkeypatch.syspath_prepend(str(THIRDPARTY))
    yield
    sys.modules.pop("acme_memory.adapter", None)
    sys.modules.pop("acme_memory", None)


def test_found_through_its_entry_point_only():
    specs = registry.available_providers()
    assert specs["acme"].origin == "acme-memory" and specs["acme"].kind == "backend"
    assert specs["mem0"].origin == "nanobot-memory-adapters"  # built-ins the same way
    adapter = load_provider({"backend": "acme"})
    assert adapter.backend_name == "acme"


class TestAcmeKeepsTheContract(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path):
        block = {"backend": "acme", "acme": {"directory": str(tmp_path / "store")}}

        async def make():
            return load_provider(block)

        async def make_failing():  # the provider's own hook, found through the registry
            from nanobot_memory_adapters.provider import failing_variant

            cls = registry.provider_class(registry.available_providers()["acme"])
            hook = failing_variant(cls)
            assert hook is not None
            return hook(cls.config_model.model_validate(block["acme"]))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=5)
