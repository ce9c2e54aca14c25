"""MotifZip's C extension against its Python reference in motif_discovery.py and motif_runs.py: the same
candidate groups (`groups_of`) in the same order, the same runs filed in the same buckets (`file_runs_of`) and
the same hashed words (`shingled_in_python`), on real and synthetic libraries and on crafted input.

Without the extension built (no C compiler or Python headers at install), these tests are skipped with the
reason; with `SKILLSTATE_REQUIRE_EXTENSIONS=1` (CI) they fail instead.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tracemalloc
import weakref
from array import array
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.synthetic import generate_library
from skillstate.server.skills import macro_index, motif_discovery, motif_runs
from skillstate.server.skills.graph import EdgeKind, SkillGraph, build_graph
from skillstate.server.skills.library import node_tokens, node_words
from skillstate.server.skills.macro_index import MacroIndex, chosen_in_python
from skillstate.server.skills.macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Occurrence, Port
from skillstate.server.skills.motif_discovery import SkillText, groups_of, shingled_in_python
from skillstate.server.skills.motif_runs import RunShapes, file_runs_of, verifiable_nodes
from skillstate.server.skills.package import load_package

from .corpus import corpus_graphs, require_corpus

SKIPPED = "C extension tests SKIPPED"


def compiled() -> ModuleType:
    """The built extension; skips the calling test without it, or fails it when CI requires it."""
    try:
        from skillstate.server.skills import _motifzip
    except ImportError as error:
        if os.environ.get("SKILLSTATE_REQUIRE_EXTENSIONS") == "1":
            pytest.fail(f"SKILLSTATE_REQUIRE_EXTENSIONS=1 but the C extension is not built: {error}")
        pytest.skip(f"{SKIPPED}: {error} (install with a C compiler and Python's headers)")
    return _motifzip


def buckets_of(graphs: list) -> tuple[MacroIndex, list[dict[Occurrence, frozenset[Port]]]]:
    """A rebuild's buckets of two or more runs (those MotifZip groups), with the index holding their texts."""
    index = MacroIndex()
    rebuild = index.rebuilding()
    for graph in sorted(graphs, key=lambda g: g.skill):
        rebuild.add(graph, node_tokens(graph), node_words(graph))
    return index, [bucket for bucket in index._buckets.values() if len(bucket) >= MIN_OCCURRENCES]


def test_the_extension_uses_the_reference_constants() -> None:
    native = compiled()
    assert (native.SKETCH, native.MAX_COMPARED, native.MAX_POSTING) == (
        motif_discovery.SKETCH, motif_discovery.MAX_COMPARED, motif_discovery.MAX_POSTING,
    )  # fmt: skip
    assert (native.MIN_OCCURRENCES, native.REFERENCE_TOKENS) == (MIN_OCCURRENCES, REFERENCE_TOKENS)
    assert native.MAX_RUN == motif_runs.MAX_RUN
    assert native.VERSION == motif_discovery.EXTENSION_VERSION
    assert motif_discovery.SIMILARITY == 0.5  # the C tests 3 * shared >= |a| + |b|
    assert motif_discovery.groups is native.groups
    assert motif_runs.file_runs is native.file_runs
    assert motif_discovery.shingled is native.shingled
    assert macro_index.chosen is native.chosen


def groups_of_every_bucket(graphs: list[SkillGraph]) -> int:
    """Checks the C's groups of every bucket of these skills against the reference's, alone and through one
    Grouper for them all (as a rebuild groups them); how many there are."""
    native = compiled()
    index, buckets = buckets_of(graphs)
    grouping = motif_discovery.grouper(index._texts, index._tokens)
    found = 0
    for bucket in buckets:
        expected = groups_of(bucket, index._texts, index._tokens)
        assert native.groups(bucket, index._texts, index._tokens) == expected
        assert grouping(bucket) == expected
        found += len(expected)
    assert isinstance(grouping, native.Grouper)
    return found


def test_every_bucket_of_a_synthetic_library_groups_as_the_reference_does() -> None:
    compiled()
    assert (
        groups_of_every_bucket([build_graph(load_package(s.files, s.folder)) for s in generate_library(400, seed=11)])
        > 500
    )


def test_every_bucket_of_the_real_corpus_groups_as_the_reference_does() -> None:
    assert groups_of_every_bucket(list(corpus_graphs(require_corpus()))) > 100


