"""The scripted test policy, called through litellm as any model is: it reads only its prompt."""

from __future__ import annotations

import os

import pytest

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.protocol.prompts import render_observation, skill_state_prompt
from skillstate.agents.protocol.reply import ReplyError, parse_reply
from skillstate.agents.runtime.contexts import React, Stateful
from skillstate.agents.runtime.llm import ModelPath, complete, count_tokens
from skillstate.agents.scripted.policy import PROVIDER, SCRIPTED, fault_rate

INSTRUCTIONS = "You run the warehouse. Actions: Store <item> <shelf>, Ship <item> <shelf>, Move <item> <old> <new>."


async def test_it_answers_from_the_state_and_observation_in_its_prompt() -> None:
    state = {"inventory": {"shelf_0": "item_0", "shelf_1": "item_4"}}
    prompt = skill_state_prompt(INSTRUCTIONS, state, render_observation({"event": "Customer ordered item_4."}))
    completion = await complete("skillstate/scripted", prompt)
    reply = parse_reply(completion.text)
    assert reply.action == "Ship item_4 shelf_1"
    assert reply.state_patch == {"inventory": {"shelf_1": None}}
    assert completion.prompt_tokens > 50 and completion.completion_tokens > 30


async def test_a_failed_action_is_taken_back_and_what_the_error_revealed_is_recorded() -> None:
    state = {"inventory": {"shelf_0": "item_1"}}
    observation = render_observation(
        {
            "last_action": {
                "action": "Store item_1 shelf_0",
                "status": "error",
                "result": "shelf_0 is occupied by item_9.",
            },
            "event": "Shipment arrived containing item_2.",
        }
    )
    reply = parse_reply(
        (await complete("skillstate/scripted", skill_state_prompt(INSTRUCTIONS, state, observation))).text
    )
    assert reply.action.startswith("Store item_2 shelf_") and reply.action != "Store item_2 shelf_0"
    assert reply.state_patch == {"inventory": {"shelf_0": "item_9", reply.action.split()[2]: "item_2"}}


async def test_the_faulty_variant_makes_the_papers_errors_at_its_rate_and_repeats_them() -> None:
    failures = 0
    for n in range(200):
        prompt = skill_state_prompt(INSTRUCTIONS, {"inventory": {}}, f"Event: Shipment arrived containing item_{n}.")
        text = (await complete("skillstate/faulty-0.5", prompt)).text
        assert text == (await complete("skillstate/faulty-0.5", prompt)).text
        try:
            reply = parse_reply(text)
            failures += reply.state_patch.get("inventory") != {reply.action.split()[-1]: f"item_{n}"}
        except ReplyError:
            failures += 1
    assert 70 <= failures <= 130


@pytest.mark.parametrize("runtime", ["react", "stateful"])
async def test_the_faulty_variant_makes_the_same_errors_in_a_transcript_runtimes_format(runtime: str) -> None:
    """Faults reach every runtime's replies alike: read as that runtime reads them, about half the replies at
    rate 0.5 are unreadable, or carry a wrong value where that runtime keeps one (its update, else its action)."""
    context = React() if runtime == "react" else Stateful()
    state = {"inventory": {}}
    wrong = {"malformed": 0, "value": 0}
    for n in range(200):
        prompt = context.prompt(INSTRUCTIONS, state, f"Event: Shipment arrived containing item_{n}.")
        text = (await complete("skillstate/faulty-0.5", prompt)).text
        assert text == (await complete("skillstate/faulty-0.5", prompt)).text
        right = (await complete("skillstate/scripted", prompt)).text
        try:
            reply = context.parse(text)
        except ReplyError:
            wrong["malformed"] += 1
            continue
        expected = context.parse(right)
        if runtime == "stateful":
            wrong["value"] += reply.state_patch != expected.state_patch
            assert reply.action == expected.action, "a state-keeping runtime's wrong value is in its update"
        else:
            wrong["value"] += reply.action != expected.action
    assert 70 <= sum(wrong.values()) <= 130 and wrong["malformed"] and wrong["value"]


def test_unknown_test_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown test policy"):
        fault_rate("skillstate/clever")
    with pytest.raises(ValueError, match="unknown test policy"):
        fault_rate("skillstate/faulty-2")


async def test_a_transient_model_failure_is_tried_again() -> None:
    """A provider that fails once with a rate limit: the step still gets its answer."""
    import litellm

    class FlakyOnce(litellm.CustomLLM):  # a test provider: fails its first call, then answers
        calls = 0

        def completion(self, *args: object, **kwargs: object) -> litellm.ModelResponse:
            FlakyOnce.calls += 1
            if FlakyOnce.calls == 1:
                raise litellm.RateLimitError("slow down", llm_provider="flaky-test", model="once")
            return litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": "Action: Wait"}}])

        async def acompletion(self, *args: object, **kwargs: object) -> litellm.ModelResponse:
            return self.completion(*args, **kwargs)

    previous = litellm.custom_provider_map
    litellm.custom_provider_map = [*previous, {"provider": "flaky-test", "custom_handler": FlakyOnce()}]
    try:
        completion = await complete("flaky-test/once", "Instructions: wait.", path=ModelPath(backoff=0.0))
    finally:
        litellm.custom_provider_map = previous
    assert completion.text == "Action: Wait" and FlakyOnce.calls == 2
    assert completion.prompt_tokens > 0  # counted by the tokenizer when the provider reports no usage


async def test_the_test_policy_is_registered_with_litellm_only_when_its_model_is_called() -> None:
    import litellm

    def registered() -> bool:
        return any(entry.get("provider") == PROVIDER for entry in litellm.custom_provider_map)

    previous = litellm.custom_provider_map
    litellm.custom_provider_map = [entry for entry in previous if entry.get("provider") != PROVIDER]
    try:
        assert count_tokens(SCRIPTED, "a few words") > 0 and count_tokens("gpt-4o", "a few words") > 0
        assert not registered()
        assert (await complete(SCRIPTED, "Instructions: wait.")).text
        assert registered()
    finally:
        litellm.custom_provider_map = previous


@pytest.mark.parametrize("words", [5, 60, 400])
def test_reply_length_is_set_in_words_and_the_same_for_every_runtime(words: int) -> None:
    from skillstate.agents.runtime.contexts import Stateful
    from skillstate.agents.scripted.policy import answer

    observation = render_observation({"event": "Shipment arrived containing item_4."})
    ours = answer(SCRIPTED, skill_state_prompt(INSTRUCTIONS, {"inventory": {}}, observation), words)
    theirs = answer(SCRIPTED, Stateful().prompt(INSTRUCTIONS, {"inventory": {}}, observation), words)
    assert len(ours.split("```json")[0].split()) == words
    assert len(theirs.split("\nStateUpdate:")[0].split()) == words
    assert parse_reply(ours).action.startswith("Store item_4 shelf_")
