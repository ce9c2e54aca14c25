"""What the registry keeps of a hydration so that Expand and ReportOutcome can refer to it, after a restart
too: its sections, the macro blocks it showed (each with its macro's key, where ReZip counts evidence) and
the version of every skill it showed. The store holds it as JSON (`to_json`), opaque to the store.

A kept hydration refers to the library as it was: Expand renders from the current library, so a macro of
a skill that changed version since (or left the library) is refused rather than rendered from other text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import NotFoundError
from .hydrate import Hydration
from .library import NodeKey, SkillLibrary
from .macros import Key, Level, Macro, Occurrence, key_from_json, key_to_json
from .render import MacroBlock


@dataclass(frozen=True)
class ShownMacro:
    """A macro occurrence as a hydration showed it."""

    macro_id: str
    name: str
    key: Key
    occurrence: Occurrence
    level: Level

    def block(self, level: Level) -> MacroBlock:
        """A block of this occurrence at `level`, for rendering: a render names the macro by id and name only,
        so a stand-in for the macro (it may have been revised or retired since) renders as the macro did."""
        stand_in = Macro(self.macro_id, self.name, self.key, frozenset(), (self.occurrence,), self.occurrence, 0, 0)
        return MacroBlock(stand_in, self.occurrence, level)


@dataclass(frozen=True)
class KeptHydration:
    hydration_id: str
    sections: tuple[NodeKey, ...]
    macros: tuple[ShownMacro, ...]
    versions: dict[str, int]
    """The version of each skill the hydration showed."""

    @classmethod
    def of(cls, hydration: Hydration, library: SkillLibrary) -> KeptHydration:
        """What to keep of a hydration made over `library`."""
        skills = {*hydration.source_skills, *(b.occurrence.skill for b in hydration.macros)}
        versions = {name: skill.version for name in sorted(skills) if (skill := library.get(name)) is not None}
        macros = tuple(
            ShownMacro(b.macro.macro_id, b.macro.name, b.macro.key, b.occurrence, b.level) for b in hydration.macros
        )
        return cls(hydration.hydration_id, tuple(hydration.sections), macros, versions)

    def macro(self, macro_id: str) -> ShownMacro:
        shown = next((m for m in self.macros if m.macro_id == macro_id), None)
        if shown is None:
            raise NotFoundError(f"macro_id: {macro_id!r} is not a macro of hydration {self.hydration_id}")
        return shown

    def check_current(self, skill: str, library: SkillLibrary) -> None:
        """Raise NotFoundError naming `hydration_id` unless `skill` is still at the version this hydration showed."""
        current = library.get(skill)
        if current is None:
            raise NotFoundError(f"hydration_id: skill {skill!r} left the library; hydrate again")
        shown = self.versions.get(skill)
        if current.version != shown:
            raise NotFoundError(
                f"hydration_id: skill {skill!r} is at version {current.version}, hydration {self.hydration_id} "
                f"showed version {shown}; hydrate again"
            )

    def by_key(self) -> dict[Key, tuple[str, ...]]:
        """The macro ids shown, by macro key (what ReZip counts evidence for)."""
        keys: dict[Key, tuple[str, ...]] = {}
        for shown in self.macros:
            keys[shown.key] = (*keys.get(shown.key, ()), shown.macro_id)
        return keys

    def keys_of(self, macro_ids: set[str]) -> set[Key]:
        return {shown.key for shown in self.macros if shown.macro_id in macro_ids}

    def to_json(self) -> str:
        macros = [
            {"id": m.macro_id, "name": m.name, "key": key_to_json(m.key), "skill": m.occurrence.skill,
             "start": m.occurrence.start, "length": m.occurrence.length, "level": int(m.level)}
            for m in self.macros
        ]  # fmt: skip
        record = {"sections": [list(section) for section in self.sections], "versions": self.versions, "macros": macros}
        return json.dumps(record, separators=(",", ":"))

    @classmethod
    def from_json(cls, hydration_id: str, text: str) -> KeptHydration:
        record: dict[str, Any] = json.loads(text)
        macros = tuple(
            ShownMacro(
                m["id"], m["name"], key_from_json(m["key"]), Occurrence(m["skill"], m["start"], m["length"]),
                Level(m["level"]),
            )
            for m in record["macros"]
        )  # fmt: skip
        sections = tuple((name, index) for name, index in record["sections"])
        return cls(hydration_id, sections, macros, dict(record["versions"]))