PORTS = [frozenset(), frozenset({Port("in", EdgeKind.REQUIRES, 0)}), frozenset({Port("out", EdgeKind.VERIFIES, 1)})]


@st.composite
def crafted_buckets(draw: st.DrawFn) -> tuple[dict[Occurrence, frozenset[Port]], dict[str, SkillText], dict]:
    """Skills of one to four nodes whose words come from a small vocabulary (texts repeat, overlap and are
    short: fewer than three words is a text of its own kind), and runs of them with one of a few port sets:
    the clustering's memo, its sketch postings and its ties all come into play."""
    vocabulary = draw(st.integers(2, 12))
    skills = draw(st.integers(1, 16))  # more than MAX_COMPARED clusters can meet a text
    texts, tokens, bucket = {}, {}, {}
    for n in range(skills):
        skill = f"s{n}"
        nodes = draw(st.lists(st.lists(st.integers(0, vocabulary), max_size=9), min_size=1, max_size=4))
        words = [[f"w{word}" for word in node] for node in nodes]
        texts[skill] = SkillText.of(words)
        tokens[skill] = tuple(draw(st.integers(0, 4 * REFERENCE_TOKENS)) for _ in nodes)
        for start in range(len(nodes)):
            for length in range(1, len(nodes) - start + 1):
                if draw(st.booleans()):
                    bucket[Occurrence(skill, start, length)] = draw(st.sampled_from(PORTS))
    return bucket, texts, tokens


@settings(max_examples=400)
@given(crafted_buckets())
def test_crafted_buckets_group_as_the_reference_does(case: tuple) -> None:
    native = compiled()
    bucket, texts, tokens = case
    expected = groups_of(bucket, texts, tokens)
    assert native.groups(bucket, texts, tokens) == expected
    grouping = native.Grouper(texts, tokens)
    assert grouping(bucket) == expected
    assert grouping(bucket) == expected  # (the skills it read serve the next call)


