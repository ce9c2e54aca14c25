"""Contract extraction and section splitting do work in proportion to their text, whatever the text holds.

A package is read in the skill registry's threads: one quadratic step over a 1 MiB file held one for minutes.
The scans are counted rather than timed; where the work that grew was not a regex scan, the input is large
enough that the quadratic code took over a minute (the timeout) and the linear one takes a fraction of a second.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.skills import contracts, sections
from skillstate.server.skills.contracts import ARTIFACT_NOUNS, EXTENSION_KINDS, Signature, extract_contract
from skillstate.server.skills.roles import Role
from skillstate.server.skills.sections import split_body

_TEXT_ARGUMENT = {"sub": 1, "subn": 1}
"""Where a pattern's method takes the text it scans (the first argument, for the others)."""


class _CountedPattern:
    def __init__(self, pattern: re.Pattern[str], scanned: list[int]) -> None:
        self._pattern, self._scanned = pattern, scanned

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._pattern, name)
        if not callable(method):
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._scanned[0] += len(args[_TEXT_ARGUMENT.get(name, 0)])
            return method(*args, **kwargs)

        return counted


class _CountedRe:
    """The `re` module, counting the text its search functions are given (a pattern is their first argument)."""

    def __init__(self, scanned: list[int]) -> None:
        self._scanned = scanned

    def __getattr__(self, name: str) -> Any:
        function = getattr(re, name)
        if name not in ("search", "match", "fullmatch", "finditer", "findall", "split", "sub", "subn"):
            return function

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._scanned[0] += len(args[2 if name in _TEXT_ARGUMENT else 1])
            return function(*args, **kwargs)

        return counted


@contextmanager
def _scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], int]]:
    """The characters every regex of contracts.py is given from here on (a match call counts its whole text)."""
    scanned = [0]
    for name, value in list(vars(contracts).items()):
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(contracts, name, _CountedPattern(value, scanned))
    monkeypatch.setattr(contracts, "re", _CountedRe(scanned))
    yield lambda: scanned[0]


def test_a_long_line_of_many_mentions_is_scanned_a_fixed_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operation's artifact is read or written by the last verb before it on its line: that verb was found
    by searching the line up to each mention again (3,000 mentions on a 62 KB line: 8 s, 190 M characters)."""
    text = "then write report.csv and read the chart, " * 1500
    with _scans(monkeypatch) as scanned:
        contract = extract_contract(text, Role.OPERATION)
    assert scanned() <= 40 * len(text)  # 7 times here, a regex once each; the rescans read it 3,000 times
    assert contract.outputs == (Signature("report.csv", "table"),)
    assert contract.inputs == (Signature("chart", "image"),)


def test_a_package_is_searched_for_its_allowed_tools_once_per_section(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search per allowed tool in each section cost tools times text: 100,000 names (a 1 MiB SKILL.md holds
    them) and 2,500 sections were over an hour."""
    allowed = tuple(f"tool-{i}(x:*)" for i in range(2000))
    texts = [f"Run tool-{i} on `data.csv`, then tool-{i}x and xtool-{i + 1}. " * 20 for i in range(50)]
    with _scans(monkeypatch) as scanned:
        found = [extract_contract(text, Role.OPERATION, (), allowed) for text in texts]
    assert scanned() <= 40 * sum(map(len, texts)) + 2 * sum(map(len, allowed))  # 8 times; a search per name: 2,000
    assert [contract.resources for contract in found] == [(f"tool:tool-{i}",) for i in range(50)]


@pytest.mark.timeout(10)
def test_file_names_and_nouns_of_a_1_mib_section_are_told_apart_in_a_fraction_of_a_second() -> None:
    """Each noun was compared with every file name before it was kept (a noun inside a file name is not an
    artifact): 35,000 of each in one section took 84 s."""
    text = "see report.csv and the chart, " * 35_000
    contract = extract_contract(text, Role.INPUT)
    assert contract.inputs == (Signature("chart", "image"), Signature("report.csv", "table"))


