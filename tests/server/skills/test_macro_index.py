"""ReZip: macros maintained skill by skill stay valid, reversible and close to a full recompression."""

from __future__ import annotations

import gc

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.synthetic import generate_library
from skillstate.server.skills.compressed import compress_skill, expand
from skillstate.server.skills.graph import SkillGraph, build_graph
from skillstate.server.skills.library import node_tokens, node_words
from skillstate.server.skills.macro_index import SETTLE_EVERY, MacroIndex, compress
from skillstate.server.skills.macro_tables import Evidence
from skillstate.server.skills.macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Level
from skillstate.server.skills.motif_runs import ports_of
from skillstate.server.skills.package import load_package

GRAPHS = [build_graph(load_package(s.files, s.folder)) for s in generate_library(60, seed=7)]
TOKENS = {g.skill: node_tokens(g) for g in GRAPHS}


def assert_valid(index: MacroIndex, present: dict[str, SkillGraph]) -> None:
    compression = index.compression()
    assert len(index) == len(compression.macros)
    held: set[tuple[str, int]] = set()
    for macro in compression.macros:
        skills = [o.skill for o in macro.occurrences]
        assert len(skills) == len(set(skills)) >= MIN_OCCURRENCES and set(skills) <= present.keys()
        sizes = [sum(TOKENS[o.skill][i] for i in o.nodes) for o in macro.occurrences]
        assert macro.gain == sum(sizes) - min(sizes) - REFERENCE_TOKENS * len(sizes) > 0
        for occurrence in macro.occurrences:
            assert ports_of(present[occurrence.skill], occurrence.nodes) == macro.ports
            for i in occurrence.nodes:
                assert (occurrence.skill, i) not in held
                held.add((occurrence.skill, i))
    for graph in present.values():
        assert expand(compression, compress_skill(compression, graph)) == graph.edges


@settings(max_examples=25)
@example([(True, 10), (True, 16), (True, 17), (True, 18), (False, 16)])  # a removal left a macro gaining nothing
@given(st.lists(st.tuples(st.booleans(), st.integers(0, len(GRAPHS) - 1)), max_size=80))
def test_any_sequence_of_adds_and_removes_keeps_every_macro_valid(operations: list[tuple[bool, int]]) -> None:
    index = MacroIndex()
    present: dict[str, SkillGraph] = {}
    for add, i in operations:
        graph = GRAPHS[i]
        if add:
            index.add(graph, TOKENS[graph.skill])
            present[graph.skill] = graph
        else:
            index.remove(graph.skill)
            present.pop(graph.skill, None)
    assert_valid(index, present)


Operation = tuple[str, int, bool, bool]
"""(add, remove, report, fork or fork back; a graph, or for a report the rank of its macro; expanded; failed)"""


def apply(index: MacroIndex, operation: Operation) -> None:
    kind, i, expanded, failed = operation
    if kind == "add":
        index.add(GRAPHS[i], TOKENS[GRAPHS[i].skill])
    elif kind == "remove":
        index.remove(GRAPHS[i].skill)
    elif kind == "report" and (macros := index.compression().macros):
        index.report(macros[i % len(macros)].macro_id, expanded=expanded, verifier_failed=failed)


def state(index: MacroIndex) -> object:
    return index.compression(), index.evidence, index.revised


@settings(max_examples=25)
@given(st.lists(st.tuples(st.sampled_from(["add", "add", "remove", "report", "report", "fork", "fork back"]),
                          st.integers(0, len(GRAPHS) - 1), st.booleans(), st.booleans()), max_size=60))  # fmt: skip
def test_a_fork_and_the_index_it_came_from_change_apart_and_exactly_as_without_forks(
    operations: list[Operation],
) -> None:
    """Each index a fork left behind (or, for `fork back`, each fork left behind) holds exactly what the same
    operations up to that point give an index never forked, and so does the last; and each goes on to
    maintain the skills that arrive next exactly as the index never forked does."""
    index = MacroIndex()
    kept: list[tuple[MacroIndex, int]] = []
    for done, operation in enumerate(operations):
        if operation[0] in ("fork", "fork back"):
            fork = index.fork()
            kept.append((index, done) if operation[0] == "fork" else (fork, done))
            index = fork if operation[0] == "fork" else index
        else:
            apply(index, operation)
    arrivals: list[Operation] = [("add", i, False, False) for i in range(0, len(GRAPHS), 7)]
    for held, done in [*kept, (index, len(operations))]:
        plain = MacroIndex()
        for operation in operations[:done]:
            apply(plain, operation)
        assert state(held) == state(plain)
        for operation in [o for o in operations[done:] if not o[0].startswith("fork")] + arrivals:
            apply(held, operation)
            apply(plain, operation)
        assert state(held) == state(plain)


def test_streaming_arrivals_come_close_to_a_full_recompression() -> None:
    index = MacroIndex()
    half = len(GRAPHS) // 2
    index.rebuild(GRAPHS[:half], TOKENS)
    for graph in GRAPHS[half:]:
        index.add(graph, TOKENS[graph.skill])
    incremental, full = index.compression(), compress(GRAPHS, TOKENS)
    assert_valid(index, {g.skill: g for g in GRAPHS})
    assert incremental.ratio > 1.0 and incremental.ratio >= 0.9 * full.ratio


