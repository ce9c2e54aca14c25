"""Terms for lexical ranking: lowercase words, common English words dropped, plurals and -ing/-ed folded."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
_JOINER = re.compile(r"[-_]")

_STOPWORDS_TEXT = """
    a about above after again all also an and any are as at be because been before being below between both
    but by can could did do does doing done down during each either else for from further had has have having
    he her here hers him his how i if in into is it its itself just me more most my no nor not now of off on
    once only or other our ours out over own same she should so some such than that the their theirs them then
    there these they this those through to too under until up use used using very was we were what when where
    which while who whom why will with would you your yours"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())

NodeWords = Sequence[tuple[str, ...] | list[str]]
"""The terms of each node of a skill, in node order."""


def terms(text: str) -> list[str]:
    """The text's terms in order; `ship-orders` gives `ship-order`, `ship` and `order`."""
    return [term for word in _WORD.findall(text.lower()) for term in _word_terms(word)]


@lru_cache(maxsize=1 << 16)
def section_terms(text: str) -> tuple[str, ...]:
    """`terms` of a section's text, kept for the texts seen last: libraries repeat sections word for word (a
    third of the synthetic 1K library's sections are distinct, nine tenths of the real corpus's). A bulk
    build empties it when done (`library.forget_section_memos`)."""
    return tuple(terms(text))


@lru_cache(maxsize=1 << 17)
def _word_terms(word: str) -> tuple[str, ...]:
    parts = [word, *_JOINER.split(word)] if "-" in word or "_" in word else [word]
    return tuple(stem(part) for part in parts if part not in STOPWORDS and len(part) > 1)


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix fold, enough for ranking: `orders` -> `order`, `shipping` -> `ship`, `parsed` -> `pars`."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
        return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word
    if len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
        return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word
