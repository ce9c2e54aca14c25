"""Every model call goes through litellm: any litellm model string works with its usual API key in the
environment, and `skillstate/...` names the scripted test policy (scripted/policy.py), registered as a litellm custom
provider only when such a model is called.

litellm is imported on first use (it takes seconds and ~200 MB). With no network configured, set
`SKILLSTATE_OFFLINE=1` (the CLI does when the model is a test policy) so that litellm never reaches for its
model cost map: that sets `LITELLM_OFFLINE_MODE` and `LITELLM_LOCAL_MODEL_COST_MAP` before the import.

How calls are made is the process's `ModelPath` (`model_path()`), read from the environment so that agents in
worker processes make their calls the same way; the CLI's `--api-base`, `--api-key`, `--max-concurrent-calls`
and `--call-timeout` set it. Parameters a model does not take are dropped (litellm's `drop_params`: a reasoning
model refuses `temperature`). A failure that may pass (a rate limit, a time-out, a lost connection, a 5xx) is
tried again after an exponential delay with full jitter, or after the provider's `Retry-After` when it sends
one; one that will not (the context window, authentication, a refused request), or the last attempt's, is a
`ModelCallError` naming its kind: the run that made the call fails with it, and the command goes on.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import os
import random
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..scripted.policy import PROVIDER, TOKENIZER_MODEL, register_provider


@dataclass(frozen=True)
class ModelPath:
    """How this process calls models; every field has an environment variable (`from_env`)."""

    api_base: str | None = None
    """An OpenAI-compatible server (vLLM, Ollama, LM Studio, llama.cpp) for every real model (SKILLSTATE_API_BASE)."""
    api_key: str | None = None
    """The key sent to it (SKILLSTATE_API_KEY); else litellm's usual variable for the provider."""
    max_concurrent_calls: int = 16
    """Calls in flight at once in this process (SKILLSTATE_MAX_CONCURRENT_CALLS); the rest wait their turn."""
    call_timeout: float = 120.0
    """Seconds one attempt may take (SKILLSTATE_CALL_TIMEOUT)."""
    attempts: int = 6
    """Attempts of a call whose failure may pass (SKILLSTATE_MODEL_ATTEMPTS)."""
    backoff: float = 1.0
    """The first retry waits up to this many seconds, each next one up to twice as long (full jitter)."""
    backoff_cap: float = 30.0
    """No wait is longer, `Retry-After` included (SKILLSTATE_BACKOFF_CAP)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> ModelPath:
        def number(name: str, default: float) -> float:
            value = environ.get(name)
            try:
                return default if value in (None, "") else float(value)
            except ValueError:
                raise ValueError(f"{name}: {value!r} is not a number") from None

        path = cls(
            api_base=environ.get("SKILLSTATE_API_BASE") or None,
            api_key=environ.get("SKILLSTATE_API_KEY") or None,
            max_concurrent_calls=int(number("SKILLSTATE_MAX_CONCURRENT_CALLS", cls.max_concurrent_calls)),
            call_timeout=number("SKILLSTATE_CALL_TIMEOUT", cls.call_timeout),
            attempts=int(number("SKILLSTATE_MODEL_ATTEMPTS", cls.attempts)),
            backoff_cap=number("SKILLSTATE_BACKOFF_CAP", cls.backoff_cap),
        )
        if path.max_concurrent_calls < 1 or path.call_timeout <= 0 or path.attempts < 1 or path.backoff_cap < 0:
            raise ValueError(f"model path out of range: {path}")
        return path


class ModelCallError(RuntimeError):
    """A model call that retrying cannot fix, or that failed every attempt: `kind` says which (litellm's
    exception name, or `timeout`)."""

    def __init__(self, model: str, kind: str, message: str, attempts: int) -> None:
        super().__init__(f"{model}: {kind} after {attempts} attempt{'s' if attempts > 1 else ''}: {message}")
        self.model, self.kind, self.attempts = model, kind, attempts


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int = 0
    """Of `prompt_tokens`, those the provider served from its prompt cache (billed differently), as it reports."""


def is_test_policy(model: str) -> bool:
    return model.startswith(f"{PROVIDER}/")


def model_path() -> ModelPath:
    return ModelPath.from_env()


def _litellm() -> Any:
    if os.environ.get("SKILLSTATE_OFFLINE"):
        os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # its "Give Feedback" banner on every failure: ours say what failed
    return litellm


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` by the model's tokenizer as litellm knows it (the test policy's: o200k_base)."""
    return int(_litellm().token_counter(model=TOKENIZER_MODEL if is_test_policy(model) else model, text=text))


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[int, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _slot(limit: int) -> asyncio.Semaphore:
    """This event loop's cap on calls in flight (made anew when the limit changes)."""
    loop = asyncio.get_running_loop()
    held = _slots.get(loop)
    if held is None or held[0] != limit:
        held = _slots[loop] = (limit, asyncio.Semaphore(limit))
    return held[1]


async def complete(
    model: str,
    prompt: str,
    *,
    response_schema: dict[str, Any] | None = None,
    path: ModelPath | None = None,
    policy_options: Mapping[str, Any] | None = None,
) -> Completion:
    """One model call with a single user message; usage as litellm reports it (or counted, when the provider
    reports none). `path` (default: the process's) says how it is made and retried. `policy_options` go to the
    scripted test policy only (scripted/policy.py: its think time, say); a real model never sees them. With a
    `response_schema`, a model that supports it is asked for output constrained to it (the caller decides:
    the runtimes ask only with `--constrained`, all alike)."""
    litellm = _litellm()
    path = path or model_path()
    options: dict[str, Any] = {"temperature": 0, "timeout": path.call_timeout, "drop_params": True}
    if is_test_policy(model):
        register_provider(litellm)
        options.update(policy_options or {})
    else:
        options.update({key: value for key, value in (("api_base", path.api_base), ("api_key", path.api_key))
                        if value})  # fmt: skip
    if response_schema is not None and not is_test_policy(model) and litellm.supports_response_schema(model=model):
        options["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "step", "schema": response_schema},
        }
    messages = [{"role": "user", "content": prompt}]
    response = await _call(litellm, model, messages, options, path)
    if not getattr(response, "choices", None):
        raise ModelCallError(model, "EmptyReply", "the provider's reply has no choices", 1)
    text = response.choices[0].message.content or ""
    usage = getattr(response, "usage", None)
    if usage is None or usage.prompt_tokens is None:  # a provider that reports no usage: count it ourselves
        return Completion(text, count_tokens(model, prompt), count_tokens(model, text))
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return Completion(text, usage.prompt_tokens, usage.completion_tokens or 0, int(cached))


async def _call(
    litellm: Any, model: str, messages: list[dict[str, Any]], options: dict[str, Any], path: ModelPath
) -> Any:
    """The call, tried again while its failure may pass and attempts are left."""
    permanent = (
        litellm.BadRequestError,
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.NotFoundError,
        litellm.UnprocessableEntityError,
    )  # context window, key, a refused request
    transient = (litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError, litellm.ServiceUnavailableError,
                 litellm.InternalServerError, litellm.BadGatewayError, litellm.APIError, TimeoutError)  # fmt: skip
    for attempt in range(1, path.attempts + 1):
        try:
            async with _slot(path.max_concurrent_calls):
                return await asyncio.wait_for(
                    litellm.acompletion(model=model, messages=messages, num_retries=0, **options), path.call_timeout
                )
        except permanent as error:
            raise ModelCallError(model, type(error).__name__, str(error), attempt) from error
        except transient as error:
            kind = "timeout" if isinstance(error, TimeoutError) else type(error).__name__
            if attempt == path.attempts or _refused(error):
                raise ModelCallError(model, kind, str(error) or kind, attempt) from error
            await asyncio.sleep(retry_delay(error, attempt, path))
        except Exception as error:  # anything litellm could not sort (its own bugs, a provider's odd reply)
            raise ModelCallError(model, type(error).__name__, str(error), attempt) from error
    raise AssertionError("unreachable: the last attempt returns or raises")


def _refused(error: BaseException) -> bool:
    """A 4xx the provider will answer the same way again (not 408, 409, 425 or 429), whatever class litellm
    gave it."""
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and 400 <= status < 500 and status not in (408, 409, 425, 429)


def retry_delay(error: BaseException, attempt: int, path: ModelPath) -> float:
    """Seconds before attempt `attempt + 1`: the provider's `Retry-After` if it sent one, else a full-jitter
    exponential delay; never more than `backoff_cap`."""
    after = retry_after(error)
    if after is None or not math.isfinite(after):
        after = random.uniform(0, path.backoff * 2 ** (attempt - 1))
    return min(max(after, 0.0), path.backoff_cap)


def retry_after(error: BaseException) -> float | None:
    """The `Retry-After` (seconds, or an HTTP date) or `retry-after-ms` a provider's error response carried."""
    lowered: dict[str, str] = {}
    for headers in (getattr(getattr(error, "response", None), "headers", None),
                    getattr(error, "litellm_response_headers", None)):  # fmt: skip
        if headers:
            lowered.update({str(k).lower(): str(v) for k, v in dict(headers).items()})
    if "retry-after-ms" in lowered:
        try:
            return float(lowered["retry-after-ms"]) / 1000
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None  # neither seconds nor a date: the backoff decides
