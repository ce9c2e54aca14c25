"""Ranking skills by whole-skill, summary and best-section evidence (server/skills/ranking.py)."""

from __future__ import annotations

import math
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.skills.graph import build_graph
from skillstate.server.skills.library import SkillLibrary, node_words
from skillstate.server.skills.package import load_package
from skillstate.server.skills.ranking import PHRASE_FLOOR, SECTION_WEIGHT, fuse, pairs, phrase_share
from skillstate.server.skills.text import terms


def skill(name: str, description: str, body: str) -> SkillLibrary:
    text = f"---\nname: {name}\ndescription: {description}\n---\n{body}"
    return build_graph(load_package({f"{name}/SKILL.md": text.encode()}, name))


LIBRARY = SkillLibrary()
for graph in (
    skill(
        "invoice-approval",
        "Approve supplier invoices against purchase orders.",
        "# Invoice approval\n\nApprove invoices.\n\n## Matching\n\nMatch each invoice line to its purchase order.\n",
    ),
    skill(
        "expense-reports",
        "Review employee expense reports and receipts.",
        "# Expense reports\n\nReview expenses.\n\n## Currency conversion for foreign receipts\n\n"
        "Convert every foreign receipt to euros at the rate of the day it was paid, and keep the rate "
        "source beside the amount.\n",
    ),
    skill(
        "travel-booking",
        "Book business travel within the travel policy.",
        "# Travel booking\n\nBook trips.\n\n## Receipts\n\nKeep receipts for expense reports and invoices.\n",
    ),
):
    LIBRARY.add(graph, version=1)


def ranked(query: str) -> list[str]:
    return list(LIBRARY.rank(terms(query), 10, 10).skills)


def test_a_query_repeating_a_description_finds_its_skill() -> None:
    assert ranked("Approve supplier invoices against purchase orders")[0] == "invoice-approval"
    assert ranked("Review employee expense reports and receipts")[0] == "expense-reports"


def test_a_query_naming_one_section_finds_the_skill_that_holds_it() -> None:
    query = "convert foreign receipt to euros at the rate of the day it was paid"
    assert ranked(query)[0] == "expense-reports"
    sections = LIBRARY.rank(terms(query), 10, 10).sections
    node = LIBRARY.graph(sections[0][0]).nodes[sections[0][1]]
    assert node.title == "Currency conversion for foreign receipts"


def test_one_matching_section_of_a_long_skill_outranks_a_short_skill_sharing_the_words() -> None:
    """Whole-skill BM25 alone prefers the short skill (its words are dense there); the section evidence and
    its phrase bonus find the long skill's one section that says what the query says."""
    chores = "".join(f"## Chore {i}\n\nRotate the {w} keys and prune the {w} caches weekly.\n\n" for i, w in
                     enumerate(("build", "lint", "docs", "deploy", "cache", "bench", "fuzz", "audit")))  # fmt: skip
    library = SkillLibrary()
    library.add(skill("release-notes", "Write release notes from changelog entries.",
                      "# Release notes\n\nCollect changelog entries into release notes.\n"), version=1)  # fmt: skip
    library.add(skill("monorepo-upkeep", "Keep a large monorepo healthy.", "# Monorepo upkeep\n\nUpkeep.\n\n"
                      + chores + "## Nightly notes\n\nThe nightly job assembles release notes from each "
                      "package's changelog entries.\n"), version=1)  # fmt: skip
    query = terms("nightly job assembles release notes from changelog entries")
    assert library.rank(query, 2, 5).skills[0] == "monorepo-upkeep"


def test_skill_names_restrict_the_ranking() -> None:
    only = frozenset({"travel-booking"})
    ranking = LIBRARY.rank(terms("expense reports receipts"), 10, 10, only)
    assert ranking.skills == ("travel-booking",) and {name for name, _ in ranking.sections} == {"travel-booking"}


