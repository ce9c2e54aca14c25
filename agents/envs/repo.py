"""The software repository of SkillExecBench (the SKILL.state paper, Appendix B.1, Environment 2): branches,
commits, pull requests and CI; actions Commit, CreatePR, Merge, FixCI and Wait; webhook-style observations.

Feature requests arrive one every FEATURE_EVERY steps (or sooner when nothing else is pending) while the
first `horizon` steps last, and what they started runs to its end (at most 3 x horizon steps); each
must become a commit on its branch, a pull request, a passing CI run (a first run fails with a seeded
chance; `FixCI` repairs it) and a merge. The webhooks of each step go to the skill that handles them:
feature requests and pushes to `repo-developer`, CI failures to `repo-ci`, passing runs to
`repo-maintainer`. Score = feature requests merged with passing CI / feature requests. Merging a pull
request whose CI has not passed breaks main: it counts against the score.

State-recovery scenarios (the paper's Experiment 3) change the world outside the agents' actions once a
chosen pull request is open: `force-push` empties its branch (the developer must commit again; CI re-runs),
`flaky-ci` fails its passing CI (the CI agent must fix it), `pr-closed` closes it (the developer must open
another; the paper calls it unrecoverable). Recovery steps are the steps spent on that feature from the
alert to its merge; the hallucination lag counts those of them that acted on the belief the alert made stale
(an action on the feature that failed, or a merge whose CI had not passed): 0 for a perfect agent.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .base import Notice, Outcome

SKILLS = ("repo-developer", "repo-ci", "repo-maintainer")
DEVELOPER, CI, MAINTAINER = SKILLS
FEATURE_EVERY = 4
CI_FAILS = 0.35
"""The chance that a pull request's first CI run fails."""
FILES = ("search", "export", "billing", "login", "cache", "metrics", "upload", "profile", "audit", "notify")
SCENARIOS = ("force-push", "flaky-ci", "pr-closed")
UNRECOVERABLE = frozenset({"pr-closed"})
"""The paper's PR Closed: no runtime recovers it there (Table 10); here a new pull request may."""
FAILURES = ("test_{f} fails: expected 200, got 500", "lint: unused import in {f}.py", "type error in {f}.py line 12")


@dataclass
class PullRequest:
    number: int
    branch: str
    feature: int
    ci: str = "running"
    """`running`, `passed` or `failed`"""
    state: str = "open"
    """`open`, `merged` or `closed`"""


@dataclass
class Feature:
    number: int
    file: str
    branch: str
    merged: bool = False
    broke_ci: bool = False
    steps: int = 0
    alert_step: int | None = None
    recovery_steps: int | None = None
    stale_steps: int = 0
    """Steps on the feature after the alert that acted on the belief it made stale (failed, or merged a pull
    request whose CI had not passed): its hallucination lag."""


@dataclass
class Repository:
    """The world: branches with their files, pull requests, and main."""

    branches: dict[str, list[str]] = field(default_factory=lambda: {"main": []})
    pulls: dict[int, PullRequest] = field(default_factory=dict)
    main_broken: bool = False

    def open_pull(self, branch: str) -> PullRequest | None:
        return next((p for p in self.pulls.values() if p.branch == branch and p.state == "open"), None)


