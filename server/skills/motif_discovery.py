"""MotifZip's discovery: which runs of section nodes are occurrences of one procedure.

A motif is a run of one to MAX_RUN consecutive section nodes of a skill. Runs are bucketed by their typed
key (each node's role, normalized title and artifact kinds, and the edge pattern inside the run), so only
interface-compatible runs are ever compared; inside a bucket, runs whose texts are similar (word 3-gram
Jaccard >= SIMILARITY) are occurrences of one procedure. Text need only be similar: real libraries repeat
procedures as near-duplicates.

A group becomes a candidate macro only if
- its boundary is stable: every occurrence has the same ports (the kinds and directions of the edges that
  cross its boundary), so dependencies are internal or exposed through ports;
- every state-changing node inside keeps a path to a verifier (inside, or through a `verifies` port);
- its description-length gain is positive: the tokens its occurrences take minus the prototype's and one
  reference per occurrence.
Which candidates become macros, and keeping them current, is macro_index.py's concern.

Everything here is computed from a graph's nodes and edges alone: the graph's own per-node edge tables
(`SkillGraph.reach`, `edges_from`) are left unmade, as they would stay with every graph of the library
(about 15 KB a skill).
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
import zlib
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import chain
from types import ModuleType
from typing import NamedTuple

import numpy as np

from .contracts import Contract
from .graph import EdgeKind, SectionNode, SkillGraph
from .macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Key, Level, Macro, Occurrence, Port
from .text import NodeWords, terms

MAX_RUN = 3
SIMILARITY = 0.5
SKETCH = 4
"""Min-hash shingles per run used to find the clusters worth comparing."""
MAX_COMPARED = 8
MAX_POSTING = 64
"""Clusters a sketch shingle is looked up in: its most recent ones (boilerplate is shared by many)."""

_STEP_TITLE = re.compile(r", step \d+$")
_DIGITS = re.compile(r"[0-9]+")


class Run(NamedTuple):
    """A run of consecutive nodes of one skill: its typed signature and inner edge pattern (`key`), its
    tokens and the ports through which edges cross its boundary."""

    occurrence: Occurrence
    key: Key
    tokens: int
    ports: frozenset[Port]


def runs_of(graph: SkillGraph, tokens: tuple[int, ...], node_terms: NodeWords) -> list[Run]:
    """Every run of the skill but those holding its intent (node 0, never shared), in (start, length)
    order. (A bulk build uses one RunShapes for all its skills.)"""
    shapes = RunShapes()
    return [
        Run(Occurrence(graph.skill, start, length), shapes.keys[key], sum(tokens[start : start + length]), ports)
        for start, length, key, ports in shapes.of_skill(graph, node_terms)
    ]


def run_key(graph: SkillGraph, occurrence: Occurrence) -> Key:
    """The key `runs_of` gives one run."""
    shapes = RunShapes()
    runs = shapes.of_skill(graph, [terms(node.text) for node in graph.nodes])
    return shapes.keys[next(key for start, length, key, _ in runs if (start, length) == occurrence[1:])]


Row = tuple[str, tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple[int, str, str], ...]]
"""What a node brings to the key of a run holding it: its signature, its input and output kinds, and its
edges to nodes a run may hold with it ((target - node, kind, label), in key order)."""


class RunShapes:
    """The keys and ports of runs, each made once: a run's key follows from its nodes' rows (`Row`) and its
    ports from its nodes' reach (`_REACH_BITS`), and runs repeat both. A bulk build keeps one for all skills."""

    def __init__(self) -> None:
        self.keys: list[Key] = []
        """key number -> key"""
        self._rows: dict[Row, int] = {}
        """row -> its number"""
        self._row_list: list[Row] = []
        self._keys: dict[tuple[int, ...], int] = {}
        """row numbers of a run -> its key number"""
        self._ports: dict[tuple[int, ...], frozenset[Port]] = {}
        """reach of a run's nodes -> its ports"""

    def of_skill(self, graph: SkillGraph, node_terms: NodeWords) -> list[tuple[int, int, int, frozenset[Port]]]:
        """(start, length, key number, ports) of every run of the skill but those holding node 0, in order. A
        run never spans two files (SKILL.md and a Markdown reference, or two references)."""
        rows, reach, _ = self._rows_of(graph, node_terms)
        return list(self._runs(rows, reach, [node.provenance.file for node in graph.nodes]))

    def file(
        self,
        graph: SkillGraph,
        node_terms: NodeWords,
        buckets: list[dict[Occurrence, frozenset[Port]]],
        grow: Callable[[int], None],
    ) -> None:
        """File each run of the skill (`of_skill`) whose nodes are all verifiable (`verifiable_nodes`) in the
        bucket of its key number; `grow(key)` makes the buckets up to that key number."""
        rows, reach, verified = self._rows_of(graph, node_terms)
        verifiable = verifiable_nodes(graph, verified)
        files = [node.provenance.file for node in graph.nodes]
        every = None if all(verifiable) else verifiable
        file_runs(self, graph.skill, rows, reach, files, every, buckets, grow, Occurrence)

    def _runs(
        self, rows: list[int], reach: list[int], files: list[str]
    ) -> Iterator[tuple[int, int, int, frozenset[Port]]]:
        count = len(rows)
        for start in range(1, count):
            for stop in range(start + 1, min(start + MAX_RUN, count) + 1):
                if files[stop - 1] != files[start]:
                    break
                run = tuple(rows[start:stop])
                key = self._keys.get(run)
                if key is None:
                    key = self._new_key(run)
                spans = tuple(reach[start:stop])
                ports = self._ports.get(spans)
                if ports is None:
                    ports = self._new_ports(spans)
                yield start, stop - start, key, ports

    def _new_key(self, run: tuple[int, ...]) -> int:
        """The key number of a run of these rows, seen for the first time."""
        rows = [self._row_list[number] for number in run]
        length = len(rows)
        pattern = [(k, k + step, kind, label) for k, row in enumerate(rows) for step, kind, label in row[2]
                   if 0 <= k + step < length]  # fmt: skip
        self.keys.append((tuple([row[0] for row in rows]), tuple([row[1] for row in rows]), tuple(pattern)))
        key = self._keys[run] = len(self.keys) - 1
        return key

    def _new_ports(self, spans: tuple[int, ...]) -> frozenset[Port]:
        """The ports of a run whose nodes have this reach, seen for the first time."""
        ports = self._ports[spans] = _ports_of_reach(spans)
        return ports

    def _rows_of(self, graph: SkillGraph, node_terms: NodeWords) -> tuple[list[int], list[int], set[int]]:
        """Each node's row number and reach, and the sources of the skill's `verifies` edges."""
        nodes = graph.nodes
        near: list[list[tuple[int, str, str]]] = [[] for _ in nodes]
        reach = [0] * len(nodes)
        verified = set()
        for edge in graph.edges:
            source, target = edge.source, edge.target
            outward, inward, kind = _REACH[edge.kind]
            if kind == _VERIFIES:
                verified.add(source)
            step = target - source
            if -MAX_RUN < step < MAX_RUN:
                near[source].append((step, kind, edge.label))
            step = step if -MAX_RUN <= step <= MAX_RUN else (MAX_RUN if step > 0 else -MAX_RUN)
            reach[source] |= outward[step]
            reach[target] |= inward[-step]
        rows = []
        for node, words, inner in zip(nodes, node_terms, near, strict=True):
            inner.sort()
            row = (_node_signature(node, words), _io_kinds(node.contract), tuple(inner))
            number = self._rows.get(row)
            if number is None:
                number = self._rows[row] = len(self._row_list)
                self._row_list.append(row)
            rows.append(number)
        return rows, reach, verified


