"""How the baselines read answers: the stateful runtime's `StateUpdate:` as models write it, and the `Action:`
line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillstate.agents.contexts import Stateful
from skillstate.agents.reply import Reply, ReplyError
from skillstate.agents.scripted import SCRIPTED, answer

PATCH = {"inventory": {"shelf_3": "item_7", "shelf_4": None}}
PRETTY = json.dumps(PATCH, indent=2)
INSTRUCTIONS = "You run the warehouse. Actions: Store <item> <shelf>, Ship <item> <shelf>, Move <item> <old> <new>."


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
    prompt = context.prompt(INSTRUCTIONS, {"inventory": {}}, "Event: Shipment arrived containing item_5.")
    assert context.parse(answer(SCRIPTED, prompt)) == Reply(
        {"inventory": {"shelf_0": "item_5"}}, "Store item_5 shelf_0"
    )
