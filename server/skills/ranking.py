"""Ranking skills for a query by three kinds of lexical evidence, combined by score (not by rank).

- **whole skill**: BM25 over everything the skill holds: name, description, SKILL.md's body and its
  Markdown references (what a whole-skill search reads);
- **summary**: BM25 over the name (counted twice) and the description, plus a phrase bonus: the share of
  the query's consecutive term pairs that occur consecutively there (a query naming the skill's purpose;
  counted over at least four pairs, so a short query's one shared pair weighs little);
- **best section**: the skill's best section among the query's top sections, by BM25 over title (counted
  twice) and text, plus the same phrase bonus over that section (a query naming one procedure or fact).

Each BM25 score is divided by the query's information in its index (`BM25Index.information`: the sum of
its terms' idf, what a full match scores), so that each evidence says how much of the query a skill
matches, on one scale for the three indexes: a weak best match stays weak (dividing by the best score,
as this did before, made a description sharing two of a long query's words count as much as a section
holding all of them). A skill's score is `whole + summary + SECTION_WEIGHT * section`. A skill with one
strongly matching section wins over one whose description merely shares words with the query, and a
query that repeats a description word for word finds that skill even when other skills' sections share
its words. `bench/skill_registry.py` measures the combination against BM25 over whole skills, per query
kind, on the real corpus and synthetic libraries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeVar

from .text import terms

SECTION_WEIGHT = 1.5
PHRASE_WEIGHT = 0.5
PHRASE_FLOOR = 4
"""A phrase share is counted over at least this many pairs: one shared pair of a three-word query is
little evidence that the text says what the query says."""
SECTION_CANDIDATES = 60
"""Top sections (by BM25) whose skills get section evidence."""
SKILL_CANDIDATES = 100
"""Top skills, by each skill-level index, that get that evidence."""

Key = TypeVar("Key")


@dataclass(frozen=True)
class Ranking:
    skills: tuple[str, ...]
    """Best first."""
    sections: tuple[tuple[str, int], ...]
    """The top sections, best first by BM25 with the phrase bonus."""


def pairs(words: Sequence[str]) -> frozenset[tuple[str, str]]:
    return frozenset(pairwise(words))


def phrase_share(query_pairs: frozenset[tuple[str, str]], text: str) -> float:
    """The share of the query's consecutive term pairs (at least PHRASE_FLOOR) that occur consecutively in
    the text."""
    if not query_pairs:
        return 0.0
    return len(query_pairs & pairs(terms(text))) / max(PHRASE_FLOOR, len(query_pairs))


def scaled(hits: Iterable[tuple[Key, float]], information: float) -> dict[Key, float]:
    """BM25 hits divided by the query's information in their index (a full match scores about 1)."""
    return {key: score / information for key, score in hits} if information > 0 else {}


def with_phrase_bonus(
    scores: dict[Key, float], query_pairs: frozenset[tuple[str, str]], text_of: Callable[[Key], str]
) -> dict[Key, float]:
    """Scaled scores, each plus PHRASE_WEIGHT times its text's phrase share."""
    return {key: score + PHRASE_WEIGHT * phrase_share(query_pairs, text_of(key)) for key, score in scores.items()}


def fuse(whole: dict[str, float], summary: dict[str, float], section: dict[str, float]) -> list[str]:
    """Skills by `whole + summary + SECTION_WEIGHT * section` (each scaled), best first, ties by name."""
    score = {
        name: whole.get(name, 0.0) + summary.get(name, 0.0) + SECTION_WEIGHT * section.get(name, 0.0)
        for name in whole.keys() | summary.keys() | section.keys()
    }
    return sorted(score, key=lambda name: (-score[name], name))
