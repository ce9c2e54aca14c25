"""Resources: an execution's state as JSON, and a skill as the Markdown it was written in. A client may
subscribe to a state resource (subscriptions.py); a skill changes only when it is registered again."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.shared.uri_template import UriTemplate

from skillstate.clients import SkillRegistryClient, SkillstateError, StateClient, StateJSON

from .errors import protocol_error

STATE_URI = "skillstate://executions/{execution_id}/state"
SKILL_URI = "skillstate://skills/{name}"
_STATE_TEMPLATE = UriTemplate.parse(STATE_URI)


def execution_of(uri: str) -> str | None:
    """The execution id a state resource's URI names, or None for any other URI."""
    match = _STATE_TEMPLATE.match(uri)
    execution_id = match.get("execution_id") if match is not None else None
    return execution_id if isinstance(execution_id, str) and execution_id else None


def state_json(execution_id: str, read: StateJSON) -> str:
    """A state resource's text: compact JSON with sorted keys; its `revision` is the base for submit_patch.
    The state goes in as the server's canonical text, never decoded (a 4 MiB state of small values would
    take some 50 ms to decode and as long again to write)."""
    head = json.dumps({"execution_id": execution_id, "revision": read.revision}, separators=(",", ":"))
    return f'{head[:-1]},"state":{read.state_json},"state_hash":{json.dumps(read.state_hash)}}}'


def register_resources(server: MCPServer, state: StateClient, registry: SkillRegistryClient) -> None:
    """Add the two resource templates to `server`."""

    @server.resource(
        STATE_URI,
        name="execution_state",
        title="Execution state",
        mime_type="application/json",
        description="An execution's shared state at its head revision, with that revision and its hash. "
        "Subscribe to be told of each new revision.",
    )
    async def execution_state(execution_id: str) -> str:
        try:
            read = await state.get_state_json(execution_id)
        except SkillstateError as e:
            raise protocol_error(e, uri=STATE_URI.replace("{execution_id}", execution_id)) from e
        return state_json(execution_id, read)

    @server.resource(
        SKILL_URI,
        name="skill",
        title="Skill",
        mime_type="text/markdown",
        description="A registered skill's current version, whole: its SKILL.md and the files it links to, "
        "section by section. hydrate_skill gives only what a task needs.",
    )
    async def skill(name: str) -> str:
        try:
            found = await registry.get_skill(name)
        except SkillstateError as e:
            raise protocol_error(e, uri=SKILL_URI.replace("{name}", name)) from e
        summary = found.summary
        head = f"<!-- skill {summary.name}, version {summary.version}, digest {summary.digest} -->\n\n"
        return head + "".join(section.text for section in found.sections).strip() + "\n"
