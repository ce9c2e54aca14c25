"""The BM25 index against Okapi BM25 written out term by term, and the scale a full match scores."""

from __future__ import annotations

import math
from itertools import zip_longest

from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.skills.bm25 import BM25Index

K1, B = 1.2, 0.75
words = st.sampled_from(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])
documents = st.dictionaries(st.integers(0, 30), st.lists(words, min_size=1, max_size=12), min_size=1, max_size=12)


def okapi(documents: dict[int, list[str]], query: list[str]) -> dict[int, float]:
    """Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))), one term at a time."""
    count = len(documents)
    average = sum(map(len, documents.values())) / count
    scores = {}
    for key, document in documents.items():
        score = 0.0
        for term in set(query):
            frequency = document.count(term)
            if frequency:
                held_by = sum(term in d for d in documents.values())
                idf = math.log(1 + (count - held_by + 0.5) / (held_by + 0.5))
                score += idf * frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * len(document) / average))
        if score:
            scores[key] = score
    return scores


def index_of(documents: dict[int, list[str]]) -> BM25Index[int]:
    index: BM25Index[int] = BM25Index()
    for key, document in documents.items():
        index.add(key, document)
    return index


@given(documents, st.lists(words, min_size=1, max_size=4), documents)
def test_scores_are_okapi_bm25_after_any_adds_and_removes(
    documents: dict[int, list[str]], query: list[str], removed: dict[int, list[str]]
) -> None:
    index = index_of({**removed, **documents})
    for key in removed.keys() - documents.keys():
        index.remove(key)
    expected = okapi(documents, query)
    found = dict(index.search(query, len(documents)))
    assert found.keys() == expected.keys()
    assert all(math.isclose(found[key], expected[key]) for key in expected)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 8), st.lists(words, max_size=6)),  # a document may hold no term
        st.tuples(st.just("remove"), st.integers(0, 8), st.none()),
        st.tuples(st.just("read"), st.none(), st.lists(words, min_size=1, max_size=3)),
    ),
    max_size=40,
)
Operation = tuple[str, int | None, list[str] | None]


def apply(index: BM25Index[int], held: dict[int, list[str]], operation: Operation) -> None:
    """One operation on the index and on `held`, what it should hold; a read checks the index against it."""
    name, key, value = operation
    if name == "add" and key is not None and value is not None:
        index.add(key, value)
        held[key] = value
    elif name == "remove" and key is not None:
        index.remove(key, held.pop(key, None))
    elif value is not None:
        assert_reads_as_okapi(index, held, value)


def assert_reads_as_okapi(index: BM25Index[int], held: dict[int, list[str]], query: list[str]) -> None:
    """Scores, the terms held and the query's information, against Okapi BM25 over the documents held."""
    expected = okapi(held, query) if held else {}
    found = dict(index.search(query, 10))
    assert found.keys() == expected.keys()
    assert all(math.isclose(found[k], expected[k]) for k in expected)
    held_by = {term: sum(term in d for d in held.values()) for term in set(query)}
    assert {term: index.holds(term) for term in held_by} == {term: n > 0 for term, n in held_by.items()}
    information = sum(math.log(1 + (len(held) - n + 0.5) / (n + 0.5)) for n in held_by.values())
    assert math.isclose(index.information(query), information)


@given(operations)
def test_any_sequence_of_adds_removes_and_reads_scores_as_okapi_over_what_is_held(
    operations: list[Operation],
) -> None:
    """Reads settle what was staged; slots freed and taken again in between must never mix two documents,
    and a term only removed documents held is held by none."""
    index: BM25Index[int] = BM25Index()
    held: dict[int, list[str]] = {}
    for operation in operations:
        apply(index, held, operation)


