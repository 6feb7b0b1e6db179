"""Graphiti's OpenAI-compatible client with the configured ``max_tokens`` as a real cap.

graphiti-core asks some prompts for more than its client's ``max_tokens`` (edge
extraction passes 16,384, the saga summary 8,192), so ``memory.graphiti.llm.max_tokens``
alone did not bound an answer: on the shared 1.5B CPU model one edge extraction looped
for 16,384 tokens. The cap applies to every request; an answer cut there is not JSON and
fails that write (retryable), which is what the setting promises.
"""

from __future__ import annotations

from typing import Any

from graphiti_core.llm_client.config import DEFAULT_MAX_TOKENS, ModelSize
from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient
from graphiti_core.prompts.models import Message
from pydantic import BaseModel


class CappedOpenAIGenericClient(OpenAIGenericClient):
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
