"""Graphiti's OpenAI-compatible client with the configured ``max_tokens`` as a real cap.

graphiti-core asks some prompts for more than its client's ``max_tokens`` (edge
extraction passes 16,384, the saga summary 8,192), so ``memory.graphiti.llm.max_tokens``
alone did not bound an answer: on the shared 1.5B CPU model one edge extraction looped
for 16,384 tokens. The cap applies to every request; an answer cut there is not JSON and
fails that write (retryable), which is what the setting promises.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from graphiti_core.llm_client.client import LLMClient, is_server_or_retry_error
from graphiti_core.llm_client.config import DEFAULT_MAX_TOKENS, ModelSize
from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient
from graphiti_core.prompts.models import Message
from openai import AsyncOpenAI
from pydantic import BaseModel
from tenacity import retry_if_exception


def _transient_not_json(exc: BaseException) -> bool:
    """graphiti-core's retry rule without invalid JSON (rate limits, 5xx, empty answers)."""
    return is_server_or_retry_error(exc) and not isinstance(exc, json.JSONDecodeError)


class CappedOpenAIGenericClient(OpenAIGenericClient):
    """``retry_invalid_json=False``: graphiti-core retries an answer that is not JSON up
    to four times, 5-120 s apart; a small model that looped until the cap often loops
    again (4 x 1,024 tokens, ~7 min per call on the shared CPU model). Off, that call
    fails at once: the write is a retryable failure the outbox keeps. Rate limits and
    server errors are still retried as graphiti-core does. On by default (graphiti-core's
    behaviour): whether a call loops varies between runs (the prompt carries a run id),
    and retries got past it in CI."""

    def __init__(self, *args: Any, retry_invalid_json: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_invalid_json = retry_invalid_json
        # graphiti-core's own tenacity wrapper with invalid JSON left out of its retry rule
        self._without_json_retry = LLMClient._generate_response_with_retry.retry_with(  # type: ignore[attr-defined]
            retry=retry_if_exception(_transient_not_json))

    async def _generate_response_with_retry(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> dict[str, Any]:
        if self.retry_invalid_json:
            return await super()._generate_response_with_retry(
                messages, response_model, max_tokens, model_size, model=model)
        return await self._without_json_retry(self, messages, response_model, max_tokens,
                                              model_size, model=model)

    async def _generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        model_size: ModelSize = ModelSize.medium,
        **overrides: Any,
    ) -> dict[str, Any]:
        capped = min(max_tokens or self.max_tokens, self.max_tokens)
        return await super()._generate_response(
            messages, response_model, capped, model_size, **overrides
        )


def with_extra_body(client: AsyncOpenAI, extra_body: dict[str, Any]) -> AsyncOpenAI:
    """``client`` sending ``extra_body`` with every chat completion: graphiti-core builds
    the request itself, so this is the one seam for a server's own sampling options."""
    completions = client.chat.completions
    completions.create = functools.partial(  # type: ignore[method-assign]
        completions.create, extra_body=extra_body)
    return client
