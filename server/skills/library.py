"""The skill library in memory: each skill's current graph and the lexical indexes over skills and sections
(whole skills; name and description; sections), which ranking.py combines.

Adding or removing a skill updates the indexes incrementally (BM25 keeps per-term postings), so after any
sequence of adds and removes the library ranks exactly as one built from scratch with the skills it holds
(a property test checks this). `fork` gives a writer a library of its own to change while readers keep
the one they hold: the two share every skill and every posting array that neither changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain

from .bm25 import BM25Index
from .bulk import settle_long_lived
from .graph import SectionNode, SkillGraph
from .ranking import SECTION_CANDIDATES, SKILL_CANDIDATES, Ranking, fuse, pairs, scaled, with_phrase_bonus
from .text import NodeWords, section_terms, terms
from .tokens import section_tokens

NodeKey = tuple[str, int]
"""(skill name, node index)"""


@dataclass(frozen=True)
class LibrarySkill:
    graph: SkillGraph
    version: int
    node_tokens: tuple[int, ...]
    """Tokens of each node's text."""

    @property
    def name(self) -> str:
        return self.graph.skill

    @property
    def tokens(self) -> int:
        return sum(self.node_tokens)


class SkillLibrary:
    def __init__(self) -> None:
        self._skills: dict[str, LibrarySkill] = {}
        self._whole_index: BM25Index[str] = BM25Index()
        self._skill_index: BM25Index[str] = BM25Index()
        self._section_index: BM25Index[NodeKey] = BM25Index()
        self._shared = False
        """Whether `_skills` may be shared with a fork: copied before this library writes it."""

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def __iter__(self) -> Iterator[LibrarySkill]:
        return iter(sorted(self._skills.values(), key=lambda s: s.name))

    def get(self, name: str) -> LibrarySkill | None:
        return self._skills.get(name)

    def fork(self) -> SkillLibrary:
        """A library with the same skills; changes to either never show in the other. Costs a copy of its
        tables (not of the skills or postings), made when one of the two first changes."""
        other = SkillLibrary.__new__(SkillLibrary)
        other._skills, other._whole_index, other._skill_index, other._section_index = (
            self._skills,
            self._whole_index.fork(),
            self._skill_index.fork(),
            self._section_index.fork(),
        )
        self._shared = other._shared = True
        return other

    def settle(self) -> None:
        """Finish the indexes' staged changes, so that reading the library writes nothing (every read does
        it first; the registry does it before readers get the library)."""
        self._whole_index.settle()
        self._skill_index.settle()
        self._section_index.settle()

    def add(self, graph: SkillGraph, version: int, words: NodeWords | None = None) -> LibrarySkill:
        """Add a skill, replacing an earlier version of the same name; `words` are its `node_words`, when the
        caller has them (they are what MotifZip reads too)."""
        self.remove(graph.skill)
        self._own()
        summary, sections = _documents(graph, words)
        skill = LibrarySkill(graph, version, node_tokens(graph))
        self._skills[graph.skill] = skill
        self._skill_index.add(graph.skill, [*terms(graph.skill), *summary])
        self._whole_index.add(graph.skill, chain(summary, *sections))
        for node, section in zip(graph.nodes, sections, strict=True):
            self._section_index.add((graph.skill, node.index), section)
        return skill

    def remove(self, name: str) -> LibrarySkill | None:
        if name not in self._skills:
            return None
        self._own()
        skill = self._skills.pop(name)
        summary, sections = _documents(skill.graph)  # recomputed: keeping them costs 1.6 GB at 100K skills
        self._skill_index.remove(name, {*terms(name), *summary})
        self._whole_index.remove(name, set(summary).union(*sections))
        for node, section in zip(skill.graph.nodes, sections, strict=True):
            self._section_index.remove((name, node.index), section)
        return skill

    def _own(self) -> None:
        if self._shared:
            self._skills, self._shared = dict(self._skills), False
            settle_long_lived()  # see MacroTables._own_tables

    def mentions(self, term: str, only: frozenset[str] | None = None) -> bool:
        """Whether any section (of the `only` skills, if given) holds the term."""
        return self._section_index.holds(term, None if only is None else lambda key: key[0] in only)

    def graph(self, name: str) -> SkillGraph:
        skill = self._skills.get(name)
        if skill is None:
            raise KeyError(name)
        return skill.graph

    def rank(self, query: list[str], skills: int, sections: int, only: frozenset[str] | None = None) -> Ranking:
        """The best `skills` skills and `sections` sections for the query's terms (in query order, for the
        phrase bonus), from the `only` skills if given (ranking.py says how evidence is combined)."""
        query_pairs = pairs(query)

        def search(index: BM25Index[str], limit: int) -> dict[str, float]:
            hits = index.search(query, limit if only is None else len(index))
            in_scope = [(name, score) for name, score in hits if only is None or name in only][:limit]
            return scaled(in_scope, index.information(query))

        whole = search(self._whole_index, SKILL_CANDIDATES)
        summary = with_phrase_bonus(search(self._skill_index, SKILL_CANDIDATES), query_pairs, self._summary)
        sections_index = self._section_index
        hits = sections_index.search(query, SECTION_CANDIDATES if only is None else len(sections_index))
        in_scope = [(key, score) for key, score in hits if only is None or key[0] in only][:SECTION_CANDIDATES]
        section_scores = with_phrase_bonus(
            scaled(in_scope, sections_index.information(query)), query_pairs, self._section_text
        )
        best_section: dict[str, float] = {}
        for (name, _), score in section_scores.items():
            best_section[name] = max(best_section.get(name, 0.0), score)
        ranked_sections = sorted(section_scores, key=lambda key: (-section_scores[key], key))
        return Ranking(tuple(fuse(whole, summary, best_section)[:skills]), tuple(ranked_sections[:sections]))

    def _summary(self, name: str) -> str:
        return f"{name} {self._skills[name].graph.description}"

    def _section_text(self, key: NodeKey) -> str:
        node = self._skills[key[0]].graph.nodes[key[1]]
        return f"{node.title} {node.text}"


