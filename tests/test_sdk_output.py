"""The backends' SDKs talk to loguru at DEBUG; the host's and the package's warnings and
logs are untouched. Run in a fresh interpreter: pytest's own warning and log capture
would otherwise stand between the code and stderr."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# One subprocess (the module fixture) serves every test here: one worker.
pytestmark = [pytest.mark.xdist_group("sdk_output"), pytest.mark.servers]

SCRIPT = textwrap.dedent(
    """
    import logging, sys, warnings
    from pathlib import Path
    from loguru import logger
    import nanobot_memory_adapters.sdk_output as sdk_output

    logger.remove()
    logger.add(sys.stdout, level="DEBUG", format="{level} {message}")
    sdk_output.route_sdk_output()
    warnings.simplefilter("always")

    def warn_from(filename, text):
        warnings.warn_explicit(UserWarning(text), UserWarning, filename, 7, module="x")

    site = Path("/env/lib/python3.11/site-packages")
    warn_from(str(site / "qdrant_client" / "qdrant_client.py"), "payload indexes")
    warn_from(str(site / "somehost" / "mod.py"), "the host's warning")
    own = Path(sdk_output.__file__).parent / "backends" / "mem0" / "store.py"
    warn_from(str(own), "the package's warning")  # backends/mem0 is not the mem0 SDK
    logging.getLogger("mem0.utils.spacy_models").warning("spaCy is not installed")
    logging.getLogger("somehost").warning("host logger untouched")
    # asyncio reporting an SDK's orphaned task (graphiti's Neo4j index build, server down),
    # as asyncio words it: the coroutine's "defined at" path, the SDK's exception class
    ServiceUnavailable = type("ServiceUnavailable", (Exception,),
                              {"__module__": "neo4j.exceptions"})
    try:
        raise ServiceUnavailable("Couldn't connect to 127.0.0.1:9")
    except ServiceUnavailable:
        logging.getLogger("asyncio").error(
            "Task exception was never retrieved\\nfuture: <Task finished name='Task-4' "
            "coro=<Neo4jDriver._execute_index_query() done, defined at "
            "/env/lib/python3.11/site-packages/graphiti_core/driver/neo4j_driver.py:61> "
            "exception=ServiceUnavailable(...)>", exc_info=True)
    try:
        raise ConnectionRefusedError("connect call failed")
    except ConnectionRefusedError:
        logging.getLogger("asyncio").error("the host's own task failed", exc_info=True)
        # this package's own code (backends/mem0 is not the mem0 SDK) stays visible
        logging.getLogger("asyncio").error(
            "Task exception was never retrieved\\nfuture: <Task coro=<Mem0Store.record() "
            f"defined at {own}:1>>", exc_info=True)
    """
)


@pytest.fixture(scope="module")
def routed() -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120, check=True)


def test_sdk_warnings_go_to_debug_others_are_shown(routed):
    assert "payload indexes" not in routed.stderr
    assert "DEBUG [warning UserWarning]" in routed.stdout
    assert "payload indexes" in routed.stdout
    assert "the host's warning" in routed.stderr
    assert "the package's warning" in routed.stderr
    assert "the host's warning" not in routed.stdout


def test_sdk_loggers_reach_loguru_at_debug_not_stderr(routed):
    assert "spaCy" not in routed.stderr
    assert "DEBUG [mem0.utils.spacy_models WARNING] spaCy is not installed" in routed.stdout
    assert "host logger untouched" in routed.stderr


def test_an_sdks_orphaned_task_goes_to_debug_not_a_traceback_on_stderr(routed):
    assert "Neo4jDriver" not in routed.stderr
    assert "DEBUG [asyncio ERROR] Task exception was never retrieved" in routed.stdout
    assert "the host's own task failed" in routed.stderr  # not an SDK's: still shown
    assert "Mem0Store.record" in routed.stderr  # the package's own task: still shown
    assert routed.stderr.count("Traceback") == 2


def test_quiet_progress_restores_the_host_setting():
    hf_logging = pytest.importorskip("transformers.utils.logging")
    from nanobot_memory_adapters import sdk_output

    hf_logging.enable_progress_bar()
    with sdk_output.quiet_progress():
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    with sdk_output.quiet_progress():
        pass
    assert not hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
