"""MotifZip's discovery: which runs of section nodes are occurrences of one procedure.

Runs come bucketed by their typed key (motif_runs.py), so only interface-compatible runs are ever compared;
inside a bucket, runs whose texts are similar (word 3-gram Jaccard >= SIMILARITY) are occurrences of one
procedure. Text need only be similar: real libraries repeat procedures as near-duplicates.

A group becomes a candidate macro only if
- its boundary is stable: every occurrence has the same ports (the kinds and directions of the edges that
  cross its boundary), so dependencies are internal or exposed through ports;
- every state-changing node inside keeps a path to a verifier (inside, or through a `verifies` port);
- its description-length gain is positive: the tokens its occurrences take minus the prototype's and one
  reference per occurrence.
Which candidates become macros, and keeping them current, is macro_index.py's concern.

The loops MotifZip spends its time in run in a C extension (`_motifzip.c`, loaded here) where it is built;
the Python here, in motif_runs.py and in macro_index.py, is their reference.
"""

from __future__ import annotations

import hashlib
import os
import warnings
import zlib
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import chain
from types import ModuleType

import numpy as np

from .graph import SkillGraph
from .macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Key, Level, Macro, Occurrence, Port
from .text import NodeWords

SIMILARITY = 0.5
SKETCH = 4
"""Min-hash shingles per run used to find the clusters worth comparing."""
MAX_COMPARED = 8
MAX_POSTING = 64
"""Clusters a sketch shingle is looked up in: its most recent ones (boilerplate is shared by many)."""


Group = tuple[frozenset[Port], tuple[Occurrence, ...], Occurrence, int, int]
"""Runs of one key that make a candidate macro: their ports, their occurrences (one per skill), the
prototype, its tokens, and the gain."""


def macro_of(graphs: Mapping[str, SkillGraph], key: Key, group: Group, level: Level) -> Macro:
    """The macro a candidate group of runs of this key makes, named after its prototype's first node."""
    ports, occurrences, prototype, prototype_tokens, gain = group
    name = graphs[prototype.skill].nodes[prototype.start].title
    identity = macro_id(key, ports, occurrences)
    return Macro(identity, name, key, ports, occurrences, prototype, prototype_tokens, gain, level)


def groups_of(
    runs: Mapping[Occurrence, frozenset[Port]], texts: Mapping[str, SkillText], tokens: Mapping[str, tuple[int, ...]]
) -> list[Group]:
    """The candidate groups among runs of one key (with their ports, in occurrence order; verifiable ones:
    see `motif_runs.verifiable_nodes`): similar texts (`clusters_of`), equal ports, one occurrence per
    skill, positive gain; `tokens`: each skill's node token counts. The reference for `groups`, which is the
    C extension's when it is built."""
    occurrences, ports = list(runs), list(runs.values())
    sizes = run_sizes(tokens, occurrences)
    if len({o.skill for o in occurrences}) < MIN_OCCURRENCES or not may_gain(sizes):
        return []
    found = []
    for cluster in clusters_of(occurrences, texts):
        if len(cluster) < MIN_OCCURRENCES or len({occurrences[i].skill for i in cluster}) < MIN_OCCURRENCES:
            continue
        by_ports: dict[frozenset[Port], list[int]] = {}
        for i in cluster:
            by_ports.setdefault(ports[i], []).append(i)
        for shared_ports, members in by_ports.items():
            # the first run of each skill (runs come in occurrence order, so a skill's runs are together)
            one_per_skill = list({occurrences[i].skill: i for i in reversed(members)}.values())[::-1]
            if len(one_per_skill) < MIN_OCCURRENCES:
                continue
            prototype = min(one_per_skill, key=lambda i: (sizes[i], occurrences[i]))
            gain = gain_of([sizes[i] for i in one_per_skill])  # (the prototype's size is the smallest)
            if gain > 0:
                chosen = tuple(occurrences[i] for i in one_per_skill)
                found.append((shared_ports, chosen, occurrences[prototype], sizes[prototype], gain))
    return found


def run_sizes(tokens: Mapping[str, tuple[int, ...]], occurrences: Sequence[Occurrence]) -> list[int]:
    """Each occurrence's tokens."""
    return [sum(tokens[skill][start : start + length]) for skill, start, length in occurrences]


def gain_of(sizes: list[int]) -> int:
    """What a macro of runs of these sizes saves: every run but the prototype (the smallest) becomes a reference."""
    return sum(sizes) - min(sizes) - REFERENCE_TOKENS * len(sizes)


