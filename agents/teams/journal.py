"""What the runtime, not the model, writes of a team's work: the audit trail and the shift notes.

With a journal (`Coordination.journal`) every action an agent submits adds an entry to Σ's `audit` in the
same patch (`append`: entries written at once are all kept, in commit order), and every action the world
refuses adds a line to Σ's `notes` (`text`: lines written at once are merged). The model neither reads nor
writes them: they grow with the run, and an agent's step needs neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

AUDIT = "audit"
NOTES = "notes"
KEYS = frozenset({AUDIT, NOTES})


def audit_patch(state: Mapping[str, Any], agent_id: str, event_id: str, action: str) -> dict[str, Any]:
    """The audit trail of `state` with this action added."""
    return {AUDIT: [*state.get(AUDIT, []), f"{agent_id} {event_id}: {action}"]}


def note_patch(state: Mapping[str, Any], agent_id: str, event_id: str, failure: Mapping[str, Any]) -> dict[str, Any]:
    """The notes of `state` with a line on a refused action (`failure`: the outcome's `last_action`)."""
    line = f"{agent_id} {event_id}: {failure.get('action')} failed: {failure.get('result')}\n"
    return {NOTES: f"{state.get(NOTES, '')}{line}"}
