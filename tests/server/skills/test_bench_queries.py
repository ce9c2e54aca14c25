"""The registry bench's section queries: who makes a query, and the odds that each maker is its target."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from bench.skill_queries import BenchQuery, section_queries
from skillstate.server.skills.package import SkillPackage, load_package

SHARED = "## Rotate the keys\n\nRotate every signing key before it expires and record the new key id in the vault.\n"
"""A section several skills hold word for word: its query cannot tell them apart."""


def package(name: str, own_sections: int, shared: int) -> SkillPackage:
    sections = [f"## {name} part {k}\n\nDescribe the {name} part {k} in enough words to make a query of it.\n"
                for k in range(own_sections)]  # fmt: skip
    sections[own_sections // 2 : own_sections // 2] = [SHARED] * shared
    text = f"---\nname: {name}\ndescription: The {name} skill.\n---\n# {name}\n\nIntro.\n\n" + "\n".join(sections)
    return load_package({f"{name}/SKILL.md": text.encode()}, name)


LIBRARY = [
    package("alpha", 1, shared=1),
    package("bravo", 2, shared=2),
    package("charlie", 0, shared=1),
    package("delta", 3, shared=0),
]
"""Usable sections: alpha 2 (one shared), bravo 4 (two shared), charlie 1 (shared), delta 3 (none shared)."""
ODDS = {"alpha": Fraction(1, 4), "bravo": Fraction(1, 4), "charlie": Fraction(1, 2)}
"""Each maker section's weight is one over its skill's usable sections: alpha 1/2, bravo 1/4 + 1/4, charlie 1;
normalized, by hand."""


def shared_queries(seeds: range, count: int) -> list[BenchQuery]:
    return [q for seed in seeds for q in section_queries(LIBRARY, "section", count, seed) if "Rotate" in q.text]


def test_a_shared_section_is_made_by_every_section_holding_it_with_odds_one_over_their_skills_sections() -> None:
    query = shared_queries(range(100), 1)[0]
    assert sorted(skill for skill, _, _ in query.makers) == ["alpha", "bravo", "bravo", "charlie"]
    assert abs(sum(query.odds) - 1) < 1e-12
    assert query.skill_odds.keys() == ODDS.keys()
    for skill, odds in ODDS.items():
        assert abs(query.skill_odds[skill] - float(odds)) < 1e-12


def test_the_odds_are_how_often_the_sampler_makes_the_query_from_each_skill() -> None:
    """Drawn 3,000 times (seeded), two skills a draw without replacement, the shared query's targets fall as its
    odds say."""
    targets = Counter(query.target for query in shared_queries(range(3000), 2))
    drawn = sum(targets.values())
    assert drawn > 2700  # two skills in four a draw, times 1/2 + 2/4 + 1: 3,000 expected
    for skill, odds in ODDS.items():
        assert abs(targets[skill] / drawn - float(odds)) < 0.03, (skill, targets[skill] / drawn, odds)


def test_a_query_only_its_target_makes_has_it_as_the_one_answer() -> None:
    queries = [q for seed in range(50) for q in section_queries(LIBRARY, "section", 4, seed) if "Rotate" not in q.text]
    assert queries
    for query in queries:
        assert query.skill_odds == {query.target: 1.0}
        assert query.answers == {query.target}
