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
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..errors import InvalidArgumentError
from .frontmatter import FrontMatterError, read_skill_text
from .links import relative_links, resolve
from .roles import Role, role_of
from .sections import Part, split_body

SKILL_FILE = "SKILL.md"
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_COMPATIBILITY_LENGTH = 500
KNOWN_KEYS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})


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


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One deviation: where it is, which rule it breaks, and what was found."""

    severity: Severity
    file: str
    rule: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.rule}: {self.message}"


class SkillFormatError(InvalidArgumentError):
    """The package cannot be loaded; `diagnostics` holds every error (and the warnings found with them)."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        errors = [str(d) for d in diagnostics if d.severity is Severity.ERROR]
        super().__init__("; ".join(errors))


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
    report = _Report(skill_file, strict)
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
    unknown = sorted(front.keys() - KNOWN_KEYS)
    if unknown:
        report.deviation(
            "front-matter.keys", f"unknown keys {', '.join(unknown)} (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    description = _description(front, report)
    name = _name(front, posixpath.basename(folder), report)
    compatibility = _compatibility(front, report)
    metadata = _metadata(front, report)
    allowed_tools = _allowed_tools(front, report)
    license_ = front.get("license")
    if license_ is not None and not isinstance(license_, str):
        report.deviation("license.type", "must be a string")
        license_ = None
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


class _Report:
    """Diagnostics of one load; a deviation is an error when strict, else a warning."""

    def __init__(self, file: str, strict: bool) -> None:
        self.file, self.strict, self.found = file, strict, list[Diagnostic]()

    def error(self, rule: str, message: str, line: int | None = None) -> Diagnostic:
        self.found.append(Diagnostic(Severity.ERROR, self.file, rule, message, line))
        return self.found[-1]

    def warning(self, rule: str, message: str, line: int | None = None) -> None:
        self.found.append(Diagnostic(Severity.WARNING, self.file, rule, message, line))

    def deviation(self, rule: str, message: str) -> None:
        (self.error if self.strict else self.warning)(rule, message)

    def raise_if_errors(self) -> None:
        if any(d.severity is Severity.ERROR for d in self.found):
            raise SkillFormatError(self.found)


MATERIAL_FOLDERS = frozenset({"assets", "templates"})
"""Folders of material a skill fills in or ships (templates, assets): Markdown there is not documentation."""


def markdown_references(
    files: Mapping[str, bytes],
    skill_file: str,
    resources: tuple[Resource, ...],
    body: Sequence[Part],
    limits: PackageLimits,
    report: _Report,
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
    found: list[tuple[Reference, list[Part]]], body: Sequence[Part], limits: PackageLimits, report: _Report
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


def _description(front: dict[str, Any], report: _Report) -> str:
    value = front.get("description")
    if not isinstance(value, str) or not value.strip():
        report.error("description.required", "a non-empty description is required")
        return ""
    if len(value) > MAX_DESCRIPTION_LENGTH:
        report.deviation("description.length", f"{len(value)} characters, more than {MAX_DESCRIPTION_LENGTH}")
    return value.strip()


def _name(front: dict[str, Any], folder_name: str, report: _Report) -> str:
    value = front.get("name")
    if not isinstance(value, str) or not value.strip():
        report.deviation("name.required", f"a non-empty name is required (using the folder name {folder_name!r})")
        return folder_name
    name = unicodedata.normalize("NFKC", value.strip())
    if len(name) > MAX_NAME_LENGTH:
        report.deviation("name.length", f"{name!r} has {len(name)} characters, more than {MAX_NAME_LENGTH}")
    if name != name.lower():
        report.deviation("name.lowercase", f"{name!r} must be lowercase")
    if name.startswith("-") or name.endswith("-"):
        report.deviation("name.hyphens", f"{name!r} must not start or end with '-'")
    if "--" in name:
        report.deviation("name.hyphens", f"{name!r} must not contain '--'")
    if not all(c.isalnum() or c == "-" for c in name):
        report.deviation("name.characters", f"{name!r} may hold only letters, digits and '-'")
    if unicodedata.normalize("NFKC", folder_name) != name:
        report.deviation("name.folder", f"{name!r} differs from its folder name {folder_name!r}")
    return name


def _compatibility(front: dict[str, Any], report: _Report) -> str | None:
    value = front.get("compatibility")
    if value is None:
        return None
    if not isinstance(value, str):
        report.deviation("compatibility.type", "must be a string")
        return None
    if len(value) > MAX_COMPATIBILITY_LENGTH:
        report.deviation("compatibility.length", f"{len(value)} characters, more than {MAX_COMPATIBILITY_LENGTH}")
    return value


def _metadata(front: dict[str, Any], report: _Report) -> dict[str, str]:
    value = front.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        report.deviation("metadata.type", "must be a mapping of strings to strings")
        return {}
    return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}


def _allowed_tools(front: dict[str, Any], report: _Report) -> tuple[str, ...]:
    value = front.get("allowed-tools")
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    report.deviation("allowed-tools.type", "must be a string or a list of strings")
    return ()


def _resources(
    files: Mapping[str, bytes], folder: str, body: str, body_line: int, report: _Report
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
