"""MotifZip: planted near-duplicate procedures become macros; every rewrite is reversible and keeps contracts."""

from __future__ import annotations

from bench.synthetic import generate_library
from skillstate.server.skills.compressed import compress_skill, expand, library_stats
from skillstate.server.skills.graph import EdgeKind, build_graph
from skillstate.server.skills.library import node_tokens
from skillstate.server.skills.macro_index import compress
from skillstate.server.skills.package import load_package

from .corpus import corpus_graphs, require_corpus

SKILLS = generate_library(120, seed=3)
GRAPHS = [build_graph(load_package(s.files, s.folder, strict=True)) for s in SKILLS]
TOKENS = {g.skill: node_tokens(g) for g in GRAPHS}
COMPRESSION = compress(GRAPHS, TOKENS)


def test_planted_routines_become_macros_across_skills() -> None:
    titles = {m.name.split(", step")[0] for m in COMPRESSION.macros}
    assert {"Prerequisites", "Troubleshooting", "Open a pull request", "Load the input table"} <= titles
    for macro in COMPRESSION.macros:
        assert len({o.skill for o in macro.occurrences}) == len(macro.occurrences) >= 2
        assert macro.gain > 0
    assert COMPRESSION.ratio > 1.2


def test_macros_never_overlap() -> None:
    held = [(o.skill, i) for m in COMPRESSION.macros for o in m.occurrences for i in o.nodes]
    assert len(held) == len(set(held))


def test_occurrences_share_the_interface_and_keep_verifiers() -> None:
    graphs = {g.skill: g for g in GRAPHS}
    for macro in COMPRESSION.macros:
        for occurrence in macro.occurrences:
            graph = graphs[occurrence.skill]
            inside = set(occurrence.nodes)
            crossing = {
                (
                    "out" if e.source in inside else "in",
                    e.kind,
                    (e.source if e.source in inside else e.target) - occurrence.start,
                )
                for e in graph.edges
                if (e.source in inside) != (e.target in inside)
            }
            assert {(p.direction, p.kind, p.offset) for p in macro.ports} == crossing
            has_verifier = any(e.kind is EdgeKind.VERIFIES for e in graph.edges)
            for i in inside:
                if has_verifier and graph.nodes[i].contract.state_changing:
                    assert any(graph.successors(i, EdgeKind.VERIFIES))


def test_expanding_every_macro_restores_the_source_graph() -> None:
    for graph in GRAPHS:
        assert expand(COMPRESSION, compress_skill(COMPRESSION, graph)) == graph.edges
    stats = library_stats(COMPRESSION, GRAPHS)
    assert (stats.dependency_preservation, stats.verifier_reachability) == (1.0, 1.0)


def test_the_generator_and_compression_are_deterministic() -> None:
    again = generate_library(120, seed=3)
    assert [s.files for s in again] == [s.files for s in SKILLS]
    assert compress(GRAPHS, TOKENS) == COMPRESSION
    assert generate_library(120, seed=4)[0].files != SKILLS[0].files


def test_reversible_over_every_package_of_the_real_corpus() -> None:
    graphs = corpus_graphs(require_corpus())
    assert len(graphs) == 764  # each package named by its folder, duplicate skill names included
    compression = compress(graphs, {g.skill: node_tokens(g) for g in graphs})
    assert compression.macros  # near-duplicates exist in real libraries too
    for graph in graphs:
        assert expand(compression, compress_skill(compression, graph)) == graph.edges
    stats = library_stats(compression, graphs)
    assert stats.dependency_preservation == 1.0 and stats.verifier_reachability == 1.0
