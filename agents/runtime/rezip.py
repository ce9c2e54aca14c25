"""An agent's part in ReZip (`sim --rezip`): the evidence the registry revises its macros on comes from real runs.

P shows a shared routine as a macro block, at the lowest level the registry thinks sufficient (its contract,
unless evidence raised it). With `--rezip`, P says how to ask for more: a reply whose only JSON block is
`{"expand": "<macro id>"}` makes the runtime call `Expand` on the hydration that showed the macro and hand its
full text back with the step's observation (`Expanded macro <id>:`), and the model answers again. At the end
of the episode the runtime reports its outcome once per hydration of P (`ReportOutcome`): success when no
action of the agent failed and no step was given up, and as failed the macros expanded for a step whose action
the next observation reports failed (`Status: error`): the step followed their text, and their check failed.

It stays off where runtimes are compared: evidence raises macro levels as runs report, so a run after another
would see a different P, and the baselines must see the same P (SimConfig refuses `rezip` for a baseline).
Agents at once (sims/team_rezip.py) feed ReZip the same way, each over a P hydrated for it alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillstate.clients import Hydrated, MacroRevision, NotFoundError, SkillRegistryClient, ValidationError

from ..protocol.prompts import EXPAND_HINT, EXPANDED_HEADER
from ..protocol.reply import ReplyError

_FAILED = re.compile(r"^Status: error$", re.MULTILINE)


class MacroFeedback:
    """What one agent tells ReZip over an episode: the macros it expanded, the ones whose check failed, and the
    outcome, reported when the episode ends."""

    def __init__(self, registry: SkillRegistryClient, hydrations: Sequence[Hydrated]) -> None:
        self.registry = registry
        self.hydrations = tuple(hydrations)
        self._hydration_of = {m.macro_id: h.hydration_id for h in self.hydrations for m in h.macros}
        self.expanded: dict[str, set[str]] = {h.hydration_id: set() for h in self.hydrations}
        """hydration id -> the macros expanded from it in this episode"""
        self.failed: dict[str, set[str]] = {h.hydration_id: set() for h in self.hydrations}
        """hydration id -> the macros expanded for a step whose action failed"""
        self.failures = 0
        """Steps whose action failed or that were given up."""
        self._this_step: set[str] = set()
        self.revisions: list[MacroRevision] = []
        """What the reports revised (a macro's new level, or None: split or retired)."""
        self.reported: list[str] = []
        """The hydrations whose outcome the registry took."""
        self.errors: list[str] = []
        """Reports the registry refused (an expired hydration, a skill changed since): the run goes on."""

    @property
    def offers_expansion(self) -> bool:
        """Whether P shows a macro below full, which the agent may ask to expand."""
        return any(m.level != "full" for h in self.hydrations for m in h.macros)

    def instructions(self, p: str) -> str:
        """P as the agent sees it: with how to ask for a macro's full text, when it shows one in summary."""
        return f"{p}\n\n{EXPAND_HINT}" if self.offers_expansion else p

    @property
    def told(self) -> bool:
        """Whether the episode's outcome went to the registry (taken or refused): an agent that died never told."""
        return bool(self.reported or self.errors)

    def begin_step(self, observation: str) -> None:
        """A new observation, for an agent answering one after another: if it reports the previous action failed,
        so did the macros that step expanded."""
        expanded = self.end_step()
        if _FAILED.search(observation):
            self.action_failed(expanded)

    def end_step(self) -> frozenset[str]:
        """The macros expanded for the step just answered; the next step starts with none."""
        expanded, self._this_step = frozenset(self._this_step), set()
        return expanded

    def action_failed(self, expanded: Iterable[str]) -> None:
        """An action failed: a failure of the episode, and of the macros expanded for the step that chose it."""
        self.failures += 1
        for macro_id in expanded:
            self.failed[self._hydration_of[macro_id]].add(macro_id)

    def gave_up(self) -> None:
        self.failures += 1

    async def expand(self, macro_id: str) -> str:
        """The macro's full text, with the header the observation shows it under; ReplyError (for the model to
        read) if P shows no such macro or the registry cannot expand it."""
        hydration_id = self._hydration_of.get(macro_id)
        if hydration_id is None:
            shown = ", ".join(sorted(self._hydration_of)) or "none"
            raise ReplyError(f"no macro {macro_id!r} in your instructions (they show: {shown})")
        try:
            text = await self.registry.expand(hydration_id, macro_id)
        except (NotFoundError, ValidationError) as error:
            raise ReplyError(f"macro {macro_id} cannot be expanded: {error.message}") from None
        self.expanded[hydration_id].add(macro_id)
        self._this_step.add(macro_id)
        return f"{EXPANDED_HEADER} {macro_id}:\n{text.strip()}"

    async def report(self) -> list[MacroRevision]:
        """Report the episode's outcome once per hydration of P; returns what the registry revised."""
        revisions: list[MacroRevision] = []
        for hydration in self.hydrations:
            failed = sorted(self.failed[hydration.hydration_id])
            try:
                revisions += await self.registry.report_outcome(
                    hydration.hydration_id, success=self.failures == 0, failed_macro_ids=failed
                )
                self.reported.append(hydration.hydration_id)
            except (NotFoundError, ValidationError) as error:
                self.errors.append(f"{hydration.hydration_id}: {error.message}")
        self.revisions += revisions
        return revisions

    def summary(self) -> dict[str, Any]:
        """What this agent told ReZip, as JSON: the macros it expanded and the failed ones, the revisions its
        reports brought, the hydrations reported and the reports refused."""
        return {
            "expanded": sorted(set().union(*self.expanded.values())),
            "failed": sorted(set().union(*self.failed.values())),
            "revisions": [[r.macro_id, r.level] for r in self.revisions],
            "reported": list(self.reported),
            "errors": list(self.errors),
        }


def summarize(by_agent: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What the agents told ReZip (agent id -> `MacroFeedback.summary()`), as results give it: per agent, the
    macros expanded and failed; the revisions, the hydrations reported and the reports refused of them all."""
    return {
        "expanded": {agent: list(told["expanded"]) for agent, told in by_agent.items()},
        "failed": {agent: list(told["failed"]) for agent, told in by_agent.items()},
        "revisions": [list(r) for told in by_agent.values() for r in told["revisions"]],
        "reported": [hydration for told in by_agent.values() for hydration in told["reported"]],
        "errors": [error for told in by_agent.values() for error in told["errors"]],
    }
