"""MotifZip and ReZip: recurring procedures across skills become reversible, contract-preserving macros,
kept current as skills come and go.

A motif is a run of one to MAX_RUN consecutive section nodes of a skill. Runs are bucketed by their typed
key (each node's role, normalized title and artifact kinds, and the edge pattern inside the run), so only
interface-compatible runs are ever compared; inside a bucket, runs whose texts are similar (word 3-gram
Jaccard >= SIMILARITY) are occurrences of one procedure. Text need only be similar: real libraries repeat
procedures as near-duplicates.

A group becomes a macro only if
- its boundary is stable: every occurrence has the same ports (the kinds and directions of the edges that
  cross its boundary), so dependencies are internal or exposed through ports;
- every state-changing node inside keeps a path to a verifier (inside, or through a `verifies` port);
- its description-length gain is positive: the tokens its occurrences take minus the prototype's and one
  reference per occurrence.
Macros are chosen greedily by gain, never overlapping. Each occurrence keeps its source pointer, and the
macro keeps the edge pattern inside it, so expanding every macro restores the source graph exactly
(compressed.py).

ReZip keeps the macros current without recompressing: a new skill's runs join a compatible macro when they
match it (key, ports, verifier paths, similar text); what matches none stays a residual in its bucket, and
a bucket whose residuals now recur across skills with a positive gain is promoted to a macro. Removing a
skill drops its occurrences; a macro left with one occurrence is retired and its residual may be promoted
again. Execution evidence (ReportOutcome) raises a macro's default rendering level, then splits or retires it.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

from .bulk import fewer_collections
from .graph import EdgeKind, SectionNode, SkillGraph
from .text import terms

MAX_RUN = 3
SIMILARITY = 0.5
REFERENCE_TOKENS = 12
"""What one reference to a macro costs in the active representation (its id, ports and source pointer)."""
MIN_OCCURRENCES = 2
SKETCH = 4
"""Min-hash shingles per run used to find the clusters worth comparing."""
MAX_COMPARED = 8
MAX_POSTING = 64
"""Clusters a sketch shingle is looked up in: its most recent ones (boilerplate is shared by many)."""

_STEP_TITLE = re.compile(r", step \d+$")

Pattern = tuple[tuple[int, int, str, str], ...]
"""Edges inside a run, by offsets: (source, target, kind, label)."""
Key = tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], tuple[str, ...]], ...], Pattern]
"""(each node's role and normalized title, each node's input and output kinds, the inner edges)"""


class Level(IntEnum):
    """How much of a macro a context shows, least first."""

    NAME = 1
    CONTRACT = 2
    OUTLINE = 3
    FULL = 4


@dataclass(frozen=True, slots=True, order=True)
class Occurrence:
    skill: str
    start: int
    length: int

    @property
    def nodes(self) -> range:
        return range(self.start, self.start + self.length)


class Port(NamedTuple):
    """An edge crossing a motif's boundary: `offset` is the inside node's position in the motif."""

    direction: str
    """`in` (from outside to the motif) or `out`."""
    kind: EdgeKind
    offset: int


@dataclass(frozen=True)
class Macro:
    macro_id: str
    name: str
    key: Key
    ports: frozenset[Port]
    occurrences: tuple[Occurrence, ...]
    prototype: Occurrence
    """The occurrence whose text stands for all of them in the active representation."""
    prototype_tokens: int
    gain: int
    default_level: Level = Level.CONTRACT
    """How a context shows it when it is there as a dependency (ReZip raises it on evidence)."""

    @property
    def signature(self) -> tuple[str, ...]:
        return self.key[0]

    @property
    def internal_edges(self) -> tuple[tuple[int, int, EdgeKind, str], ...]:
        """The edge pattern inside the motif, by offsets: the same in every occurrence."""
        return tuple((s, t, EdgeKind(kind), label) for s, t, kind, label in self.key[2])


@dataclass(frozen=True)
class Compression:
    """A library's macros, and the sizes of its raw and active representations, in tokens."""

    macros: tuple[Macro, ...]
    raw_tokens: int
    active_tokens: int

    @property
    def ratio(self) -> float:
        return self.raw_tokens / self.active_tokens if self.active_tokens else 1.0

    def covering(self) -> dict[tuple[str, int], tuple[Macro, Occurrence]]:
        """(skill, node) -> the macro occurrence that holds it."""
        return {(o.skill, i): (m, o) for m in self.macros for o in m.occurrences for i in o.nodes}

    def held_in(self, skill: str) -> dict[int, tuple[Macro, Occurrence]]:
        """node -> the macro occurrence that holds it, for one skill."""
        return self._by_skill.get(skill, {})

    @cached_property
    def _by_skill(self) -> dict[str, dict[int, tuple[Macro, Occurrence]]]:
        by_skill: dict[str, dict[int, tuple[Macro, Occurrence]]] = {}
        for (skill, index), held in self.covering().items():
            by_skill.setdefault(skill, {})[index] = held
        return by_skill


