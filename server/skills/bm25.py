"""An Okapi BM25 index that grows and shrinks one document at a time (no rebuild on add or remove).

Postings are kept in dictionaries for cheap updates and mirrored, per term and on first use after a change,
as numpy arrays, so a search scores every posting of its terms in vectorized steps: the cost of a query at
100,000 skills is a few array operations per term, not a Python loop per posting. Results do not depend on
the order documents were added in: scores are summed over the query's terms in sorted order, and ties are
broken by key.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

Key = TypeVar("Key", bound=Hashable)

_GROWTH = 1.5


class BM25Index(Generic[Key]):
    """Documents are term lists under a key; `search` ranks keys by BM25 (k1 = 1.2, b = 0.75)."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._postings: dict[str, dict[int, int]] = {}
        """term -> {document slot: term frequency}"""
        self._arrays: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        """term -> (slots, frequencies) mirroring _postings; dropped when the term's postings change."""
        self._slot_of: dict[Key, int] = {}
        self._keys: list[Key | None] = []
        self._lengths: npt.NDArray[np.float64] = np.zeros(64)
        self._free: list[int] = []
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, key: object) -> bool:
        return key in self._slot_of

    def add(self, key: Key, document: Iterable[str]) -> None:
        if key in self._slot_of:
            self.remove(key)
        slot = self._free.pop() if self._free else self._new_slot()
        self._slot_of[key] = slot
        self._keys[slot] = key
        counts = Counter(document)
        for term, count in counts.items():
            self._postings.setdefault(term, {})[slot] = count
            self._arrays.pop(term, None)
        length = sum(counts.values())
        self._lengths[slot] = length
        self._total_length += length

    def remove(self, key: Key, document: Iterable[str] | None = None) -> None:
        """Forget a document; pass its terms to skip a scan of every posting list."""
        slot = self._slot_of.pop(key, None)
        if slot is None:
            return
        self._total_length -= int(self._lengths[slot])
        self._lengths[slot] = 0
        self._keys[slot] = None
        self._free.append(slot)
        for term in set(document) if document is not None else list(self._postings):
            postings = self._postings.get(term)
            if postings is not None and postings.pop(slot, None) is not None:
                self._arrays.pop(term, None)
                if not postings:
                    del self._postings[term]

    def holds(self, term: str, where: Callable[[Key], bool] | None = None) -> bool:
        """Whether some document (satisfying `where`) holds the term."""
        slots = self._postings.get(term, {})
        if where is None:
            return bool(slots)
        return any(where(self._key(slot)) for slot in slots)

    def search(self, query: Iterable[str], limit: int) -> list[tuple[Key, float]]:
        """The `limit` best keys with their scores, best first; ties in key order (deterministic)."""
        count = len(self._slot_of)
        if not count or limit <= 0:
            return []
        average = self._total_length / count
        scores = np.zeros(len(self._keys))
        for term in sorted(set(query)):
            if term not in self._postings:
                continue
            slots, frequencies = self._array(term)
            idf = math.log(1 + (count - len(slots) + 0.5) / (len(slots) + 0.5))
            norms = self.k1 * (1 - self.b + self.b * self._lengths[slots] / average)
            scores[slots] += idf * frequencies * (self.k1 + 1) / (frequencies + norms)
        hits = np.flatnonzero(scores)
        if len(hits) > limit:  # keep every document scoring at least the limit-th best, ties included
            threshold = np.partition(scores[hits], len(hits) - limit)[len(hits) - limit]
            hits = hits[scores[hits] >= threshold]
        ranked = sorted(((self._key(int(slot)), float(scores[slot])) for slot in hits), key=lambda h: (-h[1], h[0]))
        return ranked[:limit]

    def _array(self, term: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        arrays = self._arrays.get(term)
        if arrays is None:
            postings = self._postings[term]
            arrays = self._arrays[term] = (
                np.fromiter(postings.keys(), dtype=np.int64, count=len(postings)),
                np.fromiter(postings.values(), dtype=np.float64, count=len(postings)),
            )
        return arrays

    def _key(self, slot: int) -> Key:
        key = self._keys[slot]
        assert key is not None, "a posting points at a removed document"
        return key

    def _new_slot(self) -> int:
        slot = len(self._keys)
        self._keys.append(None)
        if slot >= len(self._lengths):
            grown = np.zeros(int(len(self._lengths) * _GROWTH) + 1)
            grown[: len(self._lengths)] = self._lengths
            self._lengths = grown
        return slot
