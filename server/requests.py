"""Checks of request fields that are not JSON: ids, labels, addresses and page tokens."""

from __future__ import annotations

import base64
import binascii
import re

import orjson

from .errors import InvalidArgumentError
from .limits import Limits

_EXECUTION_ID = re.compile(r"[A-Za-z0-9._:-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_execution_id(value: str, limits: Limits) -> str:
    if not 1 <= len(value) <= limits.max_id_length or not _EXECUTION_ID.fullmatch(value):
        raise InvalidArgumentError(
            f"execution_id: must be 1-{limits.max_id_length} characters of A-Z a-z 0-9 . _ : -, got {value!r}"
        )
    return value


def check_label(value: str, field: str, limits: Limits, *, required: bool = True) -> str:
    """An agent id, skill name, source or key: printable, bounded, and present when required."""
    if required and not value:
        raise InvalidArgumentError(f"{field}: must not be empty")
    if len(value) > limits.max_id_length:
        raise InvalidArgumentError(f"{field}: {len(value)} characters exceeds the limit of {limits.max_id_length}")
    if _CONTROL.search(value):
        raise InvalidArgumentError(f"{field}: must not contain control characters")
    return value


def check_address(value: str, limits: Limits) -> str:
    """An observation address: an agent id, `skill:NAME`, or `*`."""
    check_label(value, "to", limits)
    if value.startswith("skill:") and len(value) == len("skill:"):
        raise InvalidArgumentError("to: `skill:` must be followed by a skill name")
    return value


def encode_page_token(execution_id: str, after: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([execution_id, after])).decode()


def decode_page_token(token: str, execution_id: str) -> int:
    """The revision a page token continues after; InvalidArgumentError if it is not one of ours."""
    try:
        owner, after = orjson.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, orjson.JSONDecodeError, ValueError, TypeError) as e:
        raise InvalidArgumentError("page_token: not a token returned by GetHistory") from e
    if owner != execution_id or not isinstance(after, int) or after < 0:
        raise InvalidArgumentError("page_token: not a token returned by GetHistory for this execution")
    return after
