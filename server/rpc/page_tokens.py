"""Page tokens: opaque to clients, they name whose pages they continue and the last item served."""

from __future__ import annotations

import base64
import binascii
from typing import TypeVar

import orjson

from ..errors import InvalidArgumentError

Cursor = TypeVar("Cursor", int, str)
SKILL_PAGES = "skills"
"""The owner ListSkills page tokens name (GetHistory's name their execution)."""


def encode_page_token(owner: str, after: int | str) -> str:
    """An opaque page token: whose pages it continues (an execution id, or `skills`) and the last item served."""
    return base64.urlsafe_b64encode(orjson.dumps([owner, after])).decode()


def decode_page_token(token: str, owner: str, rpc: str, cursor: type[Cursor]) -> Cursor:
    """What a page token continues after; InvalidArgumentError if `rpc` did not return it for `owner`."""
    try:
        token_owner, after = orjson.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, orjson.JSONDecodeError, ValueError, TypeError) as e:
        raise InvalidArgumentError(f"page_token: not a token returned by {rpc}") from e
    if token_owner != owner or type(after) is not cursor or (isinstance(after, int) and after < 0):
        raise InvalidArgumentError(f"page_token: not a token {rpc} returned for these pages")
    return after