def _ports_of_reach(reach: tuple[int, ...]) -> frozenset[Port]:
    """The ports of a run whose nodes have this reach."""
    mask, length = 0, len(reach)
    for k, beyond in enumerate(reach):
        mask |= _port_bits(beyond, k, length - k)
    return _ports(mask)


@lru_cache(maxsize=1 << 14)
def _port_bits(beyond: int, k: int, after: int) -> int:
    """The port mask bits of a node at offset k of a run, with `after` nodes from it to the run's end, and this
    reach (nodes repeat their reach: a library has a few thousand)."""
    mask, group = 0, 0
    while beyond:
        if beyond & _CROSSING[k][after]:
            mask |= 1 << (MAX_RUN * group + k)
        beyond >>= _REACH_BITS
        group += 1
    return mask


_REACH_BITS = 2 * MAX_RUN
"""A node's reach: for each edge kind and direction (a group), bit j < MAX_RUN says an edge goes j + 1 or
more nodes back, bit MAX_RUN + j that one goes j + 1 or more forward."""
_GROUPS = [(kind, direction) for kind in EdgeKind for direction in ("out", "in")]
"""Port groups in order: the port (kind, direction, offset) is bit MAX_RUN * group + offset of a port mask."""


def _reach_bits(group: int, step: int) -> int:
    """The reach of one edge `step` nodes away (clipped to MAX_RUN) in a group."""
    back = sum(1 << j for j in range(MAX_RUN) if step <= -(j + 1))
    forward = sum(1 << (MAX_RUN + j) for j in range(MAX_RUN) if step >= j + 1)
    return (back | forward) << (_REACH_BITS * group)


def _edge_reach(kind: EdgeKind) -> tuple[dict[int, int], dict[int, int], str]:
    """The reach of an outgoing edge of this kind by its step, of an incoming one, and the kind's name."""
    outward, inward = _GROUPS.index((kind, "out")), _GROUPS.index((kind, "in"))
    steps = range(-MAX_RUN, MAX_RUN + 1)
    return {s: _reach_bits(outward, s) for s in steps}, {s: _reach_bits(inward, s) for s in steps}, kind.value


_REACH = {kind: _edge_reach(kind) for kind in EdgeKind}
_VERIFIES = EdgeKind.VERIFIES.value
_CROSSING = [[(1 << k) | (1 << (MAX_RUN + after - 1)) if after else 0 for after in range(MAX_RUN + 1)]
             for k in range(MAX_RUN)]  # fmt: skip
