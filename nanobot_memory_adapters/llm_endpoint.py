"""Reachability of an OpenAI-compatible LLM endpoint, for backends' health reports."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

__all__ = ["EndpointProbe", "probe_models"]


@dataclass(frozen=True)
class EndpointProbe:
    reachable: bool
    status_code: int | None = None  # the HTTP answer to GET /models, when there was one
    error: str | None = None  # the exception class name, when there was none


async def probe_models(base_url: str, *, timeout_s: float = 3.0) -> EndpointProbe:
    """``GET <base_url>/models``. Any HTTP answer (401 and 404 included) means the endpoint
    is up; no answer at all (refused, timed out, malformed URL) means it is unreachable.
    Never raises: health reports, it does not fail."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.get(base_url.rstrip("/") + "/models")
    except Exception as exc:
        return EndpointProbe(reachable=False, error=type(exc).__name__)
    return EndpointProbe(reachable=True, status_code=response.status_code)
