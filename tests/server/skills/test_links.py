"""Inline links are found as the one-regex rule finds them, in time near linear in the line, whatever it holds.

The rule's backtracking retried each `[` of a line against the rest of it: a 256K-character line of `[`
took 22 s, of unclosed `[x](` 7 minutes, once in `load_package` and again in `build_graph`.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.skills.graph import build_graph
from skillstate.server.skills.links import Link, _inline_targets, relative_links
from skillstate.server.skills.package import PackageLimits, load_package

_ONE_REGEX_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
"""The inline-link rule as one regex, quadratic: the reference for short lines."""


def _one_regex_targets(line: str) -> list[str]:
    return [match["target"] for match in _ONE_REGEX_INLINE.finditer(line)]


_PIECES = st.sampled_from(
    ["[", "]", "(", ")", "](", "!", "<", ">", '"', "'", " ", "\t", "\xa0", "#", "?", "a", "b", "/", ".", "x.md"]
)


@given(st.lists(_PIECES, max_size=40).map("".join))
def test_inline_targets_are_what_the_one_regex_rule_finds(line: str) -> None:
    assert list(_inline_targets(line)) == _one_regex_targets(line)


@pytest.mark.parametrize(
    ("line", "targets"),
    [
        ("[a [b] c](x.md)", ["x.md"]),
        ("[a [b [c] d](x.md)", ["x.md"]),  # a group ends at its first `]`, whatever `[` it holds
        ("[[a]](x.md) [a]]](y.md)", ["x.md"]),
        ("![alt](img.png \"title\") and [t](t.md 'quoted')", ["img.png", "t.md"]),
        ("[a](<x.md>) [b](<y.md> (title))", ["x.md", "y.md"]),
        ("[a](<>) [b](<<x>)", ["<", "<x"]),
        ("[a](b c) then [d](e.md)", ["e.md"]),  # a title opens with a quote or parenthesis
        ("[a [b](x.md) c](y.md)", ["y.md"]),  # `[b]` is a group of the outer label, which ends at the bare `]`
        ("[a](x.md [b](y.md)", ["y.md"]),
        ("[a]  (x.md) [b](  x.md  )", []),  # blanks may open a destination, not close one
    ],
)
def test_inline_targets_of_hand_picked_lines(line: str, targets: list[str]) -> None:
    assert list(_inline_targets(line)) == targets == _one_regex_targets(line)


_N = 1 << 18
_ADVERSARIAL = {
    "open brackets": ("[" * _N + "](x.md)", ["x.md"]),
    "open brackets between words": ("[a" * (_N // 2) + "](x.md)", ["x.md"]),
    "unclosed destinations": ("[x](" * (_N // 4), []),
    "unclosed empty-label destinations": ("[](" * (_N // 3), []),
    "unclosed titles": ('[a](b "' * (_N // 7), []),
    "targets ending at one run of blanks": ("[a](x" * (_N // 5) + " " * _N, []),
    "labels ending at one `](` before blanks": ("[[a]" * (_N // 4) + "](" + " " * _N, []),
}
"""Lines of 256K characters (and 256K blanks) the one-regex rule took 14 s to 9 minutes over, and their targets."""


@pytest.mark.timeout(10)
@pytest.mark.parametrize("shape", _ADVERSARIAL)
def test_an_adversarial_line_is_scanned_in_a_fraction_of_a_second(shape: str) -> None:
    line, targets = _ADVERSARIAL[shape]
    assert list(relative_links(f"# Links\n\n{line}\n")) == [Link(target, 3) for target in targets]


@pytest.mark.timeout(10)
def test_a_package_of_adversarial_lines_is_loaded_and_built_in_seconds() -> None:
    body = "".join(f"{line}\n" for line, _ in _ADVERSARIAL.values())
    files = {"demo/SKILL.md": f"---\nname: demo\ndescription: d\n---\n{body}".encode(), "demo/x.md": b"x\n"}
    package = load_package(files, "demo", limits=PackageLimits(max_file_bytes=len(files["demo/SKILL.md"])))
    assert [(r.path, r.linked_from) for r in package.resources] == [("demo/x.md", (5, 6))]
    assert "file:demo/x.md" in build_graph(package).nodes[0].contract.resources
