"""Queries for the skill registry's benchmark, each knowing the skill (and section) it was made from.

Three kinds, so that a ranker good at one cannot hide behind it:

- `description`: what a user would type to find a skill by its purpose (synthetic: the task in other
  words; corpus: the first sentence of the description, the skill's own words).
- `section`: a later section of SKILL.md (not its first part), as its heading and the first words of its
  prose: someone who needs one procedure or fact of a skill, not the skill's summary.
- `reference`: the same, made from a section of one of the skill's `references/*.md` files: the detail
  Agent Skills keep out of SKILL.md by design.

Sections are cut with the registry's own splitter (the unit a context is made of) and named by file and
first line, so a context can be checked for holding the section its query came from.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from skillstate.server.skills.markdown import fenced
from skillstate.server.skills.package import SkillPackage
from skillstate.server.skills.sections import Part, split_body

PROSE_WORDS = 24
"""Words of a section's prose a query takes after its heading."""
MIN_PROSE_WORDS = 8
"""Sections with less prose than this (a bare list of links, a code block) make no query."""
_STEP_SUFFIX = re.compile(r", step \d+$")
_MARKUP = re.compile(r"!?\[([^\]]*)\]\([^)]*\)|[`*_>#|]|<[^>]+>")
_LIST_MARKER = re.compile(r"^\s*(?:[-+*]|\d{1,3}[.)])\s+")


@dataclass(frozen=True)
class BenchQuery:
    text: str
    target: str
    """The skill it was made from."""
    kind: str
    section: tuple[str, int] | None = None
    """(file, first line) of the section it was made from; None for a description query."""
    makers: tuple[tuple[str, str, int], ...] = ()
    """(skill, file, first line) of every section in the library that makes this very query, its own
    included: a query made from text that several skills share word for word cannot tell them apart, so any
    of them answers it. Empty for a description query (its target alone answers it)."""
    odds: tuple[float, ...] = ()
    """For each of `makers`, the probability that the query was made from it, given the query's text: the
    sampler picks a skill uniformly and then one of its sections, so a maker's odds are one over its skill's
    sections, normalized (each query's draw is uniform over skills, without replacement or not). A method sees
    only the text, so its strict Ret@1 on this query is, in expectation over which maker the sampler picked,
    the odds of the skill it ranks first (`skill_odds`)."""

    @property
    def answers(self) -> frozenset[str]:
        """The skills that answer the query: those whose sections make it, or its target."""
        return frozenset(skill for skill, _, _ in self.makers) or frozenset((self.target,))

    @property
    def skill_odds(self) -> dict[str, float]:
        """Per answering skill, the probability that it is the target, given the query's text."""
        if not self.makers:
            return {self.target: 1.0}
        odds: dict[str, float] = {}
        for (skill, _, _), chance in zip(self.makers, self.odds, strict=True):
            odds[skill] = odds.get(skill, 0.0) + chance
        return odds


@dataclass(frozen=True)
class SourceSection:
    file: str
    first_line: int
    query: str


def description_query(package: SkillPackage) -> BenchQuery:
    first = re.split(r"(?<=[.!?])\s", package.description, maxsplit=1)[0]
    return BenchQuery(first, package.name, "description")


def section_queries(packages: list[SkillPackage], kind: str, count: int, seed: int) -> list[BenchQuery]:
    """Up to `count` queries of a kind (`section` or `reference`), one per sampled skill, each from one of
    its sections picked at random."""
    rng = random.Random(f"{seed}:{kind}")
    candidates = [(p, found) for p in packages if (found := sections_of(p, kind))]
    makers: dict[str, list[tuple[str, str, int]]] = {}
    weights: dict[str, list[float]] = {}
    """query -> for each of its makers, the chance that the sampler makes it from there (up to a factor)"""
    for package, found in candidates:
        for source in found:
            makers.setdefault(source.query, []).append((package.name, source.file, source.first_line))
            weights.setdefault(source.query, []).append(1 / len(found))
    chosen = rng.sample(candidates, k=min(count, len(candidates)))
    queries = []
    for package, found in chosen:
        source = rng.choice(found)
        made = (source.file, source.first_line)
        total = sum(weights[source.query])
        odds = tuple(weight / total for weight in weights[source.query])
        queries.append(BenchQuery(source.query, package.name, kind, made, tuple(makers[source.query]), odds))
    return queries


def sections_of(package: SkillPackage, kind: str) -> list[SourceSection]:
    """The sections of a package a query of `kind` may be made from."""
    if kind == "section":
        parts = split_body(package.body)[1:]
        return _usable(package.skill_file, parts, package.body_line - 1)
    if kind == "reference":
        prefix = f"{package.folder}/references/"
        found = []
        for path in sorted(p for p in package.files if p.startswith(prefix) and p.endswith(".md")):
            try:
                text = package.files[path].decode("utf-8")
            except UnicodeDecodeError:
                continue
            found += _usable(path, split_body(text), 0)
        return found
    raise ValueError(f"unknown query kind {kind!r}")


def _usable(file: str, parts: list[Part], line_offset: int) -> list[SourceSection]:
    found = []
    for part in parts:
        prose = _prose(part.text)
        title = _STEP_SUFFIX.sub("", part.title) if part.level else ""
        if len(prose) >= MIN_PROSE_WORDS and title:
            found.append(SourceSection(file, part.first_line + line_offset, " ".join([title, *prose[:PROSE_WORDS]])))
    return found


def _prose(text: str) -> list[str]:
    """The words of a section's running text: no heading line, code, tables or markup."""
    lines = text.splitlines()
    code = fenced(lines)
    kept = []
    for line, in_code in zip(lines, code, strict=True):
        stripped = line.strip()
        if in_code or not stripped or stripped.startswith(("#", "|", "<")):
            continue
        kept.append(_MARKUP.sub(lambda m: m.group(1) or " ", _LIST_MARKER.sub("", stripped)))
    return " ".join(kept).split()
