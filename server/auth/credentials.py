"""Bearer tokens: issued by the admin CLI, stored hashed beside the revision log, revocable, each bound to
one agent identity and to what it may do.

A token reads `sst_<id>_<secret>`: the id names the credential (to list and revoke it) and the secret,
32 random bytes, is stored only as its SHA-256. A secret that random needs no slow hash: nothing can be
guessed from the digest.
"""

from __future__ import annotations

import abc
import enum
import fnmatch
import hashlib
import hmac
import secrets
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiosqlite

from ..errors import InvalidArgumentError, NotFoundError, StorageError
from ..storage.revision_log.sqlite import connect

PREFIX = "sst"


class Right(enum.Enum):
    """What a credential may do. The first four apply to the executions it names."""

    READ = "read"
    """GetState, Watch, GetHistory, StreamObservations."""
    WRITE = "write"
    """SubmitPatch; ReportOutcome to the skill registry."""
    PUBLISH = "publish"
    """PublishObservation."""
    ADMIN = "admin"
    """CreateExecution, Compact."""
    REGISTRY = "registry"
    """RegisterSkill, RemoveSkill (the library is shared by every execution)."""


DEFAULT_RIGHTS = frozenset({Right.READ, Right.WRITE})


@dataclass(frozen=True, slots=True)
class Credential:
    """One issued token, without its secret."""

    token_id: str
    agent: str
    """The identity every call made with the token carries: its agent_id, whatever the request claims."""
    executions: tuple[str, ...]
    """Execution ids the token's rights apply to; shell-style patterns (`order-*`, `*`)."""
    skills: tuple[str, ...]
    """Skills the agent runs: it receives observations sent to `skill:NAME` and owns paths owned by it."""
    rights: frozenset[Right] = DEFAULT_RIGHTS
    issued_at: float = field(default_factory=time.time)
    expires_at: float | None = None
    revoked_at: float | None = None

    def covers(self, execution_id: str) -> bool:
        return any(fnmatch.fnmatchcase(execution_id, pattern) for pattern in self.executions)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


@dataclass(frozen=True, slots=True)
class Issued:
    credential: Credential
    token: str
    """The only time the secret is seen: it is not stored."""


def new_credential(
    agent: str,
    executions: Iterable[str],
    skills: Iterable[str] = (),
    rights: Iterable[Right] = DEFAULT_RIGHTS,
    expires_in: float | None = None,
) -> tuple[Credential, str, str]:
    """A fresh credential, its token, and the digest of the token's secret."""
    agent, executions, skills = agent.strip(), tuple(executions), tuple(skills)
    if not agent:
        raise InvalidArgumentError("agent: required")
    if not executions and not (set(rights) <= {Right.REGISTRY}):
        raise InvalidArgumentError("executions: name at least one execution id or pattern ('*' for all)")
    if expires_in is not None and expires_in <= 0:
        raise InvalidArgumentError(f"expires_in: must be positive, got {expires_in}")
    token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    now = time.time()
    credential = Credential(
        token_id, agent, executions, skills, frozenset(rights), now, now + expires_in if expires_in else None
    )
    return credential, f"{PREFIX}_{token_id}_{secret}", digest(secret)


def split_token(token: str) -> tuple[str, str] | None:
    """(token id, secret) of a well-formed token, else None."""
    prefix, _, rest = token.partition("_")
    token_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not token_id or not secret:
        return None
    return token_id, secret


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(secret), stored_digest)


class CredentialStore(abc.ABC):
    """Where credentials are kept. Issuing and revoking are the same everywhere; a backend stores rows."""

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def issue(
        self,
        agent: str,
        executions: Iterable[str],
        skills: Iterable[str] = (),
        rights: Iterable[Right] = DEFAULT_RIGHTS,
        expires_in: float | None = None,
    ) -> Issued:
        credential, token, secret_digest = new_credential(agent, executions, skills, rights, expires_in)
        await self._add(credential, secret_digest)
        return Issued(credential, token)

    async def revoke(self, token_id: str) -> Credential:
        """Revoke a credential (again is a no-op); NotFoundError for an unknown id."""
        await self._mark_revoked(token_id, time.time())
        found = await self.lookup(token_id)
        if found is None:
            raise NotFoundError(f"token id {token_id!r}: no such credential")
        return found[0]

    @abc.abstractmethod
    async def all(self) -> list[Credential]:
        """Every credential, oldest first."""

    @abc.abstractmethod
    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        """The credential and its secret's digest."""

    @abc.abstractmethod
    async def any_issued(self) -> bool:
        """Whether any credential was ever issued (revoked ones count: the server stays closed)."""

    @abc.abstractmethod
    async def _add(self, credential: Credential, secret_digest: str) -> None: ...

    @abc.abstractmethod
    async def _mark_revoked(self, token_id: str, at: float) -> None:
        """Set revoked_at unless it is set; nothing for an unknown id."""


