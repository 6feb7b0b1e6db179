"""OpenAI-compatible LLM endpoints: the one settings model (where, which model, which key)
and their reachability, for backends' health reports."""

from __future__ import annotations

import os
from dataclasses import dataclass

import httpx
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EndpointProbe", "OpenAICompatibleEndpoint", "probe_models"]


class OpenAICompatibleEndpoint(BaseModel):
    """An OpenAI-compatible endpoint: where it is, which model, which key. Every LLM block
    of a provider, condition or the harness is one (mem0's, Graphiti's, rolling_summary's
    Dream, the judge's ``LLMEndpoint``, the preference agent's ``AgentLLM``); each subclass
    adds the call settings its SDK takes and its own defaults, and may make
    ``base_url``/``model`` required."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1"
    )
    model: str | None = Field(default=None, description="Chat model name at that endpoint.")
    api_key: str | None = Field(default=None, repr=False)
    api_key_env: str | None = Field(
        default=None, description="Name of an environment variable holding the API key."
    )

    def resolved_api_key(self) -> str | None:
        """``api_key``, else the variable ``api_key_env`` names, else None."""
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        return None

    @property
    def configured(self) -> bool:
        # A key alone would send every prompt to the SDK's cloud default (or whatever
        # OPENAI_BASE_URL says): the endpoint must be named explicitly.
        return bool(self.base_url)


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
