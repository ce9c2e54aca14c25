"""Every model call goes through litellm: any litellm model string works with its usual API key in the
environment, and `skillstate/...` names the scripted test policy (scripted.py), registered here as a litellm
custom provider.

litellm is imported on first use (it takes seconds and ~200 MB). With no network configured, set
`SKILLSTATE_OFFLINE=1` (the CLI does when the model is a test policy) so that litellm never reaches for its
model cost map: that sets `LITELLM_OFFLINE_MODE` and `LITELLM_LOCAL_MODEL_COST_MAP` before the import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .scripted import PROVIDER, answer

TOKENIZER_MODEL = "gpt-4o"
"""The tokenizer the test policy's usage is counted with (o200k_base, shipped with litellm)."""


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

    if not any(entry.get("provider") == PROVIDER for entry in litellm.custom_provider_map):
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": PROVIDER, "custom_handler": _scripted_handler(litellm)},
        ]
    return litellm


def _scripted_handler(litellm: Any) -> Any:
    class ScriptedProvider(litellm.CustomLLM):  # type: ignore[misc]
        """litellm's door to the scripted test policy."""

        def completion(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
            prompt = "\n".join(str(m.get("content") or "") for m in messages)
            text = answer(model, prompt)
            prompt_tokens = litellm.token_counter(model=TOKENIZER_MODEL, messages=messages)
            completion_tokens = litellm.token_counter(model=TOKENIZER_MODEL, text=text)
            return litellm.ModelResponse(
                model=model,
                choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                usage=litellm.Usage(
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    total_tokens=prompt_tokens + completion_tokens,
                ),
            )

        async def acompletion(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
            return self.completion(model, messages, **kwargs)

    return ScriptedProvider()


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` by the model's tokenizer as litellm knows it (the test policy's: o200k_base)."""
    return int(_litellm().token_counter(model=TOKENIZER_MODEL if is_test_policy(model) else model, text=text))


async def complete(model: str, prompt: str, *, response_schema: dict[str, Any] | None = None) -> Completion:
    """One model call with a single user message; usage as litellm reports it."""
    litellm = _litellm()
    options: dict[str, Any] = {"temperature": 0}
    if response_schema is not None and not is_test_policy(model) and litellm.supports_response_schema(model=model):
        options["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "step", "schema": response_schema},
        }
    response = await litellm.acompletion(model=model, messages=[{"role": "user", "content": prompt}], **options)
    usage = response.usage
    return Completion(response.choices[0].message.content or "", usage.prompt_tokens, usage.completion_tokens)
