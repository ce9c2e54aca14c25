"""JSON Pointers (RFC 6901) into a state, so that a model can read the part it needs instead of all of it."""

from __future__ import annotations

from typing import Any

_JSON_TYPES = {str: "a string", int: "a number", float: "a number", bool: "a boolean", type(None): "null"}


class PointerError(ValueError):
    """The pointer is malformed, or the state has nothing where it points."""


def resolve(document: Any, pointer: str) -> Any:
    """The value `pointer` names in `document`; "" is the whole document."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise PointerError(f"{pointer!r} is not a JSON Pointer: it must be empty or start with '/'")
    value, walked = document, ""
    for raw in pointer[1:].split("/"):
        if "~" in raw.replace("~0", "").replace("~1", ""):
            raise PointerError(f"{pointer!r}: '~' must be followed by 0 or 1 (RFC 6901)")
        token = raw.replace("~1", "/").replace("~0", "~")
        where = repr(walked) if walked else "the root"
        if isinstance(value, dict):
            if token not in value:
                raise PointerError(f"{pointer!r}: the object at {where} has no member {token!r}")
            value = value[token]
        elif isinstance(value, list):
            canonical = token.isdigit() and (token == "0" or not token.startswith("0"))
            if not canonical or int(token) >= len(value):
                raise PointerError(f"{pointer!r}: {token!r} is not an index of the {len(value)}-item array at {where}")
            value = value[int(token)]
        else:
            kind = _JSON_TYPES.get(type(value), "a value")
            raise PointerError(f"{pointer!r}: {where} is {kind}, not an object or array")
        walked += "/" + raw
    return value
