"""What a robustness run saw: every request with its outcome, every streamed item, every fault, and the
log and state read back at the end. Written as JSON lines, so a failed run can be checked again later
(`python -m tests.robustness check FILE`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OK, REJECTED, UNKNOWN = "ok", "rejected", "unknown"
"""A request's outcome: acknowledged; refused with a definite status (nothing may have changed); or no
answer (a crash, a dropped connection, a deadline), after which it may or may not have taken effect."""


@dataclass
class History:
    entries: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def now(self) -> float:
        return time.monotonic() - self.started

    def add(self, kind: str, **fields: Any) -> dict[str, Any]:
        entry = {"kind": kind, **fields}
        self.entries.append(entry)
        return entry

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.entries if e["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        (entry,) = self.of(kind)
        return entry

    def write(self, path: Path) -> None:
        with path.open("w") as out:
            for entry in self.entries:
                out.write(json.dumps(entry, sort_keys=True) + "\n")

    @classmethod
    def read(cls, path: Path) -> History:
        return cls(_entries(path.read_text().splitlines()))


def _entries(lines: Iterable[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.strip()]
