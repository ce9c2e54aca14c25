"""The skill library in memory: each skill's current graph and the lexical indexes over skills and sections.

Adding or removing a skill updates the indexes in place (BM25 keeps per-term postings), so the library is
maintained incrementally: after any sequence of adds and removes it ranks exactly as one built from
scratch with the skills it holds (a property test checks this).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .bm25 import BM25Index
from .graph import SectionNode, SkillGraph
from .text import terms
from .tokens import count_tokens

NodeKey = tuple[str, int]
"""(skill name, node index)"""


@dataclass(frozen=True)
class LibrarySkill:
    graph: SkillGraph
    version: int
    node_tokens: tuple[int, ...]
    """Tokens of each node's text."""
    node_terms: tuple[frozenset[str], ...]
    description_terms: frozenset[str]

    @property
    def name(self) -> str:
        return self.graph.skill

    @property
    def tokens(self) -> int:
        return sum(self.node_tokens)


class SkillLibrary:
    def __init__(self) -> None:
        self._skills: dict[str, LibrarySkill] = {}
        self._skill_index: BM25Index[str] = BM25Index()
        self._section_index: BM25Index[NodeKey] = BM25Index()

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def __iter__(self) -> Iterator[LibrarySkill]:
        return iter(sorted(self._skills.values(), key=lambda s: s.name))

    def get(self, name: str) -> LibrarySkill | None:
        return self._skills.get(name)

    def add(self, graph: SkillGraph, version: int) -> LibrarySkill:
        """Add a skill, replacing an earlier version of the same name."""
        self.remove(graph.skill)
        skill = LibrarySkill(
            graph,
            version,
            node_tokens(graph),
            tuple(frozenset(_node_terms(node)) for node in graph.nodes),
            frozenset(terms(f"{graph.skill} {graph.description}")),
        )
        self._skills[graph.skill] = skill
        self._skill_index.add(graph.skill, terms(f"{graph.skill} {graph.skill} {graph.description}"))
        for node in graph.nodes:
            self._section_index.add((graph.skill, node.index), _node_terms(node))
        return skill

    def remove(self, name: str) -> LibrarySkill | None:
        skill = self._skills.pop(name, None)
        if skill is None:
            return None
        self._skill_index.remove(name, skill.description_terms | frozenset(terms(name)))
        for node, node_terms in zip(skill.graph.nodes, skill.node_terms, strict=True):
            self._section_index.remove((name, node.index), node_terms)
        return skill

    def mentions(self, term: str, only: frozenset[str] | None = None) -> bool:
        """Whether any section (of the `only` skills, if given) holds the term."""
        return self._section_index.holds(term, None if only is None else lambda key: key[0] in only)

    def graph(self, name: str) -> SkillGraph:
        skill = self._skills.get(name)
        if skill is None:
            raise KeyError(name)
        return skill.graph

    def rank_skills(self, query: list[str], limit: int, only: frozenset[str] | None = None) -> list[str]:
        hits = self._skill_index.search(query, limit if only is None else len(self._skills))
        return [name for name, _ in hits if only is None or name in only][:limit]

    def rank_sections(self, query: list[str], limit: int, only: frozenset[str] | None = None) -> list[NodeKey]:
        hits = self._section_index.search(query, limit if only is None else len(self._section_index))
        return [key for key, _ in hits if only is None or key[0] in only][:limit]


def node_tokens(graph: SkillGraph) -> tuple[int, ...]:
    """Tokens of each node's text, by the tokenizer budgets are counted in."""
    return tuple(count_tokens(node.text) for node in graph.nodes)


def _node_terms(node: SectionNode) -> list[str]:
    """A section's terms; its title counts twice, as a heading says what the section is about."""
    return terms(f"{node.title} {node.title} {node.text}")
