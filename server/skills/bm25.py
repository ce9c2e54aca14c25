"""An Okapi BM25 index that grows and shrinks one document at a time (no rebuild on add or remove)."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)


class BM25Index(Generic[Key]):
    """Documents are term lists under a key; `search` ranks keys by BM25 (k1 = 1.2, b = 0.75)."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._postings: dict[str, dict[Key, int]] = {}
        self._lengths: dict[Key, int] = {}
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, key: object) -> bool:
        return key in self._lengths

    def add(self, key: Key, document: Iterable[str]) -> None:
        if key in self._lengths:
            self.remove(key)
        counts = Counter(document)
        for term, count in counts.items():
            self._postings.setdefault(term, {})[key] = count
        length = sum(counts.values())
        self._lengths[key] = length
        self._total_length += length

    def remove(self, key: Key, document: Iterable[str] | None = None) -> None:
        """Forget a document; pass its terms to skip a scan of every posting list."""
        length = self._lengths.pop(key, None)
        if length is None:
            return
        self._total_length -= length
        for term in set(document) if document is not None else list(self._postings):
            postings = self._postings.get(term)
            if postings is not None and postings.pop(key, None) is not None and not postings:
                del self._postings[term]

    def holds(self, term: str, where: Callable[[Key], bool] | None = None) -> bool:
        """Whether some document (satisfying `where`) holds the term."""
        postings = self._postings.get(term, {})
        return any(map(where, postings)) if where is not None else bool(postings)

    def search(self, query: Iterable[str], limit: int) -> list[tuple[Key, float]]:
        """The `limit` best keys with their scores, best first; ties in key order (deterministic)."""
        if not self._lengths:
            return []
        count = len(self._lengths)
        average = self._total_length / count
        scores: dict[Key, float] = {}
        for term in set(query):
            postings = self._postings.get(term)
            if not postings:
                continue
            idf = math.log(1 + (count - len(postings) + 0.5) / (len(postings) + 0.5))
            for key, frequency in postings.items():
                norm = self.k1 * (1 - self.b + self.b * self._lengths[key] / average)
                scores[key] = scores.get(key, 0.0) + idf * frequency * (self.k1 + 1) / (frequency + norm)
        return heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))