@dataclass(frozen=True)
class Run:
    """A run of consecutive nodes of one skill, keyed by its typed signature and inner edge pattern."""

    occurrence: Occurrence
    key: Key
    tokens: int


@dataclass
class Evidence:
    """What executions reported about one macro since it was last revised."""

    uses: int = 0
    expansions: int = 0
    verifier_failures: int = 0


EXPANSION_SHARE = 0.5
"""Expanded in at least this share of its uses (and MIN_EVIDENCE uses), a macro's default level rises."""
MIN_EVIDENCE = 3
FAILURES_TO_SPLIT = 2
"""Verifier failures, at the FULL level, after which a macro is split into single sections (or retired)."""


def compress(graphs: Iterable[SkillGraph], node_tokens: dict[str, tuple[int, ...]]) -> Compression:
    """MotifZip over a whole library (deterministic)."""
    index = MacroIndex()
    index.rebuild(graphs, node_tokens)
    return index.compression()


class MacroIndex:
    """The library's macros and its residual runs, maintained skill by skill (ReZip)."""

    def __init__(self) -> None:
        self.revised: dict[Key, Level | None] = {}
        """What evidence decided, by macro key: a raised default level, or None for split (never promoted
        again). It outlives the macros (a rebuild keeps it) and is what a store persists."""
        self._reset()

    def _reset(self) -> None:
        self._graphs: dict[str, SkillGraph] = {}
        self._tokens: dict[str, tuple[int, ...]] = {}
        self._runs: dict[str, list[Run]] = {}
        self._buckets: dict[Key, dict[Occurrence, Run]] = {}
        self._macros: dict[str, Macro] = {}
        self._macros_by_key: dict[Key, set[str]] = {}
        self._holder: dict[tuple[str, int], tuple[str, Occurrence]] = {}
        """(skill, node) -> (macro id, occurrence) holding it"""
        self._texts: dict[str, SkillText] = {}
        """Each skill's hashed word 3-grams: a run's shingles are a slice of them (sets of shingles per run
        took most of the index's memory)."""
        self._verifiable: dict[str, tuple[bool, ...]] = {}
        """Per skill, whether each node may sit in a macro on its own (see `verifiable`)."""
        self.evidence: dict[str, Evidence] = {}

    def rebuild(self, graphs: Iterable[SkillGraph], node_tokens: dict[str, tuple[int, ...]]) -> None:
        """Full MotifZip: forget the macros (not the revisions) and compress the given library from scratch."""
        self._reset()
        with fewer_collections():
            for graph in sorted(graphs, key=lambda g: g.skill):
                self._index(graph, node_tokens[graph.skill])
            self._promote(self._buckets)

    def add(self, graph: SkillGraph, tokens: tuple[int, ...]) -> None:
        """Assimilate a new skill (or a new version, replacing the old one)."""
        if graph.skill in self._graphs:
            self.remove(graph.skill)
        self._index(graph, tokens)
        runs = sorted(self._runs[graph.skill], key=lambda r: (-r.tokens, r.occurrence))
        for run in runs:
            self._assimilate(run)
        self._promote({run.key for run in runs})

    def remove(self, skill: str) -> None:
        graph = self._graphs.pop(skill, None)
        if graph is None:
            return
        freed: set[Key] = set()
        for macro_id in sorted(
            {self._holder[(skill, i)][0] for i in range(len(graph.nodes)) if (skill, i) in self._holder}
        ):
            macro = self._macros[macro_id]
            self._set_occurrences(macro, tuple(o for o in macro.occurrences if o.skill != skill))
            freed.add(macro.key)
        for run in self._runs.pop(skill):
            del self._buckets[run.key][run.occurrence]
        del self._tokens[skill]
        del self._texts[skill]
        del self._verifiable[skill]
        self._promote({key for key in freed if key in self._buckets})

    def macro(self, macro_id: str) -> Macro | None:
        return self._macros.get(macro_id)

    def holder(self, skill: str, index: int) -> tuple[Macro, Occurrence] | None:
        """The macro occurrence holding a node, if any."""
        held = self._holder.get((skill, index))
        return None if held is None else (self._macros[held[0]], held[1])

    def compression(self) -> Compression:
        macros = tuple(sorted(self._macros.values(), key=lambda m: m.macro_id))
        raw = sum(sum(tokens) for tokens in self._tokens.values())
        covered = sum(self._tokens[o.skill][i] for m in macros for o in m.occurrences for i in o.nodes)
        dictionary = sum(m.prototype_tokens + REFERENCE_TOKENS * len(m.occurrences) for m in macros)
        return Compression(macros, raw, raw - covered + dictionary)

    def report(self, macro_id: str, *, expanded: bool, verifier_failed: bool) -> None:
        """Record one use of a macro in an execution; revise it when the evidence says it is risky (the
        revision is recorded in `revised` under the macro's key)."""
        macro = self._macros.get(macro_id)
        if macro is None:
            return
        evidence = self.evidence.setdefault(macro_id, Evidence())
        evidence.uses += 1
        evidence.expansions += expanded
        evidence.verifier_failures += verifier_failed
        if macro.default_level < Level.FULL and (
            evidence.verifier_failures
            or (evidence.uses >= MIN_EVIDENCE and evidence.expansions >= EXPANSION_SHARE * evidence.uses)
        ):
            self._macros[macro_id] = replace(macro, default_level=Level(macro.default_level + 1))
            self.revised[macro.key] = self._macros[macro_id].default_level
            self.evidence[macro_id] = Evidence()
        elif macro.default_level == Level.FULL and evidence.verifier_failures >= FAILURES_TO_SPLIT:
            self.revised[macro.key] = None
            self._set_occurrences(macro, ())
            if macro.prototype.length > 1:  # split: its single sections may form smaller macros
                self._promote({run.key for o in macro.occurrences for run in self._runs[o.skill]
                               if run.occurrence.length == 1 and run.occurrence.start in o.nodes})  # fmt: skip

    # -- internals ----------------------------------------------------------------------------------------

    def _index(self, graph: SkillGraph, tokens: tuple[int, ...]) -> None:
        self._graphs[graph.skill] = graph
        self._tokens[graph.skill] = tokens
        node_terms = [terms(node.text) for node in graph.nodes]
        self._texts[graph.skill] = SkillText.of(node_terms)
        self._verifiable[graph.skill] = verifiable_nodes(graph)
        self._runs[graph.skill] = list(runs_of(graph, tokens, node_terms))
        for run in self._runs[graph.skill]:
            self._buckets.setdefault(run.key, {})[run.occurrence] = run

    def _shingles_of(self, occurrence: Occurrence) -> frozenset[int]:
        return self._texts[occurrence.skill].shingles(occurrence.nodes)

    def _is_verifiable(self, occurrence: Occurrence) -> bool:
        flags = self._verifiable[occurrence.skill]
        return all(flags[i] for i in occurrence.nodes)

    def _free(self, occurrence: Occurrence) -> bool:
        return not any((occurrence.skill, i) in self._holder for i in occurrence.nodes)

    def _assimilate(self, run: Run) -> None:
        """Join the run to a compatible macro, if one matches it."""
        occurrence = run.occurrence
        graph = self._graphs[occurrence.skill]
        if self._banned(run.key):
            return
        for macro_id in sorted(self._macros_by_key.get(run.key, ())):
            macro = self._macros[macro_id]
            if not self._free(occurrence) or any(o.skill == occurrence.skill for o in macro.occurrences):
                continue
            if (
                self._is_verifiable(occurrence)
                and ports_of(graph, occurrence.nodes) == macro.ports
                and jaccard(self._shingles_of(occurrence), self._shingles_of(macro.prototype)) >= SIMILARITY
            ):
                self._set_occurrences(macro, (*macro.occurrences, occurrence))
                return

    def _banned(self, key: Key) -> bool:
        return key in self.revised and self.revised[key] is None

    def _promote(self, keys: Iterable[Key]) -> None:
        """Macros from residual runs in these buckets, chosen greedily by gain, never overlapping."""
        candidates: list[Macro] = []
        for key in sorted(keys):
            bucket = self._buckets.get(key, {})
            if len(bucket) < MIN_OCCURRENCES or self._banned(key):
                continue
            free = [
                run
                for occurrence, run in sorted(bucket.items())
                if self._free(occurrence) and self._is_verifiable(occurrence)
            ]
            candidates += find_macros(self._graphs, free, self._shingles_of)
        for candidate in sorted(candidates, key=lambda m: (-m.gain, m.macro_id)):
            occurrences = tuple(o for o in candidate.occurrences if self._free(o))
            if len(occurrences) >= MIN_OCCURRENCES and _gain(self._tokens, occurrences) > 0:
                candidate = replace(candidate, default_level=self.revised.get(candidate.key) or Level.CONTRACT)
                self._macros[candidate.macro_id] = candidate
                self._macros_by_key.setdefault(candidate.key, set()).add(candidate.macro_id)
                self._set_occurrences(candidate, occurrences)

    def _set_occurrences(self, macro: Macro, occurrences: tuple[Occurrence, ...]) -> None:
        """Give a macro these occurrences (claiming their nodes), or retire it when they are fewer than
        MIN_OCCURRENCES or no longer gain anything (a removal can leave a macro that costs more than it saves)."""
        for o in macro.occurrences:
            for i in o.nodes:
                if self._holder.get((o.skill, i), ("",))[0] == macro.macro_id:
                    del self._holder[(o.skill, i)]
        if len(occurrences) < MIN_OCCURRENCES or _gain(self._tokens, occurrences) <= 0:
            self._macros.pop(macro.macro_id, None)
            self._macros_by_key.get(macro.key, set()).discard(macro.macro_id)
            self.evidence.pop(macro.macro_id, None)
            return
        occurrences = tuple(sorted(occurrences))
        tokens = [sum(self._tokens[o.skill][i] for i in o.nodes) for o in occurrences]
        prototype_tokens, prototype = min(zip(tokens, occurrences, strict=True))
        name = self._graphs[prototype.skill].nodes[prototype.start].title
        gain = _gain(self._tokens, occurrences)
        self._macros[macro.macro_id] = replace(
            macro, name=name, occurrences=occurrences, prototype=prototype, prototype_tokens=prototype_tokens, gain=gain
        )
        for o in occurrences:
            for i in o.nodes:
                self._holder[(o.skill, i)] = (macro.macro_id, o)


def key_to_json(key: Key) -> str:
    return json.dumps(key, separators=(",", ":"))


def key_from_json(text: str) -> Key:
    def tuples(value: Any) -> Any:
        return tuple(tuples(v) for v in value) if isinstance(value, list) else value

    key: Key = tuples(json.loads(text))
    return key


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


def _gain(tokens: dict[str, tuple[int, ...]], occurrences: tuple[Occurrence, ...]) -> int:
    sizes = [sum(tokens[o.skill][i] for i in o.nodes) for o in occurrences]
    return sum(sizes) - min(sizes) - REFERENCE_TOKENS * len(sizes)


def _io_kinds(graph: SkillGraph, index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    contract = graph.nodes[index].contract
    return tuple(sorted({s.kind for s in contract.inputs})), tuple(sorted({s.kind for s in contract.outputs}))


def _node_signature(node: SectionNode, words: list[str]) -> str:
    if node.is_step:
        return f"{node.role.value}:step:{' '.join(words[:3])}"
    title = _STEP_TITLE.sub("", node.title)
    return f"{node.role.value}:{' '.join(terms(re.sub(r'[0-9]+', ' ', title)))}"
