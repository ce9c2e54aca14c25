"""Bearer tokens: issued by the admin CLI, stored hashed in the server's credential store, revocable, each
bound to one agent identity and to what it may do.

A token reads `sst_<id>_<secret>`: the id names the credential (to list and revoke it) and the secret,
32 random bytes, is stored only as its SHA-256. A secret that random needs no slow hash: nothing can be
guessed from the digest.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InvalidArgumentError, NotFoundError
from ..storage.credential_store.base import CredentialStore
from ..storage.records import DEFAULT_RIGHTS, Credential, Right

PREFIX = "sst"


@dataclass(frozen=True, slots=True)
class Issued:
    credential: Credential
    token: str
    """The only time the secret is seen: it is not stored."""


async def issue(
    store: CredentialStore,
    agent: str,
    executions: Iterable[str],
    skills: Iterable[str] = (),
    rights: Iterable[Right] = DEFAULT_RIGHTS,
    expires_in: float | None = None,
) -> Issued:
    """Mint a credential for `agent` and store it; its token is returned once and never again."""
    credential, token, secret_digest = new_credential(agent, executions, skills, rights, expires_in)
    await store.add(credential, secret_digest)
    return Issued(credential, token)


async def revoke(store: CredentialStore, token_id: str) -> Credential:
    """Revoke a credential (again is a no-op); NotFoundError for an unknown id."""
    await store.mark_revoked(token_id, time.time())
    found = await store.lookup(token_id)
    if found is None:
        raise NotFoundError(f"token id {token_id!r}: no such credential")
    return found[0]


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