def node_words(graph: SkillGraph) -> list[tuple[str, ...]]:
    """The terms of each node's text."""
    return [section_terms(node.text) for node in graph.nodes]


def node_tokens(graph: SkillGraph) -> tuple[int, ...]:
    """Tokens of each node's text, by the tokenizer budgets are counted in (`SectionNode.tokens`)."""
    return tuple([node.tokens for node in graph.nodes])


def forget_section_memos() -> None:
    """Empty the memos of sections' terms and token counts (about 30 MB when full, and holding texts of skills
    since removed): a bulk build gains from them, registrations one at a time hardly."""
    section_terms.cache_clear()
    section_tokens.cache_clear()


def skill_terms(skill: LibrarySkill) -> set[str]:
    """Every term of a skill's name, description and SKILL.md (its Markdown references left out)."""
    graph = skill.graph
    body = (node for node in graph.nodes if node.provenance.file == graph.body_file)
    return set(terms(f"{graph.skill} {graph.description}")).union(*map(_node_terms, body))


def _documents(graph: SkillGraph, words: NodeWords | None = None) -> tuple[list[str], list[list[str]]]:
    """A skill's terms as the indexes hold them: its name and description, and each section's (`_node_terms`,
    from the nodes' words when given)."""
    if words is None:
        words = node_words(graph)
    titles = (_title_terms(node.title) for node in graph.nodes)
    sections = [[*title, *title, *text] for title, text in zip(titles, words, strict=True)]
    return terms(f"{graph.skill} {graph.description}"), sections


def _node_terms(node: SectionNode) -> list[str]:
    """A section's terms; its title counts twice, as a heading says what the section is about. (The terms of
    a text are its words' terms in order, so the title's and the text's are found apart.)"""
    title = _title_terms(node.title)
    return [*title, *title, *terms(node.text)]


@lru_cache(maxsize=1 << 16)
def _title_terms(title: str) -> tuple[str, ...]:
    """Titles repeat across a library (Overview, Steps, Output): their terms are found once."""
    return tuple(terms(title))
