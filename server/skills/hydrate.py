"""PathHydrate: the smallest sufficient, dependency-closed context for a task, within a token budget.

1. Anchors are the query's terms; an anchor no skill mentions cannot be covered and is reported as such.
2. Skills are ranked by whole-skill, summary and best-section evidence combined by score (ranking.py), and
   sections by BM25 over title and text with a phrase bonus. Seeds are the ranked sections taken skill by
   skill in that order, which keeps a context concentrated in the few skills that fit the task, then the
   state-changing sections of the best three skills, so a procedure is never missing.
3. Each seed brings its dependency closure, transitively: backward to what it needs (`requires` and `data`
   edges into it: inputs and preconditions), forward to the resource sections it `uses`, the verifiers that
   check it, its failure handlers and its outputs; plus its skill's intent. A numbered step brings the
   other steps of its procedure: steps run in order, so a procedure is never shown with holes.
4. Seeds are taken best first when they bring what the context lacks (an anchor not yet covered, its first
   procedure: a state-changing operation, or a verifier for it) and the rendered context still fits the
   budget. The first seed (the best-ranked section of the first skill that has one: what the query asks
   for most) is always in
   when it fits at all: if its closure is too long, it comes with what its own edges reach one step away
   (its sibling steps left out), or else alone with its skill's intent (`dependencies_closed` says whether
   its dependencies made it). Hydration stops
   as soon as the coverable anchors are covered, a procedure is in, and a verifier is reachable from it
   (unless the chosen skills have none). Unused budget is not filled. If no seed fits, the smallest
   whole-skill bundle covering the anchors is returned, even over budget, and the reply says so.
5. A macro occurrence selected whole is rendered as one block (render.py): in full when a seed is inside it,
   else at the macro's default level; a macro shown once is pointed back to afterwards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .graph import EdgeKind, SectionNode, SkillGraph
from .library import NodeKey, SkillLibrary, skill_terms
from .macro_index import MacroIndex
from .macros import Level, Occurrence
from .render import MacroBlock, macro_block, render_lines
from .roles import Role
from .text import terms
from .tokens import count_joined, count_tokens

SEED_SKILLS = 20
SEED_SECTIONS = 60
PROCEDURE_SKILLS = 3
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
    macros: tuple[MacroBlock, ...] = ()
    """The macro occurrences the context shows, and at which level."""
    ranked_skills: tuple[str, ...] = ()
    """The skills for the query, best first (the order seeds were taken in)."""


def hydrate(
    library: SkillLibrary,
    query: str,
    budget: int,
    skill_names: Iterable[str] = (),
    macros: MacroIndex | None = None,
    requester: str = "",
) -> Hydration:
    """PathHydrate one query; deterministic for a given library (and macros). The hydration id names the request
    (the requester too) and what it shows."""
    return _Hydrator(library, macros).run(query, budget, frozenset(skill_names) or None, requester)


def closure(graph: SkillGraph, seed: int) -> set[int]:
    """The seed, its skill's intent, and every node its dependency edges reach (see the module docstring)."""
    return _Walk(graph).close({seed, 0})  # the first node of a skill is its intent


def _direct(graph: SkillGraph, seed: int) -> set[int]:
    """The seed, its skill's intent, and what its own dependency edges reach, one step away."""
    return {seed, 0, *graph.predecessors(seed, *BACKWARD), *graph.successors(seed, *FORWARD)}


