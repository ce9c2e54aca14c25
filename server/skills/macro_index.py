"""MotifZip and ReZip: the library's macros, chosen among discovered candidates and kept current as skills
come and go.

MotifZip compresses a whole library: the candidate macros of motif_discovery.py are chosen greedily by gain,
never overlapping.

ReZip keeps the macros current without recompressing: a new skill's runs join a compatible macro when they
match it (key, ports, verifier paths, similar text); what matches none stays a residual in its bucket, and
a bucket whose residuals now recur across skills with a positive gain is promoted to a macro. Removing a
skill drops its occurrences; a macro left with one occurrence is retired and its residual may be promoted
again. Execution evidence (ReportOutcome) raises a macro's default rendering level, then splits or retires it.

Its tables, and how a fork shares them, are macro_tables.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from .bulk import fewer_collections, settle_long_lived
from .graph import SkillGraph
from .macro_tables import Evidence, MacroTables
from .macros import MIN_OCCURRENCES, Compression, Key, Level, Occurrence, Port
from .motif_discovery import SIMILARITY, Group, SkillText, compiled, gain_of, grouper, jaccard, run_sizes
from .motif_runs import Run, RunShapes, run_key, runs_of, verifiable_nodes
from .text import NodeWords, terms

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


class MacroIndex(MacroTables):
    """The library's macros and its residual runs, maintained skill by skill (ReZip)."""

    def rebuild(self, graphs: Iterable[SkillGraph], node_tokens: dict[str, tuple[int, ...]]) -> None:
        """Full MotifZip: forget the macros (not the revisions) and compress the given library from scratch."""
        with fewer_collections():
            rebuild = self.rebuilding()
            for graph in sorted(graphs, key=lambda g: g.skill):
                rebuild.add(graph, node_tokens[graph.skill], [terms(node.text) for node in graph.nodes])
            rebuild.finish()

    def rebuilding(self) -> Rebuild:
        """Full MotifZip fed a skill at a time (a bulk load hands each skill over as it indexes it): the index
        forgets its macros (not the revisions) now, and has the new ones when the Rebuild finishes."""
        return Rebuild(self)

    def add(self, graph: SkillGraph, tokens: tuple[int, ...], words: NodeWords | None = None) -> None:
        """Assimilate a new skill (or a new version, replacing the old one); `words`: the terms of each node's
        text, if the caller has them."""
        self._own_tables()
        if graph.skill in self._graphs:
            self.remove(graph.skill)
        runs, bucketed = self._index(graph, tokens, words or [terms(node.text) for node in graph.nodes])
        for run in sorted(bucketed, key=lambda r: (-r.tokens, r.occurrence)):
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
        for run in self._runs(graph)[1]:
            bucket = self._bucket(run.key)
            del bucket[run.occurrence]
            if not bucket:
                del self._buckets[run.key]
                self._own_buckets.discard(run.key)
        del self._tokens[skill]
        del self._texts[skill]
        self._promote({key for key in freed if key in self._buckets})

    def report(self, macro_id: str, *, expanded: bool, verifier_failed: bool) -> None:
        """Record one use of a macro in an execution (as `report_key`, for its key)."""
        macro = self._macros.get(macro_id)
        if macro is not None:
            self.report_key(macro.key, expanded=expanded, verifier_failed=verifier_failed)

    def report_key(self, key: Key, *, expanded: bool, verifier_failed: bool) -> bool:
        """Record one use of a macro key's macros in an execution; revise them when the evidence says they
        are risky: all of them take the higher level, or are split. True when they were revised (the revision
        is recorded in `revised[key]`); nothing is counted for a key that has no macro."""
        ids = sorted(self._macros_by_key.get(key, ()))
        if not ids:
            return False
        level = max(self._macros[macro_id].default_level for macro_id in ids)
        self._own_evidence()
        seen = self.evidence.get(key, Evidence())
        evidence = self.evidence[key] = Evidence(
            seen.uses + 1, seen.expansions + expanded, seen.verifier_failures + verifier_failed
        )
        if level < Level.FULL and (
            evidence.verifier_failures
            or (evidence.uses >= MIN_EVIDENCE and evidence.expansions >= EXPANSION_SHARE * evidence.uses)
        ):
            self._own_tables()
            raised = self.revised[key] = Level(level + 1)
            for macro_id in ids:
                self._macros[macro_id] = replace(self._macros[macro_id], default_level=raised)
            del self.evidence[key]
            return True
        if level == Level.FULL and evidence.verifier_failures >= FAILURES_TO_SPLIT:
            self._own_tables()
            self.revised[key] = None
            macros = [self._macros[macro_id] for macro_id in ids]
            for macro in macros:
                self._set_occurrences(macro, ())
            singles = {  # split: the single sections of a longer macro may form smaller macros
                run_key(self._graphs[o.skill], Occurrence(o.skill, i, 1))
                for m in macros
                if m.prototype.length > 1
                for o in m.occurrences
                for i in o.nodes
            }
            self._promote(singles)
            return True
        return False

    def restore_evidence(self, evidence: dict[Key, Evidence]) -> list[Key]:
        """Take up evidence a store kept (after a rebuild); returns the keys left out, which have no macro."""
        self._own_evidence()
        self.evidence = {key: counts for key, counts in evidence.items() if self._macros_by_key.get(key)}
        return sorted(key for key in evidence if key not in self.evidence)

    # -- internals ----------------------------------------------------------------------------------------

    def _index(self, graph: SkillGraph, tokens: tuple[int, ...], node_terms: NodeWords) -> tuple[list[Run], list[Run]]:
        """File a skill's runs in their buckets; returns its runs and those bucketed (see `_runs`)."""
        self._graphs[graph.skill] = graph
        self._tokens[graph.skill] = tokens
        self._texts[graph.skill] = SkillText.of(node_terms)
        runs, bucketed = self._runs(graph, node_terms)
        for run in bucketed:
            bucket = self._bucket(run.key)
            if bucket and next(reversed(bucket)) > run.occurrence:
                self._unsorted.add(run.key)
            bucket[run.occurrence] = run.ports
        if self._copied_buckets:  # as long-lived as the tables: see _own_tables
            self._copied_buckets = False
            settle_long_lived()
        return runs, bucketed

    def _runs(self, graph: SkillGraph, node_terms: NodeWords | None = None) -> tuple[list[Run], list[Run]]:
        """A skill's runs, and those that may sit in a macro (all their nodes verifiable): only these are
        bucketed, as no other is ever compared."""
        if node_terms is None:
            node_terms = [terms(node.text) for node in graph.nodes]
        runs = runs_of(graph, self._tokens[graph.skill], node_terms)
        verifiable = verifiable_nodes(graph)
        if all(verifiable):
            return runs, runs
        return runs, [run for run in runs if all(verifiable[i] for i in run.occurrence.nodes)]

    def _assimilate(self, run: Run) -> None:
        """Join the run (a bucketed one) to a compatible macro, if one matches it."""
        occurrence = run.occurrence
        if self._banned(run.key):
            return
        for macro_id in sorted(self._macros_by_key.get(run.key, ())):
            macro = self._macros[macro_id]
            if not self._free(occurrence) or any(o.skill == occurrence.skill for o in macro.occurrences):
                continue
            if (
                run.ports == macro.ports
                and jaccard(self._shingles_of(occurrence), self._shingles_of(macro.prototype)) >= SIMILARITY
            ):
                self._set_occurrences(macro, (*macro.occurrences, occurrence))
                return

    def _promote(self, keys: Iterable[Key]) -> None:
        """Macros from residual runs in the buckets of these keys (`_choose`)."""
        self._choose((key, self._buckets.get(key, {})) for key in keys)

    def _choose(self, buckets: Iterable[tuple[Key, dict[Occurrence, frozenset[Port]]]]) -> None:
        """Macros from residual runs in these buckets, chosen greedily by gain, never overlapping; among
        candidates of equal gain, the one whose prototype comes first in occurrence order goes first (each
        run is in one candidate at most, so the order is total)."""
        candidates: list[tuple[int, Occurrence, Key, Group]] = []
        grouping, settled = grouper(self._texts, self._tokens), 0
        for key, bucket in buckets:  # (in any order: the candidates are sorted below)
            if len(bucket) < MIN_OCCURRENCES or self._banned(key):
                continue
            runs = dict(sorted(bucket.items())) if self._unsorted and key in self._unsorted else bucket
            if self._holder:
                runs = {o: ports for o, ports in runs.items() if self._free(o)}
            candidates += [(-group[4], group[2], key, group) for group in grouping(runs)]
            if len(candidates) - settled >= SETTLE_EVERY:  # out of the collector's reach (see SETTLE_EVERY)
                settle_long_lived()
                settled = len(candidates)
        candidates.sort()  # by gain and prototype: no two candidates share a prototype, so nothing after is compared
        if not self._holder:  # a rebuild: nothing held before
            for position, occurrences in chosen(candidates, self._tokens):
                _, _, key, group = candidates[position]
                self._take(key, group, occurrences)
            return
        for _, _, key, group in candidates:
            occurrences = tuple(o for o in group[1] if self._free(o))
            if _worth_taking(self._tokens, group[1], occurrences):
                self._take(key, group, occurrences)


