"""A deterministic OpenAI-compatible server for tests (never imported by the package).

It answers from the request's content by explicit rules (handlers), never from a table of
expected test answers. See README.md beside this file.
"""

from tests.llm_double.server import ChatReply, ChatRequest, LLMDouble, embed_text

__all__ = ["ChatReply", "ChatRequest", "LLMDouble", "embed_text"]
