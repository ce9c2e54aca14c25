"""Identities and access end to end: tokens from the credential store, every RPC against every kind of
caller, agent ids bound to credentials, revocation and expiry, and the open mode's rules."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from skillstate.clients import (
    NotFoundError,
    PermissionDeniedError,
    SkillRegistryClient,
    SkillstateError,
    StateClient,
    UnauthenticatedError,
    ValidationError,
    open_channel,
)
from skillstate.server.auth import credentials
from skillstate.server.auth import guard as access
from skillstate.server.auth.guard import RULES, Mode
from skillstate.server.rpc.app import RunningServer, auth_mode, start_server
from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

from .test_skill_registry import package

EXECUTION, OTHER = "orders", "elsewhere"
DENIED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
BROKEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


@pytest.fixture
async def secured(db_path: Path) -> AsyncIterator[RunningServer]:
    """A server that requires credentials, with one execution and one skill made by an administrator."""
    store = SqliteCredentialStore(db_path)
    running = await start_server(
        SqliteRevisionLog(db_path), "127.0.0.1:0", skills=SqliteSkillStore(db_path), credentials=store,
        auth=Mode.REQUIRED,
    )  # fmt: skip
    admin = await credentials.issue(store, "root", ["*"], rights=set(Right))
    async with connect(running, admin.token) as (state, skills):
        await state.create_execution(EXECUTION, initial_state={"n": 0})
        await state.create_execution(OTHER, initial_state={"n": 0})
        await skills.register_skill(package("ship-order"))
    yield running
    await running.stop(grace=0)


class connect:
    """A state client and a registry client on one channel carrying `token`."""

    def __init__(self, server: RunningServer, token: str | None) -> None:
        self._channel = open_channel(f"127.0.0.1:{server.port}", token=token)

    async def __aenter__(self) -> tuple[StateClient, SkillRegistryClient]:
        return StateClient(channel=self._channel), SkillRegistryClient(channel=self._channel)

    async def __aexit__(self, *exc: object) -> None:
        await self._channel.close()


async def issue(server: RunningServer, agent: str, rights: set[Right], executions: tuple[str, ...] = (EXECUTION,),
                skills: tuple[str, ...] = ()) -> str:  # fmt: skip
    return (await credentials.issue(server.credentials, agent, executions, skills, rights)).token


async def first(stream: AsyncIterator[Any]) -> Any:
    async for item in stream:
        return item
    return None


async def open_session(state: StateClient, agent: str) -> None:
    """A session opened and closed: opening needs the right to read (each submit on it, the right to write)."""
    async with state.session(EXECUTION, agent_id=agent):
        pass


Call = Callable[[StateClient, SkillRegistryClient, str], Awaitable[Any]]
"""One RPC made as a caller whose agent id is the third argument."""

CALLS: dict[str, Call] = {
    "CreateExecution": lambda s, r, a: s.create_execution(f"{EXECUTION}-{a}"),
    "Compact": lambda s, r, a: s.compact(EXECUTION, 0),
    "GetState": lambda s, r, a: s.get_state(EXECUTION),
    "Watch": lambda s, r, a: first(s.watch(EXECUTION, resume=False)),
    "GetHistory": lambda s, r, a: s.get_history(EXECUTION),
    "SubmitPatch": lambda s, r, a: s.submit_patch(EXECUTION, {"n": 1}, agent_id=a, base_revision=0),
    "PublishObservation": lambda s, r, a: s.publish_observation(EXECUTION, "*", {"event": "x"}),
    "StreamObservations": lambda s, r, a: first(s.observations(EXECUTION, a, resume=False)),
    "AckObservations": lambda s, r, a: s.ack_observations(EXECUTION, "no-such-group", [1], agent_id=a),
    "Session": lambda s, r, a: open_session(s, a),
    "ListExecutions": lambda s, r, a: s.list_executions(),
    "DeleteExecution": lambda s, r, a: s.delete_execution(f"{EXECUTION}-never-made-{a}"),  # NOT_FOUND if allowed
    "RegisterSkill": lambda s, r, a: r.register_skill(package(f"skill-{a}")),
    "RemoveSkill": lambda s, r, a: r.remove_skill("no-such-skill"),
    "ReportOutcome": lambda s, r, a: r.report_outcome("no-such-hydration", success=True),
    "ListSkills": lambda s, r, a: first(r.list_skills()),
    "GetSkill": lambda s, r, a: r.get_skill("ship-order"),
    "Hydrate": lambda s, r, a: r.hydrate("ship an order"),
    "Expand": lambda s, r, a: r.expand("no-such-hydration", "m1"),
    "GetLibraryStats": lambda s, r, a: r.library_stats(),
}

EVERY_RIGHT = set(Right)
IDENTITIES: dict[str, set[Right] | None] = {
    "anonymous": None,
    "no-rights": set(),
    "reader": {Right.READ},
    "writer": {Right.WRITE},
    "publisher": {Right.PUBLISH},
    "admin": {Right.ADMIN},
    "registrar": {Right.REGISTRY},
    "everything-elsewhere": EVERY_RIGHT,
}
"""Each identity's rights over the executions `orders*` (the last one's over OTHER only); None sends no token."""


def allowed(identity: str, rpc: str) -> bool:
    """The expected answer, written out from docs/security.md rather than derived from RULES."""
    if identity == "anonymous":
        return False
    needs = {
        "CreateExecution": Right.ADMIN, "Compact": Right.ADMIN, "DeleteExecution": Right.ADMIN,
        "GetState": Right.READ, "Watch": Right.READ, "ListExecutions": Right.READ,
        "GetHistory": Right.READ, "StreamObservations": Right.READ, "AckObservations": Right.READ,
        "Session": Right.READ,
        "SubmitPatch": Right.WRITE,
        "PublishObservation": Right.PUBLISH, "RegisterSkill": Right.REGISTRY, "RemoveSkill": Right.REGISTRY,
        "ReportOutcome": Right.WRITE,
    }.get(rpc)  # fmt: skip
    if needs is None:
        return True  # reading the skill library needs only a valid credential
    rights = IDENTITIES[identity] or set()
    scoped_to_execution = rpc not in ("RegisterSkill", "RemoveSkill", "ReportOutcome", "ListExecutions")
    if identity == "everything-elsewhere":
        return not scoped_to_execution
    return needs in rights


def test_the_matrix_covers_every_rpc_of_both_services() -> None:
    assert set(CALLS) == set(RULES)


async def test_access_matrix(secured: RunningServer) -> None:
    """Every RPC x every kind of identity: allowed calls get past the guard (the handler may then refuse
    the request, but never fails with INTERNAL or UNKNOWN), refused ones get UNAUTHENTICATED or
    PERMISSION_DENIED. A revision and an observation for everyone exist, so an admitted stream answers."""
    setup = await issue(secured, "setup", EVERY_RIGHT)
    async with connect(secured, setup) as (state, _):
        await state.submit_patch(EXECUTION, {"n": 1}, agent_id="setup", base_revision=0)
        await state.publish_observation(EXECUTION, "*", {"event": "setup"})
    tokens = {
        name: None if rights is None else await issue(
            secured, name, rights, (OTHER,) if name == "everything-elsewhere" else (f"{EXECUTION}*",)
        )
        for name, rights in IDENTITIES.items()
    }  # fmt: skip
    cells, wrong = 0, []
    for identity, token in tokens.items():
        async with connect(secured, token) as (state, skills):
            for rpc, call in CALLS.items():
                cells += 1
                try:
                    await asyncio.wait_for(call(state, skills, identity), 30)
                    outcome = "allowed"
                except TimeoutError:
                    outcome = "no answer"
                except SkillstateError as e:
                    outcome = "refused" if e.status in DENIED else f"failed: {e}" if e.status in BROKEN else "allowed"
                expected = "allowed" if allowed(identity, rpc) else "refused"
                if outcome != expected:
                    wrong.append(f"{identity} {rpc}: {outcome}, expected {expected}")
    assert cells == len(RULES) * len(IDENTITIES) == 160
    assert wrong == []


async def test_a_refusal_changes_nothing(secured: RunningServer) -> None:
    reader = await issue(secured, "reader", {Right.READ})
    async with connect(secured, reader) as (state, _):
        with pytest.raises(PermissionDeniedError, match="reader may not write on execution 'orders'"):
            await state.submit_patch(EXECUTION, {"n": 5}, agent_id="reader", base_revision=0)
        assert (await state.get_state(EXECUTION)).revision == 0


async def test_an_execution_created_without_an_id_is_checked_against_the_id_the_server_chooses(
    secured: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine chooses the id; a credential whose patterns do not cover it may not create it."""
    narrow = await issue(secured, "narrow", {Right.ADMIN, Right.READ}, ("orders-*",))
    anywhere = await issue(secured, "anywhere", {Right.ADMIN, Right.READ}, ("*",))
    async with connect(secured, narrow) as (state, _):
        with pytest.raises(PermissionDeniedError, match=r"narrow may not admin on execution 'ex-[0-9a-f]{32}'") as e:
            await state.create_execution()
        assert (await state.create_execution("orders-1")).execution_id == "orders-1"
    assert "refused CreateExecution" in caplog.text
    refused_id = re.search(r"'(ex-[0-9a-f]{32})'", str(e.value)).group(1)  # type: ignore[union-attr]
    async with connect(secured, anywhere) as (state, _):
        with pytest.raises(NotFoundError):
            await state.get_state(refused_id)
        created = await state.create_execution()
        assert re.fullmatch(r"ex-[0-9a-f]{32}", created.execution_id)
        assert (await state.get_state(created.execution_id)).revision == 0


