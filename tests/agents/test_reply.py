"""The step reply format: reasoning dropped, exactly one JSON block with exactly `state_patch` and `action`."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillstate.agents.protocol.reply import Reply, ReplyError, format_reply, parse_reply

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


@given(
    reasoning=st.text(max_size=200).filter(lambda t: "```" not in t),
    patch=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    action=st.text(min_size=1, max_size=30).filter(lambda a: a.strip() == a and a),
)
def test_a_formatted_reply_parses_back_to_its_patch_and_action(reasoning: str, patch: dict, action: str) -> None:
    assert parse_reply(format_reply(reasoning, patch, action)) == Reply(patch, action)


def test_a_bare_json_object_is_accepted_as_constrained_output_gives_it() -> None:
    assert parse_reply('{"state_patch": {}, "action": "Wait"}') == Reply({}, "Wait")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("I will wait.", "no JSON block"),
        ("```json\n{}\n```\n```json\n{}\n```", "2 JSON blocks"),
        ('```json\n{"state_patch": {}, "action": "Wait"\n```', "does not parse"),
        ("```json\n[1, 2]\n```", "is a list"),
        ('```json\n{"action": "Wait"}\n```', "missing `state_patch`"),
        ('```json\n{"state_patch": {}, "action": "Wait", "why": "x"}\n```', "unexpected `why`"),
        ('```json\n{"state_patch": [], "action": "Wait"}\n```', "`state_patch` must be an object, not an array"),
        ('```json\n{"state_patch": {}, "action": 3}\n```', "`action` must be a non-empty string, not a number"),
        ('```json\n{"state_patch": {}, "action": "  "}\n```', "not an empty string"),
    ],
)
def test_each_broken_reply_is_refused_with_what_to_fix(text: str, message: str) -> None:
    with pytest.raises(ReplyError, match=message.replace("[", r"\[")):
        parse_reply(text)


def test_the_reasoning_never_reaches_the_parsed_reply() -> None:
    reply = parse_reply(
        "Secret plan: ship everything.\n```json\n" + json.dumps({"state_patch": {"a": 1}, "action": "Go"}) + "\n```"
    )
    assert "Secret" not in repr(reply)
