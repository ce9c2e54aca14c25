"""Fuzzing what parses requests' JSON and patches: any input is either accepted, exactly as JSON means it,
or refused InvalidArgumentError naming the field; nothing else escapes, and a refused patch changes nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.engine import canonical
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import ConflictError, InvalidArgumentError
from skillstate.server.limits import DEFAULT_LIMITS
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ...strategies import json_objects, json_values

JSON_ISH = st.text(alphabet='{}[]":,0123456789.eE+-truefalsn \\u\t\n', max_size=60)
"""Text made of JSON's own characters: mostly almost-JSON, the inputs most likely to confuse a parser."""


def parsed_or_refused(data: str | bytes) -> Any:
    try:
        return canonical.parse(data, "patch_json", DEFAULT_LIMITS)
    except InvalidArgumentError as e:
        assert str(e).startswith("patch_json: ")
        return e


@given(st.one_of(JSON_ISH, st.text(max_size=60), st.binary(max_size=60)))
def test_any_input_is_parsed_or_refused_naming_the_field(data: str | bytes) -> None:
    parsed_or_refused(data)


@given(json_values())
def test_every_json_value_reads_back_as_itself(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    parsed = parsed_or_refused(text)  # within every limit: it must be accepted
    assert not isinstance(parsed, InvalidArgumentError), parsed
    assert canonical.dumps(parsed) == canonical.dumps(value)


@given(json_objects().filter(bool), st.data())
def test_a_repeated_key_is_always_refused(value: dict[str, Any], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(value)))
    text = json.dumps(value, ensure_ascii=False)
    doubled = text[:-1] + ("," if len(value) else "") + json.dumps(key) + ":" + json.dumps(value[key]) + "}"
    refused = parsed_or_refused(doubled)
    assert isinstance(refused, InvalidArgumentError) and f"duplicate key {key!r}" in str(refused)


@given(st.lists(st.one_of(JSON_ISH, st.builds(json.dumps, json_objects())), min_size=1, max_size=8))
def test_patches_of_any_text_apply_whole_or_change_nothing(texts: list[str]) -> None:
    async def main() -> None:
        engine = StateEngine(MemoryRevisionLog())
        await engine.start()
        try:
            await engine.create_execution("x", '{"properties": {"a": {"type": "integer"}}}', "{}")
            for text in texts:
                before = await engine.get_state("x")
                try:
                    result = await engine.submit_patch("x", "fuzz", before.revision, text)
                except (InvalidArgumentError, ConflictError):
                    assert await engine.get_state("x") == before
                    continue
                after = await engine.get_state("x")
                assert result.revision == after.revision == before.revision + 1
        finally:
            await engine.close()

    asyncio.run(main())
