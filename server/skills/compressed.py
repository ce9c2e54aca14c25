"""The compressed view of a skill: plain nodes and macro references, and the way back.

Compressing a skill replaces each macro occurrence by one unit and rewires the edges that cross its
boundary through the macro's declared ports; expanding restores the source graph's edges exactly. The
library's statistics are measured on this view.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .graph import Edge, EdgeKind, SkillGraph
from .macros import Compression, Macro, Occurrence, Port


@dataclass(frozen=True)
class CompressedSkill:
    """A skill as the compressed library holds it: plain nodes and macro references, joined by edges whose
    ends inside a macro name the port they cross (the node's offset in the occurrence)."""

    skill: str
    units: tuple[int | tuple[str, Occurrence], ...]
    """A plain node's index, or (macro id, occurrence)."""
    edges: tuple[tuple[int, int, int, int, EdgeKind, str], ...]
    """(source unit, source offset, target unit, target offset, kind, label); offset 0 for a plain node."""


def compress_skill(compression: Compression, graph: SkillGraph) -> CompressedSkill:
    """Replace each macro occurrence in the skill by one unit; edges inside it are dropped (the macro keeps
    their pattern) and edges across its boundary are rewired to the unit through a declared port."""
    held = compression.held_in(graph.skill)
    units: list[int | tuple[str, Occurrence]] = []
    unit_of: dict[int, tuple[int, int]] = {}
    for index in range(len(graph.nodes)):
        if index not in held:
            unit_of[index] = (len(units), 0)
            units.append(index)
        else:
            macro, occurrence = held[index]
            if index == occurrence.start:
                units.append((macro.macro_id, occurrence))
            unit_of[index] = (len(units) - 1, index - occurrence.start)
    edges = []
    for edge in graph.edges:
        (source, source_offset), (target, target_offset) = unit_of[edge.source], unit_of[edge.target]
        if source == target and not isinstance(units[source], int):
            continue  # inside one occurrence: the macro's pattern holds it
        edges.append((source, source_offset, target, target_offset, edge.kind, edge.label))
    return CompressedSkill(graph.skill, tuple(units), tuple(edges))


def expand(compression: Compression, compressed: CompressedSkill) -> tuple[Edge, ...]:
    """The source graph's edges rebuilt from the compressed skill: the inverse of compress_skill."""
    macros = {m.macro_id: m for m in compression.macros}

    def node(unit: int, offset: int) -> int:
        held = compressed.units[unit]
        return held if isinstance(held, int) else held[1].start + offset

    edges = [Edge(node(s, so), node(t, to), kind, label) for s, so, t, to, kind, label in compressed.edges]
    for unit in compressed.units:
        if not isinstance(unit, int):
            macro_id, occurrence = unit
            pattern = macros[macro_id].internal_edges
            edges += [Edge(occurrence.start + s, occurrence.start + t, kind, label) for s, t, kind, label in pattern]
    return tuple(sorted(set(edges)))


@dataclass(frozen=True)
class LibraryStats:
    skills: int
    sections: int
    macros: int
    compression_ratio: float
    """Tokens of every section / tokens of the active representation (sections no macro holds, each macro's
    prototype once, and a reference per occurrence)."""
    dependency_preservation: float
    """Share of `requires`, `data` and `uses` edges the compressed view keeps (inside a macro's pattern, or
    across its boundary through a declared port)."""
    verifier_reachability: float
    """Share of state-changing sections with a verifier in the source that reach one in the compressed view."""


DEPENDENCIES = (EdgeKind.REQUIRES, EdgeKind.DATA, EdgeKind.USES)


def library_stats(compression: Compression, graphs: Iterable[SkillGraph]) -> LibraryStats:
    macros = {m.macro_id: m for m in compression.macros}
    skills = sections = dependencies = kept_dependencies = verified = kept_verified = 0
    for graph in graphs:
        skills += 1
        sections += len(graph.nodes)
        compressed = compress_skill(compression, graph)
        kept = {(e.source, e.target, e.kind, e.label) for e in _kept_edges(compressed, macros)}
        verifiers: dict[int, set[int]] = {}  # read from the edges: the graph's edge tables stay unmade
        for edge in graph.edges:
            if edge.kind in DEPENDENCIES:
                dependencies += 1
                kept_dependencies += (edge.source, edge.target, edge.kind, edge.label) in kept
            elif edge.kind is EdgeKind.VERIFIES:
                verifiers.setdefault(edge.source, set()).add(edge.target)
        for node in graph.nodes:
            targets = verifiers.get(node.index)
            if node.contract.state_changing and targets:
                verified += 1
                kept_verified += any((node.index, t, EdgeKind.VERIFIES, "") in kept for t in targets)
    return LibraryStats(
        skills,
        sections,
        len(compression.macros),
        compression.ratio,
        kept_dependencies / dependencies if dependencies else 1.0,
        kept_verified / verified if verified else 1.0,
    )


def _kept_edges(compressed: CompressedSkill, macros: dict[str, Macro]) -> Iterator[Edge]:
    """The edges the compressed view still states: plain ones, macro patterns, and edges through declared
    ports (an edge whose end inside a macro is not one of its ports is lost, and not yielded)."""
    units = compressed.units

    def end(unit: int, offset: int, direction: str, kind: EdgeKind) -> int | None:
        held = units[unit]
        if isinstance(held, int):
            return held
        macro_id, occurrence = held
        return occurrence.start + offset if Port(direction, kind, offset) in macros[macro_id].ports else None

    for s, so, t, to, kind, label in compressed.edges:
        source, target = end(s, so, "out", kind), end(t, to, "in", kind)
        if source is not None and target is not None:
            yield Edge(source, target, kind, label)
    for unit in units:
        if not isinstance(unit, int):
            macro_id, occurrence = unit
            for s, t, kind, label in macros[macro_id].internal_edges:
                yield Edge(occurrence.start + s, occurrence.start + t, kind, label)
