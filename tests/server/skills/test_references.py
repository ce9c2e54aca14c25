"""Markdown references: sections of their skill's graph, ranked, closed over and rendered like the body."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.synthetic import generate_library
from skillstate.server.skills.graph import Edge, EdgeKind, SkillGraph, build_graph
from skillstate.server.skills.hydrate import hydrate
from skillstate.server.skills.library import SkillLibrary, node_tokens
from skillstate.server.skills.motif_runs import runs_of
from skillstate.server.skills.package import PackageLimits, load_package, reference_edge_bound
from skillstate.server.skills.render import render_context
from skillstate.server.skills.roles import Role
from skillstate.server.skills.text import terms

SKILL = """---
name: helm-chart
description: Scaffold and validate Helm charts for Kubernetes services.
---
# Helm chart

Build a chart for one service. Detailed pattern documentation lives in
[references/details.md](references/details.md).

## Prerequisites

Install helm 3 before you begin.

## Workflow

1. Run `helm create` for the service.
2. Edit the templates and deploy the chart.

## Validation

Verify that `helm lint` passes and that `helm template` renders every manifest.

## Troubleshooting

If rendering fails, run `helm template --debug` and read the first error.
"""

DETAILS = """# Helm chart details

Patterns the workflow refers to.

## Values for staging and production

1. Write `values-staging.yaml` with one replica and debug logging.
2. Write `values-production.yaml` with three replicas, resource limits and an ingress host.

## Naming