@given(operations, operations, operations, st.lists(words, min_size=1, max_size=3))
def test_a_fork_and_its_original_change_apart(
    before: list[Operation], mine: list[Operation], theirs: list[Operation], query: list[str]
) -> None:
    """After a fork, each of the two reads as Okapi over its own documents, whatever the other does (the two
    share postings until one of them writes)."""
    index: BM25Index[int] = BM25Index()
    held: dict[int, list[str]] = {}
    for operation in before:
        apply(index, held, operation)
    fork = index.fork()
    forked = dict(held)
    for ours, other in zip_longest(mine, theirs):
        if ours is not None:
            apply(index, held, ours)
        if other is not None:
            apply(fork, forked, other)
    assert_reads_as_okapi(index, held, query)
    assert_reads_as_okapi(fork, forked, query)


@given(documents, st.lists(words, min_size=1, max_size=4), st.integers(1, 6))
def test_the_best_few_are_okapi_s_best_ties_broken_by_key(
    documents: dict[int, list[str]], query: list[str], limit: int
) -> None:
    """A limit that cuts through documents scoring alike keeps the smallest keys among them."""
    expected = okapi(documents, query)
    found = index_of(documents).search(query, limit)
    assert len(found) == min(limit, len(expected))
    assert all(math.isclose(score, expected[key]) for key, score in found)
    assert [score for _, score in found] == sorted((score for _, score in found), reverse=True)
    if len(found) < limit:
        return
    last_key, last = found[-1]
    left_out = expected.keys() - {key for key, _ in found}
    assert all(expected[key] < last or math.isclose(expected[key], last) for key in left_out)
    assert all(key > last_key for key in left_out if math.isclose(expected[key], last))


def test_many_documents_scoring_alike_come_in_key_order() -> None:
    index: BM25Index[str] = BM25Index()
    for n in reversed(range(3_000)):  # a library repeats a section word for word in thousands of skills (added in
        # reverse, so that the order of their slots is not that of their keys)
        index.add(f"skill-{n:04d}", ["shared", "routine"] if n % 3 else ["other", "routine", "text"])
    index.add("the-one", ["shared", "shared", "routine"])
    found = index.search(["shared", "routine"], 5)
    assert [key for key, _ in found] == ["the-one", "skill-0001", "skill-0002", "skill-0004", "skill-0005"]
    assert found[1][1] == found[4][1] < found[0][1]


@given(documents, st.lists(words, min_size=1, max_size=6))
def test_information_is_the_sum_of_the_query_terms_idf(documents: dict[int, list[str]], query: list[str]) -> None:
    count = len(documents)
    held_by = {term: sum(term in d for d in documents.values()) for term in set(query)}
    expected = sum(math.log(1 + (count - n + 0.5) / (n + 0.5)) for n in held_by.values())
    assert math.isclose(index_of(documents).information(query), expected)


def test_a_document_of_average_length_holding_each_query_term_once_scores_the_information() -> None:
    documents = {1: ["alpha", "beta", "gamma"], 2: ["delta", "beta", "zeta"], 3: ["eta", "theta", "iota"]}
    index = index_of(documents)
    query = ["alpha", "beta", "gamma"]
    assert math.isclose(dict(index.search(query, 3))[1], index.information(query))
    assert index.information(["never", "seen"]) > index.information(["alpha", "beta"])  # unheld terms weigh most


def test_scores_equal_but_for_rounding_tie_and_go_by_key() -> None:
    """Two documents whose scores are the same sum in another order (one idf for gamma and zeta) differ in
    their last bit unrounded; they tie, and the smaller key comes first (a case hypothesis found)."""
    documents = {key: ["alpha"] for key in range(6)} | {
        6: ["alpha"] * 9 + ["zeta"],
        7: ["alpha"] * 8 + ["gamma"],
        8: ["alpha"] * 6 + ["beta"] * 3 + ["gamma", "gamma", "zeta"],
        9: ["alpha"] * 6 + ["beta"] * 3 + ["gamma", "zeta", "zeta"],
    }
    expected = okapi(documents, ["alpha", "gamma", "zeta"])
    assert math.isclose(expected[8], expected[9])
    assert [key for key, _ in index_of(documents).search(["alpha", "gamma", "zeta"], 1)] == [8]