def may_gain(tokens: list[int]) -> bool:
    """Whether some of the runs of these sizes (two or more) could make a macro of positive gain. The gain of
    runs R is the sum over R of (tokens - REFERENCE_TOKENS) less the prototype's tokens, at least the smallest
    size of all: so no R gains when the sum of the positive (tokens - REFERENCE_TOKENS) does not exceed that
    smallest size (a sixth of the runs of the synthetic 1K library's shared buckets are never clustered)."""
    return sum(size - REFERENCE_TOKENS for size in tokens if size > REFERENCE_TOKENS) > min(tokens)


def clusters_of(occurrences: Sequence[Occurrence], texts: Mapping[str, SkillText]) -> list[list[int]]:
    """Runs of one key grouped by similar text, as positions in `occurrences`, in order. A run joins the first
    cluster whose representative (its first run) it resembles; only the MAX_COMPARED clusters whose min-hash
    sketches share most with the run's are compared (texts with Jaccard >= 0.5 share a sketch shingle with
    probability >= 94%), so a bucket of n runs costs O(n).

    A text seen before in the bucket joins the cluster it joined (or founded, when it was compared with every
    cluster it shared a shingle with) then, unless a cluster was since filed under one of its sketch
    shingles: the comparisons would be the same ones, or the ones before it no closer (libraries repeat
    procedures word for word as well as paraphrased)."""
    clusters: list[tuple[frozenset[int], list[int]]] = []
    by_sketch: dict[int, list[int]] = {}
    """sketch shingle -> the clusters filed under it (its posting), in order"""
    seen: dict[bytes, tuple[frozenset[int], list[list[int]], int, int | None]] = {}
    """text -> (its shingles, its sketch's postings, their total length then, the cluster it joined or founded,
    None if a repeat must be compared again)"""
    for position, (skill, start, length) in enumerate(occurrences):
        text = texts[skill]
        content = text.content(start, start + length)
        known = seen.get(content)
        if known is None:
            mine = text.shingles(start, start + length)
            postings = [by_sketch.setdefault(shingle, []) for shingle in sorted(mine)[:SKETCH]]
        else:
            mine, postings, filed, joined = known
            if joined is not None and sum(map(len, postings)) == filed:  # postings only grow
                clusters[joined][1].append(position)
                continue
        shared: dict[int, int] = {}
        for posting in postings:
            for c in posting[-MAX_POSTING:]:
                shared[c] = shared.get(c, 0) + 1
        joined = None
        for c in sorted(shared, key=shared.__getitem__, reverse=True)[:MAX_COMPARED]:  # ties: first seen first
            if similar(clusters[c][0], mine):
                joined = c
                break
        if joined is not None:
            seen[content] = (mine, postings, sum(map(len, postings)), joined)
            clusters[joined][1].append(position)
            continue
        for posting in postings:
            posting.append(len(clusters))
        # every cluster it could meet again was compared (fewer than MAX_COMPARED): the text rejoins the one it
        # founds, ranked among them first by the shingles it shares, as long as no posting grows
        founded = len(clusters) if len(shared) < MAX_COMPARED else None
        seen[content] = (mine, postings, sum(map(len, postings)), founded)
        clusters.append((mine, [position]))
    return [members for _, members in clusters]


def macro_id(key: Key, ports: frozenset[Port], occurrences: tuple[Occurrence, ...]) -> str:
    """A digest of the macro's key, ports and occurrences as `repr` writes them (the form ids have always
    been digests of; the occurrences written here as `repr` does, several times faster)."""
    written = ", ".join([f"Occurrence(skill={skill!r}, start={start}, length={length})"
                         for skill, start, length in occurrences])  # fmt: skip
    written = f"({written},)" if len(occurrences) == 1 else f"({written})"
    return "m-" + hashlib.sha256(f"({key!r}, {_sorted_repr(ports)}, {written})".encode()).hexdigest()[:12]


@lru_cache(maxsize=1 << 12)
def _sorted_repr(ports: frozenset[Port]) -> str:
    return repr(sorted(ports))


@dataclass(frozen=True, slots=True)
class SkillText:
    """A skill's words as hashed 3-grams (shingles), with where each node's words start: what text
    similarity is measured on. 3-grams span node boundaries, as a run's text does. Kept as machine words
    (12 bytes a word of text), not as Python ints (about 40)."""

    starts: array[int]
    """Index of each node's first word, and one past the last word."""
    words: array[int]
    """Each word's stable hash (its CRC-32: str hashes are salted per process)."""
    trigrams: array[int]
    """The hash of the 3-gram starting at each word (but the last two)."""

    @classmethod
    def of(cls, node_terms: NodeWords) -> SkillText:
        return cls(*shingled(node_terms))

    def shingles(self, start: int, stop: int) -> frozenset[int]:
        """The shingles of nodes start to stop (excluded)."""
        first, end = self.starts[start], self.starts[stop]
        if end - first < 3:  # too short for a 3-gram: the whole text is its one shingle
            return frozenset((_combine(tuple(self.words[first:end])),))
        return frozenset(self.trigrams[first : end - 2])

    def content(self, start: int, stop: int) -> bytes:
        """What the shingles of nodes start to stop are made from: equal contents give equal shingles."""
        first, end = self.starts[start], self.starts[stop]
        if end - first < 3:
            return b"w" + self.words[first:end].tobytes()  # an odd length: never a run of 3-grams
        return self.trigrams[first : end - 2].tobytes()


