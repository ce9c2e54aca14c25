"""An Agent Skills package checked against the format: its front matter, body and resources.

A package arrives as a map of relative POSIX paths to bytes and the key of its folder: `NAME/SKILL.md`,
the files of the `NAME/` folder, and any file outside it that SKILL.md links to (`../CONNECTORS.md` from
`NAME/` is the key `CONNECTORS.md` when the map's root is NAME's parent). Without a folder, the package is
the shallowest SKILL.md's folder.

Lenient loading (the default) follows the format's client guidance: it refuses only what cannot be used
(no SKILL.md, no front matter, YAML no loader reads, no description) and reports every other deviation as a
warning. Strict loading makes every deviation from the format an error, with the reference validator's
rules, so its verdicts are skills-ref's. Broken links are warnings either way: they are about the
package's content, not its format. docs/skills.md lists the rules.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ..errors import InvalidArgumentError
from .diagnostics import Diagnostic, LoadReport, Severity, SkillFormatError
from .frontmatter import FrontMatterError, read_skill_text
from .frontmatter_fields import (
    check_keys,
    read_allowed_tools,
    read_compatibility,
    read_description,
    read_license,
    read_metadata,
    read_name,
)
from .links import relative_links, resolve
from .roles import Role, role_of
from .sections import Part, split_body

SKILL_FILE = "SKILL.md"


@dataclass(frozen=True, slots=True)
class PackageLimits:
    """Bounds on one package, checked before anything is parsed (docs/limits.md)."""

    max_files: int = 1000
    max_file_bytes: int = 1 << 20
    max_package_bytes: int = 4 << 20
    max_path_length: int = 512
    max_sections: int = 500
    """Sections (parts and numbered steps) of SKILL.md, and of each Markdown reference: Sec2Graph connects a
    file's sections pairwise, so its work grows with the square (500 sections make up to ~250K edges, about
    0.7 s of building and 3.2 MiB of a GetSkill reply; the real corpus peaks at 171 sections and 2,434 edges
    in a SKILL.md)."""
    max_reference_sections: int = 2000
    """Sections of all of a package's Markdown references together (the real corpus peaks at 1,968)."""
    max_reference_edges: int = 40_000
    """Edges all of a package's Markdown references may add to its graph, `data` edges aside, as
    `reference_edge_bound` counts them before any is made: at most about 0.12 s of building (the real corpus
    peaks at 24,081 by that count, for 17,552 made). The count uses the rules' roles: a graph built with an
    extractor (llm_extract.py), which may assign others, is not bounded by it."""


class ResourceKind(StrEnum):
    SCRIPT = "script"
    REFERENCE = "reference"
    ASSET = "asset"
    FILE = "file"
    """Another file inside the package folder."""
    EXTERNAL = "external"
    """A file outside the package folder that SKILL.md links to."""


_KIND_BY_FOLDER = {"scripts": ResourceKind.SCRIPT, "references": ResourceKind.REFERENCE, "assets": ResourceKind.ASSET}


@dataclass(frozen=True, slots=True)
class Resource:
    path: str
    """Its key in the package's file map (a folder when a link names one)."""
    kind: ResourceKind
    linked_from: tuple[int, ...]
    """The SKILL.md lines that link to it; empty for a file only present in the folder."""
    present: bool


@dataclass(frozen=True, slots=True)
class Reference:
    """A Markdown file of the package that becomes sections of its skill's graph, like SKILL.md's body."""

    path: str
    """Its key in the package's file map."""
    text: str
    """Its content, with `\r\n` line ends read as `\n` (as SKILL.md's are)."""


@dataclass(frozen=True)
class SkillPackage:
    """A loaded package. `warnings` says what lenient loading accepted."""

    name: str
    description: str
    folder: str
    """The key prefix of the package folder (`NAME` for `NAME/SKILL.md`)."""
    body: str
    body_line: int
    """The SKILL.md line the body starts on, so a body line n is file line body_line + n - 1."""
    resources: tuple[Resource, ...]
    files: Mapping[str, bytes] = field(repr=False)
    references: tuple[Reference, ...] = ()
    """Markdown documentation beside SKILL.md, in path order (see `markdown_references`)."""
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def skill_file(self) -> str:
        return posixpath.join(self.folder, SKILL_FILE)

    @property
    def digest(self) -> str:
        """sha256 over every file's path and content: equal digests mean the same package version."""
        return package_digest(self.files)


def package_digest(files: Mapping[str, bytes]) -> str:
    outer = hashlib.sha256()
    for path in sorted(files):
        outer.update(f"{path}\0{hashlib.sha256(files[path]).hexdigest()}\n".encode())
    return outer.hexdigest()


