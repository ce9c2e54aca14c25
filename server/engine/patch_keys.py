"""The idempotency keys an execution's retained log holds: whether a submit's key may have been used before.

The newest MAX_PATCH_IDS keys are kept with their revisions, so that a retry is answered at once. The older
ones are kept only in a Bloom filter (`KeyFilter`, about 1.25 bytes a key), so that a fresh key is known to
be unused without asking the log, after 100,000 revisions as after ten: only a key the filter may hold (a
retry, or about one in a hundred others) is looked up in the log. An execution loaded from the log knows the
newest keys at once; the older ones of its log are filed into the filter a page at a time, one page with each
lookup it still has to make, so that the lookups soon stop.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Iterable

Key = tuple[str, str]
"""(agent_id, client_patch_id)"""
MAX_PATCH_IDS = 100_000
"""Keys remembered with their revisions per execution; older ones are in the filter, and in the log."""
FILING_PAGE = 4096
"""Keys of the log filed into the filter with each lookup an execution still has to make."""


class KeyFilter:
    """A scalable Bloom filter of keys: no false negatives, about 1% false positives per stage. A stage holds
    up to its capacity; the next, twice as large, starts when it is full."""

    _HASHES = 7
    _BITS_PER_KEY = 10

    def __init__(self, capacity: int = 1 << 14) -> None:
        self._stages: list[tuple[bytearray, int]] = []
        self._capacity = capacity
        self._count = 0
        self._add_stage()

    def _add_stage(self) -> None:
        capacity = self._capacity << len(self._stages)
        self._stages.append((bytearray(capacity * self._BITS_PER_KEY // 8 + 1), capacity))
        self._count = 0

    def add(self, key: Key) -> None:
        bits, capacity = self._stages[-1]
        if self._count >= capacity:
            self._add_stage()
            bits, capacity = self._stages[-1]
        for position in _positions(key, len(bits) * 8):
            bits[position >> 3] |= 1 << (position & 7)
        self._count += 1

    def __contains__(self, key: Key) -> bool:
        return any(self._holds(bits, key) for bits, _ in self._stages)

    @staticmethod
    def _holds(bits: bytearray, key: Key) -> bool:
        return all(bits[p >> 3] & (1 << (p & 7)) for p in _positions(key, len(bits) * 8))

    @property
    def bytes(self) -> int:
        return sum(len(bits) for bits, _ in self._stages)


def _positions(key: Key, size: int) -> Iterable[int]:
    digest = hashlib.blake2b(f"{key[0]}\0{key[1]}".encode(), digest_size=16).digest()
    first, second = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1
    return ((first + i * second) % size for i in range(KeyFilter._HASHES))


class PatchKeys:
    """The keys of one execution's retained revisions. Changed only on the event loop."""

    def __init__(self) -> None:
        self.recent: collections.OrderedDict[Key, int] = collections.OrderedDict()
        """key -> revision, for the newest keys (at most MAX_PATCH_IDS), oldest first. (A dict popped from the
        front slows down: its iteration skips the slots left by what it popped.)"""
        self._older = KeyFilter()
        self.unfiled_below = 0
        """Keys of retained revisions before this one are neither in `recent` nor in the filter yet (0: none)."""

    def revision_of(self, key: Key) -> int | None:
        return self.recent.get(key)

    def unused(self, key: Key) -> bool:
        """Whether no retained revision used `key`, as far as memory can tell without the log."""
        return key not in self.recent and not self.unfiled_below and key not in self._older

    def add(self, key: Key, revision: int) -> None:
        """A revision used `key` (the newest so far)."""
        self.recent[key] = revision
        if len(self.recent) > MAX_PATCH_IDS:
            self._older.add(self.recent.popitem(last=False)[0])

    def discard(self, key: Key) -> None:
        """A revision that used `key` was rolled back."""
        self.recent.pop(key, None)

    def remember_older(self, older: list[tuple[str, str, int]]) -> None:
        """Add the keys of revisions before those already held (at recovery). `older` is (agent_id,
        client_patch_id, revision), newest first, as many as there is room for plus one: with more than the
        room, the ones left are filed later (`file`)."""
        room = MAX_PATCH_IDS - len(self.recent)
        remembered = collections.OrderedDict(
            ((agent_id, key), revision) for agent_id, key, revision in reversed(older[:room])
        )
        remembered.update(self.recent)  # oldest first, so the cap drops the oldest
        self.recent = remembered
        if len(older) > room:
            self.unfiled_below = older[room - 1][2] if room else older[0][2] + 1

    def forget(self, up_to: int) -> None:
        """Drop the keys of revisions up to `up_to`, compacted away (the filter may still hold some: a lookup
        then finds them gone)."""
        while self.recent and next(iter(self.recent.values())) <= up_to:
            self.recent.popitem(last=False)

    def restart(self, unfiled_below: int) -> None:
        """Start over, the keys of revisions before `unfiled_below` still to be filed."""
        self.recent, self._older, self.unfiled_below = collections.OrderedDict(), KeyFilter(), unfiled_below

    def file(self, below: int, page: list[tuple[str, str, int]], last: bool) -> None:
        """File a page of the keys of revisions before `below`, newest first (`PatchKeys.unfiled_below` when
        it was read: a page read while another one was filed is dropped); `last` when no older one is left."""
        if below != self.unfiled_below:
            return
        for agent_id, key, _ in page:
            self._older.add((agent_id, key))
        self.unfiled_below = 0 if last or not page else page[-1][2]

    @property
    def filter_bytes(self) -> int:
        return self._older.bytes
