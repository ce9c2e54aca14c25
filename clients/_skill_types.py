"""The values the skill registry client returns, decoded from the wire messages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from skillstate.skills.v1 import skills_pb2 as pb


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A deviation loading accepted (or, inside a ValidationError's message, refused)."""

    file: str
    line: int | None
    rule: str
    message: str

    @classmethod
    def from_pb(cls, message: pb.Diagnostic) -> Diagnostic:
        return cls(message.file, message.line or None, message.rule, message.message)


@dataclass(frozen=True, slots=True)
class Registered:
    name: str
    version: int
    section_count: int
    warnings: tuple[Diagnostic, ...]
    unchanged: bool
    """The content equals the current version's: nothing new was stored."""
    digest: str


@dataclass(frozen=True, slots=True)
class SkillSummary:
    name: str
    version: int
    description: str
    section_count: int
    token_count: int
    digest: str
    registered_at: datetime

    @classmethod
    def from_pb(cls, message: pb.SkillSummary) -> SkillSummary:
        registered = datetime.fromtimestamp(message.registered_at_ms / 1000, tz=UTC)
        return cls(
            message.name,
            message.version,
            message.description,
            message.section_count,
            message.token_count,
            message.digest,
            registered,
        )


@dataclass(frozen=True, slots=True)
class Section:
    index: int
    title: str
    role: str
    is_step: bool
    file: str
    first_line: int
    last_line: int
    token_count: int
    text: str
    inputs: tuple[tuple[str, str], ...]
    """(artifact, kind) pairs it reads."""
    outputs: tuple[tuple[str, str], ...]
    resources: tuple[str, ...]
    guards: tuple[str, ...]
    verifies: tuple[str, ...]
    state_changing: bool


@dataclass(frozen=True, slots=True)
class Skill:
    """One version of a skill with its section graph; `files` only when asked for."""

    summary: SkillSummary
    sections: tuple[Section, ...]
    edges: tuple[tuple[int, int, str, str], ...]
    """(source, target, kind, label)"""
    warnings: tuple[Diagnostic, ...]
    folder: str
    files: dict[str, bytes]
    metadata: dict[str, str]
    """The front matter's `metadata` map."""

    @classmethod
    def from_pb(cls, message: pb.GetSkillResponse) -> Skill:
        sections = tuple(
            Section(
                s.index,
                s.title,
                s.role,
                s.is_step,
                s.file,
                s.first_line,
                s.last_line,
                s.token_count,
                s.text,
                tuple((i.name, i.kind) for i in s.contract.inputs),
                tuple((o.name, o.kind) for o in s.contract.outputs),
                tuple(s.contract.resources),
                tuple(s.contract.guards),
                tuple(s.contract.verifies),
                s.contract.state_changing,
            )
            for s in message.sections
        )
        edges = tuple((e.source, e.target, e.kind, e.label) for e in message.edges)
        warnings = tuple(Diagnostic.from_pb(d) for d in message.warnings)
        return cls(
            SkillSummary.from_pb(message.skill),
            sections,
            edges,
            warnings,
            message.folder,
            dict(message.files),
            dict(message.metadata),
        )


@dataclass(frozen=True, slots=True)
class HydratedMacro:
    """A shared routine in a hydrated context; `level` is name, contract, outline or full."""

    macro_id: str
    name: str
    skill: str
    first_index: int
    section_count: int
    level: str


@dataclass(frozen=True, slots=True)
class MacroRevision:
    """How ReZip revised a macro: its default level now, or retired."""

    macro_id: str
    level: str | None


def level_name(value: int) -> str:
    return str(pb.RenderLevel.Name(value)).removeprefix("RENDER_LEVEL_").lower()


@dataclass(frozen=True, slots=True)
class Hydrated:
    """A hydrated context and what it covers."""

    context: str
    token_count: int
    hydration_id: str
    sections: tuple[tuple[str, int, str, str], ...]
    """(skill, index, title, role) in rendering order."""
    source_skills: tuple[str, ...]
    anchors: tuple[str, ...]
    anchors_covered: tuple[str, ...]
    anchors_uncoverable: tuple[str, ...]
    dependencies_closed: bool
    verifier_reachable: bool
    whole_skill_fallback: bool
    macros: tuple[HydratedMacro, ...]

    @classmethod
    def from_pb(cls, message: pb.HydrateResponse) -> Hydrated:
        coverage = message.coverage
        return cls(
            message.context,
            message.token_count,
            message.hydration_id,
            tuple((s.skill, s.index, s.title, s.role) for s in message.sections),
            tuple(message.source_skills),
            tuple(coverage.anchors),
            tuple(coverage.anchors_covered),
            tuple(coverage.anchors_uncoverable),
            coverage.dependencies_closed,
            coverage.verifier_reachable,
            message.whole_skill_fallback,
            tuple(
                HydratedMacro(m.macro_id, m.name, m.skill, m.first_index, m.section_count, level_name(m.level))
                for m in message.macros
            ),
        )


@dataclass(frozen=True, slots=True)
class LibraryStats:
    skills: int
    sections: int
    macros: int
    compression_ratio: float
    dependency_preservation: float
    verifier_reachability: float
    raw_tokens: int
    active_tokens: int
