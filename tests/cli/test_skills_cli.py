"""`skillstate skills ...` against a real server: add folders, list, show, hydrate, remove."""

from __future__ import annotations

import json
from pathlib import Path

from skillstate.server.rpc.app import RunningServer

from .test_cli import skillstate

SKILL = """---
name: {name}
description: Ship a customer's order and confirm delivery.
---
# Ship an order

## Workflow

1. Create the shipping label and save it as `label.pdf`.
2. Verify that `label.pdf` names the customer.
"""


def write_package(root: Path, folder: str, name: str) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(SKILL.format(name=name))
    return path


async def test_add_list_show_hydrate_remove(server: RunningServer, tmp_path: Path) -> None:
    good = write_package(tmp_path, "ship-order", "ship-order")
    mismatched = write_package(tmp_path, "other-folder", "pack-box")
    code, out, err = await skillstate(server, "skills", "add", str(good), str(mismatched))
    assert code == 0, err
    added = [json.loads(line) for line in out.splitlines()]
    assert [(a["name"], a["version"]) for a in added] == [("ship-order", 1), ("pack-box", 1)]
    assert "warning: other-folder/SKILL.md: name.folder" in err

    code, out, _ = await skillstate(server, "skills", "list")
    assert [json.loads(line)["name"] for line in out.splitlines()] == ["pack-box", "ship-order"]

    code, out, _ = await skillstate(server, "skills", "show", "ship-order")
    shown = json.loads(out)
    assert [s["role"] for s in shown["sections"]] == ["intent", "operation", "operation", "verifier"]

    code, out, err = await skillstate(
        server, "skills", "hydrate", "ship label", "--budget", "500", "--skill", "ship-order"
    )
    assert code == 0 and "Verify that `label.pdf`" in out and "tokens" in err
    code, out, _ = await skillstate(server, "skills", "hydrate", "ship label", "--json")
    assert json.loads(out)["dependencies_closed"] is True

    code, out, _ = await skillstate(server, "skills", "stats")
    assert code == 0 and json.loads(out)["skills"] == 2

    code, out, _ = await skillstate(server, "skills", "remove", "pack-box")
    assert code == 0 and json.loads(out) == {"name": "pack-box", "removed_version": 1}


async def test_failures_have_stable_exit_codes(server: RunningServer, tmp_path: Path) -> None:
    mismatched = write_package(tmp_path, "other-folder", "pack-box")
    code, _, err = await skillstate(server, "skills", "add", "--strict", str(mismatched))
    assert code == 5 and "name.folder" in err
    code, _, err = await skillstate(server, "skills", "add", str(tmp_path / "missing"))
    assert code == 5 and "no SKILL.md" in err
    code, _, err = await skillstate(server, "skills", "show", "nope")
    assert code == 3 and "NOT_FOUND" in err
    code, _, err = await skillstate(server, "skills", "hydrate", "x", "--budget", "0")
    assert code == 5 and "budget_tokens" in err
