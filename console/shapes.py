"""What the API sends: the SDK's values as JSON.

Most go as the SDK's dataclasses are (orjson writes a dataclass as an object of its fields, a datetime as
RFC 3339 and a tuple as an array), so the API's field names are the SDK's (clients/_types.py,
clients/_skill_types.py). The few values the SDK keeps as positional tuples get names here.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from skillstate.clients import Hydrated, HydratedMacro, Section, Skill, StateJSON


def dumps(value: Any) -> bytes:
    """JSON text of an API value (orjson: an order of magnitude faster than json on large states)."""
    return orjson.dumps(value)


def state_document(read: StateJSON) -> bytes:
    """A State's JSON (`revision`, `state`, `state_hash`) with the server's state text put in as it came: never
    decoded and encoded again, which for a 4 MiB state of small values would hold the event loop ~60 ms."""
    return b'{"revision":%d,"state":%s,"state_hash":%s}' % (
        read.revision, read.state_json.encode(), orjson.dumps(read.state_hash)
    )  # fmt: skip


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def section(s: Section) -> dict[str, Any]:
    return {
        "index": s.index,
        "title": s.title,
        "role": s.role,
        "is_step": s.is_step,
        "file": s.file,
        "first_line": s.first_line,
        "last_line": s.last_line,
        "token_count": s.token_count,
        "text": s.text,
        "inputs": [{"name": name, "kind": kind} for name, kind in s.inputs],
        "outputs": [{"name": name, "kind": kind} for name, kind in s.outputs],
        "resources": s.resources,
        "guards": s.guards,
        "verifies": s.verifies,
        "state_changing": s.state_changing,
    }


def skill(s: Skill, macros: list[HydratedMacro]) -> dict[str, Any]:
    """A skill's section graph, with the macros that hold runs of its sections (found by hydrating it)."""
    return {
        "summary": s.summary,
        "sections": [section(x) for x in s.sections],
        "edges": [{"source": a, "target": b, "kind": kind, "label": label} for a, b, kind, label in s.edges],
        "warnings": s.warnings,
        "metadata": s.metadata,
        "macros": macros,
    }


def hydrated(h: Hydrated) -> dict[str, Any]:
    return {
        "context": h.context,
        "token_count": h.token_count,
        "hydration_id": h.hydration_id,
        "sections": [
            {"skill": skill_name, "index": index, "title": title, "role": role}
            for skill_name, index, title, role in h.sections
        ],
        "source_skills": h.source_skills,
        "coverage": {
            "anchors": h.anchors,
            "covered": h.anchors_covered,
            "uncoverable": h.anchors_uncoverable,
            "dependencies_closed": h.dependencies_closed,
            "verifier_reachable": h.verifier_reachable,
        },
        "whole_skill_fallback": h.whole_skill_fallback,
        "macros": h.macros,
    }
