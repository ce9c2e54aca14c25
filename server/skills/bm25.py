"""An Okapi BM25 index that grows and shrinks one document at a time (no rebuild on add or remove), and
forks into versions that share what neither changes.

Each term's postings are a pair of numpy arrays (document slots, frequencies; one packed int for a term
one document holds), so a search scores every posting of its terms in vectorized steps: the cost of a query
at 100,000 skills is a few array operations per term, not a Python loop per posting. The arrays are never
written once made: adds and removes are staged (as machine words) and settled (new arrays for the terms they
touch, one concatenation each) before the next read, so a version that readers hold never changes under
them, and `fork` gives a writer its own version for a shallow copy of the tables (not of the arrays), made
when the fork first writes.
Results do not depend on the order documents were added in, nor on which slots they hold: scores are
summed over the query's terms in sorted order, and ties are broken by key.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import _count_elements  # type: ignore[attr-defined]
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from .bulk import settle_long_lived

Key = TypeVar("Key", bound=Hashable)
Slots = npt.NDArray[np.int32]
Frequencies = npt.NDArray[np.float32]
"""Postings take 8 bytes each (half of int64 and float64: a 100,000-skill library holds tens of millions):
slots stay below 2**31, and a frequency is a whole number below 2**24, which float32 holds exactly (a
document is at most a 4 MiB package)."""

_GROWTH = 1.5
_SCORE_DECIMALS = 10
"""Scores are compared (and returned) rounded to this many decimals."""
_NO_SLOTS: Slots = np.zeros(0, dtype=np.int32)
_NO_FREQUENCIES: Frequencies = np.zeros(0, dtype=np.float32)
_FREQUENCY_BITS = 24
_MAX_FREQUENCY = (1 << _FREQUENCY_BITS) - 1
Posting = tuple[Slots, Frequencies] | int
"""A term's postings: (slots, frequencies), or, for a term one document holds (most terms: names, numbers,
rare words), that document's slot and frequency packed in one int (`slot << 24 | frequency`), a tenth of
what two arrays cost."""


class BM25Index(Generic[Key]):
    """Documents are term lists under a key; `search` ranks keys by BM25 (k1 = 1.2, b = 0.75)."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._postings: dict[str, Posting] = {}
        """term -> its postings, settled; the arrays are read-only and may be shared with forks."""
        self._slot_of: dict[Key, int] = {}
        self._keys: list[Key | None] = []
        self._lengths: npt.NDArray[np.float64] = np.zeros(64)
        self._norms: npt.NDArray[np.float64] = np.zeros(0)
        """Each slot's length norm, k1 * (1 - b + b * length / average length), made when settled."""
        self._norms_count = 0
        """The documents held when the norms were made."""
        self._free: list[int] = []
        self._total_length = 0
        self._shared = False
        """Whether the tables above may be shared with a fork: copied before this index writes them."""
        self._added: dict[str, array[int]] = {}
        """Staged: term -> slot, frequency, slot, frequency, ... of the documents added since the last settle,
        as 32-bit words (a bulk build stages every posting of the library before it settles)."""
        self._dead: set[int] = set()
        """Slots whose documents were removed since the last settle; free again once it is done, so that no
        slot holds two documents in one staging."""
        self._touched: set[str] = set()
        """Terms of the documents removed since the last settle (their settled postings change too)."""

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, key: object) -> bool:
        return key in self._slot_of

    def fork(self) -> BM25Index[Key]:
        """An index with the same documents; changes to either never show in the other. Settles first."""
        self.settle()
        other: BM25Index[Key] = BM25Index.__new__(BM25Index)
        other.__dict__.update(self.__dict__)
        other._added, other._dead, other._touched = {}, set(), set()
        self._shared = other._shared = True
        return other

    def add(self, key: Key, document: Iterable[str]) -> None:
        self._own()
        if key in self._slot_of:
            self.remove(key)
        slot = self._free.pop() if self._free else self._new_slot()
        self._slot_of[key] = slot
        self._keys[slot] = key
        counts: dict[str, int] = {}
        _count_elements(counts, document)  # Counter's loop without its checks: sections are many, small documents
        added = self._added
        for term, count in counts.items():
            staged = added.get(term)
            if staged is None:
                staged = added[term] = array("i")
            staged.append(slot)
            staged.append(count)
        length = sum(counts.values())
        self._lengths[slot] = length
        self._total_length += length

    def remove(self, key: Key, document: Iterable[str] | None = None) -> None:
        """Forget a document; pass its terms to skip a scan of every posting list."""
        self._own()
        slot = self._slot_of.pop(key, None)
        if slot is None:
            return
        self._total_length -= int(self._lengths[slot])
        self._lengths[slot] = 0
        self._keys[slot] = None
        self._dead.add(slot)
        self._touched |= set(document) if document is not None else {*self._postings, *self._added}

    def settle(self) -> None:
        """Turn the staged changes into postings: new arrays for the terms they touched (every read settles
        first, and the registry settles a version before readers get it)."""
        if not (self._touched or self._added or self._dead) and self._norms_count == len(self._slot_of):
            return  # (a document without terms stages nothing, but changes the average length)
        self._own()
        dead = np.fromiter(self._dead, dtype=np.int32, count=len(self._dead))
        for term in sorted(self._touched.union(self._added)):
            staged = self._added.get(term)
            if staged is not None and len(staged) == 2 and term not in self._postings:
                # a new term one document holds (most terms of a library): packed as is, with no arrays made
                if staged[0] not in self._dead:
                    self._postings[term] = _packed(staged[0], staged[1])
                continue
            slots, frequencies = self._arrays(term)
            if staged:
                pairs = np.frombuffer(staged, dtype=np.int32).reshape(-1, 2)
                slots = np.concatenate((slots, pairs[:, 0]))
                frequencies = np.concatenate((frequencies, pairs[:, 1].astype(np.float32)))
            if len(dead) and len(slots):
                kept = ~np.isin(slots, dead)
                slots, frequencies = slots[kept], frequencies[kept]
            if len(slots) == 1:
                self._postings[term] = _packed(int(slots[0]), frequencies[0])
            elif len(slots):
                slots.flags.writeable = frequencies.flags.writeable = False
                self._postings[term] = (slots, frequencies)
            else:
                self._postings.pop(term, None)
        self._free += sorted(self._dead)
        self._added, self._dead, self._touched = {}, set(), set()
        average = self._total_length / len(self._slot_of) if self._total_length else 1.0  # (else no term is held)
        self._norms, self._norms_count = self.k1 * (1 - self.b + self.b * self._lengths / average), len(self._slot_of)

    def holds(self, term: str, where: Callable[[Key], bool] | None = None) -> bool:
        """Whether some document (satisfying `where`) holds the term."""
        self.settle()
        slots = self._arrays(term)[0]
        if where is None:
            return bool(len(slots))
        return any(where(self._key(slot)) for slot in slots.tolist())

    def information(self, query: Iterable[str]) -> float:
        """The sum of the query's terms' idf, a term no document holds counting as one held by none: what a
        document of average length holding each term once scores, the scale of a full match."""
        self.settle()
        count = len(self._slot_of)
        return sum(self._idf(count, self._holders(term)) for term in set(query))

    def _arrays(self, term: str) -> tuple[Slots, Frequencies]:
        posting = self._postings.get(term)
        if posting is None:
            return _NO_SLOTS, _NO_FREQUENCIES
        if isinstance(posting, int):
            frequency = posting & _MAX_FREQUENCY
            return np.array([posting >> _FREQUENCY_BITS], dtype=np.int32), np.array([frequency], dtype=np.float32)
        return posting

    def _holders(self, term: str) -> int:
        posting = self._postings.get(term)
        return 0 if posting is None else 1 if isinstance(posting, int) else len(posting[0])

    def _idf(self, count: int, holders: int) -> float:
        return math.log(1 + (count - holders + 0.5) / (holders + 0.5))

    def search(self, query: Iterable[str], limit: int) -> list[tuple[Key, float]]:
        """The `limit` best keys with their scores, best first; ties in key order (deterministic)."""
        self.settle()
        count = len(self._slot_of)
        if not count or limit <= 0:
            return []
        norms = self._norms
        scores = np.zeros(len(self._keys))
        for term in sorted(set(query)):
            if term not in self._postings:
                continue
            slots, stored = self._arrays(term)
            frequencies = stored.astype(np.float64)
            idf = self._idf(count, len(slots))
            scores[slots] += idf * frequencies * (self.k1 + 1) / (frequencies + norms[slots])
        hits = np.flatnonzero(scores)
        # scores equal but for the order of their sums (2 x gamma + zeta against gamma + 2 x zeta, of one idf)
        # may differ in the last bit: rounded, they tie, and the tie goes by key
        scores[hits] = np.round(scores[hits], _SCORE_DECIMALS)
        if len(hits) <= limit:
            return self._ranked(hits, scores)
        threshold = np.partition(scores[hits], len(hits) - limit)[len(hits) - limit]
        best = self._ranked(hits[scores[hits] > threshold], scores)  # fewer than `limit`
        # the rest score the limit-th best: those first by key (libraries repeat sections, so they may be thousands)
        tied: list[Any] = heapq.nsmallest(limit - len(best), map(self._key, hits[scores[hits] == threshold].tolist()))
        return best + [(key, float(threshold)) for key in tied]

    def _ranked(self, hits: npt.NDArray[np.intp], scores: npt.NDArray[np.float64]) -> list[tuple[Key, float]]:
        found = zip(map(self._key, hits.tolist()), scores[hits].tolist(), strict=True)
        return sorted(found, key=lambda hit: (-hit[1], hit[0]))

    def _own(self) -> None:
        """Copy the tables this index shares with a fork before it writes them (the arrays stay shared)."""
        if self._shared:
            self._postings, self._slot_of, self._keys = dict(self._postings), dict(self._slot_of), list(self._keys)
            self._lengths, self._free, self._shared = self._lengths.copy(), list(self._free), False
            settle_long_lived()  # see MacroTables._own_tables

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


def _packed(slot: int, frequency: float) -> int:
    """The posting of a term one document holds, as one int (see `Posting`)."""
    return slot << _FREQUENCY_BITS | min(int(frequency), _MAX_FREQUENCY)
