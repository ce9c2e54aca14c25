"""One contract for every credential store: memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillstate.server.auth.credentials import issue, matches, revoke, split_token
from skillstate.server.errors import InvalidArgumentError, NotFoundError
from skillstate.server.storage.credential_store.base import CredentialStore
from skillstate.server.storage.credential_store.memory import MemoryCredentialStore
from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
from skillstate.server.storage.records import Right

from ....postgres import postgres_schema  # noqa: F401 - a fixture


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CredentialStore]:
    opened: CredentialStore
    if request.param == "postgres":
        from skillstate.server.storage.credential_store.postgres import PostgresCredentialStore

        dsn, schema = request.getfixturevalue("postgres_schema")
        opened = PostgresCredentialStore(dsn, schema=schema)
    else:
        opened = MemoryCredentialStore() if request.param == "memory" else SqliteCredentialStore(tmp_path / "c.db")
    await opened.open()
    yield opened
    await opened.close()


async def test_issue_look_up_list_and_revoke(store: CredentialStore) -> None:
    assert not await store.any_issued()
    issued = await issue(store, "receiving", ["orders-*", "x"], ["warehouse-receiving"], {Right.READ, Right.WRITE})
    token_id, secret = split_token(issued.token) or ("", "")
    found = await store.lookup(token_id)
    assert found is not None and matches(secret, found[1]) and not matches(secret + "x", found[1])
    credential = found[0]
    assert (credential.agent, credential.executions, credential.skills) == ("receiving", ("orders-*", "x"),
                                                                           ("warehouse-receiving",))  # fmt: skip
    assert credential.rights == {Right.READ, Right.WRITE} and credential.covers("orders-7")
    assert not credential.covers("other") and credential.revoked_at is None and credential.expires_at is None
    assert await store.any_issued()
    other = await issue(store, "admin", ["*"], rights=set(Right), expires_in=60)
    assert [c.token_id for c in await store.all()] == [token_id, other.credential.token_id]
    revoked = await revoke(store, token_id)
    assert revoked.revoked_at is not None and (await revoke(store, token_id)).revoked_at == revoked.revoked_at
    assert (await store.lookup(token_id) or (None,))[0] == revoked
    assert other.credential.expires_at is not None and other.credential.expires_at > other.credential.issued_at


async def test_what_cannot_be_issued_or_revoked(store: CredentialStore) -> None:
    with pytest.raises(InvalidArgumentError, match="agent: required"):
        await issue(store, " ", ["*"])
    with pytest.raises(InvalidArgumentError, match="executions: name at least one"):
        await issue(store, "a", [])
    with pytest.raises(NotFoundError, match="no such credential"):
        await revoke(store, "nope")
    assert await store.lookup("nope") is None
