"""What a simulated world's agents run: each world's skills, agents and state schema, the project's skill
packages registered with the server, and each agent's P hydrated from the registry: the same P for every
runtime, but for what it says of the state. A skill says how to read and write Σ in its `## State` and `## State
updates` sections only (the rest speaks of the world and of "your records"); for a runtime without Σ they
are rendered as one section about its records, which are its conversation (`records_section`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillstate.clients import Hydrated, NotFoundError, Skill, SkillRegistryClient
from skillstate.project_skills import FOLDER as PROJECT_SKILLS

from ..envs import repo
from ..envs.warehouse import SKILL_OF

STATE_SECTIONS = ("state", "state updates")
"""The titles of the sections that say how to read and write a skill's state (`## State`, `## State updates`)."""
READS_KEY = "state-reads"
"""The skill metadata key naming the top-level state keys its agent reads (comma-separated)."""
WAREHOUSE_SKILLS = tuple(SKILL_OF.values())
WAREHOUSE_AGENTS = {"receiving": "warehouse-receiving", "shipping": "warehouse-shipping",
                    "maintenance": "warehouse-maintenance"}  # fmt: skip
WAREHOUSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "inventory": {
            "type": "object",
            "propertyNames": {"pattern": "^shelf_[0-9]+$"},
            "additionalProperties": {"type": "string", "pattern": "^item_[0-9]+$"},
        }
    },
    "required": ["inventory"],
}
"""Every path under the default merge policy, `reject`: two agents writing one shelf concurrently conflict."""
REPO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "features": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "file": {"type": "string"},
                    "branch": {"type": "string"},
                    "pr": {"type": "integer"},
                    "ci": {"enum": ["running", "passed", "failed"]},
                },
            },
        }
    },
    "required": ["features"],
}


@dataclass(frozen=True)
class Setting:
    """What a simulation of one environment needs: its skills, its agents, its state's schema."""

    skills: tuple[str, ...]
    team: dict[str, str]
    """agent id -> the skill it runs (with 3 agents)"""
    schema: dict[str, Any]
    initial: dict[str, Any]


SETTINGS = {
    "warehouse": Setting(WAREHOUSE_SKILLS, WAREHOUSE_AGENTS, WAREHOUSE_SCHEMA, {"inventory": {}}),
    "repo": Setting(repo.SKILLS, {"developer": repo.DEVELOPER, "ci": repo.CI, "maintainer": repo.MAINTAINER},
                    REPO_SCHEMA, {"features": {}}),
}  # fmt: skip


async def ensure_skills(registry: SkillRegistryClient, names: tuple[str, ...]) -> None:
    """Register the project's packages that the server does not hold yet."""
    for name in names:
        try:
            await registry.get_skill(name)
        except NotFoundError:
            folder = PROJECT_SKILLS / name
            if not (folder / "SKILL.md").is_file():
                raise FileNotFoundError(f"{folder}: the project's skill package is missing") from None
            await registry.register_folder(folder, strict=True)


async def skill_context(
    registry: SkillRegistryClient, skills: tuple[str, ...], budget: int, *, has_state: bool = True
) -> tuple[str, tuple[str, ...] | None]:
    """An agent's P, each skill's context hydrated by the registry for its own description, with what defines
    its state always in it (below), joined; and the top-level state keys its skills declare they read
    (`metadata: state-reads: a, b`), or None (the whole state) when any of them declares nothing. Every
    runtime gets this same P, with its state section rendered for a runtime without Σ when `has_state` is
    false."""
    instructions, reads, _ = await hydrated_context(registry, skills, budget, has_state=has_state)
    return instructions, reads


async def hydrated_context(
    registry: SkillRegistryClient,
    skills: tuple[str, ...],
    budget: int,
    *,
    requester: str = "",
    has_state: bool = True,
) -> tuple[str, tuple[str, ...] | None, list[Hydrated]]:
    """`skill_context`, and the hydrations P was made of (what Expand and ReportOutcome refer to); with a
    `requester` (an agent's id), hydrations of its own (team_rezip.py)."""
    parts, reads, hydrations = [], {}, []
    declared_by_all = True
    for name in skills:
        skill = await registry.get_skill(name)
        hydrated = await registry.hydrate(
            skill.summary.description, budget_tokens=budget, skill_names=[name], requester=requester
        )
        declared = skill.metadata.get(READS_KEY)
        keys = [key.strip() for key in (declared or "").split(",") if key.strip()]
        if has_state:
            context, added = hydrated.context, state_definition(skill, hydrated, keys)
        else:
            context, added = without_state(skill, hydrated.context, keys)
        parts.append("\n\n".join([context, *added]))
        declared_by_all = declared_by_all and declared is not None
        reads.update(dict.fromkeys(keys))
        hydrations.append(hydrated)
    return "\n\n".join(parts), tuple(reads) if declared_by_all else None, hydrations


def state_definition(skill: Skill, hydrated: Hydrated, keys: list[str]) -> list[str]:
    """What a hydrated context must add so that the agent knows the shape of the state it reads and writes:
    the skill's State section when hydration left it out (it does when the budget is spent on the procedure),
    or, for a skill with none, the state keys its metadata declares."""
    shown = {index for skill_name, index, _, _ in hydrated.sections if skill_name == skill.summary.name}
    defining = [section for section in skill.sections if section.title.strip().lower() in STATE_SECTIONS]
    if defining:
        return [section.text.strip() for section in defining if section.index not in shown]
    if keys:
        held = ", ".join(f"`{key}`" for key in keys)
        return [f"## State\n\nThis skill reads {held} of the shared execution state: read it fresh at every step."]
    return []


RECORDS_TITLE = "Records"


def records_section(keys: list[str]) -> str:
    """What a runtime without Σ is told in place of a skill's state section: its records are its conversation."""
    held = " and ".join(f"`{key}`" for key in keys) if keys else "what the task needs"
    return (
        f"## {RECORDS_TITLE}\n\nNothing keeps {held} for you between steps: your records are what this conversation\n"
        "says, the results of earlier actions (and any summary of them). Read them before you act; a result that\n"
        "reports a failure means that action changed nothing."
    )


def without_state(skill: Skill, context: str, keys: list[str]) -> tuple[str, list[str]]:
    """A skill's hydrated context with its state sections replaced by one `records_section` (where the first
    of them was), and what must be added to it: the records section, where hydration left them all out."""
    records: str | None = records_section(keys)
    for section in skill.sections:
        text = section.text.strip()
        if section.title.strip().lower() in STATE_SECTIONS and text in context:
            context = context.replace(text, records or "", 1)
            records = None
    return context, [] if records is None else [records]
