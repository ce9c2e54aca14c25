"""Sec2Graph: a skill package as a graph of role-typed section nodes with contracts and typed edges.

Nodes partition the SKILL.md body and then each Markdown reference of the package (a file's nodes, joined,
are its text), so the graph is source-grounded: every node carries its file and line range. Edges are
deterministic, and connect the sections of one file:

- `order`: each node to the next;
- `data`: the nearest earlier producer of an artifact to a node that consumes it;
- `requires`: each precondition or input section to every later state-changing or verifier node;
- `verifies`: each state-changing node to the first verifier after it, and to any verifier that reads an
  artifact it writes (SkillZip's conservative attachment: skill order or matching signatures);
- `handles`: each state-changing node to every failure section of its skill;
- `produces`: each state-changing node to every output section after it;
- `uses`: a node to a resource section that names one of its resources.

A reference's sections also depend on SKILL.md's, as if the reference followed the body (`_reference_edges`).
The edges references add are bounded when the package is loaded (package.py `reference_edge_bound`, which
must stay an upper bound of these rules).
"""

from __future__ import annotations

import operator
import posixpath
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property, lru_cache

from .contracts import Contract, Signature, extract_contract
from .links import relative_links, resolve
from .package import SkillPackage
from .roles import Role, role_of
from .sections import Part, split_body
from .tokens import section_tokens


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
    tokens: int
    """The text's tokens, by the tokenizer budgets are counted in (tokens.py): counted when the graph is built,
    and kept in its record, so a restarted registry does not encode every section again."""


@dataclass(frozen=True, slots=True, order=True)
class Edge:
    source: int
    target: int
    kind: EdgeKind
    label: str = ""
    """The artifact, for a `data` edge."""


_EDGE_ORDER = operator.attrgetter("source", "target", "kind", "label")
"""Edge's own order, compared in C: sorting by its generated `__lt__` takes four times as long."""


Reach = tuple[tuple[EdgeKind, int, int], ...]
"""(edge kind, lowest node, highest node) for each kind of edge a node has on one side."""


@dataclass(frozen=True)
class SkillGraph:
    skill: str
    description: str
    nodes: tuple[SectionNode, ...]
    edges: tuple[Edge, ...]
    body_file: str = ""
    """SKILL.md's key in the package (its nodes come first; Markdown references' follow)."""

    def source(self) -> str:
        """The SKILL.md body its first nodes were cut from, exactly."""
        return "".join(node.text for node in self.nodes if node.provenance.file == self.body_file)

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
    """Sec2Graph for one package: split, assign roles, extract contracts, connect. SKILL.md's body comes first,
    then each Markdown reference (`package.references`). Roles and contracts come from the deterministic
    rules, or from `extractor` (which is given the rules' answer to fall back on)."""
    documents = [(package.skill_file, package.body, package.body_line - 1)]
    documents += [(reference.path, reference.text, 0) for reference in package.references]
    nodes: list[SectionNode] = []
    files: list[tuple[SectionNode, ...]] = []
    for file, text, line_offset in documents:
        start = len(nodes)
        for part in split_body(text):
            nodes.append(_node(package, len(nodes), file, part, line_offset, extractor))
        files.append(tuple(nodes[start:]))
    edges = set(_edges(files[0]))
    for reference in files[1:]:
        edges.update(_edges(reference))
        edges.update(_reference_edges(files[0], reference))
    ordered = tuple(sorted(edges, key=_EDGE_ORDER))
    return SkillGraph(package.name, package.description, tuple(nodes), ordered, package.skill_file)


def _node(
    package: SkillPackage, index: int, file: str, part: Part, line_offset: int, extractor: Extractor | None
) -> SectionNode:
    role = role_of(part.title, part.text, is_first=index == 0 and file == package.skill_file, is_step=part.is_step)
    title = part.title
    if not part.level and file != package.skill_file:  # a reference's text before its first heading
        title = file[len(package.folder) + 1 :] if file.startswith(package.folder + "/") else file
    linked = tuple(sorted({resolve(posixpath.dirname(file), link.target) for link in relative_links(part.text)}))
    contract = extract_contract(part.text, role, linked, package.allowed_tools)
    if extractor is not None:
        role, contract = extractor(part.title, part.text, (role, contract))
    provenance = Provenance(package.name, file, part.first_line + line_offset, part.last_line + line_offset)
    # one string for every copy of a text (freed with its last holder): libraries repeat sections word for word
    title, text, heading_path = sys.intern(title), sys.intern(part.text), tuple(map(sys.intern, part.heading_path))
    return SectionNode(
        index, title, heading_path, part.level, part.is_step, role, contract, provenance, text, section_tokens(text)
    )


