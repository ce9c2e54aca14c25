"""The bad-call corpus (bad_calls.json): malformed, hostile and boundary arguments to every tool, each refused
with an error result whose text names the argument or the server's status, and none changing anything."""

from __future__ import annotations

import json
from pathlib import Path

from skillstate.clients import StateClient

from .conftest import refused, stdio
from .test_tools import TOOLS

CORPUS = json.loads((Path(__file__).parent / "bad_calls.json").read_text())
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


def test_the_corpus_covers_every_tool() -> None:
    assert {case["tool"] for case in CORPUS} == TOOLS


async def test_every_bad_call_is_refused_and_changes_nothing(server_address: str, state: StateClient) -> None:
    await state.create_execution("orders", schema=SCHEMA, initial_state={"n": 0})
    await state.submit_patch("orders", {"n": 1}, agent_id="a", base_revision=0)
    before = await state.get_state("orders")
    async with stdio(server_address) as client:
        for case in CORPUS:
            message = await refused(client, case["tool"], **case["arguments"])
            assert case["message"] in message, f"{case['tool']}: {case['name']}: {message}"
    assert await state.get_state("orders") == before
    assert await state.publish_observation("orders", "*", {"after": "the corpus"}) == 1  # none was published
