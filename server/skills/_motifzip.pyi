from .macro_index import Choosing
from .motif_discovery import Filing, Grouping, Shingling

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
