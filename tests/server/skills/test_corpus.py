"""The real public packages in ../shared/skills-corpus: every one loads, and strict verdicts are the reference's.

MANIFEST.md records, per repository, how many packages pass the format's reference validator (skills-ref);
strict loading must reach the same counts, and lenient loading must load every package.
"""

from __future__ import annotations

import collections
import functools
import os
import re
from pathlib import Path

import pytest

from skillstate.clients import read_package_dir
from skillstate.server.skills.graph import SkillGraph, build_graph
from skillstate.server.skills.package import SkillFormatError, SkillPackage, load_package

CANDIDATES = (
    os.environ.get("SKILLSTATE_SKILLS_CORPUS", ""),
    str(Path(__file__).resolve().parents[4] / "shared" / "skills-corpus"),
    "/work/shared/skills-corpus",
)
CORPUS = next((Path(c) for c in CANDIDATES if c and (Path(c) / "MANIFEST.md").is_file()), None)
pytestmark = pytest.mark.skipif(CORPUS is None, reason="the skills corpus is not on this machine")


@functools.cache
def corpus_packages() -> tuple[SkillPackage, ...]:
    """Every corpus package, loaded leniently (read once per test session)."""
    assert CORPUS is not None
    packages = []
    for skill_file in sorted(CORPUS.rglob("SKILL.md")):
        sent = read_package_dir(skill_file.parent)
        packages.append(load_package(sent.files, sent.folder))
    return tuple(packages)


def corpus_graphs() -> list[SkillGraph]:
    """One graph per skill name (the corpus repeats a few names across repositories; the last one wins)."""
    return list({graph.skill: graph for graph in map(build_graph, corpus_packages())}.values())


def manifest_counts(manifest: str) -> dict[str, tuple[int, int]]:
    """{directory: (strict passes, packages)} from the `skills-ref validate pass` column."""
    directories = re.findall(r"^\| `([^`]+)/` \|", manifest, re.MULTILINE)
    passes = re.findall(r"\| (\d+)/(\d+) \|\s*$", manifest, re.MULTILINE)
    assert len(directories) == len(passes) == 4, "MANIFEST.md tables changed shape"
    return {d: (int(ok), int(total)) for d, (ok, total) in zip(directories, passes, strict=True)}


def test_every_package_loads_leniently_and_strict_verdicts_match_the_manifest() -> None:
    assert CORPUS is not None
    expected = manifest_counts((CORPUS / "MANIFEST.md").read_text())
    totals: collections.Counter[str] = collections.Counter()
    strict_passes: collections.Counter[str] = collections.Counter()
    for skill_file in sorted(CORPUS.rglob("SKILL.md")):
        repository = skill_file.relative_to(CORPUS).parts[0]
        sent = read_package_dir(skill_file.parent)
        package = load_package(sent.files, sent.folder)  # raises if lenient loading refuses it
        assert package.description and package.name
        totals[repository] += 1
        try:
            load_package(sent.files, sent.folder, strict=True)
            strict_passes[repository] += 1
        except SkillFormatError:
            pass
    assert {d: (strict_passes[d], totals[d]) for d in expected} == expected


@pytest.mark.parametrize(
    ("package", "rule"),
    [
        ("github__awesome-copilot/skills/azure-role-selector", "front-matter.yaml"),  # allowed-tools: ['a', 'b']
        ("K-Dense-AI__claude-scientific-skills/scientific-skills/database-lookup", "description.length"),
        ("anthropics__knowledge-work-plugins/partner-built/zoom-plugin/skills/cobrowse-sdk", "name.folder"),
        (
            "anthropics__knowledge-work-plugins/partner-built/zoom-plugin/skills/contact-center/android",
            "name.characters",
        ),
        ("K-Dense-AI__claude-scientific-skills/scientific-skills/adaptyv", "front-matter.keys"),
    ],
)
def test_real_failures_are_named_by_their_rule(package: str, rule: str) -> None:
    assert CORPUS is not None
    sent = read_package_dir(CORPUS / package)
    with pytest.raises(SkillFormatError) as caught:
        load_package(sent.files, sent.folder, strict=True)
    assert rule in {d.rule for d in caught.value.diagnostics}
    assert rule in {d.rule for d in load_package(sent.files, sent.folder).warnings}


def test_a_link_outside_the_folder_is_sent_with_the_package() -> None:
    assert CORPUS is not None
    linking = [
        p.parent
        for p in sorted(CORPUS.glob("anthropics__knowledge-work-plugins/*/skills/*/SKILL.md"))
        if "../../CONNECTORS.md" in p.read_text()
    ]
    sent = read_package_dir(linking[0])
    package = load_package(sent.files, sent.folder)
    external = [r for r in package.resources if r.kind == "external"]
    assert [r.path for r in external] == ["CONNECTORS.md"] and external[0].present and external[0].linked_from
    assert sent.folder == f"skills/{linking[0].name}"


def test_every_corpus_graph_is_its_source_cut_into_nodes() -> None:
    assert CORPUS is not None
    for skill_file in sorted(CORPUS.rglob("SKILL.md"))[::7]:  # a spread sample keeps the suite fast
        sent = read_package_dir(skill_file.parent)
        package = load_package(sent.files, sent.folder)
        graph = build_graph(package)
        assert graph.source() == package.body
        text_lines = sent.files[package.skill_file].decode().replace("\r\n", "\n").splitlines(keepends=True)
        for node in graph.nodes:
            first, last = node.provenance.first_line, node.provenance.last_line
            assert "".join(text_lines[first - 1 : last]) == node.text, (skill_file, node.title)
        assert all(0 <= e.source < len(graph.nodes) and 0 <= e.target < len(graph.nodes) for e in graph.edges)
