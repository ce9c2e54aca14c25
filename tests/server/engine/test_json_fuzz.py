"""Fuzzing what parses requests' JSON and patches: any input is either accepted, exactly as JSON means it,
or refused InvalidArgumentError naming the field; nothing else escapes, and a refused patch changes nothing.

What "exactly as JSON means it" is comes from a reference written here with Python's json module and the
rules of docs/limits.md (duplicate keys, depth 64, 64-bit integers, finite numbers, UTF-8 without lone
surrogates), and an accepted patch must change the state as the RFC 7396 merge of merge_reference.py (test
code that shares nothing with the server) does.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from hypothesis import event, example, given
from hypothesis import strategies as st

from skillstate.server.engine import canonical
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import ConflictError, InvalidArgumentError
from skillstate.server.limits import DEFAULT_LIMITS
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ...strategies import json_objects, json_values
from .merge_reference import canonical as canonical_text
from .merge_reference import merge_patch

JSON_ISH = st.text(alphabet='{}[]":,0123456789.eE+-truefalsn \\u\t\n', max_size=60)
"""Text made of JSON's own characters: mostly almost-JSON, the inputs most likely to confuse a parser."""

MAX_BYTES, MAX_DEPTH = 1 << 20, 64
MIN_INTEGER, MAX_INTEGER = -(2**63), 2**64 - 1


class Refused(Exception):
    pass


