"""The repository's own example skills conform to the format, and the README's hydration gives a procedure."""

from __future__ import annotations

from pathlib import Path

from skillstate.clients import read_package_dir
from skillstate.server.skills.graph import build_graph
from skillstate.server.skills.hydrate import hydrate
from skillstate.server.skills.library import SkillLibrary
from skillstate.server.skills.package import load_package
from skillstate.server.skills.roles import Role

SKILLS = Path(__file__).resolve().parents[3] / "skills"


def test_the_example_skills_pass_strict_loading_and_the_readme_query_gets_a_checked_procedure() -> None:
    library = SkillLibrary()
    folders = sorted(p for p in SKILLS.iterdir() if (p / "SKILL.md").is_file())
    assert {"refund-order", "restock-shelf", "ship-order", "warehouse-receiving", "warehouse-shipping", "repo-ci",
            "warehouse-maintenance"} <= {f.name for f in folders}  # fmt: skip
    for folder in folders:
        sent = read_package_dir(folder)
        package = load_package(sent.files, sent.folder, strict=True)
        assert package.warnings == ()
        library.add(build_graph(package), version=1)
    hydration = hydrate(library, "ship the customer's order", 3000)
    assert hydration.source_skills == ("ship-order",)
    graph = library.graph("ship-order")
    roles = {graph.nodes[i].role for _, i in hydration.sections}
    assert {Role.OPERATION, Role.VERIFIER, Role.PRECONDITION, Role.FAILURE} <= roles
    assert hydration.coverage.verifier_reachable and hydration.coverage.dependencies_closed
    assert len(hydration.sections) < len(graph.nodes)  # what the task does not need stays out
