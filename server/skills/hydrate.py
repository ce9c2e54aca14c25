"""PathHydrate: the smallest sufficient, dependency-closed context for a task, within a token budget.

1. Anchors are the query's terms; an anchor no skill mentions cannot be covered and is reported as such.
2. Skills are ranked by BM25 over name and description, sections by BM25 over title and text, and the two
   rankings are fused by reciprocal rank (k = 60) into one skill order. Seeds are the ranked sections taken
   skill by skill in that order, which keeps a context concentrated in the few skills that fit the task.
3. Each seed brings its dependency closure, transitively: backward to what it needs (`requires` and `data`
   edges into it: inputs and preconditions), forward to the resource sections it `uses`, the verifiers that
   check it, its failure handlers and its outputs; plus its skill's intent.
4. Seeds are taken best first when they cover an anchor not yet covered (or bring the first procedure: a
   state-changing node) and the rendered context still fits the budget. Hydration stops as soon as the
   coverable anchors are covered, a procedure is in, and a verifier is reachable from it (unless the chosen
   skills have none); closures keep dependencies closed. Unused budget is not filled. If no seed fits, the smallest
   whole-skill bundle covering the anchors is returned, even over budget, and the reply says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from .graph import EdgeKind, SkillGraph
from .library import LibrarySkill, NodeKey, SkillLibrary
from .text import terms
from .tokens import count_tokens

RRF_K = 60
SEED_SKILLS = 20
SEED_SECTIONS = 60
BACKWARD = (EdgeKind.REQUIRES, EdgeKind.DATA)
FORWARD = (EdgeKind.VERIFIES, EdgeKind.HANDLES, EdgeKind.PRODUCES, EdgeKind.USES)


@dataclass(frozen=True)
class Coverage:
    anchors: tuple[str, ...]
    anchors_covered: tuple[str, ...]
    anchors_uncoverable: tuple[str, ...]
    """Anchors no skill in scope mentions."""
    dependencies_closed: bool
    verifier_reachable: bool


@dataclass(frozen=True)
class Hydration:
    hydration_id: str
    context: str
    token_count: int
    sections: tuple[NodeKey, ...]
    """Selected nodes, in rendering order."""
    source_skills: tuple[str, ...]
    coverage: Coverage
    whole_skill_fallback: bool


def hydrate(library: SkillLibrary, query: str, budget: int, skill_names: Iterable[str] = ()) -> Hydration:
    """PathHydrate one query; deterministic for a given library content."""
    only = frozenset(skill_names) or None
    anchors = tuple(dict.fromkeys(terms(query)))
    ranked_skills = library.rank_skills(list(anchors), SEED_SKILLS, only)
    ranked_sections = library.rank_sections(list(anchors), SEED_SECTIONS, only)
    fused = _fuse(ranked_skills, ranked_sections)
    in_scope = [s for s in library if only is None or s.name in only]
    coverable = {a for a in anchors if any(a in t for s in in_scope for t in s.node_terms)}
    section_rank = {key: rank for rank, key in enumerate(ranked_sections)}
    seeds = sorted(ranked_sections, key=lambda key: (fused.index(key[0]), section_rank[key]))
    selected: dict[str, set[int]] = {}
    rendered, fallback = "", False
    covered: set[str] = set()
    for skill_name, index in seeds:
        skill = library.get(skill_name)
        assert skill is not None
        candidate = {name: set(nodes) for name, nodes in selected.items()}
        candidate.setdefault(skill_name, set()).update(closure(skill.graph, index))
        gained = _covered(library, candidate, anchors)
        if (
            selected
            and not (gained - covered)
            and (_executable(library, selected) or not _executable(library, candidate))
        ):
            continue  # sufficient, not filled: a seed that adds no anchor and no procedure is not taken
        text = render(library, candidate)
        if count_tokens(text) > budget:
            continue
        selected, rendered, covered = candidate, text, gained
        if coverable <= covered and _executable(library, selected) and _verifiable(library, selected):
            break
    if not selected:
        selected, fallback = _whole_skill_bundle(library, fused, anchors, coverable), True
        rendered = render(library, selected)
    covered = _covered(library, selected, anchors)  # the fallback bundle may cover what the seeds did not
    coverage = Coverage(
        anchors,
        tuple(a for a in anchors if a in covered),
        tuple(a for a in anchors if a not in coverable),
        all(_closed(library.get(name), nodes) for name, nodes in selected.items()),
        _verifier_reached(library, selected),
    )
    keys = tuple((name, i) for name in selected for i in sorted(selected[name]))
    digest = hashlib.sha256(repr((query, budget, sorted(only or ()), keys, _versions(library, selected))).encode())
    return Hydration(
        digest.hexdigest()[:32], rendered, count_tokens(rendered), keys, tuple(selected), coverage, fallback
    )


def closure(graph: SkillGraph, seed: int) -> set[int]:
    """The seed, its skill's intent, and every node its dependency edges reach (see the module docstring)."""
    found = {seed, 0}  # the first node of a skill is its intent
    frontier = [seed]
    while frontier:
        index = frontier.pop()
        for neighbour in (*graph.predecessors(index, *BACKWARD), *graph.successors(index, *FORWARD)):
            if neighbour not in found:
                found.add(neighbour)
                frontier.append(neighbour)
    return found


