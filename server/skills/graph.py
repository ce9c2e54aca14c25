"""Sec2Graph: a skill package as a graph of role-typed section nodes with contracts and typed edges.

Nodes partition the SKILL.md body (their texts, joined, are the body), so the graph is source-grounded:
every node carries its file and line range. Edges are deterministic:

- `order`: each node to the next;
- `data`: the nearest earlier producer of an artifact to a node that consumes it;
- `requires`: each precondition or input section to every later state-changing or verifier node;
- `verifies`: each state-changing node to the first verifier after it, and to any verifier that reads an
  artifact it writes (SkillZip's conservative attachment: skill order or matching signatures);
- `handles`: each state-changing node to every failure section of its skill;
- `produces`: each state-changing node to every output section after it;
- `uses`: a node to a resource section that names one of its resources.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from .contracts import Contract, extract_contract
from .links import relative_links, resolve
from .package import SkillPackage
from .roles import Role, role_of
from .sections import Part, split_body


class EdgeKind(StrEnum):
    ORDER = "order"
    DATA = "data"
    REQUIRES = "requires"
    VERIFIES = "verifies"
    HANDLES = "handles"
    PRODUCES = "produces"
    USES = "uses"


@dataclass(frozen=True, slots=True)
class Provenance:
    skill: str
    file: str
    first_line: int
    last_line: int
    """1-based lines of `file`, inclusive."""


@dataclass(frozen=True, slots=True)
class SectionNode:
    index: int
    title: str
    heading_path: tuple[str, ...]
    level: int
    is_step: bool
    role: Role
    contract: Contract
    provenance: Provenance
    text: str


@dataclass(frozen=True, slots=True, order=True)
class Edge:
    source: int
    target: int
    kind: EdgeKind
    label: str = ""
    """The artifact, for a `data` edge."""


Reach = tuple[tuple[EdgeKind, int, int], ...]
"""(edge kind, lowest node, highest node) for each kind of edge a node has on one side."""


@dataclass(frozen=True)
class SkillGraph:
    skill: str
    description: str
    nodes: tuple[SectionNode, ...]
    edges: tuple[Edge, ...]

    def source(self) -> str:
        """The SKILL.md body the nodes were cut from, exactly."""
        return "".join(node.text for node in self.nodes)

    def successors(self, index: int, *kinds: EdgeKind) -> Iterator[int]:
        return (e.target for e in self.edges_from(index) if not kinds or e.kind in kinds)

    def predecessors(self, index: int, *kinds: EdgeKind) -> Iterator[int]:
        return (e.source for e in self.edges_to(index) if not kinds or e.kind in kinds)

    def edges_from(self, index: int) -> Sequence[Edge]:
        return self._outgoing.get(index, ())

    def edges_to(self, index: int) -> Sequence[Edge]:
        return self._incoming.get(index, ())

    def reach(self, index: int) -> tuple[Reach, Reach]:
        """Per edge kind, the lowest and highest node a node's edges reach: (to targets, from sources)."""
        return self._reach[index]

    @cached_property
    def _reach(self) -> list[tuple[Reach, Reach]]:
        def spans(edges: Sequence[Edge], end: Callable[[Edge], int]) -> Reach:
            ends: dict[EdgeKind, list[int]] = {}
            for edge in edges:
                ends.setdefault(edge.kind, []).append(end(edge))
            return tuple((kind, min(found), max(found)) for kind, found in ends.items())

        return [
            (spans(self.edges_from(i), lambda e: e.target), spans(self.edges_to(i), lambda e: e.source))
            for i in range(len(self.nodes))
        ]

    @cached_property
    def _outgoing(self) -> dict[int, list[Edge]]:
        return _by_end(self.edges, lambda edge: edge.source)

    @cached_property
    def _incoming(self) -> dict[int, list[Edge]]:
        return _by_end(self.edges, lambda edge: edge.target)


def _by_end(edges: Sequence[Edge], end: Callable[[Edge], int]) -> dict[int, list[Edge]]:
    grouped: dict[int, list[Edge]] = {}
    for edge in edges:
        grouped.setdefault(end(edge), []).append(edge)
    return grouped


Extractor = Callable[[str, str, tuple[Role, Contract]], tuple[Role, Contract]]
"""(title, text, the rule-based role and contract) -> the role and contract to use (see llm_extract.py)."""


def build_graph(package: SkillPackage, extractor: Extractor | None = None) -> SkillGraph:
    """Sec2Graph for one package: split, assign roles, extract contracts, connect. Roles and contracts come
    from the deterministic rules, or from `extractor` (which is given the rules' answer to fall back on)."""
    parts = split_body(package.body)
    nodes = tuple(_node(package, index, part, extractor) for index, part in enumerate(parts))
    return SkillGraph(package.name, package.description, nodes, tuple(sorted(set(_edges(nodes)))))


def _node(package: SkillPackage, index: int, part: Part, extractor: Extractor | None) -> SectionNode:
    role = role_of(part.title, part.text, is_first=index == 0, is_step=part.is_step)
    linked = tuple(sorted({resolve(package.folder, link.target) for link in relative_links(part.text)}))
    contract = extract_contract(part.text, role, linked, package.allowed_tools)
    if extractor is not None:
        role, contract = extractor(part.title, part.text, (role, contract))
    offset = package.body_line - 1
    provenance = Provenance(package.name, package.skill_file, part.first_line + offset, part.last_line + offset)
    return SectionNode(
        index, part.title, part.heading_path, part.level, part.is_step, role, contract, provenance, part.text
    )


def _edges(nodes: tuple[SectionNode, ...]) -> Iterator[Edge]:
    changing = [n.index for n in nodes if n.contract.state_changing]
    by_role = {role: [n.index for n in nodes if n.role is role] for role in Role}
    for node in nodes[1:]:
        yield Edge(node.index - 1, node.index, EdgeKind.ORDER)
    for node in nodes:
        for signature in node.contract.inputs:
            producer = next((p for p in reversed(nodes[: node.index]) if signature in p.contract.outputs), None)
            if producer is not None:
                yield Edge(producer.index, node.index, EdgeKind.DATA, signature.name)
    for gate in by_role[Role.PRECONDITION] + by_role[Role.INPUT]:
        for later in changing + by_role[Role.VERIFIER]:
            if later > gate:
                yield Edge(gate, later, EdgeKind.REQUIRES)
    for index in changing:
        outputs = set(nodes[index].contract.outputs)
        first_after = next((v for v in by_role[Role.VERIFIER] if v > index), None)
        if first_after is not None:
            yield Edge(index, first_after, EdgeKind.VERIFIES)
        for verifier in by_role[Role.VERIFIER]:
            if outputs & set(nodes[verifier].contract.inputs):
                yield Edge(index, verifier, EdgeKind.VERIFIES)
        for handler in by_role[Role.FAILURE]:
            yield Edge(index, handler, EdgeKind.HANDLES)
        for output in by_role[Role.OUTPUT]:
            if output > index:
                yield Edge(index, output, EdgeKind.PRODUCES)
    for resource in by_role[Role.RESOURCE]:
        offered = set(nodes[resource].contract.resources)
        for node in nodes:
            if node.index != resource and offered & set(node.contract.resources):
                yield Edge(node.index, resource, EdgeKind.USES)
