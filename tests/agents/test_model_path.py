"""The model path over litellm's real HTTP client, against a local OpenAI-compatible server: usage and cached
tokens as reported, rate limits waited out as the provider says, transient failures and hung calls tried
again, failures that retrying cannot fix named at once, parameters a model does not take dropped, and a cap on
calls in flight."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.runtime.llm import ModelCallError, ModelPath, complete

from ..openai_server import CONTEXT_WINDOW, OpenAIServer, Reply


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer().running() as running:
        yield running


def path_to(server: OpenAIServer, **overrides: float) -> ModelPath:
    fields = {"attempts": 3, "backoff": 0.0, "call_timeout": 5.0} | overrides
    return ModelPath(api_base=server.api_base, api_key="local", **fields)  # type: ignore[arg-type]


async def test_usage_and_cached_tokens_are_those_the_provider_reports(server: OpenAIServer) -> None:
    server.script = [Reply(text="Action: Wait", cached_tokens=7)]
    completion = await complete("openai/local-model", "Instructions: wait.", path=path_to(server))
    assert completion.text == "Action: Wait"
    assert (completion.prompt_tokens, completion.cached_prompt_tokens) == (len("Instructions: wait.") // 4, 7)
    assert server.requests[0].body["model"] == "local-model"


async def test_a_rate_limit_is_waited_out_as_long_as_retry_after_says(server: OpenAIServer) -> None:
    limited = Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0.4"})
    server.script = [limited, Reply()]
    completion = await complete("openai/local-model", "Instructions: wait.", path=path_to(server))
    assert completion.text == "Action: Wait" and len(server.requests) == 2
    assert server.requests[1].at - server.requests[0].at >= 0.4, "no sooner than the provider asked"


async def test_server_errors_and_a_hung_call_are_tried_again(server: OpenAIServer) -> None:
    server.script = [Reply(status=500, body={"error": {"message": "boom"}}), Reply(delay=2.0), Reply()]
    completion = await complete("openai/local-model", "Instructions: wait.", path=path_to(server, call_timeout=0.5))
    assert completion.text == "Action: Wait" and len(server.requests) == 3


async def test_a_failure_that_retrying_cannot_fix_is_named_at_once(server: OpenAIServer) -> None:
    server.script = [Reply(status=400, body=CONTEXT_WINDOW)]
    with pytest.raises(ModelCallError) as raised:
        await complete("openai/local-model", "Instructions: wait.", path=path_to(server))
    assert raised.value.kind == "ContextWindowExceededError" and raised.value.attempts == 1
    assert len(server.requests) == 1
    server.script = [Reply(status=401, body={"error": {"message": "bad key", "type": "invalid_api_key"}})]
    with pytest.raises(ModelCallError, match="AuthenticationError"):
        await complete("openai/local-model", "Instructions: wait.", path=path_to(server))


async def test_malformed_replies_use_up_the_attempts_then_fail_named(server: OpenAIServer) -> None:
    server.script = [Reply(body="this is not json")] * 2
    with pytest.raises(ModelCallError) as raised:
        await complete("openai/local-model", "Instructions: wait.", path=path_to(server, attempts=2))
    assert raised.value.attempts == 2 and len(server.requests) == 2


async def test_parameters_a_reasoning_model_does_not_take_are_dropped(server: OpenAIServer) -> None:
    await complete("openai/o3-mini", "Instructions: wait.", path=path_to(server))
    await complete("openai/local-model", "Instructions: wait.", path=path_to(server))
    sent = [seen.body for seen in server.requests]
    assert "temperature" not in sent[0], sent[0]
    assert sent[1]["temperature"] == 0, "a model that takes it gets it"


async def test_calls_in_flight_are_capped(server: OpenAIServer) -> None:
    server.script = [Reply(delay=0.2) for _ in range(6)]
    path = path_to(server, max_concurrent_calls=2)
    await asyncio.gather(*(complete("openai/local-model", f"Instructions: wait {i}.", path=path) for i in range(6)))
    assert len(server.requests) == 6 and server.most_in_flight == 2


def test_retry_after_is_read_in_seconds_milliseconds_or_a_date_and_never_waits_without_end() -> None:
    import email.utils
    import time
    from types import SimpleNamespace

    from skillstate.agents.runtime.llm import retry_after, retry_delay

    def failed(**headers: str) -> SimpleNamespace:
        return SimpleNamespace(response=SimpleNamespace(headers=headers))

    path = ModelPath(backoff=1.0, backoff_cap=30.0)
    assert retry_after(failed(**{"Retry-After": "2.5"})) == 2.5
    assert retry_after(failed(**{"retry-after-ms": "1500", "Retry-After": "9"})) == 1.5
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8 <= retry_after(failed(**{"Retry-After": in_ten})) <= 10  # type: ignore[operator]
    assert retry_after(failed(**{"Retry-After": "soon"})) is None and retry_after(failed()) is None
    assert retry_delay(failed(**{"Retry-After": "3600"}), 1, path) == 30.0, "capped"
    assert 0 <= retry_delay(failed(**{"Retry-After": "nan"}), 3, path) <= 4.0, "a NaN falls back to the backoff"
    assert 0 <= retry_delay(failed(), 2, path) <= 2.0
