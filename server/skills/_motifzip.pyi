from array import array
from collections.abc import Callable, Mapping

from .macros import Occurrence, Port
from .motif_discovery import Group, RunShapes, SkillText
from .text import NodeWords

SKETCH: int
VERSION: int
MAX_RUN: int
MAX_COMPARED: int
MAX_POSTING: int
MIN_OCCURRENCES: int
REFERENCE_TOKENS: int

def groups(
    runs: Mapping[Occurrence, frozenset[Port]], texts: Mapping[str, SkillText], tokens: Mapping[str, tuple[int, ...]]
) -> list[Group]: ...
def file_runs(
    shapes: RunShapes,
    skill: str,
    rows: list[int],
    reach: list[int],
    files: list[str],
    verifiable: tuple[bool, ...] | None,
    buckets: list[dict[Occurrence, frozenset[Port]]],
    grow: Callable[[int], None],
    occurrence: type[Occurrence],
) -> None: ...
def shingled(node_terms: NodeWords) -> tuple[array[int], array[int], array[int]]: ...
