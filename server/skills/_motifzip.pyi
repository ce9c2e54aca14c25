from collections.abc import Mapping

from .macro_index import Choosing
from .macros import Occurrence, Port
from .motif_discovery import Group, Grouping, Shingling, SkillText
from .motif_runs import Filing

VERSION: int
MAX_RUN: int
SKETCH: int
MAX_COMPARED: int
MAX_POSTING: int
MIN_OCCURRENCES: int
REFERENCE_TOKENS: int

groups: Grouping
file_runs: Filing
shingled: Shingling
chosen: Choosing

class Grouper:
    """`groups(runs, texts, tokens)` for one bucket's runs at a time, each skill read once for all of them."""

    def __init__(self, texts: Mapping[str, SkillText], tokens: Mapping[str, tuple[int, ...]]) -> None: ...
    def __call__(self, runs: Mapping[Occurrence, frozenset[Port]]) -> list[Group]: ...