def test_a_bucket_of_many_near_duplicates_groups_as_the_reference_does() -> None:
    """Eighty families of near-duplicate texts (each text its own, one shingle apart) that all share one
    sketch shingle: its posting holds more clusters than are looked back over (MAX_POSTING), and each text
    meets more clusters than are compared (MAX_COMPARED), its family's ranked first."""
    native = compiled()
    families = 80
    texts, tokens, bucket = {}, {}, {}
    for n in range(3 * families):
        skill, family = f"s{n:03}", n % families
        shingles = [
            1,
            *(100 * family + k for k in (10, 11, 12)),
            *range(10**6 * (family + 1), 10**6 * (family + 1) + 20),
            10**9 + n,
        ]
        texts[skill] = SkillText(array("I", [0, len(shingles) + 2]), array("I", [0] * (len(shingles) + 2)),
                                 array("Q", shingles))  # fmt: skip
        tokens[skill] = (40,)
        bucket[Occurrence(skill, 0, 1)] = PORTS[n // families % 2]
    expected = groups_of(bucket, texts, tokens)
    assert len(expected) == families  # each family: its first and third text share ports
    assert native.groups(bucket, texts, tokens) == expected


def one_node_text(shingles: list[int]) -> SkillText:
    return SkillText(array("I", [0, len(shingles) + 2]), array("I", [0] * (len(shingles) + 2)), array("Q", shingles))


def grouped(texts: dict[str, SkillText]) -> tuple[list[list[str]], list[list[str]]]:
    """The skills of each group, by the reference and by the C, of one-node runs of these texts."""
    native = compiled()
    bucket = {Occurrence(skill, 0, 1): frozenset() for skill in texts}
    tokens = {skill: (40,) for skill in texts}
    expected, found = groups_of(bucket, texts, tokens), native.groups(bucket, texts, tokens)
    return [[o.skill for o in group[1]] for group in expected], [[o.skill for o in group[1]] for group in found]


def test_a_cluster_as_far_back_as_a_posting_looks_is_compared() -> None:
    """MAX_POSTING + 1 clusters filed under one sketch shingle: the second is the oldest a text still meets."""
    texts = {f"a{n:02}": one_node_text([1, *range(10**6 * (n + 1), 10**6 * (n + 1) + 20)]) for n in range(65)}
    texts["b"] = one_node_text([1, 2, 3, 4, *range(2 * 10**6, 2 * 10**6 + 20)])  # a01's, and 2, 3, 4
    expected, found = grouped(texts)
    assert expected == [["a01", "b"]]
    assert found == expected


def test_a_text_that_met_as_many_clusters_as_are_compared_is_compared_again() -> None:
    """A text meeting exactly MAX_COMPARED clusters founds its own without having met every cluster it could:
    its repeat is compared with those first again, and founds another."""
    texts = {f"c{n}": one_node_text([1, 2, 3, 4, *range(10**6 * (n + 1), 10**6 * (n + 1) + 30)]) for n in range(8)}
    repeated = [1, 2, 3, 4, *range(10**9, 10**9 + 20)]
    texts["t1"], texts["t2"] = one_node_text(repeated), one_node_text(repeated)
    expected, found = grouped(texts)
    assert expected == []
    assert found == expected


def test_the_last_of_the_clusters_compared_is_compared() -> None:
    """Eight clusters share a text's whole sketch; the one it resembles was filed last, so it ranks eighth
    (MAX_COMPARED) and is still compared."""
    texts = {f"c{n}": one_node_text([1, 2, 3, 4, *range(10**6 * (n + 1), 10**6 * (n + 1) + 30)]) for n in range(8)}
    texts["q"] = one_node_text([1, 2, 3, 4, *range(8 * 10**6, 8 * 10**6 + 30), 10**9])
    expected, found = grouped(texts)
    assert expected == [["c7", "q"]]
    assert found == expected


ROWS = [(f"r{n}", ((), ()), tuple((step, "requires", "") for step in (1, -1) if n % (2 + (step > 0)) == 0))
        for n in range(6)]  # fmt: skip
ROWS.append(("r6", (("file",), ()), ((-(2**70), "data", "x"), (-sys.maxsize, "uses", ""), (0, "data", "self"),
                                     (2, "order", ""), (sys.maxsize, "uses", ""), (2**70, "data", "y"))))  # fmt: skip
"""Rows of a few kinds: edges one node back, one forward, both or none, and one whose edges reach its own node,
two nodes on, or far beyond any run (past what a machine word holds)."""


@st.composite
def filings(draw: st.DrawFn) -> list[tuple]:
    """Skills of up to 9 nodes over seven rows, with reach from every port group, nodes in two files that
    alternate (equal names, distinct objects), and verifiable flags that are any truthy or falsy values."""
    skills = []
    for n in range(draw(st.integers(1, 6))):
        count = draw(st.integers(0, 9))
        rows = [draw(st.integers(0, len(ROWS) - 1)) for _ in range(count)]
        reach = [draw(st.sampled_from([0, 1, 8, 1 << 6, (1 << 13) | 3, 1 << 40, 1 << 80])) for _ in range(count)]
        files = ["".join(["SKILL", ".md"]) if draw(st.integers(0, 3)) else "references/a.md" for _ in range(count)]
        flags = st.tuples(*[st.sampled_from([True, False, 0, 1, (), (0,)]) for _ in range(count)])
        skills.append((f"s{n}", rows, reach, files, draw(st.one_of(st.none(), flags))))
    return skills


@given(filings(), st.integers(0, 2))
def test_crafted_filings_file_as_the_reference_does(skills: list[tuple], spare: int) -> None:
    native = compiled()

    def filing(file_runs: object) -> tuple:
        shapes, buckets = RunShapes(), []
        shapes._row_list = list(ROWS)

        def grow(key: int) -> None:
            buckets.extend({} for _ in range(len(buckets), key + 1 + spare))

        for skill, rows, reach, files, verifiable in skills:
            file_runs(shapes, skill, rows, reach, files, verifiable, buckets, grow, Occurrence)  # type: ignore[operator]
        return shapes.keys, dict(shapes._keys), [list(bucket.items()) for bucket in buckets]

    assert filing(native.file_runs) == filing(file_runs_of)


def test_a_build_from_other_sources_is_not_used() -> None:
    """An extension built from older sources (here: the same file, built with another VERSION) is passed
    over with a warning, and the Python runs."""
    compiled()
    compiler = sysconfig.get_config_var("CC") or "cc"
    if shutil.which(compiler.split()[0]) is None:
        pytest.skip(f"{SKIPPED}: no C compiler ({compiler}) to build an old extension with")
    source = Path(motif_discovery.__file__).with_name("_motifzip.c")
    with tempfile.TemporaryDirectory() as folder:
        built = Path(folder, "_motifzip" + sysconfig.get_config_var("EXT_SUFFIX"))
        command = [*compiler.split(), "-shared", "-fPIC", "-O0", "-DVERSION=1", f"-I{sysconfig.get_paths()['include']}"]
        subprocess.run([*command, str(source), "-o", str(built)], check=True, capture_output=True)
        code = (
            "import warnings, skillstate.server.skills as skills\n"
            f"skills.__path__.insert(0, {folder!r})\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    from skillstate.server.skills import motif_discovery as m\n"
            "print(m.groups is m.groups_of, [str(w.message) for w in caught])\n"
        )
        shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.startswith("True")
    assert "was built from other sources" in shown.stdout


def candidates_of(graphs: list[SkillGraph]) -> tuple[MacroIndex, list]:
    """A rebuild's candidates, sorted as its choice takes them, with the index holding their token counts."""
    index = buckets_of(graphs)[0]
    candidates = [
        (-group[4], group[2], key, group)
        for key, bucket in index._buckets.items()
        for group in groups_of(bucket, index._texts, index._tokens)
    ]
    candidates.sort(key=lambda candidate: candidate[:2])
    return index, candidates


def test_a_rebuild_chooses_as_the_reference_chooses() -> None:
    native = compiled()
    graphs = [build_graph(load_package(s.files, s.folder)) for s in generate_library(400, seed=23)]
    for library in (graphs, list(corpus_graphs(require_corpus()))):
        index, candidates = candidates_of(library)
        expected = chosen_in_python(candidates, index._tokens)
        assert native.chosen(candidates, index._tokens) == expected
        assert sum(len(found) < len(candidates[position][3][1]) for position, found in expected) > 0


@st.composite
def overlapping_candidates(draw: st.DrawFn) -> tuple[list, dict]:
    """Candidates over a few skills of up to 70 nodes (past one 64-bit word), whose occurrences overlap."""
    skills = [f"s{n}" for n in range(draw(st.integers(2, 5)))]
    tokens = {skill: tuple(draw(st.lists(st.integers(0, 40), min_size=70, max_size=70))) for skill in skills}
    candidates = []
    for n in range(draw(st.integers(0, 12))):
        chosen_skills = draw(st.lists(st.sampled_from(skills), min_size=1, max_size=len(skills), unique=True))
        found = tuple(
            Occurrence(skill, draw(st.integers(0, 66)), draw(st.integers(1, 3))) for skill in sorted(chosen_skills)
        )
        candidates.append((-n, found[0], None, (frozenset(), found, found[0], 0, 0)))
    return candidates, tokens


@given(overlapping_candidates())
def test_crafted_candidates_are_chosen_as_the_reference_chooses(case: tuple[list, dict]) -> None:
    native = compiled()
    candidates, tokens = case
    assert native.chosen(candidates, tokens) == chosen_in_python(candidates, tokens)


class ReadsItsGrouper:
    """A skill's text whose `starts` calls a Grouper (the one that reads it) on another skill."""

    def __init__(self, text: SkillText) -> None:
        self.text, self.grouping = text, None

    @property
    def starts(self) -> array:
        self.grouping({Occurrence("a", 0, 1): frozenset()})  # type: ignore[misc]
        return self.text.starts

    words = property(lambda self: self.text.words)
    trigrams = property(lambda self: self.text.trigrams)


def test_bad_input_is_refused_with_the_reason() -> None:
    native = compiled()
    text = ReadsItsGrouper(SkillText.of([["one", "two"]]))
    reentrant = text.grouping = native.Grouper({"a": SkillText.of([["one"]]), "b": text}, {"a": (5,), "b": (5,)})
    texts = {"a": SkillText.of([["one", "two"]])}
    with pytest.raises(KeyError, match="'b'"):
        native.groups({Occurrence("b", 0, 1): frozenset()}, texts, {"b": (5,)})
    with pytest.raises(ValueError, match="outside its skill's nodes"):
        native.groups({Occurrence("a", 0, 2): frozenset()}, texts, {"a": (5,)})
    with pytest.raises(TypeError, match="Occurrence"):
        native.groups({("a", 0): frozenset()}, texts, {"a": (5,)})
    with pytest.raises(TypeError):
        native.groups([(Occurrence("a", 0, 1), frozenset())], texts, {"a": (5,)})
    with pytest.raises(TypeError, match="token counts must be a tuple"):
        native.groups({Occurrence("a", 0, 1): frozenset()}, texts, {"a": [5]})
    with pytest.raises(ValueError, match="outside its skill's nodes"):  # (start + length overflows a word)
        native.groups({Occurrence("a", 0, 1): frozenset(), Occurrence("a", 1, sys.maxsize): frozenset()},
                      texts, {"a": (5, 5)})  # fmt: skip
    with pytest.raises(OverflowError, match="64 bits"):
        native.groups({Occurrence("a", 0, 2): frozenset()}, {"a": SkillText.of([["x"], ["y"]])},
                      {"a": (2**62, 2**62)})  # fmt: skip
    grouping = native.Grouper(texts, {"a": (5,)})
    with pytest.raises(KeyError, match="'b'"):  # a skill it cannot read is not kept: it fails again, and the
        grouping({Occurrence("b", 0, 1): frozenset()})  # skills it read serve on
    with pytest.raises(KeyError, match="'b'"):
        grouping({Occurrence("b", 0, 1): frozenset()})
    assert grouping({Occurrence("a", 0, 1): frozenset()}) == []
    texts.clear()  # (against the rules) what it read, it holds
    gc.collect()
    assert grouping({Occurrence("a", 0, 1): frozenset()}) == []
    with pytest.raises(TypeError):
        native.Grouper(texts)
    with pytest.raises(RuntimeError, match="from inside its own call"):  # (its tables would change under it)
        reentrant({Occurrence("b", 0, 1): frozenset()})
    with pytest.raises(TypeError, match="keywords"):
        grouping(runs={})


def test_a_grouper_in_a_cycle_is_collected() -> None:
    native = compiled()
    marker = {"a value the texts hold"}
    alive = weakref.ref(marker)
    texts: dict[str, object] = {"marker": marker}
    texts["grouper"] = native.Grouper(texts, {})  # texts -> its Grouper -> texts
    del texts, marker
    gc.collect()
    assert alive() is None


def test_the_reference_runs_when_extensions_are_turned_off() -> None:
    code = "from skillstate.server.skills import motif_discovery as m; print(m.groups is m.groups_of)"
    environment = {**os.environ, "SKILLSTATE_NO_EXTENSIONS": "1"}
    shown = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "True"


def filed(graphs: list[SkillGraph], file_runs: object) -> tuple[list, list[list]]:
    """The keys and buckets a rebuild's filing makes with this `file_runs` (each bucket's runs, in order)."""
    shapes, buckets = RunShapes(), []

    def grow(key: int) -> None:
        buckets.extend({} for _ in range(len(buckets), key + 1))

    for graph in sorted(graphs, key=lambda g: g.skill):
        words = node_words(graph)
        rows, reach, verified = shapes._rows_of(graph, words)
        files = [node.provenance.file for node in graph.nodes]
        verifiable = verifiable_nodes(graph)
        assert verifiable_nodes(graph, verified) == verifiable  # the rows' pass finds the verified nodes too
        every = None if all(verifiable) else verifiable
        file_runs(shapes, graph.skill, rows, reach, files, every, buckets, grow, Occurrence)  # type: ignore[operator]
    return shapes.keys, [list(bucket.items()) for bucket in buckets]


def test_runs_are_filed_as_the_reference_files_them() -> None:
    native = compiled()
    graphs = [build_graph(load_package(s.files, s.folder)) for s in generate_library(300, seed=13)]
    graphs += list(corpus_graphs(require_corpus()))[:150]  # references: runs never span two files
    keys, buckets = filed(graphs, native.file_runs)
    assert (keys, buckets) == filed(graphs, file_runs_of)
    assert sum(map(len, buckets)) > 5000
    occurrences = [o for bucket in buckets for o, _ in bucket]
    assert all(type(o) is Occurrence for o in occurrences)
    assert {hash(o) for o in occurrences[:100]} == {hash(Occurrence(*o)) for o in occurrences[:100]}
    assert not any(map(gc.is_tracked, occurrences))  # a str and two ints: no collection needs to walk them


words_of_nodes = st.lists(st.lists(st.text(min_size=1, max_size=6), max_size=6), max_size=5)


@given(words_of_nodes)
def test_words_are_hashed_as_the_reference_hashes_them(node_terms: list[list[str]]) -> None:
    native = compiled()
    assert native.shingled(node_terms) == shingled_in_python(node_terms)


def test_the_corpus_words_are_hashed_as_the_reference_hashes_them() -> None:
    native = compiled()
    for graph in corpus_graphs(require_corpus())[:200]:
        words = node_words(graph)
        assert native.shingled(words) == shingled_in_python(words)


def test_calls_keep_nothing_they_allocate() -> None:
    """Repeated calls leave no memory behind, and every reference and buffer a call takes is given back (a
    skill's name and text, a shared set of ports, a text's array, the Grouper type)."""
    native = compiled()
    graphs = [build_graph(load_package(s.files, s.folder)) for s in generate_library(60, seed=17)]
    index, buckets = buckets_of(graphs)
    words = [node_words(graph) for graph in graphs]

    def calls() -> None:
        grouping = native.Grouper(index._texts, index._tokens)
        for bucket in buckets:
            native.groups(bucket, index._texts, index._tokens)
            grouping(bucket)
        for node_terms in words:
            native.shingled(node_terms)
        filed(graphs, native.file_runs)
        long = RunShapes()  # a skill of 300 nodes: starts past the small ints Python keeps
        long._row_list = list(ROWS)
        native.file_runs(long, "long", [n % 6 for n in range(300)], [0] * 300, ["f"] * 300, None,
                         [{} for _ in range(600)], lambda key: None, Occurrence)  # fmt: skip
        native.chosen(candidates, index._tokens)

    candidates = candidates_of(graphs)[1]
    calls()
    gc.collect()
    ports = filed(graphs, native.file_runs)[1][0][0][1]  # a set of ports every call shares (`_ports` memoizes)
    shared = [graphs[0].skill, ports, index._texts[graphs[0].skill], index._texts[graphs[0].skill].words,
              native.Grouper]  # fmt: skip
    references = [sys.getrefcount(value) for value in shared]
    tracemalloc.start()
    try:
        calls()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):
            calls()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes kept by 20 rounds of calls"
    assert [sys.getrefcount(value) for value in shared] == references