def test_phrase_share_counts_consecutive_pairs_over_at_least_the_floor() -> None:
    query = pairs(terms("foreign receipt euros rate day paid"))  # five pairs
    assert phrase_share(query, "Convert every foreign receipt to euros at the rate of the day it was paid") == 1.0
    assert phrase_share(query, "a foreign receipt") == 1 / 5
    assert phrase_share(query, "paid day rate euros receipt foreign") == 0.0  # the words, not the phrase
    assert phrase_share(pairs(terms("foreign receipt")), "foreign receipt") == 1 / PHRASE_FLOOR
    assert phrase_share(frozenset(), "anything") == 0.0


evidence = st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0.01, 100.0), max_size=8)


@given(evidence, evidence, evidence)
def test_fuse_orders_skills_by_the_documented_sum_of_evidence(
    whole: dict[str, float], summary: dict[str, float], section: dict[str, float]
) -> None:
    order = fuse(whole, summary, section)
    assert sorted(order) == sorted(whole.keys() | summary.keys() | section.keys())
    totals = [whole.get(n, 0.0) + summary.get(n, 0.0) + SECTION_WEIGHT * section.get(n, 0.0) for n in order]
    assert all(a >= b or math.isclose(a, b) for a, b in pairwise(totals))


def test_a_description_sharing_a_few_of_a_long_querys_words_stays_weak_evidence() -> None:
    """Skills hold near-identical sections (one of two marks each); the query is one of them word for word,
    so the skills holding that one answer it. Another skill holds every word of the query, though in no one
    section, and its description shares two of them: the best summary match there is, but a weak one.
    Scaled by the query's information, not by the best match (as before, when this skill came first), it
    does not outweigh the sections that say it all."""
    edge_cases = (
        "## Edge cases in Salesforce\n\nSalesforce exports dates as week numbers; convert them before comparing "
        "entries. Entries marked {mark} belong to another team: skip them and list their ids.\n"
    )
    library = SkillLibrary()
    library.add(skill("catalog-entry-salesforce", "Sync each catalog entry with Salesforce, entry by entry.",
                      "# Catalog entry sync\n\nSync every catalog entry to Salesforce.\n\n## Fixtures\n\n"
                      "Entries marked test-data hold fixtures: list their ids and keep them out of the export.\n\n"
                      + edge_cases.format(mark="manual-override")), version=1)  # fmt: skip
    teams = ("ledger", "payroll", "tax", "grant", "budget", "refund", "invoice", "expense")
    for number, team in enumerate(teams):
        library.add(skill(f"{team}-audit", f"Audit the {team} for the finance team.",
                          f"# {team} audit\n\nAudit the {team} records and report.\n\n"
                          + edge_cases.format(mark=("test-data", "escalated")[number % 2])), version=1)  # fmt: skip
    query = "Edge cases in Salesforce Salesforce exports dates as week numbers; convert them before comparing entries. "
    query += "Entries marked test-data belong to another team: skip them and list their ids."
    assert library.rank(terms(query), 2, 2).skills[0] in {f"{team}-audit" for team in teams[::2]}


@given(
    st.text(alphabet="aZ9-_ .,\u212a\u0130\u03a3\u00df", max_size=30),
    st.text(alphabet="bY8-_ .\u212a\u0130", max_size=30),
)
def test_a_texts_terms_are_its_parts_terms_in_order(title: str, text: str) -> None:
    """What lets the library find a section's title terms and text terms apart (and share the text's with
    MotifZip): the terms of `title title text` are the title's twice, then the text's."""
    assert terms(f"{title} {title} {text}") == [*terms(title), *terms(title), *terms(text)]


def test_a_library_given_each_nodes_words_ranks_as_one_that_finds_them() -> None:
    given_words = SkillLibrary()
    for skill_ in LIBRARY:
        given_words.add(skill_.graph, 1, node_words(skill_.graph))
    for query in ("foreign receipts in euros", "invoice purchase order", "travel policy receipts"):
        assert given_words.rank(terms(query), 10, 10) == LIBRARY.rank(terms(query), 10, 10)