_PRIME = 0x100000001B3
_MASK = 0xFFFFFFFFFFFFFFFF


def _combine(hashes: tuple[int, ...]) -> int:
    """One stable 64-bit hash of a short sequence of word hashes."""
    combined = len(hashes)
    for value in hashes:
        combined = (combined * _PRIME ^ value) & _MASK
    return combined


def _trigrams(hashes: array[int]) -> array[int]:
    """`_combine` of every 3 consecutive word hashes, in one pass of 64-bit arithmetic (which wraps as the
    mask does)."""
    if len(hashes) < 3:
        return array("Q")
    words = np.frombuffer(hashes, dtype=np.uint32).astype(np.uint64)
    prime = np.uint64(_PRIME)
    combined = np.uint64(3 * _PRIME) ^ words[:-2]
    combined = combined * prime ^ words[1:-1]
    combined = combined * prime ^ words[2:]
    return array("Q", combined.tobytes())


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared) if a or b else 1.0


def similar(a: frozenset[int], b: frozenset[int]) -> bool:
    """jaccard(a, b) >= SIMILARITY; sets of too unequal sizes are not compared (their Jaccard is at most the
    smaller's size over the larger's)."""
    smaller, larger = sorted((len(a), len(b)))
    return smaller >= SIMILARITY * larger and jaccard(a, b) >= SIMILARITY


def shingled_in_python(node_terms: NodeWords) -> tuple[array[int], array[int], array[int]]:
    """`SkillText.of`'s arrays: where each node's words start, each word's CRC-32 and each 3-gram's hash. The
    reference for `shingled`, which is the C extension's when it is built."""
    starts = array("I", [0])
    for words in node_terms:
        starts.append(starts[-1] + len(words))
    hashes = array("I", map(zlib.crc32, map(str.encode, chain.from_iterable(node_terms))))
    return starts, hashes, _trigrams(hashes)


Grouping = Callable[
    [Mapping[Occurrence, frozenset[Port]], Mapping[str, SkillText], Mapping[str, tuple[int, ...]]], list[Group]
]
Shingling = Callable[[NodeWords], "tuple[array[int], array[int], array[int]]"]  # (quoted: array[int] needs 3.12)
BucketGrouping = Callable[[Mapping[Occurrence, frozenset[Port]]], list[Group]]


EXTENSION_VERSION = 4
"""The `_motifzip.VERSION` this module's calls are written for."""


def _compiled() -> ModuleType | None:
    """The C extension (`_motifzip.c`), unless it was not built, SKILLSTATE_NO_EXTENSIONS is set (to anything but
    0), or the build is older than these sources (then with a warning: `pip install -e .` rebuilds it)."""
    if os.environ.get("SKILLSTATE_NO_EXTENSIONS", "0") not in ("", "0"):
        return None
    try:
        from . import _motifzip
    except ImportError:
        return None
    if getattr(_motifzip, "VERSION", None) != EXTENSION_VERSION:
        warnings.warn(
            f"{_motifzip.__file__} was built from other sources: running MotifZip's Python (`pip install -e .` "
            "rebuilds it)",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return _motifzip


compiled = _compiled()
"""The C extension (`_motifzip`), or None."""
groups: Grouping = groups_of if compiled is None else compiled.groups
"""What MotifZip groups runs with: the C extension's where it is built (the same groups as `groups_of`, several
times faster), else `groups_of`; as `shingled` is, and `motif_runs.file_runs`."""
shingled: Shingling = shingled_in_python if compiled is None else compiled.shingled


def grouper(texts: Mapping[str, SkillText], tokens: Mapping[str, tuple[int, ...]]) -> BucketGrouping:
    """`groups` of one bucket's runs at a time, over these texts and token counts, which must not change while it
    is used: the C extension's reads each skill's once for all the buckets (a rebuild's name the same skills
    again and again), the Python's calls `groups_of`."""
    if compiled is None:
        return partial(groups_of, texts=texts, tokens=tokens)
    native: BucketGrouping = compiled.Grouper(texts, tokens)
    return native
