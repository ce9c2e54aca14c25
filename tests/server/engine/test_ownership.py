"""Per-path write ownership (`x-owner`), checked on the patch an agent submits."""

from __future__ import annotations

from typing import Any

import pytest

from skillstate.server.engine.ownership import OwnerMap
from skillstate.server.errors import InvalidArgumentError, PermissionDeniedError

REPO: dict[str, Any] = {
    "type": "object",
    "properties": {
        "features": {
            "x-owner": "developer",
            "additionalProperties": {
                "type": "object",
                "properties": {"ci": {"x-owner": ["skill:repo-ci", "maintainer"]}, "branch": {"type": "string"}},
            },
        },
        "release": {"$ref": "#/$defs/release", "x-owner": "maintainer"},
        "notes": {"type": "string"},
    },
    "$defs": {"release": {"type": "object"}},
}
OWNERS = OwnerMap(REPO)
NOBODY: frozenset[str] = frozenset()


def denied(patch: dict[str, Any], agent: str, skills: frozenset[str] = NOBODY) -> str | None:
    try:
        OWNERS.check(patch, agent, skills)
    except PermissionDeniedError as e:
        return str(e)
    return None


def test_unowned_paths_are_anyones() -> None:
    assert denied({"notes": "x"}, "anyone") is None
    assert not OwnerMap({"type": "object"}).declares_any


def test_an_owned_subtree_is_its_owners() -> None:
    assert denied({"features": {"f1": {"branch": "b"}}}, "developer") is None
    assert denied({"features": {"f1": {"branch": "b"}}}, "maintainer") == (
        "/features/f1/branch: owned by developer; 'maintainer' may not write it"
    )


def test_the_deepest_declaration_wins_and_skills_count() -> None:
    patch = {"features": {"f1": {"ci": "passed"}}}
    assert denied(patch, "developer") is not None
    assert denied(patch, "maintainer") is None
    assert denied(patch, "ci-bot", frozenset({"repo-ci"})) is None
    assert denied(patch, "ci-bot", frozenset({"repo-developer"})) is not None


def test_replacing_or_deleting_a_subtree_needs_the_owners_below() -> None:
    assert denied({"features": {"f1": None}}, "developer") == (
        "/features/f1: owned by skill:repo-ci, maintainer; 'developer' may not write it"
    )
    assert denied({"features": None}, "developer") is not None
    assert denied({"features": {"f1": {"branch": None}}}, "developer") is None


def test_a_ref_site_can_declare_owners() -> None:
    assert denied({"release": {"tag": "v1"}}, "developer") is not None
    assert denied({"release": {"tag": "v1"}}, "maintainer") is None


@pytest.mark.parametrize("owners", ["", [], [""], 3, ["a", 1], {"a": 1}])
def test_declarations_must_name_owners(owners: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="x-owner must be"):
        OwnerMap({"properties": {"a": {"x-owner": owners}}})


def test_a_recursive_schema_terminates() -> None:
    tree = {"$defs": {"node": {"x-owner": "a", "properties": {"child": {"$ref": "#/$defs/node"}}}},
            "properties": {"root": {"$ref": "#/$defs/node"}}}  # fmt: skip
    owners = OwnerMap(tree)
    owners.check({"root": None}, "a", NOBODY)
    with pytest.raises(PermissionDeniedError):
        owners.check({"root": {"child": {"child": 1}}}, "b", NOBODY)
