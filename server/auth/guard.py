"""Who is calling, and whether they may: every RPC is admitted here before its handler runs.

A call carries `authorization: Bearer <token>`; the token's credential names the caller's agent identity
and its rights over executions (docs/security.md has the table of RPCs and rights). The identity is bound:
a request claiming another `agent_id` is refused, and an empty one is filled in.

Without credentials the server runs open only where that is safe: `Mode.AUTO` (loopback) is open until the
first credential is issued, `Mode.REQUIRED` (any other address) never is, and `Mode.OPEN` is the explicit
`--insecure-no-auth`. Open, a caller is who its requests claim to be and may do everything.
"""

from __future__ import annotations

import contextvars
import enum
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import LimitExceededError, PermissionDeniedError, UnauthenticatedError
from ..storage.credential_store.base import CredentialStore
from ..storage.records import Credential, Right
from .credentials import matches, split_token
from .fairness import DEFAULT_SEATS, FairQueue

log = logging.getLogger("skillstate.access")

CACHE_SECONDS = 2.0
"""How long a looked-up credential is trusted before it is read again: a revocation or an expiry takes
effect within this time."""
DEFAULT_IN_FLIGHT = 1024
"""Unary calls one identity may have running or waiting for a seat at once; more are refused
RESOURCE_EXHAUSTED."""


