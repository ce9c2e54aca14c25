"""Concurrent simulation results as people read them: a Markdown table, a PNG plot of throughput and of tokens
per handled event as agents per skill grow, and a JSON file with every figure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..runtime.llm import is_test_policy
from ..sims.concurrent import TeamResult
from ..sims.team_setup import TeamConfig
from .results import RECALL_NOTE, TEST_POLICY_NOTE, FailedRun


def label(result: TeamResult) -> str:
    """skillstate (claims), skillstate (groups) or groupchat."""
    summary = result.summary()
    return f"skillstate ({summary['coordination']})" if result.config.runtime == "skillstate" else "groupchat"


def table(results: Sequence[TeamResult]) -> str:
    lines = [
        "| runtime | agents per skill | on time | late | dropped | duplicate actions | state drift | claim losses "
        "| data conflicts | merged writes | tokens per handled event | latency p50 / p99, ticks | makespan, ticks "
        "| wall, s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (label(r), r.config.agents_per_skill)):
        s = r.summary()
        drift = "n/a" if s["state_drift"] is None else str(len(s["state_drift"]))
        per_event = "" if s["tokens_per_handled_event"] is None else f"{s['tokens_per_handled_event']:,.0f}"
        lines.append(
            f"| {label(r)} | {s['agents_per_skill']} | {s['handled_on_time']}/{s['events']} | {s['late']} "
            f"| {s['dropped']} | {s['duplicate_actions']} | {drift} | {s['claim_losses']} "
            f"| {policy_counts(s, 'data_conflicts')} | {policy_counts(s, 'resolutions')} "
            f"| {per_event} | {_number(s['latency_ticks_p50'])} / {_number(s['latency_ticks_p99'])} "
            f"| {s['makespan_ticks']} | {s['wall_seconds']:.1f} |"
        )
    return "\n".join(lines)


def _events(config: TeamConfig) -> str:
    """What the run's world sent, in words."""
    arriving = f"at {config.pace.rate:g} a tick on average (seed {config.seed})"
    if config.env == "repo":
        return f"Repository, {config.horizon} feature requests {arriving} and the webhooks they set off"
    return (f"Stockroom, {config.horizon} events {arriving}, {config.contention:g} of them paired with a second "
            "about the same item")  # fmt: skip


def by_policy(counts: Mapping[str, int]) -> str:
    """`counter 21, set 17`: counts by merge policy, in the order docs/merge.md lists the policies."""
    order = ("reject", "lww", "counter", "max", "min", "set", "append", "text")
    shown = sorted(counts, key=lambda p: order.index(p) if p in order else len(order))
    return ", ".join(f"{policy} {counts[policy]}" for policy in shown if counts[policy]) or "0"


def policy_counts(summary: Mapping[str, Any], key: str) -> str:
    """A run's `resolutions` or `data_conflicts` by policy; n/a for a runtime that keeps no Σ."""
    return "n/a" if summary["state_drift"] is None else by_policy(summary[key])


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def notes(results: Sequence[TeamResult], failed: Sequence[FailedRun] = ()) -> str:
    lines = [run.sentence() for run in failed]
    if not results:
        return "\n".join(lines)
    first = results[0].config
    pace = first.pace
    lines += [
        f"{_events(first)}, a tick {pace.tick_ms:g} ms, deadline {pace.deadline} ticks, {first.think_ms:g} ms a "
        f"model call, leases of {first.lease_ticks} ticks. Faults: {', '.join(first.faults) or 'none'}. Merged "
        "writes: concurrent writes the server merged, by policy; data conflicts: patches refused on data (not "
        "claims), by policy."
    ]
    for model in sorted({r.config.model for r in results}):
        if not is_test_policy(model):
            lines.append(f"Model: {model}.")
            continue
        recall = " or ".join(f"{value:g}" for value in sorted({r.config.recall for r in results}))
        lines.append(f"{TEST_POLICY_NOTE.format(model=model)} {RECALL_NOTE.format(recall=recall)}")
    lines += [rezip_note(r, r.rezip) for r in results if r.rezip is not None]
    return "\n".join(lines)