class _Walk:
    """A skill's dependency neighbours, each node's found once (a hydration closes hundreds of seeds of a
    large skill, over much the same nodes)."""

    def __init__(self, graph: SkillGraph) -> None:
        self._graph = graph
        self._neighbours: dict[int, tuple[int, ...]] = {}
        self._procedures: dict[tuple[tuple[str, ...], str], list[int]] | None = None

    def close(self, nodes: set[int]) -> set[int]:
        """The nodes and every node their dependency edges reach, transitively."""
        found, frontier = set(nodes), list(nodes)
        while frontier:
            for neighbour in self.neighbours(frontier.pop()):
                if neighbour not in found:
                    found.add(neighbour)
                    frontier.append(neighbour)
        return found

    def neighbours(self, index: int) -> tuple[int, ...]:
        """Along `BACKWARD` edges into the node and `FORWARD` edges out of it, and a numbered step's sibling
        steps (a procedure runs in order, so it is never shown with holes)."""
        found = self._neighbours.get(index)
        if found is None:
            graph, node = self._graph, self._graph.nodes[index]
            siblings: list[int] = []
            if node.is_step:
                self._procedures = _procedures(graph) if self._procedures is None else self._procedures
                siblings = self._procedures[_procedure(node)]
            found = (*graph.predecessors(index, *BACKWARD), *graph.successors(index, *FORWARD), *siblings)
            self._neighbours[index] = found
        return found


def _procedures(graph: SkillGraph) -> dict[tuple[tuple[str, ...], str], list[int]]:
    """The numbered steps of each procedure of a skill (`_procedure`), in order."""
    steps: dict[tuple[tuple[str, ...], str], list[int]] = {}
    for node in graph.nodes:
        if node.is_step:
            steps.setdefault(_procedure(node), []).append(node.index)
    return steps


def _procedure(step: SectionNode) -> tuple[tuple[str, ...], str]:
    """What a numbered step's siblings share: its heading path but its own title, and its file."""
    return step.heading_path[:-1], step.provenance.file


