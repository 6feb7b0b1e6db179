"""Imported first in the bench's fork server (``executors.PRELOAD``), before the SDKs it
preloads, so their import-time chatter (graphiti-core's pydantic deprecation warnings)
goes where a worker's goes, to loguru at DEBUG (``sdk_output``), instead of the bench's
stderr. The fork server itself logs WARNING and above to stderr; each worker sets its
logging like the driver's after the fork (``executors._worker_entry``)."""

from __future__ import annotations

from nanobot_memory_adapters.logs import configure_logging
from nanobot_memory_adapters.sdk_output import route_sdk_output

configure_logging("WARNING")
route_sdk_output()