def rezip_note(result: TeamResult, told: Mapping[str, Any]) -> str:
    """One line on what a run's agents told ReZip (`told`: its `rezip` figures, all in results.json)."""
    revised = ", ".join(f"{macro} to {level or 'split'}" for macro, level in told["revisions"]) or "none"
    expanding = sum(bool(macros) for macros in told["expanded"].values())
    failing = sum(bool(macros) for macros in told["failed"].values())
    return (
        f"ReZip, {label(result)} x{result.config.agents_per_skill}: {len(told['reported'])} hydrations reported by "
        f"{len(told['expanded'])} agents, {expanding} of them expanded a macro, {failing} one that failed its check; "
        f"revisions: {revised}; reports refused: {len(told['errors'])}."
    )


def plot(results: Sequence[TeamResult], path: Path) -> None:
    """Left: events handled on time so far, per tick, for each run. Right: tokens per handled event
    (`tokens_per_event`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (over_time, per_event) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in sorted(results, key=lambda r: (label(r), r.config.agents_per_skill)):
        cumulative, total = [], 0
        for count in r.on_time_per_tick():
            total += count
            cumulative.append(total)
        over_time.plot(range(len(cumulative)), cumulative, label=f"{label(r)}, {r.config.agents_per_skill} per skill")
    over_time.set_xlabel("tick")
    over_time.set_ylabel("events handled on time, so far")
    over_time.legend(fontsize=8)
    tokens_per_event(per_event, results)
    model = results[0].config.model
    world = "stockroom" if results[0].config.env == "warehouse" else "repository"
    figure.suptitle(f"{world}, {results[0].config.horizon} {'events' if world == 'stockroom' else 'requests'}, "
                    f"{'scripted test policy' if is_test_policy(model) else model}")  # fmt: skip
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def tokens_per_event(axes: Any, results: Sequence[TeamResult]) -> None:
    """Tokens per handled event on `axes`: against agents per skill, a line per runtime, when the runs have
    several team sizes; a bar per runtime, its value written on it, when they have one."""
    names = sorted({label(r) for r in results})
    sizes = sorted({r.config.agents_per_skill for r in results})
    axes.set_ylabel("tokens per handled event")
    if len(sizes) == 1:
        values = [_tokens_per_event([r for r in results if label(r) == name])[0][1] for name in names]
        bars = axes.bar(names, [value or 0 for value in values], color=[f"C{i}" for i in range(len(names))])
        axes.bar_label(bars, labels=[_number(value) for value in values])
        axes.set_xlabel(f"{sizes[0]} agent{'' if sizes[0] == 1 else 's'} per skill")
        return
    for name in names:
        points = _tokens_per_event([r for r in results if label(r) == name])
        points = [(x, y) for x, y in points if y is not None]
        axes.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name)
    axes.set_xlabel("agents per skill")
    axes.set_yscale("log")
    axes.legend(fontsize=8)


def _tokens_per_event(runs: Sequence[TeamResult]) -> list[tuple[int, float | None]]:
    ordered = sorted(runs, key=lambda r: r.config.agents_per_skill)
    return [(r.config.agents_per_skill, r.summary()["tokens_per_handled_event"]) for r in ordered]


def write(results: Sequence[TeamResult], directory: Path, failed: Sequence[FailedRun] = ()) -> dict[str, Path]:
    """results.json, results.md and coordination.png in `directory` (with no results, results.json alone,
    naming the runs that failed); returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": directory / "results.json",
        "table": directory / "results.md",
        "plot": directory / "coordination.png",
    }
    runs = [r.summary() | {"on_time_per_tick": r.on_time_per_tick()} for r in results]
    document = {"runs": runs, "failed": [asdict(run) for run in failed], "notes": notes(results, failed)}
    paths["json"].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if not results:
        return paths
    paths["table"].write_text(f"{table(results)}\n\n{notes(results, failed)}\n", encoding="utf-8")
    plot(results, paths["plot"])
    return paths
