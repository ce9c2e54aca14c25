"""Token counts of joined lines, counted by parts, against the tokenizer counting the whole text."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from skillstate.server.skills.tokens import count_joined, count_tokens

TRICKY = "/ \t\r\n\xa0\x1c\u2028\u3000.:-_#*`'\"()[]<>|\\é中1"
characters = st.one_of(st.sampled_from(TRICKY), st.characters(codec="utf-8"))
line = st.text(characters, max_size=12).map(lambda text: text + "\n") | st.text(characters, max_size=12)


@given(st.lists(line, max_size=8))
@example(["done:\n", "/etc/hosts\n", "next\n"])  # a punctuation run takes in newlines and slashes
@example(["a\n", " b\n", "c"])
def test_joined_lines_count_as_the_whole_text(lines: list[str]) -> None:
    known: dict[str, int] = {}
    assert count_joined(lines, known) == count_tokens("\n".join(lines))
    assert count_joined(lines, known) == count_tokens("\n".join(lines))  # counted again from what it kept


def test_parts_seen_before_are_not_counted_again() -> None:
    known: dict[str, int] = {}
    lines = [f"Step {n}: copy the file.\n" for n in range(50)]
    count_joined(lines, known)
    parts = len(known)
    assert count_joined([*lines, "One more line.\n"], known) == count_tokens("\n".join([*lines, "One more line.\n"]))
    assert len(known) == parts + 2  # the last line's part, and the one before it (no longer the last)
