"""Credentials in the server's SQLite file, so that the admin CLI and the server share them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..records import Credential, Right
from ..sqlite import Database
from .base import CredentialStore

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
    def __init__(self, path: str | Path) -> None:
        self._db = Database(path, _DDL, "credential store")

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def add(self, credential: Credential, secret_digest: str) -> None:
        c = credential
        await self._db.execute(
            f"INSERT INTO credentials ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            c.token_id, secret_digest, c.agent, _SEPARATOR.join(c.executions), _SEPARATOR.join(c.skills),
            _SEPARATOR.join(sorted(r.value for r in c.rights)), c.issued_at, c.expires_at,
        )  # fmt: skip

    async def mark_revoked(self, token_id: str, at: float) -> None:
        await self._db.execute(
            "UPDATE credentials SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL", at, token_id
        )

    async def all(self) -> list[Credential]:
        return [_credential(row) for row in await self._db.rows(f"SELECT {_COLUMNS} FROM credentials ORDER BY 7, 1")]

    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        rows = await self._db.rows(f"SELECT {_COLUMNS} FROM credentials WHERE token_id = ?", token_id)
        return (_credential(rows[0]), rows[0][1]) if rows else None

    async def any_issued(self) -> bool:
        return bool(await self._db.rows("SELECT 1 FROM credentials LIMIT 1"))


def _credential(row: Any) -> Credential:
    token_id, _, agent, executions, skills, rights, issued_at, expires_at, revoked_at = row
    return Credential(
        token_id, agent, _items(executions), _items(skills), frozenset(Right(r) for r in _items(rights)),
        issued_at, expires_at, revoked_at,
    )  # fmt: skip


def _items(text: str) -> tuple[str, ...]:
    return tuple(text.split(_SEPARATOR)) if text else ()