async def test_a_credential_binds_the_agent_id(secured: RunningServer) -> None:
    token = await issue(secured, "receiving", {Right.READ, Right.WRITE})
    async with connect(secured, token) as (state, _):
        with pytest.raises(PermissionDeniedError, match="agent_id: 'shipping' is not this credential's agent"):
            await state.submit_patch(EXECUTION, {"n": 1}, agent_id="shipping", base_revision=0)
        result = await state.submit_patch(EXECUTION, {"n": 1}, agent_id="", base_revision=0)
        (event,) = (await state.get_history(EXECUTION)).revisions
        assert event.agent_id == "receiving" and event.revision == result.revision
        with pytest.raises(PermissionDeniedError, match="agent_id"):
            await first(state.observations(EXECUTION, "shipping", resume=False))
        with pytest.raises(PermissionDeniedError, match="skills: receiving does not run warehouse-shipping"):
            await first(state.observations(EXECUTION, "receiving", skills=["warehouse-shipping"], resume=False))


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ((), "no credential"),
        ((("authorization", "Basic dXNlcjpwYXNz"),), "expected 'Bearer sst_<id>_<secret>'"),
        ((("authorization", "Bearer not-a-token"),), "expected 'Bearer sst_<id>_<secret>'"),
        ((("authorization", "Bearer sst_000000000000_guess"),), "token 000000000000: not a valid credential"),
    ],
)
async def test_calls_without_a_valid_credential_are_unauthenticated(
    secured: RunningServer, metadata: tuple[tuple[str, str], ...], message: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{secured.port}") as channel:
        from skillstate.state.v1 import state_pb2, state_pb2_grpc

        stub = state_pb2_grpc.StateServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetState(state_pb2.GetStateRequest(execution_id=EXECUTION), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert message in (caught.value.details() or "")


async def test_a_wrong_secret_for_a_real_token_id_is_refused(secured: RunningServer) -> None:
    token = await issue(secured, "reader", {Right.READ})
    forged = token[: token.rindex("_") + 1] + "x" * 43
    async with connect(secured, forged) as (state, _):
        with pytest.raises(UnauthenticatedError, match="not a valid credential"):
            await state.get_state(EXECUTION)


async def test_revoked_and_expired_tokens_stop_working(secured: RunningServer, monkeypatch: Any) -> None:
    monkeypatch.setattr(access, "CACHE_SECONDS", 0.0)  # no wait for the server's credential cache
    revoked = await credentials.issue(secured.credentials, "a", [EXECUTION], rights={Right.READ})
    expiring = await credentials.issue(secured.credentials, "b", [EXECUTION], rights={Right.READ}, expires_in=0.5)
    async with connect(secured, revoked.token) as (state, _):
        await state.get_state(EXECUTION)
        await credentials.revoke(secured.credentials, revoked.credential.token_id)
        with pytest.raises(UnauthenticatedError, match="revoked"):
            await state.get_state(EXECUTION)
    async with connect(secured, expiring.token) as (state, _):
        await state.get_state(EXECUTION)
        await asyncio.sleep(0.6)  # not a wait for the server: the token's 0.5 s of life passing is what is tested
        with pytest.raises(UnauthenticatedError, match="expired"):
            await state.get_state(EXECUTION)


async def test_refusals_are_logged(secured: RunningServer, caplog: Any) -> None:
    async with connect(secured, None) as (state, _):
        with pytest.raises(UnauthenticatedError):
            await state.get_state(EXECUTION)
    assert any("refused GetState" in r.getMessage() and "no credential" in r.getMessage() for r in caplog.records)


async def test_loopback_is_open_until_the_first_credential(db_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(access, "CACHE_SECONDS", 0.0)
    store = SqliteCredentialStore(db_path)
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store)
    try:
        assert running.guard.mode is Mode.AUTO
        async with connect(running, None) as (state, _):
            await state.create_execution("x")
            await state.submit_patch("x", {"n": 1}, agent_id="anyone", base_revision=0)
            await credentials.issue(store, "root", ["*"], rights=set(Right))
            with pytest.raises(UnauthenticatedError):
                await state.get_state("x")
    finally:
        await running.stop(grace=0)


def test_beyond_loopback_credentials_are_required_unless_switched_off() -> None:
    assert auth_mode("127.0.0.1:50051") is Mode.AUTO
    assert auth_mode("localhost:1") is Mode.AUTO and auth_mode("[::1]:1") is Mode.AUTO
    assert auth_mode("0.0.0.0:50051") is Mode.REQUIRED and auth_mode("[::]:50051") is Mode.REQUIRED
    assert auth_mode("10.0.0.5:50051") is Mode.REQUIRED and auth_mode("example.com:443") is Mode.REQUIRED
    assert auth_mode("0.0.0.0:50051", insecure_no_auth=True) is Mode.OPEN


async def test_a_server_on_every_interface_refuses_anonymous_calls(db_path: Path) -> None:
    running = await start_server(SqliteRevisionLog(db_path), "0.0.0.0:0", credentials=SqliteCredentialStore(db_path))
    try:
        async with connect(running, None) as (state, _):
            with pytest.raises(UnauthenticatedError):
                await state.create_execution("x")
    finally:
        await running.stop(grace=0)


async def test_an_undecodable_request_is_still_authenticated_first(secured: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{secured.port}") as channel:
        call = channel.unary_unary("/skillstate.state.v1.StateService/GetState")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(b"\x0a\x02\xff\xfe")  # execution_id that is not UTF-8
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        token = await issue(secured, "reader", {Right.READ})
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(b"\x0a\x02\xff\xfe", metadata=(("authorization", f"Bearer {token}"),))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_open_server_takes_the_agent_id_from_the_request(server: RunningServer, client: StateClient) -> None:
    await client.create_execution("x")
    with pytest.raises(ValidationError, match="agent_id"):
        await client.submit_patch("x", {"n": 1}, agent_id="", base_revision=0)


OWNED_SCHEMA = {
    "type": "object",
    "properties": {
        "features": {
            "x-owner": "developer",
            "additionalProperties": {"type": "object", "properties": {"ci": {"x-owner": "skill:repo-ci"}}},
        }
    },
}


async def test_owned_paths_keep_each_agent_to_its_part(secured: RunningServer) -> None:
    admin = await issue(secured, "root", {Right.ADMIN}, ("repo",))
    developer = await issue(secured, "developer", {Right.READ, Right.WRITE}, ("repo",))
    ci = await issue(secured, "ci-bot", {Right.READ, Right.WRITE}, ("repo",), skills=("repo-ci",))
    async with connect(secured, admin) as (state, _):
        await state.create_execution("repo", schema=OWNED_SCHEMA, initial_state={"features": {}})
    async with connect(secured, developer) as (state, _):
        first_write = await state.submit_patch("repo", {"features": {"f1": {"branch": "f1"}}}, agent_id="",
                                               base_revision=0)  # fmt: skip
        with pytest.raises(PermissionDeniedError, match="/features/f1/ci: owned by skill:repo-ci; 'developer'"):
            await state.submit_patch("repo", {"features": {"f1": {"ci": "passed"}}}, agent_id="", base_revision=1)
    async with connect(secured, ci) as (state, _):
        with pytest.raises(PermissionDeniedError, match="/features/f2/branch: owned by developer"):
            await state.submit_patch("repo", {"features": {"f2": {"branch": "x"}}}, agent_id="", base_revision=1)
        await state.submit_patch("repo", {"features": {"f1": {"ci": "passed"}}}, agent_id="", base_revision=1)
        final = await state.get_state("repo")
    assert first_write.revision == 1 and final.revision == 2
    assert final.state == {"features": {"f1": {"branch": "f1", "ci": "passed"}}}


async def test_an_open_server_checks_owners_against_the_claimed_agent(client: StateClient) -> None:
    await client.create_execution("repo", schema=OWNED_SCHEMA, initial_state={"features": {}})
    await client.submit_patch("repo", {"features": {"f1": {"branch": "f1"}}}, agent_id="developer", base_revision=0)
    with pytest.raises(PermissionDeniedError, match="owned by developer"):
        await client.submit_patch("repo", {"features": {"f2": {}}}, agent_id="maintainer", base_revision=1)
    with pytest.raises(PermissionDeniedError, match="owned by skill:repo-ci"):  # a skill is proved by a credential
        await client.submit_patch("repo", {"features": {"f1": {"ci": "x"}}}, agent_id="developer", base_revision=1)
    assert (await client.get_state("repo")).revision == 1


async def test_a_flooding_identity_is_held_to_its_limit_and_others_are_served(db_path: Path) -> None:
    store = SqliteCredentialStore(db_path)
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store, in_flight_limit=4)
    try:
        flooder = (await credentials.issue(store, "flooder", ["*"], rights={Right.WRITE, Right.ADMIN})).token
        polite = (await credentials.issue(store, "polite", ["*"], rights={Right.READ, Right.WRITE})).token
        async with connect(running, flooder) as (noisy, _), connect(running, polite) as (calm, _):
            await noisy.create_execution("x")
            flood = [  # each waits for its commit to be durable, so they pile up
                asyncio.ensure_future(noisy.submit_patch("x", {f"k{i}": i}, agent_id="", base_revision=0))
                for i in range(300)
            ]
            served = [await calm.submit_patch("x", {f"calm{i}": i}, agent_id="", base_revision=0) for i in range(3)]
            outcomes = await asyncio.gather(*flood, return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, SkillstateError)]
        assert len(served) == 3
        assert refused and all(o.status == grpc.StatusCode.RESOURCE_EXHAUSTED for o in refused)
        assert "flooder: 4 calls in flight, the limit per identity is 4" in refused[0].message
        assert len(refused) < len(outcomes)
    finally:
        await running.stop(grace=0)
