"""Splitting a body into parts: the parts are the body, headings and steps start parts, code never splits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.skills.sections import split_body

LINES = st.sampled_from(
    [
        "# Title\n", "## Setup\n", "### Deep ###\n", "text\n", "\n", "1. first\n", "2) second\n", "   continued\n",
        "```bash\n", "```\n", "~~~\n", "# comment in code\n", "- bullet\n", "####### not a heading\n", "#nospace\n",
    ]
)  # fmt: skip


@given(st.lists(LINES, max_size=40).map("".join))
def test_parts_partition_the_body(body: str) -> None:
    parts = split_body(body)
    assert "".join(p.text for p in parts) == body
    line = 1
    for part in parts:
        assert part.first_line == line
        line = part.last_line + 1
    assert parts or not body


def test_headings_and_numbered_steps_start_parts_and_fenced_code_does_not() -> None:
    body = (
        "Intro text.\n"
        "# Deploy\n"
        "Read this first.\n"
        "## Steps\n"
        "Before:\n"
        "1. Build it\n"
        "   ```bash\n"
        "   # not a heading\n"
        "   2. not a step\n"
        "   ```\n"
        "2. Verify it\n"
        "## Notes\n"
    )
    parts = split_body(body)
    assert [(p.title, p.level, p.is_step, p.first_line, p.last_line) for p in parts] == [
        ("(preamble)", 0, False, 1, 1),
        ("Deploy", 1, False, 2, 3),
        ("Steps", 2, False, 4, 5),
        ("Steps, step 1", 3, True, 6, 10),
        ("Steps, step 2", 3, True, 11, 11),
        ("Notes", 2, False, 12, 12),
    ]
    assert parts[3].heading_path == ("Deploy", "Steps", "Steps, step 1")
    assert parts[5].heading_path == ("Deploy", "Notes")


def test_blank_lines_before_the_first_heading_belong_to_it() -> None:
    parts = split_body("\n\n# Title\ntext\n")
    assert [(p.title, p.first_line) for p in parts] == [("Title", 1)]


def test_a_single_numbered_item_is_not_split() -> None:
    assert len(split_body("# Only\n1. one thing\n")) == 1
