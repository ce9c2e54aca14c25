"""Credentials in memory: for tests and servers whose log is in memory (`--db :memory:`)."""

from __future__ import annotations

from dataclasses import replace

from ..records import Credential
from .base import CredentialStore


class MemoryCredentialStore(CredentialStore):
    def __init__(self) -> None:
        self._rows: dict[str, tuple[Credential, str]] = {}

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def add(self, credential: Credential, secret_digest: str) -> None:
        self._rows[credential.token_id] = (credential, secret_digest)

    async def mark_revoked(self, token_id: str, at: float) -> None:
        found = self._rows.get(token_id)
        if found is not None and found[0].revoked_at is None:
            self._rows[token_id] = (replace(found[0], revoked_at=at), found[1])

    async def all(self) -> list[Credential]:
        return sorted((c for c, _ in self._rows.values()), key=lambda c: (c.issued_at, c.token_id))

    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        return self._rows.get(token_id)

    async def any_issued(self) -> bool:
        return bool(self._rows)