@pytest.mark.timeout(10)
def test_a_heading_with_a_long_run_of_blanks_is_split_in_a_fraction_of_a_second() -> None:
    """The heading regex tried every blank of a run as the end of the title, and the rest of the run each time:
    a 200,000-character heading line took 4 minutes (a 1 MiB one, hours), before any limit was checked."""
    body = "# a" + " " * 200_000 + "b ##  \ntext\n"
    (part,) = split_body(body)
    assert (part.title, part.level) == ("a" + " " * 200_000 + "b", 1)


_NAME_RUNS = st.sampled_from(["ab", "x", "_", "-", ":*)", ".", " ", "é1", "\n", "("])
_NAMES = st.lists(st.lists(_NAME_RUNS, min_size=1, max_size=4).map("".join), max_size=8).map(tuple)
_TEXTS = st.lists(st.sampled_from(["ab", "x", "_", "-", ":*)", ".", " ", "é1", "\n", "abx", "(", "--"]), max_size=30)


@given(_NAMES, _TEXTS.map("".join))
def test_allowed_tools_are_found_as_a_search_for_each_name_finds_them(allowed: tuple[str, ...], text: str) -> None:
    contract = extract_contract(text, Role.RESOURCE, (), allowed)
    searched = {name for name in contracts._tool_names(allowed) if re.search(rf"\b{re.escape(name)}\b", text)}
    assert {r.removeprefix("tool:") for r in contract.resources} == searched | contracts._commands(text)


def _artifacts_by_rescanning(prose: str, role: Role) -> tuple[set[Signature], set[Signature]]:
    """The rule as it was first written, quadratic: the reference for short texts."""
    files = [(m.span(), Signature(m.group(1), EXTENSION_KINDS[m.group(2)])) for m in contracts._FILE.finditer(prose)]
    mentions = [(start, signature) for (start, _), signature in files]
    for match in contracts._NOUN.finditer(prose):
        if not any(start <= match.start() < end for (start, end), _ in files):
            mentions.append((match.start(), Signature(match.group(1), ARTIFACT_NOUNS[match.group(1)])))
    reads: set[Signature] = set()
    writes: set[Signature] = set()
    for start, signature in sorted(mentions):
        if role in (Role.INPUT, Role.PRECONDITION, Role.TRIGGER, Role.VERIFIER):
            reads.add(signature)
        elif role is Role.OUTPUT:
            writes.add(signature)
        elif role is Role.OPERATION:
            before = prose[max(0, prose.rfind("\n", 0, start)) : start]
            write, read = (
                max((m.end() for m in p.finditer(before)), default=-1) for p in (contracts._WRITE, contracts._READ)
            )
            if write > read:
                writes.add(signature)
            elif read > write:
                reads.add(signature)
    return reads, writes


_PROSE = st.lists(
    st.sampled_from(["write ", "read ", "look up", "up.csv", "report", "s ", "a.csv", "manifest.csv", "\n", ", ", "-"]),
    max_size=30,
).map("".join)


@given(_PROSE, st.sampled_from(Role))
def test_artifacts_are_what_rescanning_the_line_before_each_mention_finds(prose: str, role: Role) -> None:
    assert contracts._artifacts(prose, role) == _artifacts_by_rescanning(prose, role)


_ONE_REGEX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
"""The heading rule as one regex, quadratic: the reference for short lines."""


@given(
    st.lists(st.sampled_from(["#", "##", "#######", " ", "\t", "a", "b c", "#a", "\r", "\x0b", "é", "\n"]), max_size=12)
)
def test_headings_are_what_the_one_regex_rule_reads(pieces: list[str]) -> None:
    for line in "".join(pieces).splitlines(keepends=True):
        match = _ONE_REGEX_HEADING.match(line.rstrip("\n"))
        assert sections._heading(line) == ((len(match.group(1)), match.group(2).strip()) if match else None)
