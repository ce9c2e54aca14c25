"""Credentials in the server's SQLite file, so that the admin CLI and the server share them."""

from __future__ import annotations

from pathlib import Path

from ..records import Credential
from ..sqlite import Database
from .base import COLUMNS, EVERY_CREDENTIAL, CredentialStore, read_credential

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
            f"INSERT INTO credentials ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            c.token_id, secret_digest, c.agent, _SEPARATOR.join(c.executions), _SEPARATOR.join(c.skills),
            _SEPARATOR.join(sorted(r.value for r in c.rights)), c.issued_at, c.expires_at,
        )  # fmt: skip

    async def mark_revoked(self, token_id: str, at: float) -> None:
        await self._db.execute(
            "UPDATE credentials SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL", at, token_id
        )

    async def all(self) -> list[Credential]:
        return [read_credential(row, _items) for row in await self._db.rows(EVERY_CREDENTIAL)]

    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        rows = await self._db.rows(f"SELECT {COLUMNS} FROM credentials WHERE token_id = ?", token_id)
        return (read_credential(rows[0], _items), rows[0][1]) if rows else None

    async def any_issued(self) -> bool:
        return bool(await self._db.rows("SELECT 1 FROM credentials LIMIT 1"))


def _items(text: str) -> tuple[str, ...]:
    return tuple(text.split(_SEPARATOR)) if text else ()
