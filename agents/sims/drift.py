"""State drift: where the shared state Σ and the world's ground truth disagree at the end of a run.

A runtime whose rollback caught every error ends with Σ describing the world exactly; an error that leaked
into Σ (a schema-valid but wrong patch, a lost update) shows up here as the paths that differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MISSING = object()


def state_drift(state: Mapping[str, Any], world: Mapping[str, Any]) -> list[str]:
    """JSON Pointers (RFC 6901) of the leaves under the world's top-level keys where Σ differs from the world:
    a value the world holds and Σ lacks or holds otherwise, or one Σ holds and the world lacks. Sorted."""
    found: list[str] = []
    for key, truth in world.items():
        _diff(state.get(key, _MISSING), truth, "/" + _escape(key), found)
    return sorted(found)


def _diff(believed: Any, truth: Any, path: str, found: list[str]) -> None:
    if isinstance(believed, Mapping) and isinstance(truth, Mapping):
        for key in sorted(set(believed) | set(truth)):
            _diff(believed.get(key, _MISSING), truth.get(key, _MISSING), f"{path}/{_escape(key)}", found)
    elif believed is _MISSING or truth is _MISSING or believed != truth or type(believed) is not type(truth):
        found.append(path)


def _escape(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")
