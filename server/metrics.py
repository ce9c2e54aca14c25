"""Prometheus metrics (`skillstate serve --metrics-listen HOST:PORT`, scraped at /metrics).

The engine, the committer, the registry and the gRPC layer report through a `Metrics` object; without
`--metrics-listen` they report to `NO_METRICS`, which does nothing. Each server has a registry of its own,
so several servers in one process (tests) do not share counters.

| metric | kind | labels |
|---|---|---|
| skillstate_rpc_seconds | histogram | method (a Session's submits: `Session.submit`, from arrival to answer) |
| skillstate_rpc_refused_total | counter | method, status |
| skillstate_commits_total | counter | kind (revision, observation) |
| skillstate_commit_seconds | histogram | (one group commit to the log) |
| skillstate_commit_batch_items | histogram | |
| skillstate_commit_races_total | counter | (commits another replica beat) |
| skillstate_conflicts_total | counter | policy |
| skillstate_resolutions_total | counter | policy, outcome |
| skillstate_hydration_seconds | histogram | |
| skillstate_watchers, skillstate_observation_streams | gauge | |
| skillstate_commit_queue_depth, skillstate_executions_loaded | gauge | |
| skillstate_event_loop_lag_seconds | histogram | (how late the loop woke a timer: what one call held it) |
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LAG_INTERVAL = 0.1
"""Seconds between the event loop lag probe's wake-ups."""


class Metrics:
    """What the server reports; this base class records nothing (see PrometheusMetrics)."""

    def rpc(self, method: str, seconds: float, status: str) -> None:
        pass

    def committed(self, revisions: int, observations: int, seconds: float) -> None:
        pass

    def race_lost(self) -> None:
        pass

    def forwarded(self, method: str) -> None:
        """A call sent on to the replica that owns its execution."""

    def conflict(self, policies: list[str]) -> None:
        pass

    def resolved(self, policy: str, outcome: str) -> None:
        pass

    def hydrated(self, seconds: float) -> None:
        pass

    def loop_lag(self, seconds: float) -> None:
        pass

    def watch_gauges(self, **readers: Callable[[], float]) -> None:
        """Gauges read when scraped: watchers, observation_streams, commit_queue_depth, executions_loaded,
        executions_unloaded and executions_lost (since the start: dropped when another replica took them)."""


NO_METRICS = Metrics()


class PrometheusMetrics(Metrics):
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self._rpc = Histogram("skillstate_rpc_seconds", "RPC handling time", ["method"], registry=r,
                              buckets=LATENCY_BUCKETS)  # fmt: skip
        self._refused = Counter("skillstate_rpc_refused", "RPCs answered with an error status", ["method", "status"],
                                registry=r)  # fmt: skip
        self._commits = Counter("skillstate_commits", "Items made durable", ["kind"], registry=r)
        self._commit = Histogram("skillstate_commit_seconds", "One group commit to the log", registry=r,
                                 buckets=LATENCY_BUCKETS)  # fmt: skip
        self._batch = Histogram("skillstate_commit_batch_items", "Items in one group commit", registry=r,
                                buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))  # fmt: skip
        self._races = Counter("skillstate_commit_races", "Group commits another server's commit beat", registry=r)
        self._forwarded = Counter("skillstate_rpc_forwarded", "Calls sent on to the replica owning their execution",
                                  ["method"], registry=r)  # fmt: skip
        self._conflicts = Counter("skillstate_conflicts", "Patches refused ABORTED, by the policy at each conflict",
                                  ["policy"], registry=r)  # fmt: skip
        self._resolutions = Counter("skillstate_resolutions", "Concurrent writes merged, by policy and outcome",
                                    ["policy", "outcome"], registry=r)  # fmt: skip
        self._hydration = Histogram("skillstate_hydration_seconds", "Skill registry hydrations", registry=r,
                                    buckets=LATENCY_BUCKETS)  # fmt: skip
        self._lag = Histogram("skillstate_event_loop_lag_seconds", "How late the event loop woke a timer",
                              registry=r, buckets=LATENCY_BUCKETS)  # fmt: skip

    def rpc(self, method: str, seconds: float, status: str) -> None:
        self._rpc.labels(method).observe(seconds)
        if status != "OK":
            self._refused.labels(method, status).inc()

    def committed(self, revisions: int, observations: int, seconds: float) -> None:
        self._commits.labels("revision").inc(revisions)
        self._commits.labels("observation").inc(observations)
        self._commit.observe(seconds)
        self._batch.observe(revisions + observations)

    def race_lost(self) -> None:
        self._races.inc()

    def forwarded(self, method: str) -> None:
        self._forwarded.labels(method).inc()

    def conflict(self, policies: list[str]) -> None:
        for policy in policies:
            self._conflicts.labels(policy).inc()

    def resolved(self, policy: str, outcome: str) -> None:
        self._resolutions.labels(policy, outcome).inc()

    def hydrated(self, seconds: float) -> None:
        self._hydration.observe(seconds)

    def loop_lag(self, seconds: float) -> None:
        self._lag.observe(seconds)

    def watch_gauges(self, **readers: Callable[[], float]) -> None:
        from prometheus_client import Gauge

        for name, read in readers.items():
            Gauge(f"skillstate_{name}", name.replace("_", " "), registry=self.registry).set_function(read)

    def serve(self, listen: str) -> Any:
        """Serve /metrics on host:port (port 0 picks one) in a thread; returns the HTTP server."""
        from prometheus_client import start_http_server

        host, _, port = listen.rpartition(":")
        server, _thread = start_http_server(int(port), host.strip("[]") or "0.0.0.0", registry=self.registry)
        return server


class LoopLagProbe:
    """Wakes every LAG_INTERVAL seconds and reports how late it woke: a call that held the event loop for
    50 ms shows as a lag of about 50 ms (the loop serves every client, so this is what they all waited)."""

    def __init__(self, metrics: Metrics, interval: float = LAG_INTERVAL) -> None:
        self._metrics, self._interval = metrics, interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="skillstate-loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self._interval
            await asyncio.sleep(self._interval)
            self._metrics.loop_lag(max(0.0, loop.time() - due))
