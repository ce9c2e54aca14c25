"""The real public packages in ../shared/skills-corpus: every one loads, and strict verdicts are the reference's.

MANIFEST.md records, per repository, how many packages pass the format's reference validator (skills-ref);
strict loading must reach the same counts, and lenient loading must load every package.
"""

from __future__ import annotations

import collections
import re

import pytest

from skillstate.clients import read_package_dir
from skillstate.server.skills.diagnostics import SkillFormatError
from skillstate.server.skills.package import load_package

from .corpus import corpus_graphs, corpus_packages, require_corpus


def manifest_counts(manifest: str) -> dict[str, tuple[int, int]]:
    """{directory: (strict passes, packages)} from the `skills-ref validate pass` column."""
    directories = re.findall(r"^\| `([^`]+)/` \|", manifest, re.MULTILINE)
    passes = re.findall(r"\| (\d+)/(\d+) \|\s*$", manifest, re.MULTILINE)
    assert len(directories) == len(passes) == 4, "MANIFEST.md tables changed shape"
    return {d: (int(ok), int(total)) for d, (ok, total) in zip(directories, passes, strict=True)}


def test_every_package_loads_leniently_and_strict_verdicts_match_the_manifest() -> None:
    corpus = require_corpus()
    expected = manifest_counts((corpus / "MANIFEST.md").read_text())
    totals: collections.Counter[str] = collections.Counter()
    strict_passes: collections.Counter[str] = collections.Counter()
    for loaded in corpus_packages(corpus):  # lenient loading raised already if it refused one
        repository = loaded.folder.split("/")[0]
        assert loaded.package.description and loaded.package.name
        totals[repository] += 1
        try:
            load_package(loaded.sent.files, loaded.sent.folder, strict=True)
            strict_passes[repository] += 1
        except SkillFormatError:
            pass
    assert {d: (strict_passes[d], totals[d]) for d in expected} == expected
    assert sum(totals.values()) == 764 == sum(total for _, total in expected.values())


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
    sent = read_package_dir(require_corpus() / package)
    with pytest.raises(SkillFormatError) as caught:
        load_package(sent.files, sent.folder, strict=True)
    assert rule in {d.rule for d in caught.value.diagnostics}
    assert rule in {d.rule for d in load_package(sent.files, sent.folder).warnings}


def test_a_link_outside_the_folder_is_sent_with_the_package() -> None:
    linking = [
        p.parent
        for p in sorted(require_corpus().glob("anthropics__knowledge-work-plugins/*/skills/*/SKILL.md"))
        if "../../CONNECTORS.md" in p.read_text()
    ]
    sent = read_package_dir(linking[0])
    package = load_package(sent.files, sent.folder)
    external = [r for r in package.resources if r.kind == "external"]
    assert [r.path for r in external] == ["CONNECTORS.md"] and external[0].present and external[0].linked_from
    assert sent.folder == f"skills/{linking[0].name}"


def test_every_corpus_graph_is_its_source_cut_into_nodes() -> None:
    corpus = require_corpus()
    packages, graphs = corpus_packages(corpus), corpus_graphs(corpus)
    assert len(packages) == len(graphs) == 764
    for loaded, graph in zip(packages, graphs, strict=True):
        package = loaded.package
        assert graph.source() == package.body
        files = [package.skill_file, *(reference.path for reference in package.references)]
        assert list(dict.fromkeys(node.provenance.file for node in graph.nodes)) == files[: len(graph.nodes) and None]
        for node in graph.nodes:
            raw = loaded.sent.files[node.provenance.file].decode().removeprefix("\ufeff")
            text_lines = raw.replace("\r\n", "\n").splitlines(keepends=True)
            first, last = node.provenance.first_line, node.provenance.last_line
            assert "".join(text_lines[first - 1 : last]) == node.text, (node.provenance.file, node.title)
        assert all(0 <= e.source < len(graph.nodes) and 0 <= e.target < len(graph.nodes) for e in graph.edges)