class _Hydrator:
    """One hydration: the seeds taken so far decide which macro occurrences show in full."""

    def __init__(self, library: SkillLibrary, macros: MacroIndex | None) -> None:
        self.library, self.macros = library, macros
        self.graphs = _Graphs(library)
        self.seeds: set[NodeKey] = set()
        self._blocks: dict[tuple[str, Occurrence, bool], MacroBlock] = {}
        """Each block made, by macro, occurrence and whether a seed needs it in full: a hydration renders its
        context again for every seed it weighs, and a block's level takes rendering its summary."""
        self._words: dict[str, set[str]] = {}
        """The terms of each line rendered (`_mentioned`)."""
        self._counts: dict[str, int] = {}
        """The tokens of each part of a rendering counted (`_count`)."""
        self._walks: dict[str, _Walk] = {}
        """Each skill's dependency neighbours, found as its seeds are closed."""
        self._lacking: tuple[dict[str, set[int]], bool, bool] | None = None
        """A context, and whether it lacks a procedure and a verifier (`_lacks`)."""

    def _walk(self, skill: str) -> _Walk:
        walk = self._walks.get(skill)
        if walk is None:
            walk = self._walks[skill] = _Walk(self.graphs[skill])
        return walk

    def run(self, query: str, budget: int, only: frozenset[str] | None, requester: str = "") -> Hydration:
        library = self.library
        words = terms(query)
        anchors = tuple(dict.fromkeys(words))
        ranking = library.rank(words, SEED_SKILLS, SEED_SECTIONS, only)
        ranked_skills, ranked_sections = list(ranking.skills), list(ranking.sections)
        ranked = set(ranked_skills)  # every seed's skill, those ranked by a section alone in their best one's order
        ranked_skills += [name for name in dict.fromkeys(name for name, _ in ranked_sections) if name not in ranked]
        coverable = {a for a in anchors if library.mentions(a, only)}
        section_rank = {key: rank for rank, key in enumerate(ranked_sections)}
        seeds = sorted(ranked_sections, key=lambda key: (ranked_skills.index(key[0]), section_rank[key]))
        seeds += [  # if no ranked section brings a procedure, the best skills' own procedures can
            (name, node.index)
            for name in ranked_skills[:PROCEDURE_SKILLS]
            for node in self.graphs[name].nodes
            if node.contract.state_changing and (name, node.index) not in section_rank
        ]
        selected: dict[str, set[int]] = {}
        rendered, fallback = "", False
        covered: set[str] = set()
        for position, (skill_name, index) in enumerate(seeds):
            shapes = [self._walk(skill_name).close({index, 0})]  # its closure (`closure`)
            if position == 0:  # what the query asks for most: in, even when its whole closure is too long
                shapes += [_direct(self.graphs[skill_name], index), {index, 0}]
            for nodes in shapes:
                extended = self._extend(selected, (skill_name, index), nodes, anchors, covered, budget)
                if extended is not None:
                    selected, rendered, covered = extended
                    break
            if coverable <= covered and self._executable(selected) and self._verifiable(selected):
                break
        if not selected:
            selected, fallback = _whole_skill_bundle(library, ranked_skills, anchors, coverable), True
            self.seeds = {(name, i) for name, nodes in selected.items() for i in nodes}
            rendered = self.render(selected)
        covered = _present(anchors, rendered)
        coverage = Coverage(
            anchors,
            tuple(a for a in anchors if a in covered),
            tuple(a for a in anchors if a not in coverable),
            all(_closed(self.graphs[name], nodes) for name, nodes in selected.items()),
            self._verifier_reached(selected),
        )
        keys = tuple((name, i) for name in selected for i in sorted(selected[name]))
        blocks = tuple(dict.fromkeys(b for name, i in keys if (b := self.block(name, i, selected)) is not None))
        versions = [(name, skill.version) for name in selected if (skill := library.get(name)) is not None]
        levels = [(b.macro.macro_id, b.occurrence, b.level) for b in blocks]
        request = (query, budget, sorted(only or ()), *((requester,) if requester else ()))  # ids without one unchanged
        digest = hashlib.sha256(repr((*request, keys, versions, levels)).encode())
        return Hydration(
            digest.hexdigest()[:32],
            rendered,
            count_tokens(rendered),
            keys,
            tuple(selected),
            coverage,
            fallback,
            blocks,
            tuple(ranked_skills),
        )

    def _extend(
        self,
        selected: dict[str, set[int]],
        seed: NodeKey,
        nodes: set[int],
        anchors: tuple[str, ...],
        covered: set[str],
        budget: int,
    ) -> tuple[dict[str, set[int]], str, set[str]] | None:
        """The context with a seed's nodes added (and its text and covered anchors), when they bring what it
        lacks and it still fits the budget; else None."""
        candidate = {name: set(chosen) for name, chosen in selected.items()}
        candidate[seed[0]] = candidate.get(seed[0], set()) | nodes
        self.seeds.add(seed)
        lines = self._lines(candidate)
        gained = self._mentioned(anchors, lines)
        if (selected and not self._adds(selected, candidate, gained - covered)) or self._count(lines) > budget:
            self.seeds.discard(seed)  # sufficient, not filled: a seed that adds nothing the context lacks stays out
            return None
        return candidate, "\n".join(lines), gained

    def block(self, skill: str, index: int, selected: dict[str, set[int]]) -> MacroBlock | None:
        """The macro occurrence holding a node, at the level this hydration shows it; None when the node is
        in no macro, or its occurrence is not selected whole (then its selected sections show as they are)."""
        held = self.macros.holder(skill, index) if self.macros is not None else None
        if held is None or not set(held[1].nodes) <= selected.get(skill, set()):
            return None
        macro, occurrence = held
        needed = any((skill, i) in self.seeds for i in occurrence.nodes)
        made = self._blocks.get((macro.macro_id, occurrence, needed))
        if made is None:
            level = Level.FULL if needed else macro.default_level
            made = macro_block(self.graphs[skill], macro, occurrence, level)
            self._blocks[macro.macro_id, occurrence, needed] = made
        return made

    def render(self, selected: dict[str, set[int]]) -> str:
        return "\n".join(self._lines(selected))

    def _lines(self, selected: dict[str, set[int]]) -> list[str]:
        return render_lines(self.graphs, selected, lambda skill, index: self.block(skill, index, selected))

    def _mentioned(self, anchors: tuple[str, ...], lines: list[str]) -> set[str]:
        """The anchors a context rendered as these lines mentions (`_present`), from the terms of its lines,
        each found once a hydration: a context is rendered again for every seed weighed, mostly the same."""
        words = set().union(*map(self._terms, lines))
        return {a for a in anchors if a in words}

    def _count(self, lines: list[str]) -> int:
        """The tokens of the context rendered as these lines, counted by parts kept a hydration (`count_joined`):
        a seed of a large skill often brings too much, and is weighed in a context much like the last."""
        return count_joined(lines, self._counts)

    def _terms(self, line: str) -> set[str]:
        words = self._words.get(line)
        if words is None:
            words = self._words[line] = set(terms(line))
        return words

    def _adds(self, selected: dict[str, set[int]], candidate: dict[str, set[int]], new_anchors: set[str]) -> bool:
        """Whether a candidate brings what the context lacks: an anchor, its first procedure, or a verifier
        for its procedure."""
        lacks_procedure, lacks_verifier = self._lacks(selected)
        return (
            bool(new_anchors)
            or (lacks_procedure and self._executable(candidate))
            or (lacks_verifier and self._verifier_reached(candidate))
        )

    def _lacks(self, selected: dict[str, set[int]]) -> tuple[bool, bool]:
        """Whether the context lacks a procedure, and a verifier reached from it (found once per context)."""
        if self._lacking is None or self._lacking[0] is not selected:
            self._lacking = (selected, not self._executable(selected), not self._verifier_reached(selected))
        return self._lacking[1], self._lacking[2]

    def _executable(self, selected: dict[str, set[int]]) -> bool:
        """Whether the context holds a procedure: a state-changing operation (an output alone is not one)."""
        return any(
            (node := self.graphs[name].nodes[i]).contract.state_changing and node.role is Role.OPERATION
            for name, nodes in selected.items()
            for i in nodes
        )

    def _verifier_reached(self, selected: dict[str, set[int]]) -> bool:
        """Whether some selected state-changing node reaches a selected verifier (along `verifies` edges)."""
        for name, nodes in selected.items():
            graph = self.graphs[name]
            if any(set(graph.successors(i, EdgeKind.VERIFIES)) & nodes for i in nodes):
                return True
        return False

    def _verifiable(self, selected: dict[str, set[int]]) -> bool:
        """A verifier is reached, or no selected skill has one to reach."""
        has_verifier = any(e.kind is EdgeKind.VERIFIES for name in selected for e in self.graphs[name].edges)
        return self._verifier_reached(selected) or not has_verifier


