"""Refused calls are logged, but a flood of them cannot flood the log."""

from __future__ import annotations

import logging

import pytest

from skillstate.server.auth.guard import RefusalLog


def test_refusals_are_logged_at_most_so_many_a_second_and_the_rest_counted(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    refusals = RefusalLog(lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="skillstate.access"):
        for i in range(50):
            refusals.log(f"refused GetState from peer: attempt {i}")
        now[0] += 1
        refusals.log("refused GetState from peer: later")
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == RefusalLog.LINES_PER_SECOND + 1
    assert lines[-1] == "refused GetState from peer: later (30 more refusals were not logged)"
