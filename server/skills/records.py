"""A skill version's loaded package and graph as one record the skill store keeps beside its files: a restarted
registry reads records back instead of loading every package and building its graph again (about 60% of a
restart at 10,000 skills, where decoding takes an eighth of that).

A record is read back only by code that makes the same packages and graphs: its `tag` digests the source of
every module of this package, what they parse and count tokens with, and the package limits, so a record made
by other code or under other limits is not read (the registry builds that skill again and keeps the new
record). Texts are not stored twice: a SKILL.md body or Markdown reference is the concatenation of its
sections' texts (`SkillGraph.source`), and is stored only when it is not. Each section's token count is kept
(`SectionNode.tokens`): a start from records encodes no text."""

from __future__ import annotations

import hashlib
import json
import posixpath
import sys
import unicodedata
import zlib
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from .contracts import Contract, Signature, interned
from .diagnostics import Diagnostic, Severity
from .graph import EdgeKind, Provenance, SectionNode, SkillGraph, shared_edge
from .package import SKILL_FILE, PackageLimits, Reference, Resource, ResourceKind, SkillPackage
from .roles import Role
from .tokens import ENCODING

FORMAT = 2
"""The layout of a record; part of the tag."""


MAX_DECODED_BYTES = 64 << 20
"""A record decompresses to at most this: a package is at most 4 MiB, its record's JSON a few times that."""


class RecordError(ValueError):
    """A record that does not decode (damaged, or not a record)."""


def tag(limits: PackageLimits) -> str | None:
    """What a record is valid for: this package's code, the versions of Python, its Unicode tables and the YAML
    parsers, and the package limits. None where the code's source cannot be read (no record is then read or
    kept). Reads every source file the first time (about 2 ms): call it off the event loop."""
    code = _code_digest()
    return None if code is None else hashlib.sha256(f"{code} {limits!r}".encode()).hexdigest()[:32]


@cache
def _code_digest() -> str | None:
    here = Path(__file__).parent
    sources = sorted(here.rglob("*.py"))
    try:
        parsers = f"{metadata.version('strictyaml')} {metadata.version('PyYAML')} {unicodedata.unidata_version}"
        parsers += f" {metadata.version('tiktoken')} {ENCODING}"  # what counted the sections' tokens
    except metadata.PackageNotFoundError:
        return None
    if not sources:  # (installed without its source: nothing to tell two versions apart by)
        return None
    digest = hashlib.sha256(f"{FORMAT} {sys.version_info[:2]} {parsers}".encode())
    for source in sources:
        digest.update(source.relative_to(here).as_posix().encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def encode(package: SkillPackage, graph: SkillGraph) -> bytes:
    """The record of a loaded package and its graph (its files are the stored version's own)."""
    texts = _texts_by_file(graph)
    record = {
        "package": [
            package.name, package.description, package.folder, package.body_line,
            None if texts.get(package.skill_file, "") == package.body else package.body,
            [[r.path, r.kind.value, list(r.linked_from), r.present] for r in package.resources],
            [[r.path, None if texts.get(r.path) == r.text else r.text] for r in package.references],
            package.license, package.compatibility, dict(package.metadata), list(package.allowed_tools),
            [[d.severity.value, d.file, d.rule, d.message, d.line] for d in package.warnings],
        ],
        "graph": [
            graph.skill, graph.description, graph.body_file,
            [_node(node) for node in graph.nodes],
            [[e.source, e.target, e.kind.value, e.label] for e in graph.edges],
        ],
    }  # fmt: skip
    return zlib.compress(json.dumps(record, separators=(",", ":")).encode(), 1)


def decode(record: bytes, files: Mapping[str, bytes], name: str) -> tuple[SkillPackage, SkillGraph]:
    """The package and graph of a record of skill `name`; `files` are the stored version's. Raises RecordError."""
    try:
        decompressor = zlib.decompressobj()
        text = decompressor.decompress(record, MAX_DECODED_BYTES)
        if decompressor.unconsumed_tail:
            raise ValueError(f"more than {MAX_DECODED_BYTES} bytes")
        fields = json.loads(text)
        graph = _graph(*fields["graph"])
        package = _package(*fields["package"], files=files, texts=_texts_by_file(graph))
    except Exception as e:  # whatever a damaged or crafted row makes of the decoders: nesting, types, memory
        raise RecordError(f"not a skill record: {type(e).__name__}: {e}") from e
    if any(not (0 <= e.source < len(graph.nodes) and 0 <= e.target < len(graph.nodes)) for e in graph.edges):
        raise RecordError("not a skill record: an edge names a node the graph does not have")
    if package.name != name:
        raise RecordError(f"the record of skill {package.name!r}")
    return package, graph


def _node(node: SectionNode) -> list[Any]:
    c, p = node.contract, node.provenance
    contract = [[[s.name, s.kind] for s in c.inputs], [[s.name, s.kind] for s in c.outputs], list(c.resources),
                list(c.guards), list(c.verifies), c.state_changing]  # fmt: skip
    return [node.title, list(node.heading_path), node.level, node.is_step, node.role.value, contract,
            [p.file, p.first_line, p.last_line], node.text, node.tokens]  # fmt: skip


def _graph(skill: str, description: str, body_file: str, nodes: list[Any], edges: list[Any]) -> SkillGraph:
    made = []
    for index, node in enumerate(nodes):
        title, heading_path, level, is_step, role, contract, (file, first, last), text, tokens = node
        inputs, outputs, resources, guards, verifies, changing = contract
        if type(tokens) is not int or tokens < 0:
            raise ValueError(f"node {index}: tokens {tokens!r} is not a count")
        made.append(SectionNode(
            index, sys.intern(title), tuple(map(sys.intern, heading_path)), level, is_step, Role(role),
            interned(Contract(tuple(Signature(*s) for s in inputs), tuple(Signature(*s) for s in outputs),
                              tuple(resources), tuple(guards), tuple(verifies), changing)),
            Provenance(skill, file, first, last), sys.intern(text), tokens,
        ))  # fmt: skip
    made_edges = tuple(shared_edge(source, target, EdgeKind(kind), label) for source, target, kind, label in edges)
    return SkillGraph(skill, description, tuple(made), made_edges, body_file)


def _package(
    name: str,
    description: str,
    folder: str,
    body_line: int,
    body: str | None,
    resources: list[Any],
    references: list[Any],
    license_: str | None,
    compatibility: str | None,
    metadata_: dict[str, str],
    allowed_tools: list[str],
    warnings: list[Any],
    *,
    files: Mapping[str, bytes],
    texts: dict[str, str],
) -> SkillPackage:
    if body is None:
        body = texts.get(posixpath.join(folder, SKILL_FILE), "")
    return SkillPackage(
        name, description, folder, body, body_line,
        tuple(Resource(path, ResourceKind(kind), tuple(lines), present) for path, kind, lines, present in resources),
        files,
        tuple(Reference(path, texts[path] if text is None else text) for path, text in references),
        license_, compatibility, metadata_, tuple(allowed_tools),
        tuple(Diagnostic(Severity(severity), file, rule, message, line)
              for severity, file, rule, message, line in warnings),
    )  # fmt: skip


def _texts_by_file(graph: SkillGraph) -> dict[str, str]:
    """Each file's text as its sections put together."""
    texts: dict[str, list[str]] = {}
    for node in graph.nodes:
        texts.setdefault(node.provenance.file, []).append(node.text)
    return {file: "".join(parts) for file, parts in texts.items()}
