"""A run's progress: a live bar on a terminal, one plain line per run anywhere else."""

from __future__ import annotations

import io

from skillstate.cli.progress import RunProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_a_run_is_one_line_when_it_ends() -> None:
    stream = io.StringIO()
    progress = RunProgress("T=100 seed 0 skillstate", 100, stream=stream)
    for done in range(0, 101, 7):
        progress.update(done, tick=done * 2)
    assert stream.getvalue() == ""
    progress.close()
    (line,) = stream.getvalue().splitlines()
    assert line.startswith("T=100 seed 0 skillstate: 98/100 events, tick 196 in ") and line.endswith(" s")


def test_on_a_terminal_the_bar_is_redrawn_in_place_and_left_at_its_end() -> None:
    stream = Terminal()
    progress = RunProgress("groupchat x3", 40, stream=stream)
    for done in range(41):
        progress.update(done, tick=done)
    progress.close()
    drawn = stream.getvalue()
    assert "\r" in drawn and drawn.count("\n") == 1, "one line, redrawn"
    assert drawn.rstrip("\n").rsplit("\r", 1)[-1].startswith("groupchat x3: 100%")
    assert "40/40" in drawn.rsplit("\r", 1)[-1]
