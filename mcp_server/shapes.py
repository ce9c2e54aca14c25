"""The plain JSON shapes tools and resources answer with: dicts of JSON values with their keys in canonical
(sorted) order, times as RFC 3339 text, so that the same answer is the same text every time."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from skillstate.clients import (
    ExecutionSummary,
    Hydrated,
    Observation,
    PatchResult,
    Resolution,
    RevisionEvent,
    SkillSummary,
    Snapshot,
)

JSONObject = dict[str, Any]


def canonical(value: Any) -> Any:
    """`value` with every object's keys sorted, tuples as lists and datetimes as ISO 8601 text."""
    if isinstance(value, Mapping):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def ordered(fields: Mapping[str, Any]) -> JSONObject:
    """An answer's object: `canonical` for a mapping, typed as the object it is."""
    return {key: canonical(fields[key]) for key in sorted(fields)}


def resolution(r: Resolution) -> JSONObject:
    return {"path": r.path, "policy": r.policy, "outcome": r.outcome}


def committed(result: PatchResult) -> JSONObject:
    return {
        "status": "committed",
        "revision": result.revision,
        "state_hash": result.state_hash,
        "applied_patch": result.applied_patch,
        "resolutions": [resolution(r) for r in result.resolutions],
        "duplicate": result.duplicate,
    }


def revision_event(event: RevisionEvent | Snapshot) -> JSONObject:
    if isinstance(event, Snapshot):
        return {"revision": event.revision, "snapshot": event.state, "state_hash": event.state_hash}
    return {
        "revision": event.revision,
        "agent_id": event.agent_id,
        "base_revision": event.base_revision,
        "applied_patch": event.applied_patch,
        "action": event.action,
        "state_hash": event.state_hash,
        "commit_time": event.commit_time,
        "client_patch_id": event.client_patch_id,
        "resolutions": [resolution(r) for r in event.resolutions],
    }


def execution(summary: ExecutionSummary) -> JSONObject:
    return {
        "execution_id": summary.execution_id,
        "head_revision": summary.head_revision,
        "create_time": summary.create_time,
        "update_time": summary.update_time,
        "agents": summary.agents,
        "agent_count": summary.agent_count,
        "compact_revision": summary.compact_revision,
    }


def observation(o: Observation) -> JSONObject:
    return {
        "sequence": o.sequence,
        "to": o.to,
        "source": o.source,
        "kind": o.kind,
        "payload": o.payload,
        "publish_time": o.publish_time,
    }


def skill(summary: SkillSummary) -> JSONObject:
    return {
        "name": summary.name,
        "version": summary.version,
        "description": summary.description,
        "section_count": summary.section_count,
        "token_count": summary.token_count,
        "digest": summary.digest,
        "registered_at": summary.registered_at,
    }


def hydrated(h: Hydrated) -> JSONObject:
    return {
        "context": h.context,
        "token_count": h.token_count,
        "hydration_id": h.hydration_id,
        "source_skills": h.source_skills,
        "sections": [{"skill": s, "index": i, "title": t, "role": r} for s, i, t, r in h.sections],
        "coverage": {
            "anchors": h.anchors,
            "anchors_covered": h.anchors_covered,
            "anchors_uncoverable": h.anchors_uncoverable,
            "dependencies_closed": h.dependencies_closed,
            "verifier_reachable": h.verifier_reachable,
        },
        "whole_skill_fallback": h.whole_skill_fallback,
        "macros": [{"macro_id": m.macro_id, "name": m.name, "skill": m.skill, "level": m.level} for m in h.macros],
    }
