"""ReZip: macros maintained skill by skill stay valid, reversible and close to a full recompression."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.synthetic import generate_library
from skillstate.server.skills.compressed import compress_skill, expand
from skillstate.server.skills.graph import SkillGraph, build_graph
from skillstate.server.skills.library import node_tokens
from skillstate.server.skills.macro_index import MacroIndex, compress
from skillstate.server.skills.macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Level
from skillstate.server.skills.motif_discovery import ports_of
from skillstate.server.skills.package import load_package

GRAPHS = [build_graph(load_package(s.files, s.folder)) for s in generate_library(60, seed=7)]
TOKENS = {g.skill: node_tokens(g) for g in GRAPHS}


def assert_valid(index: MacroIndex, present: dict[str, SkillGraph]) -> None:
    compression = index.compression()
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


def test_streaming_arrivals_come_close_to_a_full_recompression() -> None:
    index = MacroIndex()
    half = len(GRAPHS) // 2
    index.rebuild(GRAPHS[:half], TOKENS)
    for graph in GRAPHS[half:]:
        index.add(graph, TOKENS[graph.skill])
    incremental, full = index.compression(), compress(GRAPHS, TOKENS)
    assert_valid(index, {g.skill: g for g in GRAPHS})
    assert incremental.ratio > 1.0 and incremental.ratio >= 0.9 * full.ratio


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
