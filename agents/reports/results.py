"""Simulation results as people read them: a Markdown table in the form of the SKILL.state paper's Table 1,
a PNG plot of cumulative tokens per step, and a JSON file with every figure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..runtime.llm import is_test_policy
from ..sims.sequential import SimConfig, SimResult
from ..sims.team_setup import TeamConfig
from .seeds import markdown, table_rows

TEST_POLICY_NOTE = (
    "Model: {model}, a scripted TEST POLICY (deterministic, no model): its scores show that the runtimes work, "
    "not how a model performs. Token figures are real counts of the prompts and replies (o200k_base)."
)


SHARED = {
    "skillstate": "one shared state",
    "stateful": "one shared state; each agent its own transcript",
    "react": "nothing: each agent its own transcript",
    "truncated": "nothing: each agent its own transcript, cut to a budget",
    "memory": "nothing: each agent its own summary and latest turns",
    "summary": "nothing: each agent its own summary, cut to a budget",
    "groupchat": "one shared transcript",
}
"""What the agents of a team have in common in each runtime: a baseline's agents see each other's work only
through what they share (the world's observations aside)."""


def table(results: Sequence[SimResult]) -> str:
    """| horizon | runtime | score | avg prompt tokens | max prompt tokens | total tokens | retries |, and what the
    agents share when a run has several."""
    team = any(r.config.agents > 1 for r in results)
    lines = [
        "| horizon | runtime |" + (" agents share |" if team else "") + " score | avg prompt tokens "
        "| max prompt tokens | total tokens | vs skillstate | conflicts / invalid / malformed / gave up / recovered |",
        "|---|---|" + ("---|" if team else "") + "---|---|---|---|---|---|",
    ]
    ours = {r.config.horizon: r.total_tokens for r in results if r.config.runtime == "skillstate"}
    for r in sorted(results, key=lambda r: r.config.horizon):
        summary = r.summary()
        base = ours.get(r.config.horizon)
        ratio = f"{r.total_tokens / base:.1f}x" if base else ""
        retries = summary["retries"]
        shared = f" {SHARED[r.config.runtime]} |" if team else ""
        lines.append(
            f"| {r.config.horizon} | {r.config.runtime} |{shared} {r.score:.2f} | {r.average_prompt_tokens:,.0f} "
            f"| {summary['max_prompt_tokens']:,} | {r.total_tokens:,} | {ratio} "
            f"| {retries['conflict']} / {retries['invalid']} / {retries['malformed']} / {retries['gave_up']} "
            f"/ {retries['recovered']} |"
        )
    return "\n".join(lines)


def recovery_table(results: Sequence[SimResult]) -> str:
    """The state-recovery outcome of each run that had a scenario ("" when none had)."""
    runs = [r for r in results if r.recovery]
    if not runs:
        return ""
    lines = ["| runtime | scenario | recoverable | recovered | hallucination lag | recovery steps | state drift |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in runs:
        assert r.recovery is not None
        lag, steps = r.recovery.get("hallucination_lag"), r.recovery["recovery_steps"]
        drift = "n/a" if r.state_drift is None else str(len(r.state_drift))
        recoverable, recovered = ("yes" if r.recovery[key] else "no" for key in ("recoverable", "recovered"))
        lines.append(f"| {r.config.runtime} | {r.recovery['scenario']} | {recoverable} "
                     f"| {recovered} | {'' if lag is None else lag} "
                     f"| {'' if steps is None else steps} | {drift} |")  # fmt: skip
    return "\n".join(lines)


RECALL_NOTE = (
    "It reads a state exactly and recalls each fact that only a transcript or a summary gives with probability "
    "{recall} at each step (--recall; 1 is a perfect replay)."
)


@dataclass(frozen=True)
class FailedRun:
    """A run that ended with an error (a model call retrying could not fix, say) instead of its results."""

    runtime: str
    run: str
    """Which run, in words: `T=30, seed 0, 1 agent`."""
    error: str

    @classmethod
    def of(cls, config: SimConfig, error: BaseException) -> FailedRun:
        agents = f"{config.agents} agent{'s' if config.agents > 1 else ''}"
        return cls(config.runtime, f"T={config.horizon}, seed {config.seed}, {agents}", _reason(error))

    @classmethod
    def of_team(cls, config: TeamConfig, error: BaseException) -> FailedRun:
        sharing = f", {config.coordination}" if config.runtime == "skillstate" else ""
        return cls(config.runtime, f"{config.agents_per_skill} agents a skill{sharing}", _reason(error))

    def line(self) -> str:
        return f"the {self.runtime} run ({self.run}) failed: {self.error}"

    def sentence(self) -> str:
        """`line`, as a note under a table says it."""
        return f"The {self.runtime} run ({self.run}) failed: {self.error}"


def _reason(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def notes(results: Sequence[SimResult], failed: Sequence[FailedRun] = ()) -> str:
    lines = [run.sentence() for run in failed]
    for model in sorted({r.config.model for r in results}):
        if not is_test_policy(model):
            lines.append(f"Model: {model}.")
            continue
        recalls = sorted({r.config.recall for r in results if r.config.model == model})
        recall = " or ".join(f"{value:g}" for value in recalls)
        lines.append(f"{TEST_POLICY_NOTE.format(model=model)} {RECALL_NOTE.format(recall=recall)}")
    return "\n".join(lines)


def plot(results: Sequence[SimResult], path: Path) -> None:
    """Cumulative tokens per step, one line per runtime (of the longest horizon, the first seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    horizon = max(r.config.horizon for r in results)
    seed = min(r.config.seed for r in results)
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for r in results:
        if (r.config.horizon, r.config.seed) == (horizon, seed):
            curve = r.cumulative_tokens()
            ours = r.config.runtime == "skillstate"
            axis.plot(range(1, len(curve) + 1), curve, label=f"{r.config.runtime} (score {r.score:.2f})",
                      linewidth=2.5 if ours else 1.2, zorder=3 if ours else 2)  # fmt: skip
    axis.set_xlabel("step (one observation handled)")
    axis.set_ylabel("cumulative tokens (prompt + completion)")
    model = results[0].config.model
    label = "scripted test policy" if is_test_policy(model) else model
    axis.set_title(f"{results[0].config.env}, {results[0].config.agents} agents, T={horizon}, seed {seed}, {label}")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write(results: Sequence[SimResult], directory: Path, failed: Sequence[FailedRun] = ()) -> dict[str, Path]:
    """results.json, results.md and tokens.png in `directory` (with no results, results.json alone, naming
    the runs that failed); returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"json": directory / "results.json", "table": directory / "results.md", "plot": directory / "tokens.png"}
    runs = [r.summary() | {"cumulative_tokens": r.cumulative_tokens()} for r in results]
    rows = table_rows(results) if results else []
    document = {"runs": runs, "failed": [asdict(run) for run in failed], "table": rows,
                "notes": notes(results, failed)}  # fmt: skip
    paths["json"].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if not results:
        return paths
    recovery = recovery_table(results)
    per_seed = len({r.config.seed for r in results}) > 1
    text = (markdown(rows) if per_seed else table(results)) + (f"\n\n{recovery}" if recovery else "")
    text += f"\n\n{notes(results, failed)}\n"
    paths["table"].write_text(text, encoding="utf-8")
    plot(results, paths["plot"])
    return paths
