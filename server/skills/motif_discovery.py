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
"""

from __future__ import annotations

import hashlib
import re
import zlib
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from .graph import EdgeKind, SectionNode, SkillGraph
from .macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Key, Macro, Occurrence, Port
from .text import terms

MAX_RUN = 3
SIMILARITY = 0.5
SKETCH = 4
"""Min-hash shingles per run used to find the clusters worth comparing."""
MAX_COMPARED = 8
MAX_POSTING = 64
"""Clusters a sketch shingle is looked up in: its most recent ones (boilerplate is shared by many)."""

_STEP_TITLE = re.compile(r", step \d+$")


@dataclass(frozen=True)
class Run:
    """A run of consecutive nodes of one skill, keyed by its typed signature and inner edge pattern."""

    occurrence: Occurrence
    key: Key
    tokens: int


def runs_of(graph: SkillGraph, tokens: tuple[int, ...], node_terms: list[list[str]]) -> Iterator[Run]:
    nodes = graph.nodes
    signatures = [_node_signature(node, words) for node, words in zip(nodes, node_terms, strict=True)]
    io_kinds = [_io_kinds(graph, i) for i in range(len(nodes))]
    outgoing = [[(e.target, e.kind.value, e.label) for e in graph.edges_from(i)] for i in range(len(nodes))]
    for start in range(1, len(nodes)):  # node 0 is the skill's own intent: never shared
        for length in range(1, min(MAX_RUN, len(nodes) - start) + 1):
            inside = range(start, start + length)
            stop = start + length
            pattern = tuple(
                sorted(
                    (i - start, target - start, kind, label)
                    for i in inside
                    for target, kind, label in outgoing[i]
                    if start <= target < stop
                )
            )
            key = (tuple(signatures[i] for i in inside), tuple(io_kinds[i] for i in inside), pattern)
            yield Run(Occurrence(graph.skill, start, length), key, sum(tokens[i] for i in inside))


def find_macros(
    graphs: Mapping[str, SkillGraph],
    runs: list[Run],
    shingles: Callable[[Occurrence], frozenset[int]],
) -> Iterator[Macro]:
    """Candidate macros among runs of one key (verifiable ones: see `verifiable`): similar texts, equal
    ports, one occurrence per skill, positive gain. A run joins the first cluster whose representative it resembles;
    only the MAX_COMPARED clusters whose min-hash sketches share most with the run's are compared (texts with
    Jaccard >= 0.5 share a sketch shingle with probability >= 94%), so a bucket of n runs costs O(n)."""
    if len({r.occurrence.skill for r in runs}) < MIN_OCCURRENCES:
        return
    clusters: list[tuple[frozenset[int], list[Run]]] = []
    by_sketch: dict[int, list[int]] = {}
    for run in runs:
        mine = shingles(run.occurrence)
        sketch = sorted(mine)[:SKETCH]
        shared: dict[int, int] = {}
        for shingle in sketch:
            for c in by_sketch.get(shingle, ())[-MAX_POSTING:]:
                shared[c] = shared.get(c, 0) + 1
        closest = sorted(shared, key=shared.__getitem__, reverse=True)[:MAX_COMPARED]  # ties: first seen first
        joined = next((c for c in closest if jaccard(clusters[c][0], mine) >= SIMILARITY), None)
        if joined is not None:
            clusters[joined][1].append(run)
            continue
        for shingle in sketch:
            by_sketch.setdefault(shingle, []).append(len(clusters))
        clusters.append((mine, [run]))
    for _, cluster in clusters:
        if len({r.occurrence.skill for r in cluster}) < MIN_OCCURRENCES:
            continue
        by_ports: dict[frozenset[Port], list[Run]] = {}
        for run in cluster:
            by_ports.setdefault(ports_of(graphs[run.occurrence.skill], run.occurrence.nodes), []).append(run)
        for ports, members in sorted(by_ports.items(), key=lambda item: sorted(item[0])):
            one_per_skill = sorted(
                {r.occurrence.skill: r for r in reversed(members)}.values(), key=lambda r: r.occurrence
            )
            if len(one_per_skill) < MIN_OCCURRENCES:
                continue
            prototype = min(one_per_skill, key=lambda r: (r.tokens, r.occurrence))
            occurrences = tuple(r.occurrence for r in one_per_skill)
            gain = sum(r.tokens for r in one_per_skill) - prototype.tokens - REFERENCE_TOKENS * len(one_per_skill)
            if gain <= 0:
                continue
            digest = hashlib.sha256(repr((prototype.key, sorted(ports), occurrences)).encode()).hexdigest()[:12]
            name = graphs[prototype.occurrence.skill].nodes[prototype.occurrence.start].title
            yield Macro(
                f"m-{digest}", name, prototype.key, ports, occurrences, prototype.occurrence, prototype.tokens, gain
            )


@dataclass(frozen=True, slots=True)
class SkillText:
    """A skill's words as hashed 3-grams (shingles), with where each node's words start: what text
    similarity is measured on. 3-grams span node boundaries, as a run's text does."""

    starts: tuple[int, ...]
    """Index of each node's first word, and one past the last word."""
    words: tuple[int, ...]
    """Each word's stable hash."""
    trigrams: array[int]
    """The hash of the 3-gram starting at each word (but the last two)."""

    @classmethod
    def of(cls, node_terms: list[list[str]]) -> SkillText:
        starts = [0]
        for words in node_terms:
            starts.append(starts[-1] + len(words))
        hashes = tuple(_word_hash(word) for words in node_terms for word in words)
        trigrams = array("Q", (_combine(hashes[k : k + 3]) for k in range(len(hashes) - 2)))
        return cls(tuple(starts), hashes, trigrams)

    def shingles(self, nodes: range) -> frozenset[int]:
        first, end = self.starts[nodes.start], self.starts[nodes.stop]
        if end - first < 3:  # too short for a 3-gram: the whole text is its one shingle
            return frozenset((_combine(self.words[first:end]),))
        return frozenset(self.trigrams[first : end - 2])