def render(library: SkillLibrary, selected: dict[str, set[int]]) -> str:
    """Each skill's name and description, then its selected sections in source order, gaps marked."""
    blocks = []
    for name, chosen in selected.items():
        skill = library.get(name)
        assert skill is not None
        lines = [f"# Skill: {name}\n{skill.graph.description}\n"]
        previous = -1
        for index in sorted(chosen):
            if index > previous + 1:
                omitted = index - previous - 1
                lines.append(f"[{omitted} section{'s' if omitted > 1 else ''} omitted]\n")
            lines.append(skill.graph.nodes[index].text.rstrip("\n") + "\n")
            previous = index
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def _fuse(ranked_skills: list[str], ranked_sections: list[NodeKey]) -> list[str]:
    """Skills ordered by reciprocal-rank fusion of their description rank and their best section's rank."""
    best_section: dict[str, int] = {}
    for rank, (name, _) in enumerate(ranked_sections):
        best_section.setdefault(name, rank)
    names = dict.fromkeys([*ranked_skills, *best_section])
    score = {
        name: (1 / (RRF_K + ranked_skills.index(name)) if name in ranked_skills else 0.0)
        + (1 / (RRF_K + best_section[name]) if name in best_section else 0.0)
        for name in names
    }
    return sorted(names, key=lambda name: (-score[name], name))


def _covered(library: SkillLibrary, selected: dict[str, set[int]], anchors: tuple[str, ...]) -> set[str]:
    present: set[str] = set()
    for name, nodes in selected.items():
        skill = library.get(name)
        assert skill is not None
        present |= skill.description_terms
        for index in nodes:
            present |= skill.node_terms[index]
    return {a for a in anchors if a in present}


def _closed(skill: LibrarySkill | None, nodes: set[int]) -> bool:
    assert skill is not None
    return all(
        set(skill.graph.predecessors(i, *BACKWARD)) <= nodes and set(skill.graph.successors(i, *FORWARD)) <= nodes
        for i in nodes
    )


def _executable(library: SkillLibrary, selected: dict[str, set[int]]) -> bool:
    """Whether the context holds a procedure: at least one state-changing node."""
    return any(
        _skill(library, name).graph.nodes[i].contract.state_changing for name, nodes in selected.items() for i in nodes
    )


def _verifier_reached(library: SkillLibrary, selected: dict[str, set[int]]) -> bool:
    """Whether some selected state-changing node reaches a selected verifier (along `verifies` edges)."""
    for name, nodes in selected.items():
        graph = _skill(library, name).graph
        if any(set(graph.successors(i, EdgeKind.VERIFIES)) & nodes for i in nodes):
            return True
    return False


def _verifiable(library: SkillLibrary, selected: dict[str, set[int]]) -> bool:
    """A verifier is reached, or no selected skill has one to reach."""
    has_verifier = any(e.kind is EdgeKind.VERIFIES for name in selected for e in _skill(library, name).graph.edges)
    return _verifier_reached(library, selected) or not has_verifier


def _skill(library: SkillLibrary, name: str) -> LibrarySkill:
    skill = library.get(name)
    assert skill is not None, f"{name} left the library during a hydration"
    return skill


def _whole_skill_bundle(
    library: SkillLibrary, fused: list[str], anchors: tuple[str, ...], coverable: set[str]
) -> dict[str, set[int]]:
    """Greedy set cover of the anchors by whole skills, most anchors per token first; at least one skill."""
    bundle: dict[str, set[int]] = {}
    uncovered = set(coverable)
    candidates = {s.name: (s, s.description_terms.union(*s.node_terms)) for s in map(library.get, fused) if s}
    while candidates and (uncovered or not bundle):
        name = min(
            candidates,
            key=lambda n: (-len(uncovered & candidates[n][1]) / max(1, candidates[n][0].tokens), n),
        )
        skill, present = candidates.pop(name)
        if bundle and not uncovered & present:
            break
        bundle[name] = set(range(len(skill.graph.nodes)))
        uncovered -= present
    return bundle


def _versions(library: SkillLibrary, selected: dict[str, set[int]]) -> list[tuple[str, int]]:
    return [(name, skill.version) for name in selected if (skill := library.get(name)) is not None]