@settings(max_examples=10)
@given(st.permutations(range(len(GRAPHS))))
def test_a_rebuild_fed_skill_by_skill_in_any_order_equals_one_over_the_whole_library(order: list[int]) -> None:
    index = MacroIndex()
    rebuild = index.rebuilding()
    for i in order:
        rebuild.add(GRAPHS[i], TOKENS[GRAPHS[i].skill], node_words(GRAPHS[i]))
    rebuild.finish()
    assert index.compression() == compress(GRAPHS, TOKENS)
    assert_valid(index, {g.skill: g for g in GRAPHS})


def test_a_rebuild_moves_what_it_made_out_of_the_collectors_reach_as_it_goes() -> None:
    index = MacroIndex()
    rebuild = index.rebuilding()
    filed = 0
    for graph in GRAPHS:
        rebuild.add(graph, TOKENS[graph.skill], node_words(graph))
        filed += len(graph.nodes)
        if filed >= SETTLE_EVERY:
            break
    young = {id(o) for o in gc.get_objects()}  # every generation but the frozen one
    assert filed >= SETTLE_EVERY and id(index._texts[GRAPHS[0].skill]) not in young
    rebuild.add(GRAPHS[-1], TOKENS[GRAPHS[-1].skill], node_words(GRAPHS[-1]))
    assert id(index._texts[GRAPHS[-1].skill]) in {id(o) for o in gc.get_objects()}  # until the next settle


def test_a_rebuild_refuses_a_skill_twice() -> None:
    rebuild = MacroIndex().rebuilding()
    rebuild.add(GRAPHS[0], TOKENS[GRAPHS[0].skill], node_words(GRAPHS[0]))
    with pytest.raises(ValueError, match=GRAPHS[0].skill):
        rebuild.add(GRAPHS[0], TOKENS[GRAPHS[0].skill], node_words(GRAPHS[0]))


def test_evidence_raises_the_level_then_splits_a_macro() -> None:
    index = MacroIndex()
    index.rebuild(GRAPHS, TOKENS)
    macro = max((m for m in index.compression().macros if m.prototype.length > 1), key=lambda m: m.gain)
    assert macro.default_level is Level.CONTRACT
    for _ in range(3):
        index.report(macro.macro_id, expanded=True, verifier_failed=False)
    assert index.macro(macro.macro_id).default_level is Level.OUTLINE  # type: ignore[union-attr]
    index.report(macro.macro_id, expanded=False, verifier_failed=True)
    assert index.macro(macro.macro_id).default_level is Level.FULL  # type: ignore[union-attr]
    index.report(macro.macro_id, expanded=False, verifier_failed=True)
    index.report(macro.macro_id, expanded=False, verifier_failed=True)
    assert index.macro(macro.macro_id) is None  # split: its procedure is never promoted again

    def rejoined() -> bool:
        holders = [index.holder(o.skill, i) for o in macro.occurrences for i in o.nodes]
        return any(h is not None and h[0].key == macro.key for h in holders)

    assert not rejoined()
    assert_valid(index, {g.skill: g for g in GRAPHS})
    for occurrence in macro.occurrences:  # its skills arriving again do not bring it back
        graph = next(g for g in GRAPHS if g.skill == occurrence.skill)
        index.add(graph, TOKENS[graph.skill])
    assert not rejoined()


def test_the_macros_of_one_key_share_their_evidence_and_their_level() -> None:
    """Evidence is counted per key, as levels are decided (docs/skills.md, ReZip): uses of either macro of a
    key count for both, and the level they reach is both's."""
    index = MacroIndex()
    index.rebuild(GRAPHS, TOKENS)
    by_key: dict[object, list[str]] = {}
    for macro in index.compression().macros:
        by_key.setdefault(macro.key, []).append(macro.macro_id)
    first, second = next(ids for ids in by_key.values() if len(ids) >= 2)[:2]
    for macro_id in (first, second):
        index.report(macro_id, expanded=True, verifier_failed=False)
    assert [index.macro(m).default_level for m in (first, second)] == [Level.CONTRACT] * 2  # type: ignore[union-attr]
    index.report(first, expanded=False, verifier_failed=False)  # 3 uses, 2 expanded: at least half
    assert [index.macro(m).default_level for m in (first, second)] == [Level.OUTLINE] * 2  # type: ignore[union-attr]
    assert index.evidence == {}  # the counts start again


def test_evidence_taken_up_after_a_rebuild_goes_on_counting() -> None:
    """What a store kept (the revisions and the counts) given to a rebuilt index: a third expanded use raises
    the level where two came before; counts of a key that has no macro are left out."""
    before = MacroIndex()
    before.rebuild(GRAPHS, TOKENS)
    macro = max(before.compression().macros, key=lambda m: m.gain)
    for _ in range(2):
        before.report(macro.macro_id, expanded=True, verifier_failed=False)
    after = MacroIndex()
    after.revised = dict(before.revised)
    after.rebuild(GRAPHS, TOKENS)
    stray = ((("nothing:here",), ((("x",), ()),), ()), Evidence(5, 5, 0))
    assert after.restore_evidence({**before.evidence, stray[0]: stray[1]}) == [stray[0]]
    assert after.evidence == before.evidence
    assert after.report_key(macro.key, expanded=True, verifier_failed=False)
    assert after.revised[macro.key] is Level.OUTLINE
