"""Fuzzing schemas: whatever a client declares (policies and owners of every JSON type, references to
anywhere, cycles), creating the execution either works or is refused INVALID_ARGUMENT, and so is every
patch after it; nothing ends in an unexpected error, and nothing reaches the network."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import StateError
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ...strategies import json_objects, json_values

POLICIES = st.sampled_from(["reject", "lww", "counter", "max", "min", "set", "append", "text"])
REFERENCES = st.one_of(
    st.sampled_from(["#", "#/$defs/a", "#/$defs/b", "#/$defs/missing", "#/properties", "#/required", "#anchor"]),
    st.sampled_from(["http://127.0.0.1:9/s.json", "other.json", "file:///etc/passwd", "urn:x"]),
    st.text(max_size=8),
    json_values(3),
)


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    def node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(["object", "integer", "string", "array", "number"]),
                "x-merge": st.one_of(POLICIES, json_values(3)),
                "x-owner": st.one_of(st.sampled_from(["a", "skill:s"]), json_values(3)),
                "$ref": REFERENCES,
                "$dynamicRef": REFERENCES,
                "$anchor": st.just("anchor"),
                "properties": st.dictionaries(st.sampled_from(["a", "b", "n"]), children, max_size=3),
                "additionalProperties": children,
                "allOf": st.lists(children, max_size=2),
                "not": children,
            },
        )

    leaf = st.fixed_dictionaries({}, optional={"type": st.sampled_from(["integer", "string"]), "$ref": REFERENCES})
    tree = st.recursive(leaf, node, max_leaves=8)
    defs = st.fixed_dictionaries({}, optional={"a": tree, "b": tree})
    return st.builds(lambda root, found: {**root, "$defs": found} if found else root, tree, defs)


@given(schemas(), json_objects(), st.lists(json_objects(), max_size=3))
def test_any_schema_is_accepted_or_refused_by_name_and_so_is_every_patch(
    schema: dict[str, Any], state: dict[str, Any], patches: list[dict[str, Any]]
) -> None:
    with no_network():
        asyncio.run(_create_and_patch(schema, state, patches))


def test_a_connection_attempt_fails_the_fuzzing() -> None:
    """The guard above can fail: code that opens a socket under it raises."""
    with no_network(), socket.socket() as probe, contextlib.suppress(OSError):
        try:
            probe.connect(("127.0.0.1", 9))
        except AssertionError as e:
            assert "connect to ('127.0.0.1', 9)" in str(e)
            return
    raise AssertionError("no_network let a connection through")


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Any socket connection while this holds raises AssertionError (escaping the engine's StateError
    handling, so the property fails): a schema must never make the server fetch anything."""

    def refuse(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"a schema made the server connect to {address}")

    original = socket.socket.connect
    socket.socket.connect = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect = original  # type: ignore[method-assign]


async def _create_and_patch(schema: dict[str, Any], state: dict[str, Any], patches: list[dict[str, Any]]) -> None:
    engine = StateEngine(MemoryRevisionLog())
    await engine.start()
    try:
        try:
            await engine.create_execution("x", json.dumps(schema), json.dumps(state))
        except StateError:
            return  # refused with a status: what matters is that nothing else escaped
        for patch in patches:  # on the base 0 as well as at head: merges run through the schema's policies
            for base in (0, await engine.head_revision("x")):
                with contextlib.suppress(StateError):
                    await engine.submit_patch("x", "w", base, json.dumps(patch))
    finally:
        await engine.close()
