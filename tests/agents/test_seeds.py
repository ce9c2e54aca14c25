"""Runs over seeds: mean ± SD and paired t-tests as the paper reports them, with undefined p-values as null."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from skillstate.agents.reports.seeds import markdown, paired_p, table_rows
from skillstate.agents.runtime.records import StepRecord
from skillstate.agents.sims.sequential import SimConfig, SimResult


def test_a_paired_t_test_matches_the_formula() -> None:
    ours, theirs = [100.0, 110.0, 95.0, 105.0], [150.0, 171.0, 139.0, 160.0]
    differences = [t - o for o, t in zip(ours, theirs, strict=True)]
    t = statistics.fmean(differences) / (statistics.stdev(differences) / math.sqrt(len(differences)))
    from scipy.stats import t as student

    assert paired_p(ours, theirs) == pytest.approx(2 * student.sf(abs(t), df=len(differences) - 1))


def test_an_undefined_p_value_is_none_never_nan() -> None:
    assert paired_p([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) is None, "identical samples"
    assert paired_p([1.0], [2.0]) is None, "one seed"
    assert paired_p([1.0, 2.0], [3.0, 4.0]) == 0.0, "every difference equal and not zero: t is infinite"


def run(runtime: str, seed: int, score: float, tokens: int) -> SimResult:
    record = StepRecord("a", runtime, 1, 1, tokens - 10, 10, "applied")
    return SimResult(SimConfig(runtime=runtime, seed=seed, horizon=10), score, int(score * 10), 10, [record])


def test_rows_summarize_each_runtime_over_its_seeds_against_skillstate() -> None:
    results = [run("skillstate", s, 1.0, 100 + s) for s in range(3)]
    results += [run("stateful", s, 0.9 + 0.05 * (s % 2), 300 + 7 * s) for s in range(3)]
    rows = {row["runtime"]: row for row in table_rows(results)}
    ours, theirs = rows["skillstate"], rows["stateful"]
    assert (ours["seeds"], ours["score_mean"], ours["score_sd"], ours["p_value"]) == (3, 1.0, 0.0, None)
    assert theirs["total_tokens_mean"] == pytest.approx(307.0) and theirs["total_tokens_sd"] == pytest.approx(7.0)
    assert theirs["p_value"] == pytest.approx(paired_p([100, 101, 102], [300, 307, 314]))
    assert theirs["p_value_score"] == pytest.approx(paired_p([1.0, 1.0, 1.0], [0.9, 0.95, 0.9]))
    json.dumps(rows, allow_nan=False)  # valid JSON: no NaN anywhere
    assert "| warehouse | 10 | stateful | 3 | 0.92 ± 0.03 |" in markdown(list(rows.values()))
