"""The SKILL.state step as an MCP prompt: the paper's template (skillstate.agents.protocol.prompts), filled with the
skill context P the registry hydrates, the execution's current state Σ and the latest observation O, so that a
client's model answers `{"state_patch": ..., "action": ...}` as the runtime's agents do; a second message says
how that answer goes back through the tools."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer, UserMessage
from pydantic import Field

from skillstate.agents.protocol.prompts import skill_state_prompt
from skillstate.clients import SkillRegistryClient, SkillstateError, StateClient

from .errors import protocol_error

NO_OBSERVATION = "None yet: this is the first step."
DESCRIPTION = (
    "One step of a skill over an execution's shared state, the SKILL.state way: the skill's instructions "
    "(hydrated for the task), the current state and the latest observation, answered with a state patch and an "
    "action."
)


def submit_instructions(execution_id: str, revision: int) -> str:
    """How a client's model turns its answer into calls: the state it saw is `revision`, the base to submit on."""
    return (
        f"The state above is revision {revision} of execution {execution_id!r}. Once you have answered, call "
        f"submit_patch with execution_id {execution_id!r}, base_revision {revision}, your state_patch as patch "
        'and your action as action. If it answers with status "conflict", another agent changed the same part '
        "of the state: read it again with get_state and redo the step on the new revision. Then wait for the "
        "next observation with next_observations."
    )


def register_prompts(server: MCPServer, state: StateClient, registry: SkillRegistryClient) -> None:
    """Add the skill_state_step prompt to `server`."""

    @server.prompt(name="skill_state_step", title="SKILL.state step", description=DESCRIPTION)
    async def skill_state_step(
        skill: Annotated[str, Field(description="The skill to follow (list_skills shows them).")],
        execution_id: Annotated[str, Field(description="The execution whose shared state the step works on.")],
        observation: Annotated[str, Field(description="The latest observation, as text; empty: none yet.")] = "",
        task: Annotated[str, Field(description="What to hydrate the skill for; empty: its own description.")] = "",
        budget: Annotated[int, Field(ge=1, description="The most tokens of skill context.")] = 3000,
    ) -> list[UserMessage]:
        try:
            query = task or (await registry.get_skill(skill)).summary.description or skill
            context = await registry.hydrate(query, budget_tokens=budget, skill_names=[skill])
            current = await state.get_state(execution_id)
        except SkillstateError as e:
            raise protocol_error(e, skill=skill, execution_id=execution_id) from e
        return [
            UserMessage(skill_state_prompt(context.context, current.state, observation or NO_OBSERVATION)),
            UserMessage(submit_instructions(execution_id, current.revision)),
        ]
