"""PathHydrate: closed, verifiable contexts within budget; incremental maintenance equals a rebuild."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.synthetic import generate_library
from skillstate.server.skills.graph import build_graph
from skillstate.server.skills.hydrate import BACKWARD, FORWARD, _Hydrator, _present, closure, hydrate
from skillstate.server.skills.library import SkillLibrary
from skillstate.server.skills.macro_index import MacroIndex
from skillstate.server.skills.macros import Level
from skillstate.server.skills.package import load_package
from skillstate.server.skills.text import terms
from skillstate.server.skills.tokens import count_tokens

TOPICS = ["invoice", "shipment", "refund", "spreadsheet", "dashboard", "migration", "release", "backup"]


def skill_md(name: str, topic: str, other: str) -> str:
    return f"""---
name: {name}
description: Handle a {topic} end to end, with {other} checks.
---
# {name}

Handles one {topic}.

## When to use

When a customer asks about a {topic}.

## Prerequisites

Only run this if the {topic} API token is set.

## Workflow

1. Read the {topic} from `{topic}.json`.
2. Create the {topic} summary and save it as `{topic}-summary.csv`.
3. Update the {other} ledger.
4. Verify that `{topic}-summary.csv` lists every {topic} line.

## Troubleshooting

If the {topic} request fails, retry once.

## Output

Return the {topic} summary.
"""


def skill_graph(index: int):
    name = f"skill-{index}"
    topic, other = TOPICS[index % len(TOPICS)], TOPICS[(index * 3 + 1) % len(TOPICS)]
    files = {f"{name}/SKILL.md": skill_md(name, topic, other).encode()}
    return build_graph(load_package(files, name, strict=True))


GRAPHS = [skill_graph(i) for i in range(12)]
QUERIES = st.lists(st.sampled_from([*TOPICS, "summary", "ledger", "verify", "unknownword"]), min_size=1, max_size=4)


def library_of(indexes: list[int]) -> SkillLibrary:
    library = SkillLibrary()
    for i in indexes:
        library.add(GRAPHS[i], version=1)
    return library


FULL = library_of(list(range(len(GRAPHS))))
LARGEST_CLOSURE = max(
    sum(FULL.get(g.skill).node_tokens[j] for j in closure(g, i))  # type: ignore[union-attr]
    for g in GRAPHS
    for i in range(len(g.nodes))
)
"""Tokens of the longest closure of any section: a budget well above it fits every seed's whole closure."""


@given(QUERIES, st.integers(min_value=60, max_value=4000))
def test_contexts_are_closed_verifiable_and_within_budget(words: list[str], budget: int) -> None:
    hydration = hydrate(FULL, " ".join(words), budget)
    assert hydration.token_count == count_tokens(hydration.context)
    assert hydration.token_count <= budget or hydration.whole_skill_fallback
    chosen: dict[str, set[int]] = {}
    for name, index in hydration.sections:
        chosen.setdefault(name, set()).add(index)
    closed = True
    for name, nodes in chosen.items():  # recomputed here, not taken from the reply
        graph = FULL.get(name).graph  # type: ignore[union-attr]
        for i in nodes:
            closed &= set(graph.predecessors(i, *BACKWARD)) <= nodes and set(graph.successors(i, *FORWARD)) <= nodes
    assert hydration.coverage.dependencies_closed == closed  # the reply never claims a closure it lacks
    if budget >= LARGEST_CLOSURE + 200:  # every seed's whole closure fits: nothing is cut short
        assert closed
    assert set(hydration.coverage.anchors_covered) <= set(hydration.coverage.anchors)
    if "unknownword" in words:
        assert "unknownword" in hydration.coverage.anchors_uncoverable


def test_a_roomy_budget_covers_the_task_with_a_verified_procedure_and_stops_there() -> None:
    hydration = hydrate(FULL, "refund summary", 3000)
    assert not hydration.whole_skill_fallback
    assert set(hydration.coverage.anchors_covered) == {"refund", "summary"}
    assert hydration.coverage.verifier_reachable and hydration.coverage.dependencies_closed
    assert hydration.token_count < 3000 / 2  # stops when sufficient: the budget is an allowance, not a quota
    assert "Verify that `refund-summary.csv`" in hydration.context


def test_when_nothing_fits_the_smallest_whole_skill_is_returned_and_flagged() -> None:
    hydration = hydrate(FULL, "refund", 10)
    assert hydration.whole_skill_fallback
    assert len(hydration.source_skills) == 1
    graph = FULL.get(hydration.source_skills[0]).graph  # type: ignore[union-attr]
    assert len(hydration.sections) == len(graph.nodes)


