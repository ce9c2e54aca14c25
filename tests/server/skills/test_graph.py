"""Sec2Graph: roles, contracts and edges of section nodes, grounded in their source lines."""

from __future__ import annotations

import pytest

from skillstate.server.skills.contracts import Signature, extract_contract
from skillstate.server.skills.graph import Edge, EdgeKind, build_graph
from skillstate.server.skills.package import load_package
from skillstate.server.skills.roles import Role, role_of
from skillstate.server.skills.tokens import count_tokens

SKILL = """---
name: ship-order
description: Ship a customer's order and confirm delivery.
allowed-tools: Bash(git:*) Read
---
# Ship an order

Ships one order end to end.

## When to use

Use this skill when a customer's order is paid and must be shipped.

## Prerequisites

Only run this if the warehouse API key is set. Never ship unpaid orders.

## Workflow

1. Read the order from `order.json`.
2. Create the shipping label and save it as `label.pdf`.
   ```bash
   curl -X POST https://api.example.com/labels
   ```
3. Write the manifest to `manifest.csv`.
4. Verify that `manifest.csv` lists every item.

## Troubleshooting

If the label request fails, retry once, then escalate.

## Output

Return the tracking number and `label.pdf`.

## Resources

See [the carrier guide](references/carrier.md).
"""


def graph():
    files = {"ship-order/SKILL.md": SKILL.encode(), "ship-order/references/carrier.md": b"carrier"}
    return build_graph(load_package(files, "ship-order", strict=True))


def test_nodes_have_roles_and_source_lines() -> None:
    g = graph()
    assert [(n.title, n.role) for n in g.nodes] == [
        ("Ship an order", Role.INTENT),
        ("When to use", Role.TRIGGER),
        ("Prerequisites", Role.PRECONDITION),
        ("Workflow", Role.OPERATION),
        ("Workflow, step 1", Role.INPUT),
        ("Workflow, step 2", Role.OPERATION),
        ("Workflow, step 3", Role.OUTPUT),
        ("Workflow, step 4", Role.VERIFIER),
        ("Troubleshooting", Role.FAILURE),
        ("Output", Role.OUTPUT),
        ("Resources", Role.RESOURCE),
        ("references/carrier.md", Role.OPERATION),  # a Markdown reference's untitled text, named by its file
    ]
    assert g.nodes[-1].provenance.file == "ship-order/references/carrier.md" and g.nodes[-1].text == "carrier"
    file_lines = SKILL.splitlines(keepends=True)
    for node in g.nodes[:-1]:
        assert node.provenance.file == "ship-order/SKILL.md"
        first, last = node.provenance.first_line, node.provenance.last_line
        assert "".join(file_lines[first - 1 : last]) == node.text
    assert g.source() == SKILL.split("---\n", 2)[2]


def test_each_node_carries_its_texts_token_count() -> None:
    assert [n.tokens for n in graph().nodes] == [count_tokens(n.text) for n in graph().nodes]
    assert graph().nodes[-1].tokens == 1  # "carrier"


def test_contracts_read_artifacts_tools_guards_and_checks() -> None:
    g = graph()
    by_title = {n.title: n.contract for n in g.nodes}
    assert Signature("order.json", "data") in by_title["Workflow, step 1"].inputs
    assert by_title["Workflow, step 2"].outputs == (Signature("label.pdf", "document"),)
    assert "tool:curl" in by_title["Workflow, step 2"].resources
    assert Signature("manifest.csv", "table") in by_title["Workflow, step 3"].outputs
    assert Signature("manifest.csv", "table") in by_title["Workflow, step 4"].inputs
    assert by_title["Workflow, step 4"].verifies
    assert by_title["Prerequisites"].guards == (
        "Only run this if the warehouse API key is set.",
        "Never ship unpaid orders.",
    )
    assert by_title["Resources"].resources == ("file:ship-order/references/carrier.md",)
    assert by_title["Workflow, step 2"].state_changing and not by_title["Prerequisites"].state_changing


def test_edges_follow_the_documented_rules() -> None:
    g = graph()
    index = {n.title: n.index for n in g.nodes}
    edges = set(g.edges)
    step2, step3, step4 = index["Workflow, step 2"], index["Workflow, step 3"], index["Workflow, step 4"]
    assert Edge(step3, step4, EdgeKind.DATA, "manifest.csv") in edges
    assert Edge(step2, step4, EdgeKind.VERIFIES) in edges  # the first verifier after it
    assert Edge(step2, index["Troubleshooting"], EdgeKind.HANDLES) in edges
    assert Edge(step2, index["Output"], EdgeKind.PRODUCES) in edges
    assert Edge(index["Prerequisites"], step2, EdgeKind.REQUIRES) in edges
    assert Edge(index["Prerequisites"], step4, EdgeKind.REQUIRES) in edges
    body = len(g.nodes) - 1  # the last node is references/carrier.md's: order edges stay inside a file
    assert all(Edge(i, i + 1, EdgeKind.ORDER) in edges for i in range(body - 1))
    assert not any(e.kind is EdgeKind.ORDER and body in (e.source, e.target) for e in edges)
    assert not any(e.kind is EdgeKind.REQUIRES and e.target < e.source for e in edges)


@pytest.mark.parametrize(
    ("title", "role"),
    [
        ("When to Use This Skill", Role.TRIGGER),
        ("Troubleshooting", Role.FAILURE),
        ("Validation Checklist", Role.VERIFIER),
        ("Output Format", Role.OUTPUT),
        ("Inputs", Role.INPUT),
        ("Prerequisites", Role.PRECONDITION),
        ("Reference Files", Role.RESOURCE),
        ("Overview", Role.INTENT),
        ("Workflow", Role.OPERATION),
    ],
)
def test_title_rules(title: str, role: Role) -> None:
    assert role_of(title, "anything", is_first=False, is_step=False) is role


def test_the_first_part_is_the_intent_and_untitled_prose_is_judged_by_its_cues() -> None:
    assert role_of("Deploy", "text", is_first=True, is_step=False) is Role.INTENT
    assert role_of("Finally", "Make sure the build is green.", is_first=False, is_step=False) is Role.VERIFIER
    assert role_of("Finally", "Push the branch.", is_first=False, is_step=False) is Role.OPERATION
    assert role_of("x, step 1", "1. **Check** the logs", is_first=False, is_step=True) is Role.VERIFIER


def test_a_read_only_operation_does_not_change_state() -> None:
    assert not extract_contract("Inspect the logs and search for errors.", Role.OPERATION).state_changing
    assert extract_contract("Tidy things up.", Role.OPERATION).state_changing  # ambiguous counts as changing