def load_package(
    files: Mapping[str, bytes],
    folder: str = "",
    *,
    strict: bool = False,
    limits: PackageLimits = PackageLimits(),
) -> SkillPackage:
    """Check and load the package in `folder` (a key prefix); raises SkillFormatError listing every error."""
    _check_map(files, limits)
    skill_file = _find_skill_file(files, folder)
    report = LoadReport(skill_file, strict)
    try:
        text = files[skill_file].decode("utf-8")
    except UnicodeDecodeError as e:
        raise SkillFormatError([report.error("encoding", f"not UTF-8 ({e.reason} at byte {e.start})")]) from e
    try:
        parsed = read_skill_text(text, strict=strict)
    except FrontMatterError as e:
        raise SkillFormatError([report.error(e.rule, str(e))]) from e
    for note in parsed.notes:
        report.warning("front-matter.yaml", note)
    body_parts = split_body(parsed.body)
    if len(body_parts) > limits.max_sections:
        message = f"{len(body_parts)} sections, more than the limit of {limits.max_sections}"
        raise SkillFormatError([report.error("limits.sections", message)])

    folder = posixpath.dirname(skill_file)
    front = parsed.front_matter
    check_keys(front, report)
    description = read_description(front, report)
    name = read_name(front, posixpath.basename(folder), report)
    compatibility = read_compatibility(front, report)
    metadata = read_metadata(front, report)
    allowed_tools = read_allowed_tools(front, report)
    license_ = read_license(front, report)
    resources = _resources(files, folder, parsed.body, parsed.body_line, report)
    report.raise_if_errors()
    references = markdown_references(files, skill_file, resources, body_parts, limits, report)
    return SkillPackage(
        name=name,
        description=description,
        folder=folder,
        body=parsed.body,
        body_line=parsed.body_line,
        resources=resources,
        files=dict(files),
        references=references,
        license=license_,
        compatibility=compatibility,
        metadata=metadata,
        allowed_tools=allowed_tools,
        warnings=tuple(report.found),
    )


MATERIAL_FOLDERS = frozenset({"assets", "templates"})
"""Folders of material a skill fills in or ships (templates, assets): Markdown there is not documentation."""


def markdown_references(
    files: Mapping[str, bytes],
    skill_file: str,
    resources: tuple[Resource, ...],
    body: Sequence[Part],
    limits: PackageLimits,
    report: LoadReport,
) -> tuple[Reference, ...]:
    """The package's Markdown documentation: every present `.md` resource inside the folder except what
    `assets/` and `templates/` hold, and every linked `.md` file outside it; never a SKILL.md (its own, or
    another skill's it links to). Agent Skills keep
    procedures and worked examples there by design (progressive disclosure), so they are sections too.
    A file that is not UTF-8, or has more sections than `max_sections`, and, in path order, each file that
    would bring the references over `max_reference_sections` in all, then over `max_reference_edges` (their
    edges depend on SKILL.md's parts, `body`), stay resources only, with a warning."""
    folder = posixpath.dirname(skill_file)
    found: list[tuple[Reference, list[Part]]] = []
    sections = 0
    for resource in resources:
        top = resource.path[len(folder) + 1 :].split("/", 1)[0] if resource.kind is not ResourceKind.EXTERNAL else ""
        markdown = resource.path.lower().endswith(".md") and resource.path in files
        a_skill = posixpath.basename(resource.path).lower() == "skill.md"  # its own, or another skill linked
        if not markdown or a_skill or top in MATERIAL_FOLDERS:
            continue
        try:
            text = files[resource.path].decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n")
        except UnicodeDecodeError:
            report.warning("reference.encoding", f"{resource.path} is not UTF-8: kept as a resource, not sections")
            continue
        parts = split_body(text)
        count = len(parts)
        if count > limits.max_sections:
            message = f"{resource.path} has {count} sections, more than {limits.max_sections}: not sectioned"
            report.warning("limits.sections", message)
            continue
        if sections + count > limits.max_reference_sections:
            message = f"{resource.path}: more than {limits.max_reference_sections} reference sections in all"
            report.warning("limits.reference-sections", f"{message}: not sectioned")
            continue
        sections += count
        found.append((Reference(resource.path, text), parts))
    return _within_edge_limit(found, body, limits, report)


def _within_edge_limit(
    found: list[tuple[Reference, list[Part]]], body: Sequence[Part], limits: PackageLimits, report: LoadReport
) -> tuple[Reference, ...]:
    """The references `found` (in path order, each with its parts) but those that would bring the edges of the
    references before them over `max_reference_edges`, which are warned. Finding roles costs as much as the
    rest of loading, so it is skipped when no roles could make that many (see `reference_edge_bound`)."""
    if sum(len(parts) * (len(parts) + len(body) + 2) for _, parts in found) <= limits.max_reference_edges:
        return tuple(reference for reference, _ in found)
    body_roles = _roles(body, in_body=True)
    kept, edges = [], 0
    for reference, parts in found:
        added = reference_edge_bound(body_roles, _roles(parts, in_body=False))
        if edges + added > limits.max_reference_edges:
            message = f"{reference.path}: up to {added} edges, more than {limits.max_reference_edges} in all"
            report.warning("limits.reference-edges", f"{message}: not sectioned")
            continue
        edges += added
        kept.append(reference)
    return tuple(kept)