class _Graphs(Mapping[str, SkillGraph]):
    """The library's graphs by name, looked up as needed (a hydration touches a few skills of many)."""

    def __init__(self, library: SkillLibrary) -> None:
        self._library = library

    def __getitem__(self, name: str) -> SkillGraph:
        return self._library.graph(name)

    def __iter__(self) -> Iterator[str]:
        return (skill.name for skill in self._library)

    def __len__(self) -> int:
        return len(self._library)


def _present(anchors: tuple[str, ...], text: str) -> set[str]:
    """The anchors a rendered context mentions: coverage is judged on what an agent will read."""
    words = set(terms(text))
    return {a for a in anchors if a in words}


def _closed(graph: SkillGraph, nodes: set[int]) -> bool:
    return all(
        set(graph.predecessors(i, *BACKWARD)) <= nodes and set(graph.successors(i, *FORWARD)) <= nodes for i in nodes
    )


def _whole_skill_bundle(
    library: SkillLibrary, ranked_skills: list[str], anchors: tuple[str, ...], coverable: set[str]
) -> dict[str, set[int]]:
    """Greedy set cover of the anchors by whole skills (SKILL.md, as loading a skill gives it; its references
    stay out), most anchors per token first; at least one skill."""
    bundle: dict[str, set[int]] = {}
    uncovered = set(coverable)
    candidates = {s.name: (s, skill_terms(s)) for s in map(library.get, ranked_skills) if s}
    while candidates and (uncovered or not bundle):
        name = min(
            candidates,
            key=lambda n: (-len(uncovered & candidates[n][1]) / max(1, candidates[n][0].tokens), n),
        )
        skill, present = candidates.pop(name)
        if bundle and not uncovered & present:
            break
        bundle[name] = {n.index for n in skill.graph.nodes if n.provenance.file == skill.graph.body_file}
        uncovered -= present
    return bundle