def test_bad_filing_input_is_refused_with_the_reason() -> None:
    native = compiled()
    skill = generate_library(1, seed=19)[0]
    graph = build_graph(load_package(skill.files, skill.folder))
    shapes = RunShapes()
    rows, reach, _ = shapes._rows_of(graph, node_words(graph))
    files = [node.provenance.file for node in graph.nodes]
    with pytest.raises(ValueError, match="one item a node"):
        native.file_runs(shapes, graph.skill, rows, reach[:-1], files, None, [], lambda key: None, Occurrence)
    with pytest.raises(ValueError, match="short of the key"):
        native.file_runs(shapes, graph.skill, rows, reach, files, None, [], lambda key: None, Occurrence)
    with pytest.raises(TypeError, match="a bucket is a dict"):
        native.file_runs(shapes, graph.skill, rows, reach, files, None, [[]] * 999, lambda key: None, Occurrence)
    unknown, malformed = RunShapes(), RunShapes()
    malformed._row_list = [("a", ((), ()), ((1, "order", ""),)), ("b", ((), ()), "no edges")]
    with pytest.raises(IndexError, match="row number 7: there are 0 rows"):
        native.file_runs(unknown, "s", [0, 7], [0, 0], ["f", "f"], None, [], lambda key: None, Occurrence)
    with pytest.raises(IndexError, match="row number -1"):
        native.file_runs(unknown, "s", [0, -1], [0, 0], ["f", "f"], None, [], lambda key: None, Occurrence)
    with pytest.raises(TypeError, match="a row must be"):
        buckets: list[dict] = [{}]  # (the run of row 0 gets key 0)
        native.file_runs(malformed, "s", [0, 0, 1], [0, 0, 0], ["f"] * 3, None, buckets, lambda key: None, Occurrence)
    assert (unknown.keys, unknown._keys, malformed._keys) == ([], {}, {(0,): 0})  # the bad run made no key
    with pytest.raises(TypeError, match="a term must be a str"):
        native.shingled([["one", 2]])
    a, b, c, d = (Occurrence(skill, 0, 1) for skill in "abcd")
    with pytest.raises(TypeError, match="a candidate must be"):
        native.chosen([(0, a, None)], {})
    with pytest.raises(KeyError, match="'b'"):  # the second loses a's node: the gain of b's and d's is counted
        native.chosen([(0, a, None, (frozenset(), (a, c), a, 0, 0)),
                       (0, a, None, (frozenset(), (a, b, d), a, 0, 0))], {"a": (5,)})  # fmt: skip
