"""MotifZip and ReZip: the library's macros, chosen among discovered candidates and kept current as skills
come and go.

MotifZip compresses a whole library: the candidate macros of motif_discovery.py are chosen greedily by gain,
never overlapping.

ReZip keeps the macros current without recompressing: a new skill's runs join a compatible macro when they
match it (key, ports, verifier paths, similar text); what matches none stays a residual in its bucket, and
a bucket whose residuals now recur across skills with a positive gain is promoted to a macro. Removing a
skill drops its occurrences; a macro left with one occurrence is retired and its residual may be promoted
again. Execution evidence (ReportOutcome) raises a macro's default rendering level, then splits or retires it.

`MacroIndex.fork` gives a writer an index of its own to maintain while readers keep the one they hold: the
two share every graph, run, text and macro, and each bucket and key set until one of them changes it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .bulk import fewer_collections, settle_long_lived
from .graph import SkillGraph
from .macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Compression, Key, Level, Macro, Occurrence
from .motif_discovery import SIMILARITY, Run, SkillText, find_macros, jaccard, ports_of, runs_of, verifiable_nodes
from .text import terms


@dataclass(frozen=True)
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
        self._shared_tables = self._shared_evidence = False
        """Whether the tables above (and, apart, the evidence) may be shared with a fork: copied before this
        index writes them."""
        self._own_buckets: set[Key] = set()
        self._own_key_sets: set[Key] = set()
        """The buckets and key sets this index made or copied since it last forked: the others may be shared
        with a fork, and are copied before this index changes them."""
        self._copied_buckets = False

    def fork(self) -> MacroIndex:
        """An index with the same macros, residuals, evidence and revisions; changes to either never show in
        the other. The first change to either copies its tables, shallowly (at 10K skills the largest, the
        node holders, has about 130K entries; a report that revises nothing copies the evidence alone), and
        a bucket or key set is copied when one of the two first changes it."""
        other = copy.copy(self)
        for index in (self, other):
            index._shared_tables = index._shared_evidence = True
            index._own_buckets, index._own_key_sets = set(), set()
        return other

    def rebuild(self, graphs: Iterable[SkillGraph], node_tokens: dict[str, tuple[int, ...]]) -> None:
        """Full MotifZip: forget the macros (not the revisions) and compress the given library from scratch."""
        self.revised = dict(self.revised)  # its own from now on, like the tables _reset makes
        self._reset()
        with fewer_collections():
            for graph in sorted(graphs, key=lambda g: g.skill):
                self._index(graph, node_tokens[graph.skill])
            self._promote(self._buckets)

    def add(self, graph: SkillGraph, tokens: tuple[int, ...]) -> None:
        """Assimilate a new skill (or a new version, replacing the old one)."""
        self._own_tables()
        if graph.skill in self._graphs:
            self.remove(graph.skill)
        self._index(graph, tokens)
        runs = sorted(self._runs[graph.skill], key=lambda r: (-r.tokens, r.occurrence))
        for run in runs:
            self._assimilate(run)
        self._promote({run.key for run in runs})

    def remove(self, skill: str) -> None:
        if skill not in self._graphs:
            return
        self._own_tables()
        graph = self._graphs.pop(skill)
        freed: set[Key] = set()
        for macro_id in sorted(
            {self._holder[(skill, i)][0] for i in range(len(graph.nodes)) if (skill, i) in self._holder}
        ):
            macro = self._macros[macro_id]
            self._set_occurrences(macro, tuple(o for o in macro.occurrences if o.skill != skill))
            freed.add(macro.key)
        for run in self._runs.pop(skill):
            del self._bucket(run.key)[run.occurrence]
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
        self._own_evidence()
        seen = self.evidence.get(macro_id, Evidence())
        evidence = self.evidence[macro_id] = Evidence(
            seen.uses + 1, seen.expansions + expanded, seen.verifier_failures + verifier_failed
        )
        if macro.default_level < Level.FULL and (
            evidence.verifier_failures
            or (evidence.uses >= MIN_EVIDENCE and evidence.expansions >= EXPANSION_SHARE * evidence.uses)
        ):
            self._own_tables()
            self._macros[macro_id] = replace(macro, default_level=Level(macro.default_level + 1))
            self.revised[macro.key] = self._macros[macro_id].default_level
            self.evidence[macro_id] = Evidence()
        elif macro.default_level == Level.FULL and evidence.verifier_failures >= FAILURES_TO_SPLIT:
            self._own_tables()
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
            self._bucket(run.key)[run.occurrence] = run
        if self._copied_buckets:  # as long-lived as the tables: see _own_tables
            self._copied_buckets = False
            settle_long_lived()

    def _own_tables(self) -> None:
        self._own_evidence()
        if self._shared_tables:
            self.revised, self._graphs, self._tokens = dict(self.revised), dict(self._graphs), dict(self._tokens)
            self._runs, self._buckets, self._macros = dict(self._runs), dict(self._buckets), dict(self._macros)
            self._macros_by_key, self._holder = dict(self._macros_by_key), dict(self._holder)
            self._texts, self._verifiable, self._shared_tables = dict(self._texts), dict(self._verifiable), False
            # the copies are as long-lived as the library: out of the collector's reach at once, or each young
            # collection the maintenance triggers walks their entries until they age (82 ms stalls at 10K)
            settle_long_lived()

    def _own_evidence(self) -> None:
        if self._shared_evidence:
            self.evidence, self._shared_evidence = dict(self.evidence), False

    def _bucket(self, key: Key) -> dict[Occurrence, Run]:
        """A bucket to change: made, or copied if a fork may share it."""
        bucket = self._buckets.get(key)
        if bucket is None or key not in self._own_buckets:
            self._copied_buckets |= bucket is not None
            bucket = self._buckets[key] = {} if bucket is None else dict(bucket)
            self._own_buckets.add(key)
        return bucket

    def _key_set(self, key: Key) -> set[str]:
        """The macro ids of a key, to change: made, or copied if a fork may share them."""
        ids = self._macros_by_key.get(key)
        if ids is None or key not in self._own_key_sets:
            ids = self._macros_by_key[key] = set() if ids is None else set(ids)
            self._own_key_sets.add(key)
        return ids

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
                self._key_set(candidate.key).add(candidate.macro_id)
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
            if macro.key in self._macros_by_key:
                self._key_set(macro.key).discard(macro.macro_id)
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


def _gain(tokens: dict[str, tuple[int, ...]], occurrences: tuple[Occurrence, ...]) -> int:
    sizes = [sum(tokens[o.skill][i] for i in o.nodes) for o in occurrences]
    return sum(sizes) - min(sizes) - REFERENCE_TOKENS * len(sizes)