def verifiable_nodes(graph: SkillGraph) -> tuple[bool, ...]:
    """Whether each node may sit in a macro: it changes nothing, or it keeps a path to a verifier (through
    a `verifies` edge, inside the macro or through its port), or its skill has no verifier at all. A run is
    verifiable when all its nodes are."""
    if not any(e.kind is EdgeKind.VERIFIES for e in graph.edges):
        return (True,) * len(graph.nodes)
    return tuple(
        not node.contract.state_changing or any(graph.successors(node.index, EdgeKind.VERIFIES)) for node in graph.nodes
    )


def ports_of(graph: SkillGraph, inside: range) -> frozenset[Port]:
    start, stop = inside.start, inside.stop
    ports = []
    for i in inside:
        targets, sources = graph.reach(i)
        ports += [Port("out", kind, i - start) for kind, low, high in targets if low < start or high >= stop]
        ports += [Port("in", kind, i - start) for kind, low, high in sources if low < start or high >= stop]
    return frozenset(ports)


@lru_cache(maxsize=1 << 17)
def _word_hash(word: str) -> int:
    """A hash that is the same in every process (str hashes are salted per process)."""
    return zlib.crc32(word.encode())


def _combine(hashes: tuple[int, ...]) -> int:
    """One stable 64-bit hash of a short sequence of word hashes."""
    combined = len(hashes)
    for value in hashes:
        combined = (combined * 0x100000001B3 ^ value) & 0xFFFFFFFFFFFFFFFF
    return combined


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _io_kinds(graph: SkillGraph, index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    contract = graph.nodes[index].contract
    return tuple(sorted({s.kind for s in contract.inputs})), tuple(sorted({s.kind for s in contract.outputs}))


def _node_signature(node: SectionNode, words: list[str]) -> str:
    if node.is_step:
        return f"{node.role.value}:step:{' '.join(words[:3])}"
    title = _STEP_TITLE.sub("", node.title)
    return f"{node.role.value}:{' '.join(terms(re.sub(r'[0-9]+', ' ', title)))}"