@lru_cache(maxsize=1 << 16)
def shared_edge(source: int, target: int, kind: EdgeKind, label: str = "") -> Edge:
    """One object per distinct edge: skills repeat the same few thousand (`3 -> 5, requires`), so the 7 million
    edges of 100,000 synthetic skills are about 10,000 objects (0.45 GB less)."""
    return Edge(source, target, kind, label)


def _edges(nodes: tuple[SectionNode, ...]) -> Iterator[Edge]:
    """The edges among one file's sections (consecutive node indexes)."""
    changing = [n.index for n in nodes if n.contract.state_changing]
    by_role = {role: [n.index for n in nodes if n.role is role] for role in Role}
    outputs_of = {n.index: set(n.contract.outputs) for n in nodes}
    for node in nodes[1:]:
        yield shared_edge(node.index - 1, node.index, EdgeKind.ORDER)
    nearest: dict[Signature, int] = {}  # each artifact's producer nearest before the node
    for node in nodes:
        for signature in node.contract.inputs:
            if signature in nearest:
                yield shared_edge(nearest[signature], node.index, EdgeKind.DATA, signature.name)
        nearest.update(dict.fromkeys(node.contract.outputs, node.index))
    for gate in by_role[Role.PRECONDITION] + by_role[Role.INPUT]:
        for later in changing + by_role[Role.VERIFIER]:
            if later > gate:
                yield shared_edge(gate, later, EdgeKind.REQUIRES)
    inputs_of = {n.index: set(n.contract.inputs) for n in nodes}
    for index in changing:
        first_after = next((v for v in by_role[Role.VERIFIER] if v > index), None)
        if first_after is not None:
            yield shared_edge(index, first_after, EdgeKind.VERIFIES)
        for verifier in by_role[Role.VERIFIER]:
            if outputs_of[index] & inputs_of[verifier]:
                yield shared_edge(index, verifier, EdgeKind.VERIFIES)
        for handler in by_role[Role.FAILURE]:
            yield shared_edge(index, handler, EdgeKind.HANDLES)
        for output in by_role[Role.OUTPUT]:
            if output > index:
                yield shared_edge(index, output, EdgeKind.PRODUCES)
    resources_of = {n.index: set(n.contract.resources) for n in nodes}
    for resource in by_role[Role.RESOURCE]:
        for node in nodes:
            if node.index != resource and resources_of[resource] & resources_of[node.index]:
                yield shared_edge(node.index, resource, EdgeKind.USES)


def _reference_edges(body: tuple[SectionNode, ...], reference: tuple[SectionNode, ...]) -> Iterator[Edge]:
    """How a Markdown reference's sections depend on SKILL.md's, as if the reference followed the body: its
    state-changing and verifier sections require the body's preconditions and inputs, read artifacts the
    body writes (when the reference writes none before), are handled by the body's failure sections, and a
    state-changing section with no verifier after it in its file is checked by the body's last verifier."""
    gates = [n.index for n in body if n.role in (Role.PRECONDITION, Role.INPUT)]
    body_verifiers = [n.index for n in body if n.role is Role.VERIFIER]
    handlers = [n.index for n in body if n.role is Role.FAILURE]
    verifiers = [n.index for n in reference if n.role is Role.VERIFIER]
    last_producer = {signature: n.index for n in body for signature in n.contract.outputs}
    written: set[Signature] = set()
    for node in reference:
        changing = node.contract.state_changing
        if changing or node.role is Role.VERIFIER:
            yield from (shared_edge(gate, node.index, EdgeKind.REQUIRES) for gate in gates)
        for signature in node.contract.inputs:
            if signature not in written and signature in last_producer:
                yield shared_edge(last_producer[signature], node.index, EdgeKind.DATA, signature.name)
        written.update(node.contract.outputs)
        if changing:
            yield from (shared_edge(node.index, handler, EdgeKind.HANDLES) for handler in handlers)
            if body_verifiers and not any(v > node.index for v in verifiers):
                yield shared_edge(node.index, body_verifiers[-1], EdgeKind.VERIFIES)
