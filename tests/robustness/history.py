"""What a robustness run saw: every request with its outcome, every streamed item, every fault, when the
traffic ran, and the log and state read back at the end. Written as JSON lines, so a failed run can be
checked again later (`python -m tests.robustness check FILE`)."""

from __future__ import annotations

import json
import time
from collections import Counter
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


FAULTS = ("sigkill", "dropped call", "reconnect", "stream cut", "session cut")
"""The faults a run must have injected while the agents ran, or it proves nothing about them. A session cut
is a Session stream dropped by its client, or cut by a crash, with submits sent on it unanswered."""


def faults_in_traffic(history: History) -> Counter[str]:
    """The faults recorded while the agents ran, by kind (a stream cut for falling behind, `RESOURCE_EXHAUSTED`,
    is a "slow watcher cut"). The kill that ends every run, and the cuts it causes, come after the traffic
    and are not counted: a run with no fault injected counts none."""
    counted: Counter[str] = Counter()
    traffic = history.of("traffic")
    if len(traffic) != 1 or "end" not in traffic[0]:
        return counted
    start, end = traffic[0]["start"], traffic[0]["end"]
    for fault in history.of("fault"):
        if fault.get("at") is not None and start <= fault["at"] <= end:
            behind = fault["what"] == "stream cut" and fault.get("status") == "RESOURCE_EXHAUSTED"
            counted["slow watcher cut" if behind else fault["what"]] += 1
    return counted


def missing_faults(history: History) -> list[str]:
    """Each kind of fault the run should have injected during its traffic and did not; empty when it did."""
    counted = faults_in_traffic(history)
    return [f"no {what} during the traffic" for what in FAULTS if not counted[what]]


RACING = ("lww", "counter", "reject")
"""The policies of the patches an agent sends several of at once (a burst), on one base."""


def same_agent_races(history: History) -> Counter[str]:
    """By policy, the bursts in which two or more of one agent's patches of that policy, sent at once on one
    base, were settled against each other: for lww and counter, at least two of them committed (for lww, a tie
    of stamps); for reject, one committed and another was refused ABORTED. A run checks same-agent races
    only if it had them."""
    log = history.of("final_log")
    committed = {r["client_patch_id"] for r in log[0]["revisions"]} if log else set()
    bursts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for submit in history.of("submit"):
        if "burst" in submit:
            bursts.setdefault((submit["burst"], submit["policy"]), []).append(submit)
    raced: Counter[str] = Counter({policy: 0 for policy in RACING})
    for (_, policy), writes in bursts.items():
        landed = sum(w["id"] in committed for w in writes)
        aborted = sum(w["outcome"] == REJECTED and w["status"] == "ABORTED" for w in writes)
        if landed >= 2 or (policy == "reject" and landed and aborted):
            raced[policy] += 1
    return raced


def _entries(lines: Iterable[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.strip()]
