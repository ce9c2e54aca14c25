"""Reading query parameters, headers and bodies: each bad one is a BadParameter that names it, and each is
bounded so that no request makes the console (or the server for it) do unbounded work."""

from __future__ import annotations

import re

from starlette.datastructures import QueryParams

from .errors import BadParameter

INT64 = (1 << 63) - 1
"""The largest revision or sequence the wire can carry; a larger number is refused here, not by protobuf."""
MAX_TEXT = 4096
"""The longest text parameter (a prefix, a page token, an agent id); the server's own limits are lower."""
_WHOLE = re.compile(r"-?[0-9]{1,19}")


def whole(query: QueryParams, name: str, default: int, *, low: int = 0, high: int = INT64) -> int:
    """A whole number in low..high, or `default` when the parameter is absent or empty."""
    found = optional_whole(query, name, low=low, high=high)
    return default if found is None else found


def optional_whole(query: QueryParams, name: str, *, low: int = 0, high: int = INT64) -> int | None:
    raw = query.get(name, "")
    return None if raw == "" else parse_whole(name, raw, low, high)


def parse_whole(name: str, raw: str, low: int = 0, high: int = INT64) -> int:
    if not _WHOLE.fullmatch(raw):
        raise BadParameter(name, f"expected a whole number, got {raw[:40]!r}")
    value = int(raw)
    if not low <= value <= high:
        raise BadParameter(name, f"must be in {low}..{high}, got {value}")
    return value


def text(query: QueryParams, name: str, default: str = "", *, longest: int = MAX_TEXT) -> str:
    raw = query.get(name, default)
    return checked_text(name, raw, longest)


def checked_text(name: str, value: object, longest: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise BadParameter(name, f"expected a string, got {type(value).__name__}")
    if len(value) > longest:
        raise BadParameter(name, f"{len(value)} characters, more than {longest}")
    return value


def names(query: QueryParams, name: str, *, most: int = 100) -> list[str] | None:
    """A comma-separated list (None when the parameter is absent: the caller's default applies)."""
    if name not in query:
        return None
    items = [item.strip() for item in text(query, name).split(",") if item.strip()]
    if len(items) > most:
        raise BadParameter(name, f"{len(items)} names, more than {most}")
    return items
