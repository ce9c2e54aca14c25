"""The optional model extractor, through litellm with a scripted test provider (no network, no real model).

`ScriptedExtractor` is a test policy: it answers from a fixed script, never from a model, and its results are
never presented as a model's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from litellm import CustomLLM

from skillstate.server.skills.graph import build_graph
from skillstate.server.skills.llm_extract import FileCache, LlmExtractor
from skillstate.server.skills.package import load_package
from skillstate.server.skills.roles import Role

SKILL = b"""---
name: ship-order
description: Ship an order.
---
# Ship an order

## Label

Print the shipping label.

## Confirm

Make sure the carrier scanned the parcel.
"""


class ScriptedExtractor(CustomLLM):
    """Test policy: sections titled `Confirm` are verifiers, everything else an operation; `Broken` gets prose."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []

    def completion(self, *args: Any, **kwargs: Any) -> litellm.ModelResponse:
        self.requests.append(kwargs)
        section = kwargs["messages"][-1]["content"]
        if "Broken" in section:
            answer = "I think this section is about shipping."
        else:
            role = "verifier" if "Section title: Confirm" in section else "operation"
            contract = {"role": role, "verifies": ["the carrier scanned the parcel"] if role == "verifier" else []}
            answer = (
                "```json\n" + json.dumps(contract | {"outputs": [{"name": "label.pdf", "kind": "document"}]}) + "\n```"
            )
        return litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": answer}}])


@pytest.fixture
def scripted() -> Iterator[ScriptedExtractor]:
    handler = ScriptedExtractor()
    previous = litellm.custom_provider_map
    litellm.custom_provider_map = [{"provider": "skillstate-test", "custom_handler": handler}]
    yield handler
    litellm.custom_provider_map = previous


def test_roles_and_contracts_come_from_the_model_once_per_section(scripted: ScriptedExtractor, tmp_path: Path) -> None:
    package = load_package({"ship-order/SKILL.md": SKILL}, "ship-order")
    extractor = LlmExtractor("skillstate-test/scripted", FileCache(tmp_path / "cache.jsonl"))
    graph = build_graph(package, extractor)
    assert [(n.title, n.role) for n in graph.nodes] == [
        ("Ship an order", Role.OPERATION),
        ("Label", Role.OPERATION),
        ("Confirm", Role.VERIFIER),
    ]
    assert graph.nodes[2].contract.verifies == ("the carrier scanned the parcel",)
    assert all(request["optional_params"]["temperature"] == 0 for request in scripted.requests)
    assert extractor.calls == 3

    again = LlmExtractor("skillstate-test/scripted", FileCache(tmp_path / "cache.jsonl"))  # a restart
    assert build_graph(package, again) == graph and again.calls == 0


def test_an_answer_outside_the_schema_keeps_the_rule_based_extraction(scripted: ScriptedExtractor) -> None:
    text = SKILL.replace(b"## Label", b"## Broken")
    package = load_package({"ship-order/SKILL.md": text}, "ship-order")
    extractor = LlmExtractor("skillstate-test/scripted")
    by_model, by_rules = build_graph(package, extractor), build_graph(package)
    assert by_model.nodes[1] == by_rules.nodes[1]
    assert "Broken" not in "".join(extractor.cache.values())  # not cached: asked again next time