Candidate = tuple[int, Occurrence, Key, Group]
"""A candidate group of runs of a key, led by what the choice sorts on: its gain (negated) and prototype."""


def chosen_in_python(
    candidates: list[Candidate], tokens: Mapping[str, tuple[int, ...]]
) -> list[tuple[int, tuple[Occurrence, ...]]]:
    """The greedy choice of a rebuild, where no node is held yet: the position of each candidate taken (they
    come best first) with its occurrences still free (`_worth_taking`). The reference for `chosen`, which is
    the C extension's when it is built."""
    claimed: dict[str, int] = {}
    """per skill, its nodes taken as bits"""
    taken = []
    for position, (_, _, _, group) in enumerate(candidates):
        found = group[1]
        occurrences = tuple(o for o in found if not claimed.get(o.skill, 0) >> o.start & (1 << o.length) - 1)
        if _worth_taking(tokens, found, occurrences):
            taken.append((position, occurrences))
            for o in occurrences:
                claimed[o.skill] = claimed.get(o.skill, 0) | (1 << o.length) - 1 << o.start
    return taken


Choosing = Callable[[list[Candidate], Mapping[str, tuple[int, ...]]], list[tuple[int, tuple[Occurrence, ...]]]]
chosen: Choosing = chosen_in_python if compiled is None else compiled.chosen
"""The C extension's where it is built (the same choice as `chosen_in_python`), else `chosen_in_python`."""


