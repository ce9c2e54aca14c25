"""Checks of request fields: ids, labels, addresses, and a whole SubmitPatch request."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from ..limits import Limits
from . import canonical

_EXECUTION_ID = re.compile(r"[A-Za-z0-9._:-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def new_execution_id() -> str:
    """The id the server gives an execution created without one."""
    return f"ex-{uuid.uuid4().hex}"


def check_execution_id(value: str, limits: Limits) -> str:
    if not 1 <= len(value) <= limits.max_id_length or not _EXECUTION_ID.fullmatch(value):
        raise InvalidArgumentError(
            f"execution_id: must be 1-{limits.max_id_length} characters of A-Z a-z 0-9 . _ : -, got {value!r}"
        )
    return value


def check_label(value: str, field: str, limits: Limits, *, required: bool = True) -> str:
    """An agent id, skill name, source or key: printable, bounded, and present when required."""
    if required and not value:
        raise InvalidArgumentError(f"{field}: must not be empty", field=field)
    if len(value) > limits.max_id_length:
        raise InvalidArgumentError(
            f"{field}: {len(value)} characters exceeds the limit of {limits.max_id_length}", field=field
        )
    if _CONTROL.search(value):
        raise InvalidArgumentError(f"{field}: must not contain control characters", field=field)
    return value


def check_address(value: str, limits: Limits) -> str:
    """An observation address: an agent id, `skill:NAME`, or `*`."""
    check_label(value, "to", limits)
    if value.startswith("skill:") and len(value) == len("skill:"):
        raise InvalidArgumentError("to: `skill:` must be followed by a skill name")
    return value


@dataclass(slots=True)
class Submission:
    """A checked SubmitPatch request: the patch decoded, the patch and action as canonical JSON. Never changed
    (not frozen: one is made per patch)."""

    agent_id: str
    base_revision: int
    patch: dict[str, Any]
    patch_json: str
    action_json: str
    client_patch_id: str

    @property
    def key(self) -> tuple[str, str]:
        """The idempotency key: a retry with the same key gets the original result."""
        return (self.agent_id, self.client_patch_id)

    @classmethod
    def check(
        cls, agent_id: str, base_revision: int, patch_json: str, client_patch_id: str, action_json: str, limits: Limits
    ) -> Submission:
        """Check every field (not the base against head); InvalidArgumentError names the first bad one."""
        agent_id = check_label(agent_id, "agent_id", limits)
        client_patch_id = check_label(client_patch_id, "client_patch_id", limits, required=False)
        patch = canonical.parse_object(patch_json, "patch_json", limits)
        action = canonical.parse(action_json, "action_json", limits) if action_json else None
        if base_revision < 0:
            raise InvalidArgumentError(f"base_revision: must be >= 0, got {base_revision}")
        return cls(
            agent_id, base_revision, patch, canonical.dumps_str(patch), canonical.dumps_str(action), client_patch_id
        )
