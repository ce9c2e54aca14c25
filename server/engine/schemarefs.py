"""References inside an execution's schema (`$ref`, `$dynamicRef`), checked once when the schema is accepted.

A schema never makes the server reach the network: only references within the schema itself (`#...`) are
allowed, and the registry validation resolves them through refuses to retrieve anything. Every reference
must resolve to a schema, and no chain of in-place references (`$ref`, `allOf`, `not`, `if`, ...) may lead
back to where it started: validating would never end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NoReturn

from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012

from ..errors import InvalidArgumentError

REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")
DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are instances, not schemas: a `$ref` key inside them is data."""
IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
IN_PLACE_SCHEMAS = ("not", "if", "then", "else")
"""Applicators that validate the same instance again (a cycle through them never ends), as opposed to
`properties`, `items` and the like, which descend into the instance."""


def _never_retrieve(uri: str) -> NoReturn:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


def checked_registry(schema: dict[str, Any]) -> Registry[Any]:
    """A registry holding only `schema`, after checking every reference in it; InvalidArgumentError names
    the first bad one by its JSON Pointer."""
    root = DRAFT202012.create_resource(schema)
    registry: Registry[Any] = Registry(retrieve=_never_retrieve).with_resource(root.id() or "", root)  # type: ignore[call-arg]
    nodes = list(_schema_nodes(schema, "", registry.resolver(root.id() or ""), root=True))
    targets: dict[int, list[Any]] = {}
    for location, node, resolver in nodes:
        for keyword in REFERENCE_KEYWORDS:
            if keyword in node:
                target = _resolve(node[keyword], f"{location}/{keyword}", resolver)
                targets.setdefault(id(node), []).append(target)
    _refuse_cycles([(location, node) for location, node, _ in nodes], targets)
    return registry


def _schema_nodes(
    node: Any, location: str, resolver: Any, root: bool = False
) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Every schema object with its JSON Pointer and the resolver of its base URI (a nested `$id` moves it)."""
    if isinstance(node, dict):
        if not root and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        yield location, node, resolver
        for key, child in node.items():
            if key not in DATA_KEYWORDS:
                yield from _schema_nodes(child, f"{location}/{key}", resolver)
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _schema_nodes(child, f"{location}/{index}", resolver)


def _resolve(reference: Any, location: str, resolver: Any) -> Any:
    if not isinstance(reference, str):
        raise InvalidArgumentError(f"schema_json: {location}: must be a string, got {reference!r}")
    if not reference.startswith("#"):
        raise InvalidArgumentError(
            f"schema_json: {location}: {reference!r} is not a reference within the schema (#...): "
            "a schema may not make the server fetch anything"
        )
    try:
        target = resolver.lookup(reference).contents
    except Unresolvable as e:
        raise InvalidArgumentError(f"schema_json: {location}: {reference!r} does not resolve within the schema") from e
    if not isinstance(target, dict | bool):
        raise InvalidArgumentError(
            f"schema_json: {location}: {reference!r} points at a {type(target).__name__}, not a schema"
        )
    return target


def _refuse_cycles(nodes: list[tuple[str, dict[str, Any]]], targets: dict[int, list[Any]]) -> None:
    """Depth-first over in-place edges (references and applicators that re-validate the same instance)."""

    def in_place(node: Any) -> Iterator[Any]:
        if not isinstance(node, dict):
            return
        yield from targets.get(id(node), ())
        for keyword in IN_PLACE_LISTS:
            if isinstance(node.get(keyword), list):
                yield from node[keyword]
        for keyword in IN_PLACE_SCHEMAS:
            if keyword in node:
                yield node[keyword]
        if isinstance(node.get("dependentSchemas"), dict):
            yield from node["dependentSchemas"].values()

    done: set[int] = set()
    for location, start in nodes:
        if id(start) in done:
            continue
        path: set[int] = set()
        stack: list[tuple[Any, Iterator[Any]]] = [(start, in_place(start))]
        path.add(id(start))
        while stack:
            node, edges = stack[-1]
            following = next(edges, None)
            if following is None:
                stack.pop()
                path.discard(id(node))
                done.add(id(node))
            elif id(following) in path:
                raise InvalidArgumentError(
                    f"schema_json: {location or '/'}: references lead back to themselves without descending into "
                    "the state (a $ref cycle): validating would never end"
                )
            elif isinstance(following, dict) and id(following) not in done:
                path.add(id(following))
                stack.append((following, in_place(following)))
