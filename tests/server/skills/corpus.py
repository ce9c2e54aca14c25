"""The real public packages of the skills corpus, for the tests that run over all of them.

The corpus is found in `../shared/skills-corpus` beside the repository, or where `SKILLSTATE_SKILLS_CORPUS`
says, nowhere else. Without it, corpus tests are skipped with the reason and the session's summary says so
loudly; with `SKILLSTATE_REQUIRE_CORPUS=1` (CI) a missing corpus fails them instead.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import pytest

from skillstate.clients import PackageFiles, read_package_dir
from skillstate.server.skills.graph import SkillGraph, build_graph
from skillstate.server.skills.package import SkillPackage, load_package

REPOSITORY = Path(__file__).resolve().parents[3]
LOCATION = Path(os.environ.get("SKILLSTATE_SKILLS_CORPUS") or REPOSITORY.parent / "shared" / "skills-corpus")
CORPUS = LOCATION if (LOCATION / "MANIFEST.md").is_file() else None
REQUIRED = os.environ.get("SKILLSTATE_REQUIRE_CORPUS") == "1"
SKIPPED = "skills corpus tests SKIPPED"


def require_corpus() -> Path:
    """The corpus's folder; skips the calling test without it, or fails it when CI requires the corpus."""
    if CORPUS is None:
        if REQUIRED:
            pytest.fail(f"SKILLSTATE_REQUIRE_CORPUS=1 but {LOCATION} holds no MANIFEST.md")
        pytest.skip(f"{SKIPPED}: no {LOCATION} (set SKILLSTATE_SKILLS_CORPUS=/path/to/skills-corpus)")
    return CORPUS


@dataclasses.dataclass(frozen=True)
class CorpusPackage:
    folder: str
    """The package's folder relative to the corpus: `<owner>__<repo>/...`, unique."""
    sent: PackageFiles
    package: SkillPackage
    """Loaded leniently."""


@functools.cache
def corpus_packages(corpus: Path) -> tuple[CorpusPackage, ...]:
    """Every package of the corpus (all 764), in path order, read once per test session."""
    packages = []
    for skill_file in sorted(corpus.rglob("SKILL.md")):
        sent = read_package_dir(skill_file.parent)
        folder = skill_file.parent.relative_to(corpus).as_posix()
        packages.append(CorpusPackage(folder, sent, load_package(sent.files, sent.folder)))
    return tuple(packages)


@functools.cache
def corpus_graphs(corpus: Path) -> tuple[SkillGraph, ...]:
    """One graph per package, each named by its folder: the corpus repeats a few skill names across
    repositories, and a library holds one skill per name."""
    return tuple(dataclasses.replace(build_graph(p.package), skill=p.folder) for p in corpus_packages(corpus))
