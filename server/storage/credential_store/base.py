"""Where credentials are kept: the narrow interface every backend implements. A store keeps rows; minting
tokens, hashing secrets and checking them is server/auth's job."""

from __future__ import annotations

import abc

from ..records import Credential


class CredentialStore(abc.ABC):
    """Issued credentials and their secrets' digests; every backend passes
    tests/server/storage/test_credential_stores.py."""

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