"""[k][after]: the reach bits by which a node at offset k of a run, with `after` nodes from it to the run's
end (itself included), has an edge of the group leaving the run: k + 1 or more back, `after` or more forward."""


@lru_cache(maxsize=1 << 12)
def _ports(mask: int) -> frozenset[Port]:
    """The ports of a mask; one set per mask, shared by every run that has it."""
    return frozenset(
        Port(direction, kind, offset)
        for group, (kind, direction) in enumerate(_GROUPS)
        for offset in range(MAX_RUN)
        if mask >> (MAX_RUN * group + offset) & 1
    )


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
    see `verifiable_nodes`): similar texts (`clusters_of`), equal ports, one occurrence per skill, positive
    gain; `tokens`: each skill's node token counts. The reference for `groups`, which is the C extension's
    when it is built."""
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


def verifiable_nodes(graph: SkillGraph, verified: set[int] | None = None) -> tuple[bool, ...]:
    """Whether each node may sit in a macro: it changes nothing, or it keeps a path to a verifier (through
    a `verifies` edge, inside the macro or through its port), or its skill has no verifier at all. A run is
    verifiable when all its nodes are. `verified`: the sources of the skill's `verifies` edges, if known."""
    if verified is None:
        verified = {e.source for e in graph.edges if e.kind is EdgeKind.VERIFIES}
    if not verified:
        return (True,) * len(graph.nodes)
    return tuple(not node.contract.state_changing or node.index in verified for node in graph.nodes)


def ports_of(graph: SkillGraph, inside: range) -> frozenset[Port]:
    """The ports of a run, from the graph's edge tables (what `Run.ports` holds, computed alone)."""
    start, stop = inside.start, inside.stop
    ports = []
    for i in inside:
        targets, sources = graph.reach(i)
        ports += [Port("out", kind, i - start) for kind, low, high in targets if low < start or high >= stop]
        ports += [Port("in", kind, i - start) for kind, low, high in sources if low < start or high >= stop]
    return frozenset(ports)


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


def _io_kinds(contract: Contract) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The distinct kinds of a contract's inputs and of its outputs, sorted (a library has a few dozen pairs,
    and two fifths of its sections neither take nor give anything)."""
    inputs, outputs = contract.inputs, contract.outputs
    if not inputs and not outputs:
        return _NO_KINDS
    return _sorted_kinds(tuple([s.kind for s in inputs]), tuple([s.kind for s in outputs]))


_NO_KINDS: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


@lru_cache(maxsize=1 << 10)
def _sorted_kinds(inputs: tuple[str, ...], outputs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(sorted(set(inputs))), tuple(sorted(set(outputs)))


def _node_signature(node: SectionNode, words: Sequence[str]) -> str:
    if node.is_step:
        return f"{node.role.value}:step:{' '.join(words[:3])}"
    return f"{node.role.value}:{_title_words(node.title)}"


@lru_cache(maxsize=1 << 16)
def _title_words(title: str) -> str:
    """A title's terms without step numbers or digits: `Load the input table, step 2` -> `load input table`."""
    return " ".join(terms(_DIGITS.sub(" ", _STEP_TITLE.sub("", title))))


def file_runs_of(
    shapes: RunShapes,
    skill: str,
    rows: list[int],
    reach: list[int],
    files: list[str],
    verifiable: tuple[bool, ...] | None,
    buckets: list[dict[Occurrence, frozenset[Port]]],
    grow: Callable[[int], None],
    occurrence: type[Occurrence],
) -> None:
    """`RunShapes.file` of the nodes' rows, reach and files: the reference for `file_runs`, which is the C
    extension's when it is built."""
    for start, length, key, ports in shapes._runs(rows, reach, files):
        if verifiable is None or all(verifiable[start : start + length]):
            if key >= len(buckets):
                grow(key)
            buckets[key][occurrence(skill, start, length)] = ports


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
Filing = Callable[
    [RunShapes, str, list[int], list[int], list[str], tuple[bool, ...] | None,
     list[dict[Occurrence, frozenset[Port]]], Callable[[int], None], type[Occurrence]],
    None,
]  # fmt: skip
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
times faster), else `groups_of`; as `file_runs` and `shingled` are."""
file_runs: Filing = file_runs_of if compiled is None else compiled.file_runs
shingled: Shingling = shingled_in_python if compiled is None else compiled.shingled


def grouper(texts: Mapping[str, SkillText], tokens: Mapping[str, tuple[int, ...]]) -> BucketGrouping:
    """`groups` of one bucket's runs at a time, over these texts and token counts, which must not change while it
    is used: the C extension's reads each skill's once for all the buckets (a rebuild's name the same skills
    again and again), the Python's calls `groups_of`."""
    if compiled is None:
        return partial(groups_of, texts=texts, tokens=tokens)
    native: BucketGrouping = compiled.Grouper(texts, tokens)
    return native