def test_skill_names_restrict_the_scope() -> None:
    hydration = hydrate(FULL, "refund invoice", 3000, ["skill-0"])
    assert hydration.source_skills == ("skill-0",)


@settings(max_examples=40)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, len(GRAPHS) - 1)), max_size=30), QUERIES)
def test_incremental_adds_and_removes_equal_a_rebuild(operations: list[tuple[bool, int]], words: list[str]) -> None:
    incremental = SkillLibrary()
    present: set[int] = set()
    for add, index in operations:
        if add:
            incremental.add(GRAPHS[index], version=1)
            present.add(index)
        else:
            incremental.remove(GRAPHS[index].skill)
            present.discard(index)
    rebuilt = library_of(sorted(present))
    query = " ".join(words)
    assert incremental.rank(words, 50, 50) == rebuilt.rank(words, 50, 50)
    if present:
        assert hydrate(incremental, query, 2000) == hydrate(rebuilt, query, 2000)


@settings(max_examples=40)
@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "fork", "fork back"]), st.integers(0, len(GRAPHS) - 1)),
                max_size=30), QUERIES)  # fmt: skip
def test_a_fork_and_the_library_it_came_from_change_apart(operations: list[tuple[str, int]], words: list[str]) -> None:
    """What a registration does to its fork never shows in the library readers hold, and the other way round
    (`fork back` goes on changing the original and keeps the fork); each still ranks and hydrates as a
    library built from scratch with the skills it held."""
    library, present = SkillLibrary(), set[int]()
    kept: list[tuple[SkillLibrary, set[int]]] = []
    for operation, index in operations:
        if operation == "add":
            library.add(GRAPHS[index], version=1)
            present.add(index)
        elif operation == "remove":
            library.remove(GRAPHS[index].skill)
            present.discard(index)
        else:
            fork = library.fork()
            kept.append((library, set(present)) if operation == "fork" else (fork, set(present)))
            library = fork if operation == "fork" else library
    query = " ".join(words)
    for held, skills in [*kept, (library, present)]:
        rebuilt = library_of(sorted(skills))
        assert [skill.name for skill in held] == [skill.name for skill in rebuilt]
        assert held.rank(words, 50, 50) == rebuilt.rank(words, 50, 50)
        if skills:
            assert hydrate(held, query, 2000) == hydrate(rebuilt, query, 2000)


SYNTHETIC = [build_graph(load_package(s.files, s.folder)) for s in generate_library(80, seed=11)]
SYNTHETIC_LIBRARY = SkillLibrary()
for _graph in SYNTHETIC:
    SYNTHETIC_LIBRARY.add(_graph, version=1)
MACROS = MacroIndex()
MACROS.rebuild(SYNTHETIC, {g.skill: SYNTHETIC_LIBRARY.get(g.skill).node_tokens for g in SYNTHETIC})  # type: ignore[union-attr]
TASKS = st.sampled_from([s.task.rsplit(" (", 1)[0] for s in generate_library(80, seed=11)])


@given(TASKS, st.integers(min_value=100, max_value=3000))
def test_macros_show_whole_and_contexts_stay_closed_and_within_budget(task: str, budget: int) -> None:
    hydration = hydrate(SYNTHETIC_LIBRARY, task, budget, macros=MACROS)
    assert hydration.token_count <= budget or hydration.whole_skill_fallback
    assert hydration.coverage.dependencies_closed
    chosen = set(hydration.sections)
    shown: set[str] = set()
    for block in hydration.macros:
        assert {(block.occurrence.skill, i) for i in block.occurrence.nodes} <= chosen  # a macro shows whole
        if block.macro.macro_id in shown:
            assert f'[macro {block.macro.macro_id} "{block.macro.name}": as shown above]' in hydration.context
        elif block.level is Level.FULL:
            graph = SYNTHETIC_LIBRARY.get(block.occurrence.skill).graph  # type: ignore[union-attr]
            assert "".join(graph.nodes[i].text for i in block.occurrence.nodes).rstrip("\n") in hydration.context
        else:
            assert f"[macro {block.macro.macro_id}" in hydration.context
        shown.add(block.macro.macro_id)


