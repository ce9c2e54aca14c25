from collections.abc import Mapping

from .macros import Occurrence, Port
from .motif_discovery import Group, SkillText

SKETCH: int
MAX_COMPARED: int
MAX_POSTING: int
MIN_OCCURRENCES: int
REFERENCE_TOKENS: int

def groups(
    runs: Mapping[Occurrence, frozenset[Port]], texts: Mapping[str, SkillText], tokens: Mapping[str, tuple[int, ...]]
) -> list[Group]: ...
