"""Runs over seeds as the SKILL.state paper reports them (its Table 1): mean ± SD of score, total tokens and
average and largest prompt per (environment, horizon, runtime), and a paired t-test of each baseline against
SKILL.state over the same seeds.

A p-value that is undefined (fewer than two seeds, or identical samples: every difference zero) is None, never
NaN, so that results.json stays JSON.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from ..sims.sequential import SimResult

OURS = "skillstate"


def paired_p(ours: Sequence[float], theirs: Sequence[float]) -> float | None:
    """The two-sided p-value of a paired t-test of `theirs` against `ours` (the same seeds, in order)."""
    if len(ours) < 2 or len(ours) != len(theirs):
        return None
    differences = {b - a for a, b in zip(ours, theirs, strict=True)}
    if len(differences) == 1:  # no spread: t is 0/0 (identical samples) or infinite
        return None if differences == {0} else 0.0
    from scipy import stats  # type: ignore[import-untyped]  # imported here: it takes a second

    p = float(stats.ttest_rel(theirs, ours).pvalue)
    return None if math.isnan(p) else p


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def table_rows(results: Sequence[SimResult]) -> list[dict[str, Any]]:
    """One row per (env, horizon, runtime): the runs of every seed summarized, and tested against
    SKILL.state's runs on the same seeds."""
    groups: dict[tuple[str, int, str], dict[int, SimResult]] = {}
    for r in results:
        groups.setdefault((r.config.env, r.config.horizon, r.config.runtime), {})[r.config.seed] = r
    rows = []
    for (env, horizon, runtime), by_seed in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1])):
        seeds = sorted(by_seed)
        runs = [by_seed[s] for s in seeds]
        ours_by_seed = groups.get((env, horizon, OURS), {})
        paired = [s for s in seeds if s in ours_by_seed]
        row: dict[str, Any] = {"env": env, "horizon": horizon, "runtime": runtime, "seeds": len(runs)}
        for name, values in (
            ("score", [r.score for r in runs]),
            ("total_tokens", [float(r.total_tokens) for r in runs]),
            ("avg_prompt_tokens", [r.average_prompt_tokens for r in runs]),
            ("max_prompt_tokens", [float(max(r.prompt_sizes, default=0)) for r in runs]),
        ):
            mean, sd = _mean_sd(values)
            row[f"{name}_mean"], row[f"{name}_sd"] = round(mean, 4), round(sd, 4)
        if runtime == OURS or not paired:
            row["p_value"] = row["p_value_score"] = None
        else:
            row["p_value"] = paired_p([ours_by_seed[s].total_tokens for s in paired],
                                      [by_seed[s].total_tokens for s in paired])  # fmt: skip
            row["p_value_score"] = paired_p([ours_by_seed[s].score for s in paired],
                                            [by_seed[s].score for s in paired])  # fmt: skip
        rows.append(row)
    return rows


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The rows in the paper's layout: mean ± SD over seeds, the ratio of total tokens to SKILL.state's."""
    lines = [
        "| env | horizon | runtime | seeds | score | avg prompt tokens | max prompt tokens | total tokens "
        "| vs skillstate | p (tokens) | p (score) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ours = {(r["env"], r["horizon"]): r["total_tokens_mean"] for r in rows if r["runtime"] == OURS}
    for r in rows:
        base = ours.get((r["env"], r["horizon"]))
        ratio = f"{r['total_tokens_mean'] / base:.1f}x" if base else ""
        lines.append(
            f"| {r['env']} | {r['horizon']} | {r['runtime']} | {r['seeds']} "
            f"| {r['score_mean']:.2f} ± {r['score_sd']:.2f} "
            f"| {r['avg_prompt_tokens_mean']:,.0f} ± {r['avg_prompt_tokens_sd']:,.0f} "
            f"| {r['max_prompt_tokens_mean']:,.0f} ± {r['max_prompt_tokens_sd']:,.0f} "
            f"| {r['total_tokens_mean']:,.0f} ± {r['total_tokens_sd']:,.0f} | {ratio} "
            f"| {_p(r['p_value'])} | {_p(r['p_value_score'])} |"
        )
    return "\n".join(lines)


def _p(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"
