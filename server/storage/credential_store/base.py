"""Where credentials are kept: the narrow interface every backend implements. A store keeps rows; minting
tokens, hashing secrets and checking them is server/auth's job."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..records import Credential, Right

COLUMNS = "token_id, secret_sha256, agent, executions, skills, rights, issued_at, expires_at, revoked_at"
"""The columns of the credentials table, in the order `read_credential` reads them (both SQL backends)."""
EVERY_CREDENTIAL = f"SELECT {COLUMNS} FROM credentials ORDER BY issued_at, token_id"
"""Every row, oldest first, in the SQL both SQL backends speak."""


def read_credential(row: Sequence[Any], items: Callable[[Any], Iterable[str]]) -> Credential:
    """The credential in a row of COLUMNS; `items` reads a stored list (each SQL backend stores lists its way)."""
    token_id, _, agent, executions, skills, rights, issued_at, expires_at, revoked_at = row
    return Credential(
        token_id, agent, tuple(items(executions)), tuple(items(skills)), frozenset(Right(r) for r in items(rights)),
        issued_at, expires_at, revoked_at,
    )  # fmt: skip


class CredentialStore(abc.ABC):
    """Issued credentials and their secrets' digests; every backend passes
    tests/server/storage/credential_store/test_backends.py."""

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def add(self, credential: Credential, secret_digest: str) -> None:
        """Store a newly issued credential."""

    @abc.abstractmethod
    async def mark_revoked(self, token_id: str, at: float) -> None:
        """Set revoked_at unless it is set; nothing for an unknown id."""

    @abc.abstractmethod
    async def all(self) -> list[Credential]:
        """Every credential, oldest first."""

    @abc.abstractmethod
    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        """The credential and its secret's digest."""

    @abc.abstractmethod
    async def any_issued(self) -> bool:
        """Whether any credential was ever issued (revoked ones count: the server stays closed)."""
