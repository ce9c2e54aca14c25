"""Page tokens round-trip what they continue after, and refuse what another caller's pages returned."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.errors import InvalidArgumentError
from skillstate.server.rpc.page_tokens import SKILL_PAGES, decode_page_token, encode_page_token


@given(owner=st.text(min_size=1, max_size=40), after=st.integers(0, 2**62))
def test_a_history_token_gives_back_where_its_page_ended(owner: str, after: int) -> None:
    assert decode_page_token(encode_page_token(owner, after), owner, "GetHistory", int) == after


@given(after=st.text(max_size=60))
def test_a_skills_token_gives_back_the_last_name_served(after: str) -> None:
    assert decode_page_token(encode_page_token(SKILL_PAGES, after), SKILL_PAGES, "ListSkills", str) == after


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (encode_page_token("other-execution", 5), "not a token GetHistory returned for these pages"),
        (encode_page_token("x", "5"), "not a token GetHistory returned for these pages"),
        (encode_page_token("x", -1), "not a token GetHistory returned for these pages"),
        ("not base64!", "not a token returned by GetHistory"),
        (base64.urlsafe_b64encode(b"[1, 2, 3]").decode(), "not a token returned by GetHistory"),
    ],
)
def test_a_token_from_elsewhere_is_refused_by_name(token: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        decode_page_token(token, "x", "GetHistory", int)