def test_a_routine_the_task_does_not_ask_about_shows_as_its_contract() -> None:
    hydrations = [hydrate(SYNTHETIC_LIBRARY, s.task.rsplit(" (", 1)[0], 3000, macros=MACROS)
                  for s in generate_library(80, seed=11)]  # fmt: skip
    levels = {block.level for h in hydrations for block in h.macros}
    assert Level.CONTRACT in levels, "dependencies held by macros render at their contract"
    plain = [hydrate(SYNTHETIC_LIBRARY, s.task.rsplit(" (", 1)[0], 3000) for s in generate_library(80, seed=11)]
    assert sum(h.token_count for h in hydrations) <= sum(h.token_count for h in plain)


def long_procedure_skill() -> SkillLibrary:
    steps = "".join(
        f"{n}. Calibrate sensor {n} of the rig: " + " ".join(f"reading{n}x{k}" for k in range(60)) + ".\n"
        for n in range(1, 13)
    )
    text = (
        "---\nname: rig-calibration\ndescription: Calibrate the test rig.\n---\n# Rig calibration\n\nCalibrates it.\n\n"
        "## Prerequisites\n\nInstall the rig driver before you begin.\n\n"
        f"## Calibration\n\n{steps}\n## Verification\n\nVerify that every sensor reads zero at rest.\n"
    )
    library = SkillLibrary()
    library.add(build_graph(load_package({"rig-calibration/SKILL.md": text.encode()}, "rig-calibration")), version=1)
    return library


def test_the_section_a_query_asks_for_is_in_even_when_its_whole_procedure_is_over_budget() -> None:
    library = long_procedure_skill()
    graph = library.graph("rig-calibration")
    step = next(n for n in graph.nodes if n.title == "Calibration, step 7")
    whole = hydrate(library, "calibrate sensor 7 reading7x3", 20_000)
    assert whole.coverage.dependencies_closed and step.text in whole.context
    assert whole.token_count > 900  # all twelve steps: too long for the budget below

    cut = hydrate(library, "calibrate sensor 7 reading7x3", 900)
    assert step.text in cut.context and cut.token_count <= 900 and not cut.whole_skill_fallback
    assert cut.coverage.dependencies_closed  # its own edges' ends are in: only sibling steps are left out
    shown = {graph.nodes[i].title for _, i in cut.sections}
    assert {"Prerequisites", "Verification"} <= shown  # what the step itself needs and the check it reaches
    assert "omitted]" in cut.context  # and the context says where


WITH_REFERENCES = [build_graph(load_package(s.files, s.folder)) for s in generate_library(60, seed=5, references=True)]
REFERENCES_LIBRARY = SkillLibrary()
for _graph in WITH_REFERENCES:
    REFERENCES_LIBRARY.add(_graph, version=1)
REFERENCE_MACROS = MacroIndex()
REFERENCE_MACROS.rebuild(
    WITH_REFERENCES,
    {g.skill: REFERENCES_LIBRARY.get(g.skill).node_tokens for g in WITH_REFERENCES},  # type: ignore[union-attr]
)


VOCABULARY = sorted({t for g in WITH_REFERENCES for n in g.nodes for t in terms(n.text)})


@pytest.mark.parametrize("seed", range(8))
def test_the_anchors_a_context_mentions_are_found_from_its_lines(seed: int) -> None:
    """Hydration finds the anchors a context mentions from its lines' terms, each line's found once a hydration:
    for any selection (sections, reference files, macros at any level, omitted runs), they are those its text
    mentions."""
    rng = random.Random(seed)
    tasks = [s.task for s in generate_library(60, seed=5, references=True)]
    hydrator = _Hydrator(REFERENCES_LIBRARY, REFERENCE_MACROS)
    ranking = REFERENCES_LIBRARY.rank(terms(rng.choice(tasks)), 20, 60)
    selected: dict[str, set[int]] = {}
    kinds: set[str] = set()
    for skill, index in rng.sample(list(ranking.sections), min(30, len(ranking.sections))):
        graph = REFERENCES_LIBRARY.graph(skill)
        nodes = closure(graph, index) if rng.random() < 0.5 else {0, index, *rng.sample(range(len(graph.nodes)), 3)}
        selected = {**selected, skill: selected.get(skill, set()) | nodes}
        if rng.random() < 0.5:
            hydrator.seeds.add((skill, index))
        lines = hydrator._lines(selected)
        text = "\n".join(lines)
        assert text == hydrator.render(selected)
        anchors = tuple(dict.fromkeys([*terms(text), *rng.sample(VOCABULARY, 20)]))
        assert hydrator._mentioned(anchors, lines) == _present(anchors, text)
        kinds |= {kind for kind in ("[from ", "omitted]", "[macro ", "as shown above") if kind in text}
    assert kinds >= {"[from ", "omitted]", "[macro "}
