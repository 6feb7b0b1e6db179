from __future__ import annotations

import asyncio

from nanobot_memory_adapters.conditions.full_history import FullHistory
from nanobot_memory_adapters.store import StoreProvider
from nanobot_memory_adapters.tracing import JsonlTraceWriter, read_traces, redact


def test_redact_strips_secrets_but_keeps_budgets():
    data = {
        "api_key": "sk-123",
        "llm": {"apiKey": "x", "token_count": 5, "max_tokens": 9},
        "headers": {"Authorization": "Bearer y"},
        "access_token": "t",
    }
    out = redact(data)
    assert out["api_key"] == "***" and out["llm"]["apiKey"] == "***"
    assert out["headers"]["Authorization"] == "***" and out["access_token"] == "***"
    assert out["llm"]["token_count"] == 5 and out["llm"]["max_tokens"] == 9


def test_every_operation_is_traced_to_jsonl(tmp_path):
    from tests.test_suite_catches_bugs import event, request

    sink = JsonlTraceWriter(tmp_path / "traces.jsonl")
    adapter = StoreProvider(FullHistory(tmp_path / "h.sqlite3"), trace_sink=sink)

    async def run():
        await adapter.record_event(event("r", "alice", "I like tea"))
        await adapter.retrieve(request("r", "alice", "tea"))
        await adapter.aclose()

    asyncio.run(run())
    traces = [r["trace"] for r in read_traces(tmp_path / "traces.jsonl")]
    assert [t["operation"] for t in traces] == ["record_event", "retrieve"]
    assert traces[1]["token_count"] > 0 and traces[1]["condition_kind"] == "control"


def test_transport_errors_of_vendored_http_stacks_are_retryable():
    from nanobot_memory_adapters.diagnostics import native_diagnostics

    class APIConnectionError(Exception):  # the shape openai raises over its own httpx copy
        pass

    class ConnectError(Exception):
        pass

    raw, retryable = native_diagnostics(APIConnectionError("Connection error."))
    assert retryable and raw["type"].endswith("APIConnectionError")
    wrapped = ValueError("bad answer")
    wrapped.__cause__ = ConnectError("refused")
    assert native_diagnostics(wrapped)[1] is True
    assert native_diagnostics(ValueError("schema mismatch"))[1] is False


def test_redact_covers_cloud_key_names_and_url_passwords():
    out = redact({"aws_secret_access_key": "a", "private_key": "b", "secret_key": "c",
                  "dsn": "postgresql://memos:hunter2@127.0.0.1/db", "url": "http://h/x@y"})
    assert out["aws_secret_access_key"] == out["private_key"] == out["secret_key"] == "***"
    assert out["dsn"] == "postgresql://memos:***@127.0.0.1/db"
    assert out["url"] == "http://h/x@y"


def test_cause_chain_is_walked():
    from nanobot_memory_adapters.diagnostics import native_diagnostics

    class RateLimitError(Exception):
        pass

    inner = RateLimitError("slow down")
    middle = ValueError("wrapped")
    middle.__cause__ = inner
    outer = RuntimeError("outer")
    outer.__cause__ = middle
    raw, retryable = native_diagnostics(outer)
    assert retryable and len(raw["cause_chain"]) == 2


def test_sdk_errors_the_backends_used_to_special_case_are_retryable_through_wrappers():
    # mem0 wraps LLM failures in its LLMError; Graphiti raises openai's and its own
    # RateLimitError. The shared check must see them anywhere in the cause chain.
    import httpx
    import openai
    from graphiti_core.llm_client.errors import RateLimitError as GraphitiRateLimitError

    from nanobot_memory_adapters.diagnostics import native_diagnostics

    request = httpx.Request("POST", "http://llm.test/v1/chat/completions")
    server_error = openai.InternalServerError(
        "boom", response=httpx.Response(500, request=request), body=None
    )
    natives = [
        openai.APIConnectionError(request=request),
        openai.APITimeoutError(request=request),
        openai.RateLimitError("slow", response=httpx.Response(429, request=request), body=None),
        server_error,
        GraphitiRateLimitError(),
    ]
    for native in natives:
        assert native_diagnostics(native)[1] is True, type(native)
        wrapper = RuntimeError("LLMError: generation failed")
        wrapper.__cause__ = native
        assert native_diagnostics(wrapper)[1] is True, type(native)