Chart names are lowercase and use dashes.
"""

FILES = {
    "helm-chart/SKILL.md": SKILL.encode(),
    "helm-chart/references/details.md": DETAILS.encode(),
    "helm-chart/assets/values-template.md": b"# Values\n\nreplicas: {{ replicas }}\n",
}


def test_a_reference_is_cut_into_sections_that_name_their_file_and_lines() -> None:
    package = load_package(FILES, "helm-chart")
    assert [r.path for r in package.references] == ["helm-chart/references/details.md"]  # assets are material
    graph = build_graph(package)
    assert graph.source() == package.body
    details = [n for n in graph.nodes if n.provenance.file == "helm-chart/references/details.md"]
    assert [n.title for n in details] == [
        "Helm chart details",
        "Values for staging and production",
        "Values for staging and production, step 1",
        "Values for staging and production, step 2",
        "Naming",
    ]
    lines = DETAILS.splitlines(keepends=True)
    for node in details:
        assert "".join(lines[node.provenance.first_line - 1 : node.provenance.last_line]) == node.text
    assert "".join(n.text for n in details) == DETAILS


def test_a_reference_depends_on_the_body_as_if_it_followed_it() -> None:
    graph = build_graph(load_package(FILES, "helm-chart"))
    index = {(n.provenance.file.rsplit("/", 1)[-1], n.title): n.index for n in graph.nodes}
    step = index[("details.md", "Values for staging and production, step 2")]
    edges = set(graph.edges)
    assert Edge(index[("SKILL.md", "Prerequisites")], step, EdgeKind.REQUIRES) in edges
    assert Edge(step, index[("SKILL.md", "Troubleshooting")], EdgeKind.HANDLES) in edges
    # no verifier follows it in its own file: the body's last verifier checks it
    assert Edge(step, index[("SKILL.md", "Validation")], EdgeKind.VERIFIES) in edges
    first_reference = index[("details.md", "Helm chart details")]
    assert not any(e.kind is EdgeKind.ORDER and e.target == first_reference for e in edges)


def test_a_task_a_reference_answers_gets_that_reference_in_its_context() -> None:
    library = SkillLibrary()
    library.add(build_graph(load_package(FILES, "helm-chart")), version=1)
    hydration = hydrate(library, "write values files for staging and production replicas", budget=1500)
    assert "[from references/details.md]" in hydration.context
    assert "Write `values-production.yaml` with three replicas" in hydration.context
    assert hydration.coverage.dependencies_closed and hydration.coverage.verifier_reachable


def test_a_reference_over_the_section_limit_stays_a_resource_with_a_warning() -> None:
    many = "".join(f"## Part {i}\n\ntext {i}\n\n" for i in range(10)).encode()  # SKILL.md has 8 sections
    files = {**FILES, "helm-chart/references/many.md": many}
    package = load_package(files, "helm-chart", limits=PackageLimits(max_sections=9))
    assert [r.path for r in package.references] == ["helm-chart/references/details.md"]
    assert any(w.rule == "limits.sections" and "references/many.md" in w.message for w in package.warnings)
    assert "helm-chart/references/many.md" in {r.path for r in package.resources}


def test_another_skills_skill_md_it_links_to_is_not_a_reference() -> None:
    skill = SKILL.replace("## Prerequisites", "See also [the chart linter](../lint/SKILL.md).\n\n## Prerequisites")
    files = {**FILES, "helm-chart/SKILL.md": skill.encode(), "lint/SKILL.md": b"---\nname: lint\ndescription: x\n---\n"}
    package = load_package(files, "helm-chart")
    assert [r.path for r in package.references] == ["helm-chart/references/details.md"]


def test_a_skill_with_an_empty_body_keeps_its_references_apart_from_it() -> None:
    files = {**FILES, "helm-chart/SKILL.md": b"---\nname: helm-chart\ndescription: Helm charts.\n---\n"}
    graph = build_graph(load_package(files, "helm-chart"))
    assert graph.source() == "" and graph.body_file == "helm-chart/SKILL.md"
    assert all(n.role is not Role.INTENT for n in graph.nodes)  # only SKILL.md's first part is the intent


def test_a_context_marks_each_file_and_what_it_leaves_out_of_each() -> None:
    graph = build_graph(load_package(FILES, "helm-chart"))
    index = {n.title: n.index for n in graph.nodes}
    chosen = {0, index["Naming"]}
    context = render_context({"helm-chart": graph}, {"helm-chart": chosen}, lambda skill, i: None)
    body_after_intent = sum(n.provenance.file == graph.body_file for n in graph.nodes) - 1
    before_naming = index["Naming"] - index["Helm chart details"]
    assert context.index(f"[{body_after_intent} sections omitted]") < context.index("[from references/details.md]")
    assert context.index("[from references/details.md]") < context.index(f"[{before_naming} sections omitted]")
    assert context.index(f"[{before_naming} sections omitted]") < context.index("Chart names are lowercase")


def test_no_macro_candidate_spans_two_files() -> None:
    skills = generate_library(40, seed=3, references=True)
    graphs = [build_graph(load_package(s.files, s.folder)) for s in skills]
    runs = [
        (graph, run)
        for graph in graphs
        for run in runs_of(graph, node_tokens(graph), [terms(n.text) for n in graph.nodes])
    ]
    assert any(graph.nodes[-1].provenance.file != graph.body_file for graph in graphs)  # references to cross into
    for graph, run in runs:
        files = {graph.nodes[i].provenance.file for i in run.occurrence.nodes}
        assert len(files) == 1, run.occurrence


def gated_skill(gates: int, failures: int) -> bytes:
    """A SKILL.md whose preconditions all gate, whose failure sections all handle, and whose one verifier
    checks every state-changing section of a reference."""
    return (
        "---\nname: deploy\ndescription: Deploy services.\n---\n# Deploy\n\nDeploy the services.\n\n"
        + "".join(f"## Prerequisites {i}\n\nInstall tool {i}.\n\n" for i in range(gates))
        + "".join(f"## Troubleshooting {i}\n\nIf it fails, retry {i}.\n\n" for i in range(failures))
        + "## Validation\n\nVerify that every service answers.\n"
    ).encode()


def steps(count: int) -> bytes:
    """A reference of `count` numbered steps, each changing state."""
    return "".join(f"{i + 1}. Deploy service {i}.\n" for i in range(count)).encode()


def reference_edges(graph: SkillGraph) -> list[Edge]:
    """The edges with an end outside SKILL.md."""
    body = {n.index for n in graph.nodes if n.provenance.file == graph.body_file}
    return [e for e in graph.edges if e.source not in body or e.target not in body]


def test_references_that_would_add_too_many_edges_stay_resources_with_a_warning() -> None:
    # every step of a reference is required by 240 preconditions and handled by 240 failure sections: 499
    # steps would add about 240,000 edges each, and the four took 5 s to build
    files = {"deploy/SKILL.md": gated_skill(240, 240), "deploy/references/upgrade.md": steps(3)}
    files |= {f"deploy/references/services-{i}.md": steps(499) for i in range(4)}
    package = load_package(files, "deploy")
    assert [r.path for r in package.references] == ["deploy/references/upgrade.md"]
    warned = [w.message for w in package.warnings if w.rule == "limits.reference-edges"]
    assert [m.split(":")[0] for m in warned] == [f"deploy/references/services-{i}.md" for i in range(4)]
    assert all(f"more than {PackageLimits().max_reference_edges} in all" in m for m in warned)
    assert {f"deploy/references/services-{i}.md" for i in range(4)} <= {r.path for r in package.resources}

    graph = build_graph(package)
    assert len(reference_edges(graph)) <= PackageLimits().max_reference_edges
    index = {n.title: n.index for n in graph.nodes}
    last_step = graph.nodes[-1].index
    assert graph.nodes[-1].provenance.file == "deploy/references/upgrade.md" and graph.nodes[-1].is_step
    assert Edge(index["Prerequisites 239"], last_step, EdgeKind.REQUIRES) in graph.edges
    assert Edge(last_step, index["Troubleshooting 0"], EdgeKind.HANDLES) in graph.edges


def test_references_are_sectioned_in_path_order_while_their_edges_fit() -> None:
    # n steps follow one another, and each is required by 3 preconditions, handled by 2 failure sections and
    # checked by the body's verifier: n - 1 + 6n edges, as many as the bound counts
    files = {"deploy/SKILL.md": gated_skill(3, 2)}
    files |= {f"deploy/references/{name}.md": steps(count) for name, count in (("a", 4), ("b", 8), ("c", 5))}
    a, b, c = 4 - 1 + 6 * 4, 8 - 1 + 6 * 8, 5 - 1 + 6 * 5

    def sectioned(limit: int) -> tuple[list[str], list[str]]:
        package = load_package(files, "deploy", limits=PackageLimits(max_reference_edges=limit))
        warned = [w.message.split(":")[0] for w in package.warnings if w.rule == "limits.reference-edges"]
        return [r.path.rsplit("/", 1)[1] for r in package.references], warned

    assert sectioned(a + b + c) == (["a.md", "b.md", "c.md"], [])
    full = load_package(files, "deploy", limits=PackageLimits(max_reference_edges=a + b + c))
    assert len(reference_edges(build_graph(full))) == a + b + c
    assert sectioned(a + b + c - 1) == (["a.md", "b.md"], ["deploy/references/c.md"])
    assert sectioned(a + c) == (["a.md", "c.md"], ["deploy/references/b.md"])  # a later one that fits


TIGHT = {
    # every rule's pairs all joined, so each term of the bound is met: resources sharing a tool (`uses`);
    # preconditions before verifiers (`requires`); a failure section and state-changing sections that write
    # what an earlier verifier reads, with none after them (`handles`, `verifies`)
    "tools.md": "".join(f"## Tools {i}\n\n```bash\nkubectl version\n```\n\n" for i in range(4)),
    "checks.md": "".join(f"## Prerequisites {i}\n\nInstall tool {i}.\n\n" for i in range(2))
    + "".join(f"## Verify {i}\n\nCheck that service {i} answers.\n\n" for i in range(3)),
    "flow.md": "## Prerequisites\n\nInstall kubectl.\n\n## Verify\n\nCheck report.csv.\n\n"
    "## Troubleshooting\n\nIf it fails, retry.\n\n"
    "## Deploy a\n\nWrite report.csv.\n\n## Deploy b\n\nWrite report.csv.\n",
}


def made_and_bound(graph: SkillGraph) -> dict[str, tuple[int, int]]:
    """Per reference, its edges other than `data` (among its sections and to SKILL.md's), and their bound."""
    by_file: dict[str, list[int]] = {}
    for node in graph.nodes:
        by_file.setdefault(node.provenance.file, []).append(node.index)
    body = [graph.nodes[i].role for i in by_file.pop(graph.body_file, [])]
    found = {}
    for file, indexes in by_file.items():
        made = [e for e in graph.edges if e.kind is not EdgeKind.DATA and {e.source, e.target} & set(indexes)]
        found[file] = len(made), reference_edge_bound(body, [graph.nodes[i].role for i in indexes])
    return found


def test_the_edge_bound_is_what_the_rules_make_at_most() -> None:
    files = {"deploy/SKILL.md": gated_skill(2, 2)}
    files |= {f"deploy/references/{name}": text.encode() for name, text in TIGHT.items()}
    tight = made_and_bound(build_graph(load_package(files, "deploy")))
    assert len(tight) == len(TIGHT) and all(made == bound for made, bound in tight.values()), tight
    for skill in generate_library(40, seed=3, references=True):
        for made, bound in made_and_bound(build_graph(load_package(skill.files, skill.folder))).values():
            assert made <= bound


@given(st.lists(st.sampled_from(Role), max_size=40), st.lists(st.sampled_from(Role), max_size=40))
def test_section_counts_alone_bound_the_edge_bound(body: list[Role], reference: list[Role]) -> None:
    # loading checks this first, and finds no roles when no roles could pass the limit
    assert reference_edge_bound(body, reference) <= len(reference) * (len(reference) + len(body) + 2)