def reference_parse(data: str | bytes) -> Any:
    """A JSON document as docs/limits.md reads it, by Python's json module; Refused if any rule refuses it."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in pairs}) < len(pairs):
            raise Refused("duplicate key")
        return dict(pairs)

    def integer(text: str) -> int:
        if not MIN_INTEGER <= int(text) <= MAX_INTEGER:
            raise Refused("integer out of range")
        return int(text)

    def number(text: str) -> float:
        if not math.isfinite(float(text)):
            raise Refused("not a finite double")
        return float(text)

    def constant(name: str) -> Any:
        raise Refused(f"{name} is not JSON")

    try:
        raw = data.encode() if isinstance(data, str) else data
        if len(raw) > MAX_BYTES:
            raise Refused("too large")
        value = json.loads(
            raw.decode(), object_pairs_hook=unique, parse_int=integer, parse_float=number, parse_constant=constant
        )
    except (UnicodeError, ValueError, RecursionError) as e:
        raise Refused(str(e)) from e
    if depth(value) > MAX_DEPTH:
        raise Refused("too deep")
    if any(0xD800 <= ord(c) <= 0xDFFF for s in strings(value) for c in s):
        raise Refused("a lone surrogate")
    return value


def depth(value: Any) -> int:
    if isinstance(value, dict | list):
        return 1 + max(map(depth, value.values() if isinstance(value, dict) else value), default=0)
    return 0


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(s for item in value.values() for s in strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return [value] if isinstance(value, str) else []


LEAVES = st.sampled_from(
    [
        "0", "-0", "-0.0", "1.0", "1E5", "01", "1.", ".5", "1e", "+1", "- 1",
        "9223372036854775807", "-9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "1e308", "1e309", "-1e400", "1e-400",
        "NaN", "Infinity", "-Infinity", "true", "True", "null", "nul",
        '"\\ud800"', '"x\\udc00"', '"\\ud83d\\ude00"', '"\\u0000"', '"a\\tb"', '"\x01"', '"é"', '"\\x"',
    ]
)  # fmt: skip
"""Numbers, literals and strings on either side of a rule."""
KEYS = st.sampled_from(['"a"', '"b"', '"\\u0061"'])
"""`"\\u0061"` is the key `"a"` written another way: a duplicate only a real parse sees."""


def documents(leaves: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    members = st.lists(st.tuples(KEYS, leaves), max_size=3).map(
        lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"
    )
    return st.one_of(members, st.lists(leaves, max_size=3).map(lambda items: "[" + ",".join(items) + "]"))


EDGE_DOCUMENTS = st.one_of(
    LEAVES,
    st.recursive(LEAVES, documents, max_leaves=6),
    st.tuples(st.integers(MAX_DEPTH - 2, MAX_DEPTH + 2), LEAVES, st.sampled_from("[{")).map(
        lambda d: ("[" * d[0] if d[2] == "[" else '{"a":' * d[0]) + d[1] + ("]" * d[0] if d[2] == "[" else "}" * d[0])
    ),
    st.sampled_from(["", " ", "\ufeff{}", '{"a":1} ', '{"a":1}x', "[1,]", "{,}", '{"a" 1}', "[] []"]),
)
"""Documents built at the edges of the rules: nesting around the depth limit, keys repeated, bad leaves."""
ANY_INPUT = st.one_of(JSON_ISH, EDGE_DOCUMENTS, st.text(max_size=60), st.binary(max_size=60))


def parsed_or_refused(data: str | bytes) -> Any:
    try:
        return canonical.parse(data, "patch_json", DEFAULT_LIMITS)
    except InvalidArgumentError as e:
        assert str(e).startswith("patch_json: ")
        return e


@given(ANY_INPUT)
@example("[" * 64 + "]" * 64)
@example("[" * 65 + "]" * 65)
@example('{"a":1,"\\u0061":2}')
@example("1e309")
@example('"\\ud800"')
@example(b'"\xed\xa0\x80"')  # a surrogate encoded as UTF-8 bytes: not UTF-8
def test_the_parser_accepts_exactly_what_json_and_the_limits_accept(data: str | bytes) -> None:
    """Accepted exactly when the reference accepts, with the same value; refused naming the field otherwise."""
    parsed = parsed_or_refused(data)
    try:
        expected = reference_parse(data)
    except Refused as e:
        assert isinstance(parsed, InvalidArgumentError), f"{data!r} accepted as {parsed!r}; the reference: {e}"
        event("refused")
        return
    assert not isinstance(parsed, InvalidArgumentError), f"{data!r} refused ({parsed}); it is {expected!r}"
    assert canonical_text(parsed) == canonical_text(expected)
    event("accepted")


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


SCHEMA = {"properties": {"a": {"type": "integer"}}}


def valid(state: dict[str, Any]) -> bool:
    """SCHEMA, as JSON Schema 2020-12 means it: an integer is any number with a zero fractional part."""
    a = state.get("a", 0)
    return not isinstance(a, bool) and (isinstance(a, int) or (isinstance(a, float) and a.is_integer()))


@given(st.lists(st.one_of(JSON_ISH, EDGE_DOCUMENTS, st.builds(json.dumps, json_objects())), min_size=1, max_size=8))
def test_patches_of_any_text_apply_whole_or_change_nothing(texts: list[str]) -> None:
    """An accepted patch makes the state RFC 7396 says, from the value the reference parses; a refused one is
    one the reference refuses (not JSON, not an object, or a state the schema refuses) and changes nothing."""

    async def main() -> None:
        engine = StateEngine(MemoryRevisionLog())
        await engine.start()
        try:
            await engine.create_execution("x", json.dumps(SCHEMA), "{}")
            for text in texts:
                before = await engine.get_state("x")
                try:
                    patch = reference_parse(text)
                except Refused:
                    patch = None
                try:
                    result = await engine.submit_patch("x", "fuzz", before.revision, text)
                except (InvalidArgumentError, ConflictError) as e:
                    assert isinstance(e, InvalidArgumentError), f"{text!r} on head: {e}"
                    assert await engine.get_state("x") == before
                    if isinstance(patch, dict):
                        assert not valid(merge_patch(json.loads(before.state_json), patch)), f"{text!r}: {e}"
                    event("refused")
                    continue
                assert isinstance(patch, dict), f"{text!r} applied, but it is no JSON object: {patch!r}"
                after = await engine.get_state("x")
                assert result.revision == after.revision == before.revision + 1
                expected = merge_patch(json.loads(before.state_json), patch)
                assert canonical_text(json.loads(after.state_json)) == canonical_text(expected), text
                event("applied")
        finally:
            await engine.close()

    asyncio.run(main())