def test_retryability_looks_past_the_first_eight_causes():
    from nanobot_memory_adapters.diagnostics import native_diagnostics

    deepest: BaseException = ConnectionError("refused")
    for n in range(12):
        outer = ValueError(f"layer {n}")
        outer.__cause__ = deepest
        deepest = outer
    raw, retryable = native_diagnostics(deepest)
    assert retryable and len(raw["cause_chain"]) == 8
    assert native_diagnostics(ValueError("plain"))[1] is False


def test_adapter_error_scrubs_credentials_from_message_and_raw():
    """Errors reach logs and the outbox: a backend's URL password or key never does."""
    from nanobot_memory_adapters.contract import AdapterError

    err = AdapterError(
        "Honcho at https://bob:hunter2@honcho.example is unreachable",
        backend_name="honcho", operation="retrieve",
        raw={"base_url": "https://bob:hunter2@honcho.example", "body": {"api_key": "sk-123"},
             "status_code": 503},
    )
    text = repr(err.to_dict()) + str(err)
    assert "hunter2" not in text and "sk-123" not in text
    assert "https://bob:***@honcho.example" in err.message
    assert err.raw["status_code"] == 503 and err.raw["body"]["api_key"] == "***"


# -- the writer: one open file, buffered in a bench, the redaction guarantee kept --------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from nanobot_memory_adapters.contract import Trace  # noqa: E402
from nanobot_memory_adapters.redaction import redact_text, scrub_work  # noqa: E402

_PIECES = ["sk-", "proj1234567890abcdefXYZ", "ghp_", "hf_", "AKIA", "eyJ", "abcdefgh12.", "://",
           "user:", "hunter2@", "host", "Bearer ", "Basic ", "api_key", "apiKey", "token",
           "password", "PASSWORD", "pwd", "secret", "credentials", "Authorization", "=", ":",
           " ", "\n", "&", "?", "-", "_", "é", "ı", "ſ", "K", "tea", "Caroline", "2023",
           "the key", "basic", "[", "]", "'", '"']


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=6)), max_size=30))
def test_the_quick_path_of_redaction_changes_nothing(pieces):
    """Text the cheap check passes over is exactly what the full scrub returns: skipping
    the scan for plain text never lets a secret through."""
    text = "".join(pieces)
    assert redact_text(text) == scrub_work(text)[0]


def _trace(i: int) -> Trace:
    return Trace(trace_id=f"t{i}", backend_name="x", condition_kind="control",
                 operation="retrieve")


def test_a_buffered_writer_opens_once_and_writes_at_flush(tmp_path, monkeypatch):
    """The bench's writer keeps its file open and holds lines until a flush (a session's
    or test point's end) or close; secrets in its fields are still scrubbed."""
    from pathlib import Path

    opened: list[str] = []
    real_open = Path.open

    def counting_open(self, *args, **kwargs):
        opened.append(str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    path = tmp_path / "traces.jsonl"
    writer = JsonlTraceWriter(path, buffered=True)
    for i in range(50):
        writer.emit(_trace(i), context=f"note {i} api_key=sk-abcdef0123456789abcdef",
                    ranked_sources=[["e1", "e2"]])
    assert not path.exists() or path.stat().st_size == 0  # held in memory
    writer.flush()
    lines = read_traces(path)
    assert len(lines) == 50 and all("sk-abcdef" not in str(r) for r in lines)
    assert lines[3]["ranked_sources"] == [["e1", "e2"]]
    writer.emit(_trace(50))
    writer.close()
    assert len(read_traces(path)) == 51
    assert opened.count(str(path)) == 1 + 2  # one for the writer, two for read_traces
    unbuffered = JsonlTraceWriter(tmp_path / "plugin.jsonl")
    unbuffered.emit(_trace(0))
    assert len(read_traces(tmp_path / "plugin.jsonl")) == 1  # on file at once
    unbuffered.close()