def _worth_taking(
    tokens: Mapping[str, tuple[int, ...]], found: tuple[Occurrence, ...], free: tuple[Occurrence, ...]
) -> bool:
    """Whether a candidate whose occurrences are `found` is taken with those still `free`: two or more, and all
    of them (its gain stands) or a positive gain of those."""
    return len(free) >= MIN_OCCURRENCES and (len(free) == len(found) or gain_of(run_sizes(tokens, free)) > 0)


SETTLE_EVERY = 1024
"""A rebuild moves what the build made so far out of the collector's reach each time it has filed this many more
nodes (the library's entries too, when it adds them alongside): it is long-lived, and young collections would
otherwise walk it before it ages (with the bulk thresholds, 0.02-0.03 s of a 0.32 s build at 1,000 skills, and
0.14-0.21 s of 3.1-3.6 s on the real corpus). Freezing is a constant-time splice of the collector's lists."""


class Rebuild:
    """A full MotifZip under way (`MacroIndex.rebuilding`): `add` files each skill's runs in their buckets,
    `finish` chooses the macros. Skills may come in any order; the buckets are put in occurrence order."""

    def __init__(self, index: MacroIndex) -> None:
        index.revised = dict(index.revised)  # its own from now on, like the tables _reset makes
        index._reset()
        settle_long_lived()  # the library's graphs, out of the reach of the full collections the build triggers
        self._index = index
        self._shapes = RunShapes()
        self._buckets: list[dict[Occurrence, frozenset[Port]]] = []
        """key number (`RunShapes.keys`) -> its bucket"""
        self._in_order = True
        self._last = ""
        self._unsettled = 0
        """nodes filed since the last settle_long_lived"""

    def add(self, graph: SkillGraph, tokens: tuple[int, ...], words: NodeWords) -> None:
        """File a new skill's runs; `words`: the terms of each node's text."""
        index, skill = self._index, graph.skill
        if skill in index._graphs:
            raise ValueError(f"skill {skill!r} is already in the rebuild")
        self._in_order, self._last = self._in_order and skill > self._last, skill
        index._graphs[skill], index._tokens[skill], index._texts[skill] = graph, tokens, SkillText.of(words)
        self._shapes.file(graph, words, self._buckets, self._grow)
        self._unsettled += len(graph.nodes)
        if self._unsettled >= SETTLE_EVERY:
            settle_long_lived()
            self._unsettled = 0

    def _grow(self, key: int) -> None:
        """Buckets for the key numbers up to this one."""
        buckets, keys = self._buckets, self._shapes.keys
        buckets += [self._index._buckets.setdefault(keys[known], {}) for known in range(len(buckets), key + 1)]

    def finish(self) -> None:
        index = self._index
        if not self._in_order:
            index._buckets = {key: dict(sorted(bucket.items())) for key, bucket in index._buckets.items()}
        index._own_every_bucket = True
        index._choose(index._buckets.items())
        settle_long_lived()  # the new tables, out of the collector's reach before a full collection walks them
