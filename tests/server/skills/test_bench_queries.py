"""The registry bench's section queries: who makes a query, and the odds that each maker is its target."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from bench.skill_queries import section_queries
from skillstate.server.skills.package import SkillPackage, load_package

SHARED = "## Rotate the keys\n\nRotate every signing key before it expires and record the new key id in the vault.\n"
"""A section three skills hold word for word: its query cannot tell them apart."""


def package(name: str, own_sections: int, shared: bool) -> SkillPackage:
    sections = [f"## {name} part {k}\n\nDescribe the {name} part {k} in enough words to make a query of it.\n"
                for k in range(own_sections)]  # fmt: skip
    if shared:
        sections.insert(own_sections // 2, SHARED)
    text = f"---\nname: {name}\ndescription: The {name} skill.\n---\n# {name}\n\nIntro.\n\n" + "\n".join(sections)
    return load_package({f"{name}/SKILL.md": text.encode()}, name)


LIBRARY = [
    package("alpha", 1, shared=True),
    package("bravo", 2, shared=True),
    package("charlie", 0, shared=True),
    package("delta", 3, shared=False),
]
"""Usable sections: alpha 2, bravo 3, charlie 1 (the shared one each), delta 3."""


def test_a_shared_section_is_made_by_every_skill_holding_it_with_odds_one_over_their_sections() -> None:
    query = next(q for seed in range(100) for q in section_queries(LIBRARY, "section", 1, seed) if "Rotate" in q.text)
    assert sorted(skill for skill, _, _ in query.makers) == ["alpha", "bravo", "charlie"]
    # odds proportional to 1/2, 1/3 and 1/1, computed by hand
    expected = {"alpha": Fraction(3, 11), "bravo": Fraction(2, 11), "charlie": Fraction(6, 11)}
    assert query.skill_odds.keys() == expected.keys()
    for skill, odds in expected.items():
        assert abs(query.skill_odds[skill] - float(odds)) < 1e-12


def test_the_odds_are_how_often_the_sampler_makes_the_query_from_each_skill() -> None:
    """Drawn 6,000 times (seeded), the shared query's targets fall as its odds say."""
    targets: Counter[str] = Counter()
    odds: dict[str, float] = {}
    for seed in range(6000):
        (query,) = section_queries(LIBRARY, "section", 1, seed)
        if "Rotate" in query.text:
            targets[query.target] += 1
            odds = query.skill_odds
    drawn = sum(targets.values())
    assert drawn > 2500  # a skill in four, times 1/2 + 1/3 + 1: 2,750 expected
    for skill, chance in odds.items():
        assert abs(targets[skill] / drawn - chance) < 0.03, (skill, targets[skill] / drawn, chance)


def test_a_query_only_its_target_makes_has_it_as_the_one_answer() -> None:
    queries = [q for seed in range(50) for q in section_queries(LIBRARY, "section", 4, seed) if "Rotate" not in q.text]
    assert queries
    for query in queries:
        assert query.skill_odds == {query.target: 1.0}
        assert query.answers == {query.target}
