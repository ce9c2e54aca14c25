"""The Agent Skills packages the project's agents run (one folder each), shipped with the wheel as package
data so that `skillstate demo` works from any install, not only a source checkout."""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
