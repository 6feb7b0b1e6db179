"""Imported first in the bench's fork server (``executors.PRELOAD``), before the SDKs it
preloads, so their import-time chatter (graphiti-core's pydantic deprecation warnings)
goes where a worker's goes, to loguru at DEBUG (``sdk_output``), instead of the bench's
stderr. The fork server itself logs WARNING and above to stderr; each worker sets its
logging like the driver's after the fork (``executors._worker_entry``). mem0 is imported
here with its telemetry off: imported plainly, it makes an analytics client whose flag
poller every forked worker would restart (``telemetry.quiet_mem0``)."""

from __future__ import annotations

import contextlib

from nanobot_memory_adapters.logs import configure_logging
from nanobot_memory_adapters.sdk_output import route_sdk_output
from nanobot_memory_adapters.telemetry import quiet_graphiti, quiet_mem0

configure_logging("WARNING")
route_sdk_output()
for quiet in (quiet_mem0, quiet_graphiti):
    with contextlib.suppress(ImportError):  # an extra that is not installed
        quiet()
