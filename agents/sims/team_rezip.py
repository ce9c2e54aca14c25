"""ReZip from agents at once (`sim --agents-per-skill N --rezip`): each agent hydrates its own P and reports its
own outcome (runtime/rezip.py), with its own client and identity, in this process or in a process of its own.

Without ReZip the agents of a skill share one P, hydrated once (concurrent.py). But the registry takes one
report per hydration (a second is NOT_FOUND, `unknown or expired`: docs/skills.md) and counts as expanded the
macros anyone expanded from it: over one shared hydration, only the first agent to finish could report, as
one use carrying every agent's expansions. So with ReZip each agent hydrates P for itself, and each agent's
episode is one use in the evidence, with the expansions it asked for, as in the sequential simulation.

Identical requests share one hydration unless they name who they are for: each agent hydrates with its id as
`requester`, so every agent of a skill gets the same P (sections, macros, levels) under a hydration id of its
own.
"""

from __future__ import annotations

from skillstate.clients import SkillRegistryClient

from ..runtime.rezip import MacroFeedback
from .skills import hydrated_context


async def own_context(
    registry: SkillRegistryClient, agent_id: str, budget: int
) -> tuple[str, tuple[str, ...] | None, MacroFeedback]:
    """P hydrated for one agent (`{skill}-{i}`, as TeamConfig names them) through its own `registry` client, the
    state keys it reads (None: all), and the feedback it gives ReZip over that P."""
    skill = agent_id.rpartition("-")[0]
    instructions, reads, hydrations = await hydrated_context(registry, (skill,), budget, requester=agent_id)
    return instructions, reads, MacroFeedback(registry, hydrations)