class Mode(enum.Enum):
    AUTO = "auto"
    """Open until a credential is issued (a loopback address)."""
    REQUIRED = "required"
    """Every call needs a valid credential."""
    OPEN = "open"
    """No authentication at all (`--insecure-no-auth`)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """The caller of one RPC."""

    agent: str | None
    """The credential's agent; None on an open server, where the request's own claim stands."""
    skills: frozenset[str]
    credential: Credential | None = None

    @property
    def name(self) -> str:
        return self.agent if self.agent is not None else "(open)"

    def may(self, right: Right, execution_id: str | None) -> bool:
        """Whether the caller has `right` over the execution (None: over some execution, or none needed)."""
        if self.credential is None:
            return True
        if right not in self.credential.rights:
            return False
        return execution_id is None or self.credential.covers(execution_id)

    def check(self, right: Right, execution_id: str | None) -> None:
        """Raise PermissionDeniedError unless the caller `may`."""
        if not self.may(right, execution_id):
            where = f" on execution {execution_id!r}" if execution_id is not None else ""
            raise PermissionDeniedError(f"{self.name} may not {right.value}{where}")


OPEN_IDENTITY = Identity(agent=None, skills=frozenset())

CALLER: contextvars.ContextVar[Identity] = contextvars.ContextVar("skillstate_caller", default=OPEN_IDENTITY)
"""The identity of the RPC running in this task, for handlers that act on it (SubmitPatch's ownership)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """What one RPC needs: a right (None: any valid credential), over the execution its request names."""

    right: Right | None
    execution_field: str | None = None
    agent_field: str | None = None
    """A request field holding the caller's agent id: bound to the credential's agent."""
    skills_field: str | None = None
    """A request field listing skills the caller acts for: each must be one of the credential's."""
    names_new: bool = False
    """The request creates what execution_field names. Left empty, the engine chooses the id, and the handler
    checks the credential against it (`Identity.check`) before anything is created."""


RULES: dict[str, Rule] = {
    "CreateExecution": Rule(Right.ADMIN, "execution_id", names_new=True),
    "Compact": Rule(Right.ADMIN, "execution_id"),
    "DeleteExecution": Rule(Right.ADMIN, "execution_id"),
    "ListExecutions": Rule(Right.READ),  # it lists only the executions the credential may read
    "GetState": Rule(Right.READ, "execution_id"),
    "Watch": Rule(Right.READ, "execution_id"),
    "GetHistory": Rule(Right.READ, "execution_id"),
    "SubmitPatch": Rule(Right.WRITE, "execution_id", agent_field="agent_id"),
    "PublishObservation": Rule(Right.PUBLISH, "execution_id"),
    "StreamObservations": Rule(Right.READ, "execution_id", agent_field="agent_id", skills_field="skills"),
    "AckObservations": Rule(Right.READ, "execution_id", agent_field="agent_id"),
    "Session": Rule(None),  # each message is authorized as the call it stands for (Guard.authorize)
    "RegisterSkill": Rule(Right.REGISTRY),
    "RemoveSkill": Rule(Right.REGISTRY),
    "ReportOutcome": Rule(Right.WRITE),
    "ListSkills": Rule(None),
    "GetSkill": Rule(None),
    "Hydrate": Rule(None),
    "Expand": Rule(None),
    "GetLibraryStats": Rule(None),
}
"""Every RPC of the state service and the skill registry. Health and reflection are not guarded."""


class Guard:
    """Authenticates and authorizes calls; one per server."""

    def __init__(
        self,
        store: CredentialStore,
        mode: Mode,
        *,
        in_flight_limit: int = DEFAULT_IN_FLIGHT,
        seats: int = DEFAULT_SEATS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self.mode = store, mode
        self._in_flight_limit = in_flight_limit
        self._in_flight: dict[str, int] = {}
        """Calls running or waiting for a seat, by identity."""
        self._fair = FairQueue(seats)
        self._clock = clock
        self._credentials: dict[str, tuple[float, tuple[Credential, str] | None]] = {}
        self._closed, self._checked_at = False, -float("inf")
        self._refusals = RefusalLog(clock)

    async def is_open(self) -> bool:
        """Whether calls are admitted without credentials right now."""
        if self.mode is Mode.OPEN:
            return True
        if self.mode is Mode.REQUIRED:
            return False
        if not self._closed:  # once a credential exists the server stays closed, so look until then
            now = self._clock()
            if now - self._checked_at > CACHE_SECONDS:
                self._closed, self._checked_at = await self._store.any_issued(), now
        return not self._closed

    async def admit(self, method: str, request: Any, metadata: Any) -> Identity:
        """The caller's identity, once it may make this call; raises UnauthenticatedError or
        PermissionDeniedError (the caller logs them with `refused`). Binds the request's agent id to the
        credential's. `request` is None when it did not decode (its handler then refuses it)."""
        if await self.is_open():
            return OPEN_IDENTITY
        identity = await self._authenticate(metadata)
        _authorize(RULES[method], request, identity)
        return identity

    def authorize(self, method: str, request: Any, identity: Identity) -> None:
        """Check one message of a stream as if it were a call of `method` (a session's open as
        StreamObservations, its submits as SubmitPatch), binding its agent id like `admit` does."""
        if identity.credential is not None:
            _authorize(RULES[method], request, identity)

    def refused(self, method: str, peer: str, error: UnauthenticatedError | PermissionDeniedError) -> None:
        """Log a refusal, by admission or by the handler (an owned path), within RefusalLog's rate."""
        self._refusals.log(f"refused {method} from {peer}: {error}")

    @asynccontextmanager
    async def admitted(self, identity: Identity, peer: str) -> AsyncIterator[None]:
        """Run one call for its identity (on an open server, its connection): refused past the identity's
        limit of calls in flight, else waiting its turn for a seat (fairness.py)."""
        key = self._key(identity, peer)
        running = self._in_flight.get(key, 0)
        if running >= self._in_flight_limit:
            raise LimitExceededError(
                f"{identity.name}: {running} calls in flight, the limit per identity is {self._in_flight_limit}"
            )
        self._in_flight[key] = running + 1
        try:
            async with self._fair.seat(key):
                yield
        finally:
            left = self._in_flight[key] - 1
            if left:
                self._in_flight[key] = left
            else:
                del self._in_flight[key]

    async def revalidate(self, identity: Identity) -> None:
        """Raise UnauthenticatedError if the identity's credential was revoked or has expired since its
        stream was admitted (seen within CACHE_SECONDS, as for every call)."""
        if identity.credential is None:
            return
        token_id = identity.credential.token_id
        found = await self._lookup(token_id)
        if found is None or found[0].revoked_at is not None:
            raise UnauthenticatedError(f"token {token_id}: revoked")
        if found[0].expired(time.time()):
            raise UnauthenticatedError(f"token {token_id}: expired")

    def seat_free(self) -> bool:
        """Whether a call would get a seat at once: one is free and no call waits for one."""
        return self._fair.seat_free()

    async def turn(self, identity: Identity, peer: str) -> None:
        """Wait for the identity's turn to send one streamed message."""
        await self._fair.turn(self._key(identity, peer))

    @staticmethod
    def _key(identity: Identity, peer: str) -> str:
        return identity.credential.token_id if identity.credential is not None else peer

    async def _authenticate(self, metadata: Any) -> Identity:
        values = [value for key, value in metadata or () if key == "authorization"]
        if not values:
            raise UnauthenticatedError("no credential: send 'authorization: Bearer <token>' metadata")
        scheme, _, token = str(values[0]).partition(" ")
        parts = split_token(token.strip()) if scheme.lower() == "bearer" else None
        if parts is None:
            raise UnauthenticatedError("authorization: expected 'Bearer sst_<id>_<secret>'")
        token_id, secret = parts
        found = await self._lookup(token_id)
        if found is None or not matches(secret, found[1]):
            raise UnauthenticatedError(f"token {token_id}: not a valid credential")
        credential = found[0]
        if credential.revoked_at is not None:
            raise UnauthenticatedError(f"token {token_id}: revoked")
        if credential.expired(time.time()):
            raise UnauthenticatedError(f"token {token_id}: expired")
        return Identity(credential.agent, frozenset(credential.skills), credential)

    async def _lookup(self, token_id: str) -> tuple[Credential, str] | None:
        now = self._clock()
        cached = self._credentials.get(token_id)
        if cached is not None and now - cached[0] <= CACHE_SECONDS:
            return cached[1]
        found = await self._store.lookup(token_id)
        if len(self._credentials) > 10_000:  # unknown ids are cached too: bound what a scan can fill
            self._credentials.clear()
        self._credentials[token_id] = (now, found)
        return found


class RefusalLog:
    """Logs refused calls at WARNING, at most LINES_PER_SECOND of them a second: a client hammering the
    server with a bad token cannot flood the log. What was held back is counted in the next line."""

    LINES_PER_SECOND = 20

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._second, self._lines, self._held_back = -1, 0, 0

    def log(self, line: str) -> None:
        second = int(self._clock())
        if second != self._second:
            self._second, self._lines = second, 0
        if self._lines >= self.LINES_PER_SECOND:
            self._held_back += 1
            return
        self._lines += 1
        if self._held_back:
            line += f" ({self._held_back} more refusals were not logged)"
            self._held_back = 0
        log.warning("%s", line)


def _authorize(rule: Rule, request: Any, identity: Identity) -> None:
    """Check the rule; a request that did not decode (None) is checked for the right alone."""
    field = rule.execution_field
    execution_id = getattr(request, field) if field and request is not None else None
    if rule.names_new and not execution_id:
        execution_id = None  # the engine chooses the id; the handler checks the credential against it
    if rule.right is not None:
        identity.check(rule.right, execution_id)
    if request is None:
        return
    if rule.agent_field:
        claimed = getattr(request, rule.agent_field)
        if claimed and claimed != identity.agent:
            raise PermissionDeniedError(
                f"{rule.agent_field}: {claimed!r} is not this credential's agent {identity.agent!r}"
            )
        setattr(request, rule.agent_field, identity.agent)
    if rule.skills_field:
        foreign = sorted(set(getattr(request, rule.skills_field)) - identity.skills)
        if foreign:
            raise PermissionDeniedError(f"{rule.skills_field}: {identity.name} does not run {', '.join(foreign)}")
