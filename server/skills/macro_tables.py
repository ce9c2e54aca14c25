"""The tables of a MacroIndex (macro_index.py): its macros by id and by key, its residual runs by key, which
macro occurrence holds each node, each skill's graph, tokens and text, and the evidence; and how a macro is
made from a candidate group, given other occurrences, or retired.

`MacroIndex.fork` gives a writer an index of its own to maintain while readers keep the one they hold: the
two share every graph, text and macro, and each bucket and key set until one of them changes it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Self

from .bulk import settle_long_lived
from .graph import SkillGraph
from .macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Compression, Key, Level, Macro, Occurrence, Port
from .motif_discovery import Group, SkillText, gain_of, macro_of, run_sizes


@dataclass(frozen=True)
class Evidence:
    """What executions reported about one macro key since it was last revised. Evidence is counted per key,
    as revisions are: the macros of one key (one routine's shape, in clusters of differing text) share it."""

    uses: int = 0
    expansions: int = 0
    verifier_failures: int = 0


class MacroTables:
    """The tables a MacroIndex maintains, shared with its forks until one of them writes (`fork`)."""

    def __init__(self) -> None:
        self.revised: dict[Key, Level | None] = {}
        """What evidence decided, by macro key: a raised default level, or None for split (never promoted
        again). It outlives the macros (a rebuild keeps it) and is what a store persists."""
        self._reset()

    def _reset(self) -> None:
        self._graphs: dict[str, SkillGraph] = {}
        self._tokens: dict[str, tuple[int, ...]] = {}
        self._buckets: dict[Key, dict[Occurrence, frozenset[Port]]] = {}
        """key -> the runs of that key that may sit in a macro (`motif_runs.verifiable_nodes`), with their
        ports. A run's tokens are its nodes', and a skill's runs are found again when it is removed: a run
        object per run took most of the index's memory (the runs are about 2.7 per section node)."""
        self._unsorted: set[Key] = set()
        """Buckets whose runs are not in occurrence order (a skill added after one that sorts later): sorted
        when read. A rebuild files every run in order."""
        self._macros: dict[str, Macro] = {}
        self._macros_by_key: dict[Key, set[str]] = {}
        self._holder: dict[tuple[str, int], tuple[str, Occurrence]] = {}
        """(skill, node) -> (macro id, occurrence) holding it"""
        self._texts: dict[str, SkillText] = {}
        """Each skill's hashed word 3-grams: a run's shingles are a slice of them (sets of shingles per run
        took most of the index's memory)."""
        self.evidence: dict[Key, Evidence] = {}
        """By macro key; dropped with the key's last macro, and kept by a store (`restore_evidence`)."""
        self._shared_tables = self._shared_evidence = False
        """Whether the tables above (and, apart, the evidence) may be shared with a fork: copied before this
        index writes them."""
        self._own_buckets: set[Key] = set()
        self._own_key_sets: set[Key] = set()
        """The buckets and key sets this index made or copied since it last forked: the others may be shared
        with a fork, and are copied before this index changes them."""
        self._own_every_bucket = False
        """Whether this index made every bucket it has (a rebuild does): then none is shared with a fork."""
        self._copied_buckets = False

    def fork(self) -> Self:
        """An index with the same macros, residuals, evidence and revisions; changes to either never show in
        the other. The first change to either copies its tables, shallowly (at 10K skills the largest, the
        node holders, has about 130K entries; a report that revises nothing copies the evidence alone), and
        a bucket or key set is copied when one of the two first changes it."""
        other = copy.copy(self)
        for index in (self, other):
            index._shared_tables = index._shared_evidence = True
            index._own_buckets, index._own_key_sets, index._own_every_bucket = set(), set(), False
        return other

    def __len__(self) -> int:
        """The number of macros (`compression()` also measures them: long, at 100K skills)."""
        return len(self._macros)

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

    # -- internals ----------------------------------------------------------------------------------------

    def _own_tables(self) -> None:
        self._own_evidence()
        if self._shared_tables:
            self.revised, self._graphs, self._tokens = dict(self.revised), dict(self._graphs), dict(self._tokens)
            self._buckets, self._macros = dict(self._buckets), dict(self._macros)
            self._macros_by_key, self._holder = dict(self._macros_by_key), dict(self._holder)
            self._texts, self._unsorted, self._shared_tables = dict(self._texts), set(self._unsorted), False
            # the copies are as long-lived as the library: out of the collector's reach at once, or each young
            # collection the maintenance triggers walks their entries until they age (82 ms stalls at 10K)
            settle_long_lived()

    def _own_evidence(self) -> None:
        if self._shared_evidence:
            self.evidence, self._shared_evidence = dict(self.evidence), False

    def _bucket(self, key: Key) -> dict[Occurrence, frozenset[Port]]:
        """A bucket to change: made, or copied if a fork may share it."""
        bucket = self._buckets.get(key)
        if bucket is None or not (self._own_every_bucket or key in self._own_buckets):
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
        return self._texts[occurrence.skill].shingles(occurrence.start, occurrence.start + occurrence.length)

    def _free(self, occurrence: Occurrence) -> bool:
        return not any((occurrence.skill, i) in self._holder for i in occurrence.nodes)

    def _banned(self, key: Key) -> bool:
        return bool(self.revised) and key in self.revised and self.revised[key] is None  # (a key hashes slowly)

    def _take(self, key: Key, group: Group, occurrences: tuple[Occurrence, ...]) -> None:
        """Make the macro of a candidate group with these of its occurrences (those still free)."""
        macro = macro_of(self._graphs, key, group, self.revised.get(key) or Level.CONTRACT)
        self._macros[macro.macro_id] = macro
        self._key_set(key).add(macro.macro_id)
        if len(occurrences) == len(group[1]):  # all still free: its prototype, name and gain stand
            self._claim(macro)
        else:  # (a new macro: none of its nodes is held by it yet)
            self._give(macro, occurrences)

    def _set_occurrences(self, macro: Macro, occurrences: tuple[Occurrence, ...]) -> None:
        """Give a macro these occurrences instead of its own (`_give`)."""
        for o in macro.occurrences:
            for i in o.nodes:
                if self._holder.get((o.skill, i), ("",))[0] == macro.macro_id:
                    del self._holder[(o.skill, i)]
        self._give(macro, occurrences)

    def _give(self, macro: Macro, occurrences: tuple[Occurrence, ...]) -> None:
        """Give a macro whose nodes are not held these occurrences (claiming their nodes), or retire it when they
        are fewer than MIN_OCCURRENCES or no longer gain anything (a removal can leave a macro that costs more
        than it saves)."""
        occurrences = tuple(sorted(occurrences))
        sizes = run_sizes(self._tokens, occurrences)
        if len(occurrences) < MIN_OCCURRENCES or gain_of(sizes) <= 0:
            self._macros.pop(macro.macro_id, None)
            if macro.key in self._macros_by_key:
                self._key_set(macro.key).discard(macro.macro_id)
            if not self._macros_by_key.get(macro.key):
                self.evidence.pop(macro.key, None)
            return
        prototype_tokens, prototype = min(zip(sizes, occurrences, strict=True))
        name = self._graphs[prototype.skill].nodes[prototype.start].title
        gain = gain_of(sizes)
        self._macros[macro.macro_id] = macro = replace(
            macro, name=name, occurrences=occurrences, prototype=prototype, prototype_tokens=prototype_tokens, gain=gain
        )
        self._claim(macro)

    def _claim(self, macro: Macro) -> None:
        """Mark the macro's occurrences' nodes as held by it."""
        holder, macro_id = self._holder, macro.macro_id
        for o in macro.occurrences:
            skill, start, length = o
            held = (macro_id, o)
            for i in range(start, start + length):
                holder[(skill, i)] = held
