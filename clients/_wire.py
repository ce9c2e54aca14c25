"""Requests as the SDK sends them, shared by StateClient and its sessions."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping

from skillstate.state.v1 import state_pb2 as pb

from ._types import JSON


def dumps_json(value: JSON) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def patch_request(
    patch: Mapping[str, JSON],
    base_revision: int,
    action: JSON,
    client_patch_id: str | None,
    execution_id: str = "",
    agent_id: str = "",
    into: pb.SubmitPatchRequest | None = None,
) -> pb.SubmitPatchRequest:
    """A submit, with an idempotency key generated when none is given (so that a retry can never apply it
    twice; a session makes its own keys); filled in `into` (a field of a larger message) when given, which
    spares a copy."""
    request = pb.SubmitPatchRequest() if into is None else into
    request.execution_id = execution_id
    request.agent_id = agent_id
    request.base_revision = base_revision
    request.patch_json = dumps_json(patch)
    request.client_patch_id = client_patch_id if client_patch_id is not None else uuid.uuid4().hex
    request.action_json = dumps_json(action) if action is not None else ""
    return request