class MemoryCredentialStore(CredentialStore):
    """Credentials of a server whose log is in memory (tests, `--db :memory:`)."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[Credential, str]] = {}

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def all(self) -> list[Credential]:
        return sorted((c for c, _ in self._rows.values()), key=lambda c: (c.issued_at, c.token_id))

    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        return self._rows.get(token_id)

    async def any_issued(self) -> bool:
        return bool(self._rows)

    async def _add(self, credential: Credential, secret_digest: str) -> None:
        self._rows[credential.token_id] = (credential, secret_digest)

    async def _mark_revoked(self, token_id: str, at: float) -> None:
        found = self._rows.get(token_id)
        if found is not None and found[0].revoked_at is None:
            self._rows[token_id] = (replace(found[0], revoked_at=at), found[1])


_DDL = """
CREATE TABLE IF NOT EXISTS credentials (
    token_id      TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    agent         TEXT NOT NULL,
    executions    TEXT NOT NULL,
    skills        TEXT NOT NULL,
    rights        TEXT NOT NULL,
    issued_at     REAL NOT NULL,
    expires_at    REAL,
    revoked_at    REAL
);
"""
_COLUMNS = "token_id, secret_sha256, agent, executions, skills, rights, issued_at, expires_at, revoked_at"
_SEPARATOR = "\n"
"""Lists are stored one item a line: patterns and skill names hold no newline."""


class SqliteCredentialStore(CredentialStore):
    """Credentials in the server's SQLite database, so the admin CLI and the server share them."""

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        self._db: aiosqlite.Connection | None = None

    async def open(self) -> None:
        if self._db is not None:
            return
        try:
            self._db = await connect(self._path, _DDL)
        except sqlite3.Error as e:
            await self.close()
            raise StorageError(f"cannot open {self._path}: {e}") from e

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def all(self) -> list[Credential]:
        rows = await self._rows(f"SELECT {_COLUMNS} FROM credentials ORDER BY issued_at, token_id")
        return [_credential(row) for row in rows]

    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        rows = await self._rows(f"SELECT {_COLUMNS} FROM credentials WHERE token_id = ?", token_id)
        return (_credential(rows[0]), rows[0][1]) if rows else None

    async def any_issued(self) -> bool:
        return bool(await self._rows("SELECT 1 FROM credentials LIMIT 1"))

    async def _add(self, credential: Credential, secret_digest: str) -> None:
        c = credential
        row = (
            c.token_id, secret_digest, c.agent, _SEPARATOR.join(c.executions), _SEPARATOR.join(c.skills),
            _SEPARATOR.join(sorted(r.value for r in c.rights)), c.issued_at, c.expires_at, None,
        )  # fmt: skip
        await self._execute(f"INSERT INTO credentials ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", *row)

    async def _mark_revoked(self, token_id: str, at: float) -> None:
        await self._execute(
            "UPDATE credentials SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL", at, token_id
        )

    @property
    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StorageError("the credential store is not open")
        return self._db

    async def _execute(self, sql: str, *params: object) -> None:
        try:
            await self._conn.execute(sql, params)
        except sqlite3.Error as e:
            raise StorageError(f"credentials: {e}") from e

    async def _rows(self, sql: str, *params: object) -> list[Any]:
        try:
            async with self._conn.execute(sql, params) as cursor:
                return list(await cursor.fetchall())
        except sqlite3.Error as e:
            raise StorageError(f"credentials: {e}") from e


def _credential(row: sqlite3.Row) -> Credential:
    token_id, _, agent, executions, skills, rights, issued_at, expires_at, revoked_at = row
    return Credential(
        token_id, agent, _items(executions), _items(skills), frozenset(Right(r) for r in _items(rights)),
        issued_at, expires_at, revoked_at,
    )  # fmt: skip


def _items(text: str) -> tuple[str, ...]:
    return tuple(text.split(_SEPARATOR)) if text else ()
