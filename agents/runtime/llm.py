"""Every model call goes through litellm: any litellm model string works with its usual API key in the
environment, and `skillstate/...` names the scripted test policy (scripted/policy.py), registered as a litellm custom
provider only when such a model is called.

litellm is imported on first use (it takes seconds and ~200 MB). With no network configured, set
`SKILLSTATE_OFFLINE=1` (the CLI does when the model is a test policy) so that litellm never reaches for its
model cost map: that sets `LITELLM_OFFLINE_MODE` and `LITELLM_LOCAL_MODEL_COST_MAP` before the import.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..scripted.policy import PROVIDER, TOKENIZER_MODEL, register_provider

RETRY_DELAYS = (1.0, 4.0, 15.0)
"""Seconds to wait before each new try of a call that failed on a transient error (rate limit, timeout,
connection, 5xx); after the last, the error is raised."""
MODEL_TIMEOUT = 120.0
"""Seconds one model call may take."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int


def is_test_policy(model: str) -> bool:
    return model.startswith(f"{PROVIDER}/")


def _litellm() -> Any:
    if os.environ.get("SKILLSTATE_OFFLINE"):
        os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` by the model's tokenizer as litellm knows it (the test policy's: o200k_base)."""
    return int(_litellm().token_counter(model=TOKENIZER_MODEL if is_test_policy(model) else model, text=text))


async def complete(
    model: str,
    prompt: str,
    *,
    response_schema: dict[str, Any] | None = None,
    retry_delays: Sequence[float] = RETRY_DELAYS,
    policy_options: Mapping[str, Any] | None = None,
) -> Completion:
    """One model call with a single user message; usage as litellm reports it (or counted, when the provider
    reports none). Transient failures are tried again after each of `retry_delays`. `policy_options` go to
    the scripted test policy only (scripted/policy.py: its think time, say); a real model never sees them. With a
    `response_schema`, a model that supports it is asked for output constrained to it (the caller decides:
    the runtimes ask only with `--constrained`, all alike)."""
    litellm = _litellm()
    options: dict[str, Any] = {"temperature": 0, "timeout": MODEL_TIMEOUT}
    if is_test_policy(model):
        register_provider(litellm)
        options.update(policy_options or {})
    if response_schema is not None and not is_test_policy(model) and litellm.supports_response_schema(model=model):
        options["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "step", "schema": response_schema},
        }
    messages = [{"role": "user", "content": prompt}]
    transient = (litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError,
                 litellm.ServiceUnavailableError, litellm.InternalServerError)  # fmt: skip
    for delay in (*retry_delays, None):
        try:
            response = await litellm.acompletion(model=model, messages=messages, **options)
            break
        except transient:
            if delay is None:
                raise
            await asyncio.sleep(delay)
    text = response.choices[0].message.content or ""
    usage = getattr(response, "usage", None)
    if usage is None or usage.prompt_tokens is None:  # a provider that reports no usage: count it ourselves
        return Completion(text, count_tokens(model, prompt), count_tokens(model, text))
    return Completion(text, usage.prompt_tokens, usage.completion_tokens or 0)
