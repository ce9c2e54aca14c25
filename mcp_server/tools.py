"""The tools an MCP client's model calls: the state service's calls an agent makes, and the skill registry's
reads. Each answers with one JSON object (structured content, and the same as text); a failed call is an error
result naming the gRPC status, except a conflict on submit_patch, which is an answer: re-read and try again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Annotated, Any, TypeVar, cast

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from skillstate.clients import (
    ConflictError,
    Observation,
    SkillRegistryClient,
    SkillstateError,
    SkillSummary,
    StateClient,
)

from . import shapes
from .errors import argument_error, tool_error
from .pointer import PointerError, resolve

MAX_WAIT_SECONDS = 60.0
"""The longest next_observations waits: a tool call never holds a client longer (docs/mcp.md, limits)."""
LINGER_SECONDS = 0.05
"""Once an observation arrived, how long next_observations waits for the next before it answers: long enough
to take a backlog the server sends back to back, short enough not to matter to a model."""

Tool = TypeVar("Tool", bound=Callable[..., Any])

READS = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
WAITS = ToolAnnotations(read_only_hint=True, idempotent_hint=False, open_world_hint=False)

ExecutionId = Annotated[str, Field(min_length=1, description="The execution's id (list_executions shows them).")]
Limit = Annotated[int, Field(ge=1, le=1000, description="At most this many items in the answer.")]
PageToken = Annotated[str, Field(description="next_page_token of the previous answer, to continue; empty: start.")]
AgentId = Annotated[str, Field(description="The agent id to act as; empty: the token's agent.")]


@contextlib.contextmanager
def reported() -> Iterator[None]:
    """Turn the client's typed errors into the tool's error result."""
    try:
        yield
    except SkillstateError as e:
        raise tool_error(e) from e


def register_tools(server: MCPServer, state: StateClient, registry: SkillRegistryClient) -> None:
    """Add the eight tools to `server`; they act through `state` and `registry`, with their token's rights."""

    def tool(annotations: ToolAnnotations) -> Callable[[Tool], Tool]:
        """Register a tool under its function's name, its docstring on one line as the model's description."""

        def register(fn: Tool) -> Tool:
            server.add_tool(fn, description=" ".join((fn.__doc__ or "").split()), annotations=annotations)
            return fn

        return register

    @tool(READS)
    async def list_executions(prefix: str = "", limit: Limit = 100, page_token: PageToken = "") -> dict[str, Any]:
        """List the executions this agent may read whose id starts with `prefix`, by id, with their head
        revision and the agents that wrote to them."""
        with reported():
            page = await state.list_executions(prefix, page_size=limit, page_token=page_token)
        executions = [shapes.execution(e) for e in page.executions]
        return shapes.ordered({"executions": executions, "next_page_token": page.next_page_token})

    @tool(READS)
    async def get_state(
        execution_id: ExecutionId,
        at_revision: Annotated[
            int | None, Field(ge=0, description="A committed revision to read instead of the head.")
        ] = None,
        pointer: Annotated[
            str, Field(description="A JSON Pointer (RFC 6901) to the part to read, e.g. /orders/0; empty: all.")
        ] = "",
    ) -> dict[str, Any]:
        """Read an execution's shared state: at its head revision, or at `at_revision`. Pass the `revision`
        it answers as base_revision to submit_patch."""
        with reported():
            read = await state.get_state(execution_id, at_revision)
        answer: dict[str, Any] = {"execution_id": execution_id, "revision": read.revision}
        answer["state_hash"] = read.state_hash
        if pointer:
            try:
                answer |= {"pointer": pointer, "value": resolve(read.state, pointer)}
            except PointerError as e:
                raise argument_error("pointer", str(e)) from None
        else:
            answer["state"] = read.state
        return dict(sorted(answer.items()))  # the state, as large as 4 MiB, comes in the server's canonical order

    @tool(WRITES)
    async def submit_patch(
        execution_id: ExecutionId,
        patch: Annotated[
            dict[str, Any],
            Field(description="A JSON merge patch (RFC 7396) of the state: the keys to set; null deletes a key."),
        ],
        base_revision: Annotated[
            int, Field(ge=0, description="The revision the patch was computed against (get_state's `revision`).")
        ],
        action: Annotated[Any, Field(description="The action this step takes (any JSON), kept in the history.")] = None,
        agent_id: AgentId = "",
        client_patch_id: Annotated[
            str, Field(description="An idempotency key: a patch sent again with it applies once. Empty: a new one.")
        ] = "",
    ) -> dict[str, Any]:
        """Write to an execution's shared state: the server merges the patch three-way against what changed
        since base_revision, under the schema's per-path policies, and answers with the new revision and how
        concurrent writes were resolved. An answer with status "conflict" means another agent changed the same
        paths under the `reject` policy: read the state again (get_state), redo the step, and submit against
        the new revision."""
        try:
            result = await state.submit_patch(
                execution_id, patch, agent_id=agent_id, base_revision=base_revision, action=action,
                client_patch_id=client_patch_id or None,
            )  # fmt: skip
        except ConflictError as e:
            conflict = {"paths": e.paths, "head_revision": e.head_revision, "message": e.message}
            return shapes.ordered({"execution_id": execution_id, "status": "conflict", "conflict": conflict})
        except SkillstateError as e:
            raise tool_error(e) from e
        return shapes.ordered({"execution_id": execution_id, **shapes.committed(result)})

    @tool(READS)
    async def get_history(
        execution_id: ExecutionId,
        from_revision: Annotated[int, Field(ge=0, description="The first revision to list.")] = 1,
        to_revision: Annotated[int, Field(ge=0, description="The last revision to list; 0: the head.")] = 0,
        limit: Limit = 50,
        page_token: PageToken = "",
    ) -> dict[str, Any]:
        """The audit trail of an execution: each revision's agent, base revision, applied patch, action and
        how concurrent writes were resolved."""
        with reported():
            page = await state.get_history(
                execution_id, from_revision, to_revision, page_size=limit, page_token=page_token
            )
        return shapes.ordered(
            {
                "execution_id": execution_id,
                "revisions": [shapes.revision_event(r) for r in page.revisions],
                "next_page_token": page.next_page_token,
                "head_revision": page.head_revision,
                "compact_revision": page.compact_revision,
            }
        )

    @tool(WRITES)
    async def publish_observation(
        execution_id: ExecutionId,
        to: Annotated[
            str, Field(min_length=1, description="An agent id, skill:NAME for every agent of a skill, or *.")
        ],
        payload: Annotated[Any, Field(description="The observation (any JSON).")],
        source: Annotated[str, Field(description="Who or what produced it.")] = "",
        kind: Annotated[str, Field(description="A short type tag, e.g. tool_result or alert.")] = "",
    ) -> dict[str, Any]:
        """Publish an observation to other agents of an execution; it is stored durably and delivered to every
        agent it is addressed to (next_observations). Not retried: a lost answer could publish it twice."""
        with reported():
            sequence = await state.publish_observation(execution_id, to, payload, source=source, kind=kind)
        return shapes.ordered({"execution_id": execution_id, "sequence": sequence})

    @tool(WAITS)
    async def next_observations(
        execution_id: ExecutionId,
        after_sequence: Annotated[
            int, Field(ge=0, description="Only observations after this sequence: the last next_after_sequence.")
        ] = 0,
        agent_id: AgentId = "",
        skills: Annotated[
            list[str], Field(description="The skills this agent runs: also receive what is addressed to skill:NAME.")
        ] = [],  # noqa: B006 (pydantic copies defaults)
        timeout_seconds: Annotated[
            float, Field(ge=1, le=MAX_WAIT_SECONDS, description="Seconds to wait for one, at most 60.")
        ] = 20.0,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many observations.")] = 10,
    ) -> dict[str, Any]:
        """Wait for the observations addressed to this agent (its id, its skills, or everyone) after
        `after_sequence`: answers as soon as one arrives, with those that follow it at once, or empty with
        timed_out after timeout_seconds. Pass next_after_sequence to the next call to continue."""
        found: list[Observation] = []
        stream = cast(  # an async generator, closed here rather than when collected
            AsyncGenerator[Observation, None],
            state.observations(execution_id, agent_id, skills=skills, after_sequence=after_sequence, resume=False),
        )
        with reported():
            async with contextlib.aclosing(stream):
                arrivals = aiter(stream)
                wait = timeout_seconds
                while len(found) < limit:
                    try:
                        found.append(await asyncio.wait_for(anext(arrivals), wait))
                    except (TimeoutError, StopAsyncIteration):
                        break
                    wait = LINGER_SECONDS
        return shapes.ordered(
            {
                "execution_id": execution_id,
                "observations": [shapes.observation(o) for o in found],
                "next_after_sequence": found[-1].sequence if found else after_sequence,
                "timed_out": not found,
            }
        )

    @tool(READS)
    async def list_skills(limit: Limit = 200) -> dict[str, Any]:
        """List the skills in the registry: name, version, description and size in tokens."""
        listed: list[SkillSummary] = []
        with reported():
            pages = cast(AsyncGenerator[SkillSummary, None], registry.list_skills(page_size=min(limit + 1, 1000)))
            async with contextlib.aclosing(pages):
                async for summary in pages:
                    listed.append(summary)
                    if len(listed) > limit:
                        break
        return shapes.ordered({"skills": [shapes.skill(s) for s in listed[:limit]], "truncated": len(listed) > limit})

    @tool(READS)
    async def hydrate_skill(
        query: Annotated[str, Field(min_length=1, description="The task, in words: what the context must cover.")],
        budget: Annotated[int, Field(ge=1, description="The most tokens the context may take.")] = 3000,
        skills: Annotated[list[str], Field(description="Only these skills (names); empty: the whole library.")] = [],  # noqa: B006 (pydantic copies defaults)
    ) -> dict[str, Any]:
        """The smallest sufficient part of the skill library for a task, within a token budget: the sections
        that cover its words and everything they depend on (preconditions, inputs, verifiers, failure
        handlers). Use its `context` as the instructions to follow."""
        with reported():
            context = await registry.hydrate(query, budget_tokens=budget, skill_names=skills)
        return shapes.ordered(shapes.hydrated(context))