def reference_edge_bound(body: Sequence[Role], reference: Sequence[Role]) -> int:
    """At most how many edges, `data` edges aside, Sec2Graph makes among one Markdown reference's sections and
    from them to SKILL.md's (graph.py `_edges` and `_reference_edges`), given the sections' roles: each
    rule's pairs all joined, and every operation and output section taken as state-changing (no other
    role's section can be). A `data` edge joins a section to the producer of an artifact it reads, so those
    grow with the text, not with pairs of sections. Whatever the roles, the bound is at most n(n + b + 2) for
    n sections in the reference and b in SKILL.md."""
    own, before = Counter(reference), Counter(body)
    others = max(len(reference) - 1, 0)
    changing, verifiers = own[Role.OPERATION] + own[Role.OUTPUT], own[Role.VERIFIER]
    gates = sum(roles[role] for roles in (own, before) for role in (Role.PRECONDITION, Role.INPUT))
    handlers = own[Role.FAILURE] + before[Role.FAILURE]
    return (
        others * (1 + own[Role.RESOURCE])  # order; uses
        + gates * (changing + verifiers)  # requires
        + changing * (1 + verifiers + handlers + own[Role.OUTPUT])  # verifies; handles; produces
    )


def _roles(parts: Sequence[Part], *, in_body: bool) -> list[Role]:
    """The rules' roles of a file's parts, as Sec2Graph assigns them (SKILL.md's first part is its intent)."""
    return [role_of(p.title, p.text, is_first=in_body and i == 0, is_step=p.is_step) for i, p in enumerate(parts)]


def _check_map(files: Mapping[str, bytes], limits: PackageLimits) -> None:
    if not files:
        raise SkillFormatError([Diagnostic(Severity.ERROR, "files", "files.empty", "no files sent")])
    if len(files) > limits.max_files:
        raise InvalidArgumentError(f"files: {len(files)} files, more than the limit of {limits.max_files}")
    total = 0
    for path, content in files.items():
        parts = path.split("/")
        if (
            not path
            or len(path) > limits.max_path_length
            or path.startswith("/")
            or "\\" in path
            or any(part in ("", ".", "..") for part in parts)
        ):
            raise InvalidArgumentError(
                f"files: {path[:100]!r} is not a relative POSIX path of at most {limits.max_path_length} "
                "characters without '.', '..' or empty segments"
            )
        if len(content) > limits.max_file_bytes:
            raise InvalidArgumentError(
                f"files: {path} is {len(content)} bytes, more than the limit of {limits.max_file_bytes}"
            )
        total += len(content)
    if total > limits.max_package_bytes:
        raise InvalidArgumentError(f"files: {total} bytes in all, more than the limit of {limits.max_package_bytes}")


def _find_skill_file(files: Mapping[str, bytes], folder: str) -> str:
    if folder:
        for name in (SKILL_FILE, "skill.md"):
            if posixpath.join(folder, name) in files:
                return posixpath.join(folder, name)
        raise SkillFormatError([Diagnostic(Severity.ERROR, "files", "skill-file", f"no {folder}/SKILL.md")])
    candidates = [p for p in files if posixpath.basename(p) == SKILL_FILE]
    if not candidates:
        candidates = [p for p in files if posixpath.basename(p) == "skill.md"]
    if not candidates:
        raise SkillFormatError([Diagnostic(Severity.ERROR, "files", "skill-file", "no SKILL.md among the files")])
    depth = min(p.count("/") for p in candidates)
    shallowest = sorted(p for p in candidates if p.count("/") == depth)
    if depth == 0:
        message = "SKILL.md must be inside its package folder: send it as NAME/SKILL.md"
        raise SkillFormatError([Diagnostic(Severity.ERROR, shallowest[0], "skill-file", message)])
    if len(shallowest) > 1:
        message = f"more than one package: {', '.join(shallowest)}; send one package at a time"
        raise SkillFormatError([Diagnostic(Severity.ERROR, "files", "skill-file", message)])
    return shallowest[0]


def _resources(
    files: Mapping[str, bytes], folder: str, body: str, body_line: int, report: LoadReport
) -> tuple[Resource, ...]:
    """Files of the folder and targets of links, each with the lines linking it; missing targets warned."""
    linked: dict[str, list[int]] = {}
    for link in relative_links(body):
        line = body_line + link.line - 1
        path = resolve(folder, link.target)
        linked.setdefault(path, []).append(line)
        if path.startswith("../") or path == "..":
            report.deviation("link.outside", f"line {line}: {link.target} points outside the files sent")
        elif path not in files and not any(key.startswith(path + "/") for key in files):
            report.warning("link.missing", f"{link.target} is not among the package's files", line)
    prefix = folder + "/"
    skill_file = posixpath.join(folder, SKILL_FILE)
    paths = {p for p in files if p.startswith(prefix) and p != skill_file} | {
        p for p in linked if not p.startswith("../")
    }
    resources = []
    for path in sorted(paths):
        inside = path.startswith(prefix)
        kind = _KIND_BY_FOLDER.get(path[len(prefix) :].split("/", 1)[0], ResourceKind.FILE)
        present = path in files or any(key.startswith(path + "/") for key in files)
        resources.append(
            Resource(path, kind if inside else ResourceKind.EXTERNAL, tuple(linked.get(path, ())), present)
        )
    return tuple(resources)
