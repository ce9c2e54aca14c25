"""How the baselines read answers and keep their context: the stateful runtime's `StateUpdate:` as models write
it, the `Action:` line, and the summary-capped runtime held to its prompt budget."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillstate.agents.protocol.prompts import SUMMARY_REQUEST, render_observation
from skillstate.agents.protocol.reply import Reply, ReplyError
from skillstate.agents.runtime.contexts import RUNTIMES, Stateful, SummaryCapped
from skillstate.agents.scripted.policy import SCRIPTED, answer

PATCH = {"inventory": {"shelf_3": "item_7", "shelf_4": None}}
PRETTY = json.dumps(PATCH, indent=2)
INSTRUCTIONS = "You run the warehouse. Actions: Store <item> <shelf>, Ship <item> <shelf>, Move <item> <old> <new>."


def words(text: str) -> int:
    return len(text.split())


@pytest.mark.parametrize(
    "text",
    [
        f"I store it.\nStateUpdate: {json.dumps(PATCH)}\nAction: Store item_7 shelf_3",
        f"I store it.\nStateUpdate:\n{PRETTY}\nAction: Store item_7 shelf_3",
        f"I store it.\nStateUpdate: {PRETTY}\n\nThat records the shelf.\n\nAction: Store item_7 shelf_3",
        f"I store it.\nStateUpdate:\n```json\n{PRETTY}\n```\nAction: Store item_7 shelf_3",
        f"I store it.\nStateUpdate:\n```\n{PRETTY}\n```\nThen I act.\nAction: `Store item_7 shelf_3`",
        f"I store it.\n```json\nStateUpdate: {PRETTY}\n```\nAction: Store item_7 shelf_3",
        f"I store it.\n**StateUpdate:** `{json.dumps(PATCH)}`\n**Action:** Store item_7 shelf_3",
        f"I store it.\nState Update (JSON): {json.dumps(PATCH)}\n\nAction:\n```\nStore item_7 shelf_3\n```",
        f'```json\n{{"StateUpdate": {PRETTY}}}\n```\nAction: "Store item_7 shelf_3"',
    ],
    ids=["one-line", "multi-line", "text-after", "fenced-json", "fenced", "in-fence", "emphasis", "label", "key"],
)
def test_a_state_update_is_read_however_it_is_laid_out(text: str) -> None:
    assert Stateful().parse(text) == Reply(PATCH, "Store item_7 shelf_3")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


@given(
    patch=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    indent=st.sampled_from([None, 2, 4]),
    fence=st.sampled_from(["", "```json\n", "```\n"]),
    after=st.sampled_from(["", "\nThat is all I change.", "\n\n"]),
)
def test_any_patch_written_any_way_parses_back(patch: dict, indent: int | None, fence: str, after: str) -> None:
    body = json.dumps(patch, indent=indent)
    text = f"Reasoning.\nStateUpdate: {fence}{body}{chr(10) + '```' if fence else ''}{after}\nAction: Wait"
    assert Stateful().parse(text) == Reply(patch, "Wait")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('StateUpdate: {"inventory": {"shelf_1": "item_2",}}\nAction: Wait', "does not parse as JSON"),
        ('StateUpdate:\n{\n  "inventory": {\n    "shelf_1": "item_2"\n\nAction: Wait', "at line 5 of the update"),
        ("StateUpdate: {'inventory': {'shelf_1': 'item_2'}}\nAction: Wait", "does not parse as JSON"),
        ('StateUpdate: ["shelf_1"]\nAction: Wait', "must be a JSON object, not an array"),
        ("StateUpdate: shelf_1 now holds item_2\nAction: Wait", "not followed by a JSON object"),
        ('StateUpdate: {"a": 1}\nStateUpdate: {"a": {"b": 2}}\nAction: Wait', "disagree on `a`"),
    ],
)
def test_an_update_that_is_there_but_does_not_parse_is_refused_never_dropped(text: str, message: str) -> None:
    with pytest.raises(ReplyError, match=message):
        Stateful().parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "Nothing changes.\nAction: Wait",
        "Nothing changes.\nStateUpdate: none\nAction: Wait",
        "Nothing changes.\nStateUpdate: null\nAction: Wait",
        "Nothing changes.\nStateUpdate: {}\nAction: Wait",
    ],
)
def test_no_update_is_an_empty_patch(text: str) -> None:
    assert Stateful().parse(text) == Reply({}, "Wait")


def test_several_updates_are_one_patch_and_a_marker_inside_an_update_is_part_of_it() -> None:
    text = (
        'StateUpdate: {"inventory": {"shelf_1": "item_1"}}\nStateUpdate: {"inventory": {"shelf_2": null}}\n'
        'StateUpdate: {"note": "StateUpdate: not a second update"}\nAction: Wait'
    )
    assert Stateful().parse(text).state_patch == {
        "inventory": {"shelf_1": "item_1", "shelf_2": None},
        "note": "StateUpdate: not a second update",
    }


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("Action: Store item_1 shelf_0\nOn reflection:\nAction: Wait", "Wait"),
        ("### Action: <Ship item_1 shelf_0>", "Ship item_1 shelf_0"),
        ("- action: Wait  ", "Wait"),
        ("Action:\n\n```bash\nMove item_1 shelf_0 shelf_9\n```", "Move item_1 shelf_0 shelf_9"),
    ],
)
def test_the_last_action_line_is_the_action(text: str, action: str) -> None:
    assert Stateful().parse(text).action == action


@pytest.mark.parametrize("text", ["I will wait.", "My next Action: Wait", "Action:\n```\n```"])
def test_no_action_is_refused(text: str) -> None:
    with pytest.raises(ReplyError, match="no action"):
        Stateful().parse(text)


def test_the_scripted_policys_stateful_answer_parses() -> None:
    context = Stateful()
    prompt = context.prompt(
        INSTRUCTIONS, {"inventory": {"shelf_1": "item_1"}}, "Event: Shipment arrived containing item_5."
    )
    reply = context.parse(answer(SCRIPTED, prompt))
    ((shelf, item),) = reply.state_patch["inventory"].items()
    assert item == "item_5" and shelf != "shelf_1" and reply.action == f"Store item_5 {shelf}"


def test_summary_is_a_runtime_beside_truncated() -> None:
    assert RUNTIMES.index("summary") == RUNTIMES.index("truncated") + 1
    assert SummaryCapped(budget_tokens=100, count_tokens=words).name == "summary"


def test_the_summary_is_asked_for_after_each_turn_and_only_then() -> None:
    context = SummaryCapped(budget_tokens=200, count_tokens=words)
    assert context.summarize_request() is None
    prompt = context.prompt(INSTRUCTIONS, {}, "Event: Shipment arrived containing item_1.")
    assert "Summarized History:\n(none yet)" in prompt
    context.remember("Event: Shipment arrived containing item_1.", "It is new.\nAction: Store item_1 shelf_0")
    request = context.summarize_request()
    assert request is not None and request.startswith(SUMMARY_REQUEST)
    assert "Action: Store item_1 shelf_0" in request
    assert f"at most {200 - words(prompt.replace('(none yet)', ''))} tokens" in request
    context.summarized("shelf_0=item_1")
    assert context.summarize_request() is None
    assert "Summarized History:\nshelf_0=item_1\n" in context.prompt(
        INSTRUCTIONS, {}, "Event: Customer ordered item_1."
    )


def test_a_summary_that_never_stops_growing_keeps_every_prompt_within_the_cap() -> None:
    budget = 120
    context = SummaryCapped(budget_tokens=budget, count_tokens=words)
    for step in range(300):
        observation = f"Event: Shipment arrived containing item_{step}." + " noise" * (step % 40)
        prompt = context.prompt(INSTRUCTIONS, {}, observation)
        assert words(prompt) <= budget
        context.remember(observation, f"Stored.\nAction: Store item_{step} shelf_{step}")
        request = context.summarize_request()
        assert request is not None
        context.summarized(f"{context.summary} shelf_{step}=item_{step} " + "filler " * 30)  # never compressed
        assert words(context.summary) <= budget
    assert context.summary.startswith("shelf_0=item_0")  # what passes the ceiling is cut off at the end


def test_when_p_and_the_observation_alone_pass_the_budget_the_summary_is_empty() -> None:
    context = SummaryCapped(budget_tokens=10, count_tokens=words, summary="shelf_0=item_0")
    prompt = context.prompt(INSTRUCTIONS, {}, "Event: Customer ordered item_0.")
    assert "Summarized History:\n\n" in prompt and "shelf_0" not in prompt


def run_scripted(context: SummaryCapped, events: list[str]) -> list[tuple[str, str]]:
    """Drive the context as the runtime does, with the scripted policy: (prompt, action) per event."""
    steps, last = [], None
    for event in events:
        request = context.summarize_request()
        if request is not None:
            context.summarized(answer(SCRIPTED, request))
        observation = render_observation({"last_action": last, "event": event})
        prompt = context.prompt(INSTRUCTIONS, {}, observation)
        text = answer(SCRIPTED, prompt)
        action = context.parse(text).action
        context.remember(observation, text)
        steps.append((prompt, action))
        last = {"action": action, "status": "ok", "result": "Done."}
    return steps


def test_the_scripted_policy_finds_an_item_through_the_summary_alone() -> None:
    events = [f"Shipment arrived containing item_{n}." for n in range(30)] + ["Customer ordered item_3."]
    steps = run_scripted(SummaryCapped(budget_tokens=2000, count_tokens=words), events)
    stored = [action.split() for _, action in steps[:30]]
    assert [words[:2] for words in stored] == [["Store", f"item_{n}"] for n in range(30)]
    assert len({words[2] for words in stored}) == 30, "each on a shelf the records show free"
    assert steps[-1][1] == f"Ship item_3 {stored[3][2]}"
    assert (
        f"{stored[29][2]}=item_29" in steps[-1][0] and "Action: Store item_28" not in steps[-1][0]
    )  # no verbatim turn


def test_a_budget_too_small_for_the_whole_summary_cuts_it_and_the_policy_forgets() -> None:
    budget = 60  # the rest of the prompt takes about 42 words: 18 are left for the summary
    context = SummaryCapped(budget_tokens=budget, count_tokens=words)
    run_scripted(context, [f"Shipment arrived containing item_{n}." for n in range(40)])
    kept = set(re.findall(r"=(item_\d+)", context.summary))
    forgotten = sorted(f"item_{n}" for n in range(40) if f"item_{n}" not in kept)
    assert kept and forgotten, "the summary was cut to what fits"
    (remembered, *_), ((prompt, action),) = sorted(kept), run_scripted(context, [f"Customer ordered {forgotten[0]}."])
    assert words(prompt) <= budget and forgotten[0] not in prompt.partition("Latest Observation")[0]
    assert action == "Wait"  # its shelf was cut from the summary: the policy has no record of it
    ((_, shipped),) = run_scripted(context, [f"Customer ordered {remembered}."])
    assert shipped.startswith(f"Ship {remembered} shelf_")


def test_every_runtime_reads_its_constrained_answer_reasoning_first() -> None:
    """`--constrained` asks every runtime alike for one JSON object with its reasoning first."""
    from skillstate.agents.protocol.reply import REPLY_SCHEMA
    from skillstate.agents.runtime.contexts import ACTION_SCHEMA, STATEFUL_SCHEMA, React, SkillState

    for context, schema in ((SkillState(), REPLY_SCHEMA), (React(), ACTION_SCHEMA), (Stateful(), STATEFUL_SCHEMA)):
        assert context.response_schema == schema and schema["required"][0] == "reasoning"
    reasoning = "item_5 arrived; shelf_5 is free."
    assert SkillState().parse(json.dumps({"reasoning": reasoning, "state_patch": {"inventory": {"shelf_5": "item_5"}},
                                          "action": "Store item_5 shelf_5"})) == Reply(
        {"inventory": {"shelf_5": "item_5"}}, "Store item_5 shelf_5"
    )  # fmt: skip
    assert React().parse(json.dumps({"reasoning": reasoning, "action": "Wait"})) == Reply({}, "Wait")
    assert Stateful().parse(json.dumps({"reasoning": reasoning, "state_update": {"a": 1}, "action": "Wait"})) == Reply(
        {"a": 1}, "Wait"
    )  # fmt: skip
    with pytest.raises(ReplyError, match="`state_update` must be a JSON object"):
        Stateful().parse(json.dumps({"reasoning": reasoning, "state_update": [1], "action": "Wait"}))
