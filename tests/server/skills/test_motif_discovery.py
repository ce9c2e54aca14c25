"""MotifZip: planted near-duplicate procedures become macros; every rewrite is reversible and keeps contracts."""

from __future__ import annotations

import zlib
from array import array
from collections import defaultdict
from hashlib import sha256
from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st

from bench.synthetic import generate_library
from skillstate.server.skills.compressed import compress_skill, expand, library_stats
from skillstate.server.skills.graph import EdgeKind, build_graph
from skillstate.server.skills.library import node_tokens
from skillstate.server.skills.macro_index import compress
from skillstate.server.skills.macros import REFERENCE_TOKENS, Occurrence
from skillstate.server.skills.motif_discovery import (
    MAX_COMPARED,
    MAX_POSTING,
    SIMILARITY,
    SKETCH,
    SkillText,
    _combine,
    clusters_of,
    jaccard,
    macro_id,
    may_gain,
)
from skillstate.server.skills.motif_runs import Run, ports_of, run_key, runs_of
from skillstate.server.skills.package import load_package
from skillstate.server.skills.text import terms

from .corpus import CORPUS, corpus_graphs, require_corpus

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


def test_runs_carry_the_ports_inner_edges_and_tokens_of_their_nodes() -> None:
    """Keys and ports are made from node rows and reach bits (RunShapes): each run's agree with its graph's
    edges read directly, over the synthetic skills and a sample of real ones (their references included)."""
    corpus = corpus_graphs(CORPUS)[::20] if CORPUS is not None else ()
    for graph in [*GRAPHS[:40], *corpus]:
        tokens, near = node_tokens(graph), defaultdict(list)
        for e in graph.edges:
            if abs(e.target - e.source) < 3:
                near[e.source].append(e)
        for n, run in enumerate(runs_of(graph, tokens, [terms(node.text) for node in graph.nodes])):
            inside = run.occurrence.nodes
            assert run.ports == ports_of(graph, inside)
            inner = sorted(
                (e.source - inside.start, e.target - inside.start, e.kind.value, e.label)
                for i in inside
                for e in near[i]
                if e.target in inside
            )
            assert run.key[2] == tuple(inner) and len(run.key[0]) == len(run.key[1]) == len(inside)
            assert run.tokens == sum(tokens[i] for i in inside)
            if n % 25 == 0:
                assert run.key == run_key(graph, run.occurrence)


def reference_clusters(runs: list[Run], texts: dict[str, SkillText]) -> list[list[Run]]:
    """MotifZip's clustering as first written: every run's sketch looked up and compared afresh."""
    clusters: list[tuple[frozenset[int], list[Run]]] = []
    by_sketch: dict[int, list[int]] = {}
    for run in runs:
        start, stop = run.occurrence.start, run.occurrence.start + run.occurrence.length
        mine = texts[run.occurrence.skill].shingles(start, stop)
        sketch = sorted(mine)[:SKETCH]
        shared: dict[int, int] = {}
        for shingle in sketch:
            for c in by_sketch.get(shingle, [])[-MAX_POSTING:]:
                shared[c] = shared.get(c, 0) + 1
        closest = sorted(shared, key=shared.__getitem__, reverse=True)[:MAX_COMPARED]
        joined = next((c for c in closest if jaccard(clusters[c][0], mine) >= SIMILARITY), None)
        if joined is not None:
            clusters[joined][1].append(run)
            continue
        for shingle in sketch:
            by_sketch.setdefault(shingle, []).append(len(clusters))
        clusters.append((mine, [run]))
    return [members for _, members in clusters]


def test_a_text_seen_before_joins_the_cluster_that_comparing_it_afresh_would() -> None:
    graphs = [build_graph(load_package(s.files, s.folder)) for s in generate_library(600, seed=5)]
    texts, buckets = {}, defaultdict(list)
    for graph in graphs:
        node_terms = [terms(node.text) for node in graph.nodes]
        texts[graph.skill] = SkillText.of(node_terms)
        for run in runs_of(graph, node_tokens(graph), node_terms):
            buckets[run.key].append(run)
    repeated = 0
    for runs in buckets.values():
        runs.sort(key=lambda r: r.occurrence)
        assert clustered(runs, texts) == reference_clusters(runs, texts)
        contents = [texts[r.occurrence.skill].content(r.occurrence.start, r.occurrence.start + r.occurrence.length)
                    for r in runs]  # fmt: skip
        repeated += len(contents) - len(set(contents))
    assert repeated > 1000  # the memo was exercised


def clustered(runs: list[Run], texts: dict[str, SkillText]) -> list[list[Run]]:
    """`clusters_of` the runs' occurrences, as runs."""
    return [[runs[i] for i in cluster] for cluster in clusters_of([run.occurrence for run in runs], texts)]


def crafted_text(shingles: list[int]) -> SkillText:
    """A one-node skill whose text has exactly these shingles."""
    return SkillText(array("I", [0, len(shingles) + 2]), array("I", [0] * (len(shingles) + 2)), array("Q", shingles))


def test_a_text_rejoins_the_cluster_it_founded_only_if_it_was_compared_with_every_cluster_it_met() -> None:
    """Texts sharing their sketch (the four smallest shingles) and little else: each founds a cluster. A
    repeat of one compared with every cluster it met rejoins it; a repeat of one that met more clusters than
    are compared is compared with the same first ones again (its own ranks after them) and founds another."""
    sketch = list(range(1, SKETCH + 1))
    texts, runs = {}, []
    last = MAX_COMPARED + 1  # a text that meets more clusters than are compared
    for n, repeated in enumerate([0, 0, *range(1, last), last, last]):
        skill = f"s{n:02}"
        texts[skill] = crafted_text(sketch + [1000 * (repeated + 1) + k for k in range(20)])
        runs.append(Run(Occurrence(skill, 0, 1), ((), (), ()), 30, frozenset()))
    clusters = clustered(runs, texts)
    assert clusters == reference_clusters(runs, texts)
    assert [len(members) for members in clusters] == [2, *[1] * (last - 1), 1, 1]  # the last repeat founds


def test_shingles_hash_each_three_words_as_one_stable_hash() -> None:
    words = [terms(node.text) for node in GRAPHS[0].nodes]
    text = SkillText.of(words)
    flat = [word for node in words for word in node]
    assert list(text.trigrams) == [_combine(tuple(text.words[k : k + 3])) for k in range(len(flat) - 2)]
    assert list(text.words) == [zlib.crc32(word.encode()) for word in flat]


def test_macro_ids_digest_the_repr_of_key_ports_and_occurrences() -> None:
    for macro in COMPRESSION.macros[:50]:
        for occurrences in (macro.occurrences, macro.occurrences[:1], (Occurrence('it\'s "odd"', 3, 1),)):
            written = repr((macro.key, sorted(macro.ports), occurrences))
            assert macro_id(macro.key, macro.ports, occurrences) == "m-" + sha256(written.encode()).hexdigest()[:12]


@given(st.lists(st.integers(min_value=0, max_value=3 * REFERENCE_TOKENS), min_size=2, max_size=7))
def test_runs_said_not_to_gain_have_no_two_or_more_that_would(tokens: list[int]) -> None:
    """The gain of runs R (the formula find_macros uses), for every R of two or more, written out."""
    best = max(sum(subset) - min(subset) - REFERENCE_TOKENS * len(subset)
               for size in range(2, len(tokens) + 1) for subset in combinations(tokens, size))  # fmt: skip
    if not may_gain(tokens):
        assert best <= 0
