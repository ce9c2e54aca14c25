"""MotifZip's C extension (`_motifzip.groups`) against its reference, `motif_discovery.groups_of`: the same
candidate groups, in the same order, on every bucket of real and synthetic libraries and on crafted ones.

Without the extension built (no C compiler or Python headers at install), these tests are skipped with the
reason; with `SKILLSTATE_REQUIRE_EXTENSIONS=1` (CI) they fail instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from array import array
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.synthetic import generate_library
from skillstate.server.skills import motif_discovery
from skillstate.server.skills.graph import EdgeKind, build_graph
from skillstate.server.skills.library import node_tokens, node_words
from skillstate.server.skills.macro_index import MacroIndex
from skillstate.server.skills.macros import MIN_OCCURRENCES, REFERENCE_TOKENS, Occurrence, Port
from skillstate.server.skills.motif_discovery import SkillText, groups_of
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
    assert motif_discovery.SIMILARITY == 0.5  # the C tests 3 * shared >= |a| + |b|
    assert motif_discovery.groups is native.groups


def test_every_bucket_of_a_synthetic_library_groups_as_the_reference_does() -> None:
    native = compiled()
    graphs = [build_graph(load_package(s.files, s.folder)) for s in generate_library(400, seed=11)]
    index, buckets = buckets_of(graphs)
    found = 0
    for bucket in buckets:
        expected = groups_of(bucket, index._texts, index._tokens)
        assert native.groups(bucket, index._texts, index._tokens) == expected
        found += len(expected)
    assert found > 500


def test_every_bucket_of_the_real_corpus_groups_as_the_reference_does() -> None:
    native = compiled()
    index, buckets = buckets_of(list(corpus_graphs(require_corpus())))
    found = 0
    for bucket in buckets:
        expected = groups_of(bucket, index._texts, index._tokens)
        assert native.groups(bucket, index._texts, index._tokens) == expected
        found += len(expected)
    assert found > 100


PORTS = [frozenset(), frozenset({Port("in", EdgeKind.REQUIRES, 0)}), frozenset({Port("out", EdgeKind.VERIFIES, 1)})]


@st.composite
def crafted_buckets(draw: st.DrawFn) -> tuple[dict[Occurrence, frozenset[Port]], dict[str, SkillText], dict]:
    """Skills of one to four nodes whose words come from a small vocabulary (texts repeat, overlap and are
    short: fewer than three words is a text of its own kind), and runs of them with one of a few port sets:
    the clustering's memo, its sketch postings and its ties all come into play."""
    vocabulary = draw(st.integers(2, 12))
    skills = draw(st.integers(1, 9))
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
    assert native.groups(bucket, texts, tokens) == groups_of(bucket, texts, tokens)


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


def test_bad_input_is_refused_with_the_reason() -> None:
    native = compiled()
    texts = {"a": SkillText.of([["one", "two"]])}
    with pytest.raises(KeyError, match="'b'"):
        native.groups({Occurrence("b", 0, 1): frozenset()}, texts, {"b": (5,)})
    with pytest.raises(ValueError, match="outside its skill's nodes"):
        native.groups({Occurrence("a", 0, 2): frozenset()}, texts, {"a": (5,)})
    with pytest.raises(TypeError, match="Occurrence"):
        native.groups({("a", 0): frozenset()}, texts, {"a": (5,)})
    with pytest.raises(TypeError):
        native.groups([(Occurrence("a", 0, 1), frozenset())], texts, {"a": (5,)})


def test_the_reference_runs_when_extensions_are_turned_off() -> None:
    code = "from skillstate.server.skills import motif_discovery as m; print(m.groups is m.groups_of)"
    environment = {**os.environ, "SKILLSTATE_NO_EXTENSIONS": "1"}
    shown = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "True"