class RepoEnvironment:
    """Feature requests and the webhooks they cause, against the repository (the driver's Environment)."""

    skills: tuple[str, ...] = SKILLS

    def __init__(self, horizon: int, seed: int, scenario: str | None = None) -> None:
        if scenario is not None and scenario not in SCENARIOS:
            raise ValueError(f"scenario: unknown {scenario!r} (one of {', '.join(SCENARIOS)})")
        self.rng = random.Random(f"repo:{seed}")
        self.horizon = horizon
        self.scenario = scenario
        self.world = Repository()
        self.features: dict[int, Feature] = {}
        self.queue: deque[Notice] = deque()
        self.step = 0
        self.max_steps = 3 * horizon
        """Webhooks still flow after the last request; this bounds a run whose agents loop."""
        self._target: int | None = None
        """The feature the recovery scenario hits (the first one whose pull request opens)."""

    # -- the driver's interface ---------------------------------------------------------------------------

    def next_notice(self) -> Notice | None:
        if self.step >= self.max_steps:
            return None
        if self.step < self.horizon and (self.step % FEATURE_EVERY == 0 or not self.queue):
            self.queue.appendleft(self.request())
        if not self.queue:
            return None
        self.step += 1
        notice = self.queue.popleft()
        if isinstance(notice.subject, int) and notice.subject in self.features:
            self.features[notice.subject].steps += 1
        return notice

    def act(self, notice: Notice, action: str) -> Outcome:
        words = action.split()
        verb = words[0] if words else ""
        handlers: dict[str, tuple[int, Callable[..., Outcome]]] = {
            "Commit": (2, self._commit),
            "CreatePR": (1, self._create_pr),
            "FixCI": (1, self._fix_ci),
            "Merge": (1, self._merge),
        }
        if verb == "Wait" and len(words) == 1:
            return Outcome(action, "ok", "Waited.", False)
        if verb not in handlers:
            return Outcome(action, "error", f"Unknown action {verb or '(empty)'!r}: use Commit, CreatePR, "
                           "Merge, FixCI or Wait.", False)  # fmt: skip
        arity, handler = handlers[verb]
        if len(words) - 1 != arity:
            return Outcome(
                action, "error", f"{verb} takes {arity} argument{'s' * (arity > 1)}, got {len(words) - 1}.", False
            )
        outcome = handler(action, *words[1:])
        target = self.features.get(self._target) if self._target is not None else None
        if target is not None and target.alert_step is not None and target.recovery_steps is None:
            acted_on_it = notice.subject == target.number or target.branch in words
            if acted_on_it and (outcome.status == "error" or (verb == "Merge" and target.broke_ci)):
                target.stale_steps += 1
        if self.scenario and self._target is not None and outcome.status == "ok":
            self._maybe_alert()
        return outcome

    def telemetry(self, rng: random.Random, count: int) -> list[str]:
        """Irrelevant syslog lines (Appendix C.3)."""
        return [
            f"[Syslog] Server-{rng.randint(1, 99)} CPU load: {rng.randint(1, 99)}%, RAM usage: {rng.randint(5, 95)}%"
            for _ in range(count)
        ]

    def score(self) -> tuple[int, int]:
        return sum(f.merged and not f.broke_ci for f in self.features.values()), len(self.features)

    def snapshot(self) -> dict[str, Any]:
        """The world in the shape of the agents' state (`features`): each feature's file and branch, and its
        latest pull request with that request's CI, once one exists."""
        features: dict[str, Any] = {}
        for feature in self.features.values():
            entry: dict[str, Any] = {"file": feature.file, "branch": feature.branch}
            pulls = [p for p in self.world.pulls.values() if p.feature == feature.number]
            if pulls:
                latest = max(pulls, key=lambda p: p.number)
                entry |= {"pr": latest.number, "ci": latest.ci}
            features[str(feature.number)] = entry
        return {"features": features}

    def recovery(self) -> dict[str, Any] | None:
        """The scenario's outcome: whether the hit feature was merged cleanly, and in how many steps."""
        if self.scenario is None or self._target is None:
            return None
        feature = self.features[self._target]
        recoverable = self.scenario not in UNRECOVERABLE
        recovered = feature.merged and not feature.broke_ci
        return {"scenario": self.scenario, "recoverable": recoverable, "recovered": recovered,
                "hallucination_lag": feature.stale_steps if recovered else None,
                "recovery_steps": feature.recovery_steps if recovered else None}  # fmt: skip

    # -- actions ------------------------------------------------------------------------------------------

    def _commit(self, action: str, branch: str, file: str) -> Outcome:
        if branch == "main":
            return Outcome(action, "error", "Commit to a feature branch, not to main.", False)
        feature = self._feature_of(branch)
        files = self.world.branches.setdefault(branch, list(self.world.branches["main"]))
        files.append(file)
        sha = f"{self.rng.getrandbits(28):07x}"
        pull = self.world.open_pull(branch)
        if pull is not None:  # a push to an open pull request runs its CI again
            pull.ci = "passed" if self._expected_file(feature) in files else "failed"
            self._ci_webhook(pull)
            return Outcome(action, "ok", f"Pushed {file} to {branch} (commit {sha}); CI re-runs on PR #{pull.number}.",
                           True)  # fmt: skip
        self.queue.append(Notice(DEVELOPER, f"Pushed to {branch} (commit {sha}); no pull request is open for it yet.",
                                 feature.number if feature else None))  # fmt: skip
        return Outcome(action, "ok", f"Pushed {file} to {branch} (commit {sha}).", feature is not None)

    def _create_pr(self, action: str, branch: str) -> Outcome:
        if branch not in self.world.branches or branch == "main":
            return Outcome(action, "error", f"There is no feature branch {branch!r}: commit to it first.", False)
        if (pull := self.world.open_pull(branch)) is not None:
            return Outcome(action, "error", f"PR #{pull.number} is already open for {branch}.", False)
        feature = self._feature_of(branch)
        number = len(self.world.pulls) + 1
        pull = self.world.pulls[number] = PullRequest(number, branch, feature.number if feature else 0)
        first_run_fails = self.rng.random() < CI_FAILS
        complete = feature is not None and self._expected_file(feature) in self.world.branches[branch]
        pull.ci = "failed" if first_run_fails or not complete else "passed"
        if feature is not None and self._target is None and self.scenario:
            self._target = feature.number
        self._ci_webhook(pull)
        return Outcome(action, "ok", f"Opened PR #{number} for {branch}; CI is running.", feature is not None)

    def _fix_ci(self, action: str, branch: str) -> Outcome:
        pull = self.world.open_pull(branch)
        if pull is None:
            return Outcome(action, "error", f"No pull request is open for {branch}.", False)
        if pull.ci != "failed":
            return Outcome(action, "error", f"CI of PR #{pull.number} has not failed (it is {pull.ci}).", False)
        feature = self.features.get(pull.feature)
        if feature is not None and self._expected_file(feature) not in self.world.branches[branch]:
            return Outcome(action, "error", f"{branch} lacks {feature.file}: commit it first.", False)
        pull.ci = "passed"
        self._ci_webhook(pull)
        return Outcome(action, "ok", f"Fixed CI on {branch}; PR #{pull.number} passes.", True)

    def _merge(self, action: str, number_text: str) -> Outcome:
        number = int(number_text.lstrip("#")) if number_text.lstrip("#").isdigit() else -1
        pull = self.world.pulls.get(number)
        if pull is None or pull.state != "open":
            return Outcome(action, "error", f"PR #{number_text.lstrip('#')} is not an open pull request.", False)
        pull.state = "merged"
        self.world.branches["main"] += [
            f for f in self.world.branches.pop(pull.branch) if f not in self.world.branches["main"]
        ]
        feature = self.features.get(pull.feature)
        clean = pull.ci == "passed"
        if feature is not None:
            feature.merged, feature.broke_ci = True, not clean
            if feature.alert_step is not None and feature.recovery_steps is None:
                feature.recovery_steps = feature.steps - feature.alert_step
        if not clean:
            self.world.main_broken = True
            return Outcome(action, "ok", f"Merged PR #{number} with CI {pull.ci}: main is broken.", False)
        return Outcome(action, "ok", f"Merged PR #{number} into main; its branch is deleted.", True)

    # -- events -------------------------------------------------------------------------------------------

    def request(self) -> Notice:
        """The next feature request."""
        number = len(self.features) + 1
        file = f"{FILES[(number - 1) % len(FILES)]}{'' if number <= len(FILES) else (number - 1) // len(FILES)}"
        feature = self.features[number] = Feature(number, f"{file}.py", f"feature-{number}")
        return Notice(DEVELOPER, f"Feature request #{number}: add {feature.file} on branch {feature.branch}.", number)

    def _ci_webhook(self, pull: PullRequest) -> None:
        if pull.ci == "failed":
            reason = self.rng.choice(FAILURES).format(f=self.features[pull.feature].file[:-3] if pull.feature else "x")
            text = f"CI Pipeline Failed for PR #{pull.number} ({pull.branch}): {reason}."
            self.queue.append(Notice(CI, text, pull.feature))
        else:
            self.queue.append(Notice(MAINTAINER, f"CI Pipeline Passed for PR #{pull.number} ({pull.branch}): "
                                     "ready to merge.", pull.feature))  # fmt: skip

    def _maybe_alert(self) -> None:
        """Once, when the target's pull request reaches the scenario's point: change the world and say so."""
        feature = self.features[self._target] if self._target is not None else None
        if feature is None or feature.alert_step is not None:
            return
        pull = self.world.open_pull(feature.branch)
        if pull is None:
            return
        if self.scenario == "force-push":
            self.world.branches[feature.branch] = list(self.world.branches["main"])
            pull.ci = "failed"
            self.queue = deque(n for n in self.queue if n.subject != feature.number)
            text = (f"Alert: someone force-pushed {feature.branch}; its commits are gone and PR #{pull.number} "
                    "has nothing to merge.")  # fmt: skip
            notice = Notice(DEVELOPER, text, feature.number)
        elif self.scenario == "flaky-ci" and pull.ci == "passed":
            pull.ci = "failed"
            self.queue = deque(n for n in self.queue if not (n.skill == MAINTAINER and n.subject == feature.number))
            notice = Notice(CI, f"Alert: CI re-ran on PR #{pull.number} ({pull.branch}) and failed: flaky test.",
                            feature.number)  # fmt: skip
        elif self.scenario == "pr-closed":
            pull.state = "closed"
            self.queue = deque(n for n in self.queue if n.subject != feature.number)
            notice = Notice(DEVELOPER, f"Alert: PR #{pull.number} ({pull.branch}) was closed by an admin.",
                            feature.number)  # fmt: skip
        else:
            return
        feature.alert_step = feature.steps
        self.queue.appendleft(notice)

    def _feature_of(self, branch: str) -> Feature | None:
        return next((f for f in self.features.values() if f.branch == branch), None)

    @staticmethod
    def _expected_file(feature: Feature | None) -> str:
        return feature.file if feature is not None else ""
