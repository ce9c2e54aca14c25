"""One progress bar per run on stderr: live on a terminal (tqdm), and off a terminal (a log, a pipe, CI) one
plain line when the run ends, so that a whole `skillstate demo` reads on one screen either way."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class RunProgress:
    """A run's progress toward `total` (events handled), with what else it shows (`update(..., tick=12)`)."""

    def __init__(self, label: str, total: int, *, unit: str = "events", stream: TextIO | None = None) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = sys.stderr if stream is None else stream
        self.done = 0
        self.shown: dict[str, Any] = {}
        self._started = time.monotonic()
        self._bar: Any = None
        if self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label, unit=f" {unit}", file=self.stream, dynamic_ncols=True)

    def update(self, done: int, total: int | None = None, **shown: Any) -> None:
        """`done` of the total so far; `total` when it grew (a world whose actions set off more events)."""
        self.done, self.shown = done, shown
        if total is not None and total != self.total:
            self.total = total
            if self._bar is not None:
                self._bar.total = total
        if self._bar is not None:
            if shown:
                self._bar.set_postfix(shown, refresh=False)
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            return
        extra = "".join(f", {name} {value}" for name, value in self.shown.items())
        seconds = time.monotonic() - self._started
        self.stream.write(f"{self.label}: {self.done}/{self.total} {self.unit}{extra} in {seconds:.1f} s\n")
