"""Prompts, exactly as the SKILL.state paper's Appendix A builds them: the same instructions for every runtime,
so that context management is the only thing that differs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

STATE_HEADER = "Skill Execution State:"
OBSERVATION_HEADER = "Latest Observation:"
TELEMETRY_HEADER = "--- BACKGROUND TELEMETRY ---"

SKILL_STATE_FORMAT = """Provide your response with:
1. Step-by-step reasoning (will be discarded after execution)
2. A JSON block fenced with ```json ... ``` containing both your State Patch and your Action. The JSON block MUST \
have exactly these two keys:
"state_patch": <dict: your state updates, set keys to null to delete>,
"action": "<string: the exact command you want to execute>\""""


ACTION_FORMAT = "Generate your next reasoning and action (format 'Action: <cmd>'):"
"""How the transcript baselines ask for their answer (runtime/contexts.py)."""
STATEFUL_FORMAT = (
    "Update the state if necessary, provide reasoning, and output 'Action: <cmd>'. To update state, use the "
    'format: StateUpdate: {"key": "value"}'
)
"""How the LangGraph-style stateful baseline asks for its answer and its state update."""
SUMMARY_REQUEST = "Summarize the execution so far for your own later use"
"""What the summary-memory baselines ask their model at each step before answering."""

EXPAND_HINT = """A block `[macro ID "name", ... expand it ...]` above is a routine several skills share, shown in \
summary. If this step needs its full text, answer with only a JSON block ```json {"expand": "ID"} ``` (no \
state_patch, no action): the text comes back with your observation, and you answer again."""
"""What an agent with `--rezip` adds to its instructions when they show a macro below full (agents/runtime/rezip.py)."""
EXPANDED_HEADER = "Expanded macro"
"""Heads a macro's text the runtime expanded for the step: `Expanded macro m-...:` then the text."""
GIVE_UP = (
    "You have no attempts left at this event: take back what your failed action recorded in the state, and "
    "answer `Wait`."
)
"""What an agent out of attempts at an event is told (agents/teams/agent.py): its last step only undoes."""
RECORDED_HEADER = "Its state patches wrote:"
"""Follows a failed action's result for a team agent: what the patches sent with its actions on the event wrote
(canonical JSON), the record to take back."""


def skill_state_prompt(instructions: str, state: Mapping[str, Any], observation: str) -> str:
    """Appendix A.4: the skill P, the state Σ and the latest observation O, nothing else."""
    return (
        f"Instructions:\n{instructions.strip()}\n\n"
        f"{STATE_HEADER}\n```json\n{json.dumps(state, separators=(',', ':'), sort_keys=True)}\n```\n\n"
        f"{OBSERVATION_HEADER}\n{observation.strip()}\n\n{SKILL_STATE_FORMAT}"
    )


def render_observation(payload: Mapping[str, Any]) -> str:
    """An environment's observation as text: the action just executed with its status and full result (never
    cut silently: a `truncated` field is said out loud), the new event, then any background telemetry."""
    lines = []
    last = payload.get("last_action")
    if last:
        lines += [f"Last action: {last['action']}", f"Status: {last['status']}", f"Result: {last['result']}"]
        if last.get("truncated"):
            lines.append(f"(The result was cut to {last['truncated']} characters.)")
        if "recorded" in payload:
            lines.append(f"{RECORDED_HEADER} {json.dumps(payload['recorded'], separators=(',', ':'), sort_keys=True)}")
    if payload.get("event"):
        lines.append(f"Event: {payload['event']}")
    if payload.get("give_up"):
        lines.append(GIVE_UP)
    if payload.get("done"):
        lines.append("No more events: finish with the action `Finish`.")
    telemetry = payload.get("telemetry") or []
    if telemetry:
        lines += [TELEMETRY_HEADER, *telemetry]
    return "\n".join(lines)
