"""Session streams: pipelined submits answered in order once durable, observations and revisions on the same
stream, refusals that leave it open, backpressure, resubmission after a cut, and bad openings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from skillstate.clients import (
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    RevisionEvent,
    StateClient,
    SyncStateClient,
    UnauthenticatedError,
    UnavailableError,
    ValidationError,
)
from skillstate.server.auth import credentials
from skillstate.server.engine.config import EngineConfig
from skillstate.server.rpc import session as session_module
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from ..conftest import RestartableServer
from ..waiting import eventually


def submit(sequence: int, patch: dict[str, object], base: int = 0, **fields: str) -> pb.SessionRequest:
    request = pb.SubmitPatchRequest(base_revision=base, patch_json=json.dumps(patch), **fields)
    return pb.SessionRequest(submit=pb.SessionSubmit(sequence=sequence, patch=request))


def opening(execution_id: str, agent_id: str = "a", **fields: object) -> pb.SessionRequest:
    return pb.SessionRequest(open=pb.SessionOpen(execution_id=execution_id, agent_id=agent_id, **fields))  # type: ignore[arg-type]


async def read_kind(call: grpc.aio.StreamStreamCall, kind: str) -> pb.SessionResponse:
    """The next message of `kind`, skipping others."""
    while True:
        message = await call.read()
        assert message is not grpc.aio.EOF, f"the stream ended before a {kind}"
        if message.WhichOneof("kind") == kind:
            return message


@pytest.fixture
async def stub(server_address: str) -> AsyncIterator[pb_grpc.StateServiceStub]:
    async with grpc.aio.insecure_channel(server_address) as channel:
        yield pb_grpc.StateServiceStub(channel)


async def test_pipelined_results_come_in_submission_order_each_durable(
    stub: pb_grpc.StateServiceStub, client: StateClient
) -> None:
    execution_id = (await client.create_execution()).execution_id
    call = stub.Session()
    await call.write(opening(execution_id))
    sequences = [3 * n + 1 for n in range(40)]  # the client's own numbers: increasing, not consecutive
    for n, sequence in enumerate(sequences):
        await call.write(submit(sequence, {f"k{n}": n}, client_patch_id=f"p{n}"))
    await call.done_writing()
    results, first = [], await call.read()
    assert first.WhichOneof("kind") == "progress" and first.progress.head_revision == 0
    while (message := await call.read()) is not grpc.aio.EOF:
        assert message.WhichOneof("kind") == "result"
        results.append(message.result)
    assert await call.code() == grpc.StatusCode.OK  # a half-closed session ends once everything is answered
    assert [r.sequence for r in results] == sequences
    history = [e async for e in client.history(execution_id)]
    assert len(history) == 40
    by_patch = {e.client_patch_id: e for e in history}
    for n, result in enumerate(results):
        committed = by_patch[f"p{n}"]  # the log holds what each result acknowledged
        assert (committed.revision, committed.state_hash) == (result.response.revision, result.response.state_hash)
        assert committed.applied_patch == {f"k{n}": n}
    assert (await client.get_state(execution_id)).state == {f"k{n}": n for n in range(40)}


async def test_a_result_comes_after_the_revision_it_committed_on_a_session_receiving_revisions(
    stub: pb_grpc.StateServiceStub, client: StateClient
) -> None:
    execution_id = (await client.create_execution()).execution_id
    await client.submit_patch(execution_id, {"before": 1}, agent_id="b", base_revision=0)  # not this session's
    call = stub.Session()
    await call.write(opening(execution_id, from_revision=1))
    for n in range(1, 31):  # pipelined: committed together, in groups
        await call.write(submit(n, {f"k{n}": n}, base=1))
    await call.write(submit(31, {"k1": "twice"}, base=1))  # refused ABORTED: answered without a revision
    await call.done_writing()
    seen: set[int] = set()
    answered = []
    while (message := await call.read()) is not grpc.aio.EOF:
        kind = message.WhichOneof("kind")
        if kind == "revision":
            seen.add(message.revision.revision)
        elif kind == "result":
            if message.result.HasField("response"):
                assert message.result.response.revision in seen, "a result overtook the revision it committed"
            answered.append(message.result.sequence)
    assert answered == list(range(1, 32)) and seen == set(range(2, 32))


@pytest.mark.parametrize("engine_config", [EngineConfig(subscriber_queue=1)])
async def test_results_waiting_for_their_revision_go_out_when_the_revisions_end(
    server_address: str, client: StateClient, engine_config: EngineConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that does not read falls behind the revisions (one queued ahead, one in the subscription):
    its revision pump ends RESOURCE_EXHAUSTED. The result of its own submit, durable and waiting for a
    revision the pump will never queue, still reaches it, before the stream ends."""
    monkeypatch.setattr(session_module, "STREAMED_AHEAD", 1)
    execution_id = (await client.create_execution()).execution_id
    fixed_window = [("grpc.http2.bdp_probe", 0)]  # the receive window stays 64 KB: big revisions fill it
    async with grpc.aio.insecure_channel(server_address, options=fixed_window) as channel:
        call = pb_grpc.StateServiceStub(channel).Session()
        await call.write(opening(execution_id, from_revision=0))
        await client.submit_patch(execution_id, {"first": 1}, agent_id="b", base_revision=0)
        assert (await read_kind(call, "revision")).revision.revision == 1  # the pump is following
        for n in range(2, 6):  # sent while the client reads nothing: the pump falls behind and is dropped
            await client.submit_patch(execution_id, {f"big{n}": "x" * 200_000}, agent_id="b", base_revision=0)
        await call.write(submit(1, {"mine": 1}, base=1))  # commits revision 6, past what the pump will queue
        await eventually(lambda: _revision_is(client, execution_id, 6), timeout=10)
        kinds = []
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            while (message := await call.read()) is not grpc.aio.EOF:
                kinds.append(message.WhichOneof("kind"))
                if kinds[-1] == "result":
                    assert message.result.response.revision == 6
    assert ended.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "result" in kinds, f"the durable result never came: {kinds}"


async def _revision_is(client: StateClient, execution_id: str, revision: int) -> bool | None:
    return (await client.get_state(execution_id)).revision == revision or None


async def test_a_refused_submit_is_answered_and_the_stream_goes_on(
    stub: pb_grpc.StateServiceStub, client: StateClient
) -> None:
    execution_id = (await client.create_execution(initial_state={"owner": "nobody"})).execution_id
    await client.submit_patch(execution_id, {"owner": "b"}, agent_id="b", base_revision=0)
    call = stub.Session()
    await call.write(opening(execution_id))
    await call.write(submit(1, {"owner": "a"}, base=0))  # overlaps b's write: reject
    await call.write(submit(2, {"x": 1}, base=0, agent_id="someone-else"))
    await call.write(submit(3, {"x": 1}, base=0, execution_id="another"))
    await call.write(submit(3, {"x": 1}, base=0))  # not after the previous sequence
    await call.write(submit(4, {"x": 1}, base=1))
    results = [(await read_kind(call, "result")).result for _ in range(5)]
    assert [r.sequence for r in results] == [1, 2, 3, 3, 4]
    codes = [grpc.StatusCode.ABORTED, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INVALID_ARGUMENT]
    codes.append(grpc.StatusCode.INVALID_ARGUMENT)
    assert [r.error.code for r in results[:4]] == [c.value[0] for c in codes]
    assert "conflict at /owner" in results[0].error.message
    assert "submit.patch.agent_id: 'someone-else' is not the session's 'a'" in results[1].error.message
    assert "submit.patch.execution_id" in results[2].error.message
    assert "submit.sequence: 3 is not greater than the previous submit's 3" in results[3].error.message
    assert results[4].HasField("response") and results[4].response.revision == 2
    call.cancel()
    assert (await client.get_state(execution_id)).state == {"owner": "b", "x": 1}


@pytest.mark.parametrize(
    ("first", "code", "message"),
    [
        (
            lambda e: submit(1, {"x": 1}),
            grpc.StatusCode.INVALID_ARGUMENT,
            "the first message of a session must be open",
        ),
        (lambda e: opening("no-such-execution"), grpc.StatusCode.NOT_FOUND, "no-such-execution"),
        (lambda e: opening(e, agent_id=""), grpc.StatusCode.INVALID_ARGUMENT, "open.agent_id: must not be empty"),
        (lambda e: opening(e, from_revision=-1), grpc.StatusCode.INVALID_ARGUMENT, "open.from_revision"),
        (lambda e: pb.SessionRequest(), grpc.StatusCode.INVALID_ARGUMENT, "must be open, got nothing"),
    ],
)
async def test_a_bad_opening_ends_the_stream_with_its_error_and_changes_nothing(
    stub: pb_grpc.StateServiceStub, client: StateClient, first: object, code: grpc.StatusCode, message: str
) -> None:
    execution_id = (await client.create_execution()).execution_id
    call = stub.Session()
    await call.write(first(execution_id))  # type: ignore[operator]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call.read()
    assert refused.value.code() == code and message in (refused.value.details() or "")
    assert (await client.get_state(execution_id)).revision == 0


async def test_a_second_open_ends_the_stream_after_what_came_before_it(
    stub: pb_grpc.StateServiceStub, client: StateClient
) -> None:
    execution_id = (await client.create_execution()).execution_id
    call = stub.Session()
    await call.write(opening(execution_id))
    await call.write(opening(execution_id))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        while True:
            await call.read()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "this session is already open" in (refused.value.details() or "")
    assert (await client.get_state(execution_id)).revision == 0


async def test_observations_and_revisions_arrive_on_the_session_once_in_order_and_resume(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    for n in range(6):
        await client.publish_observation(execution_id, "a" if n % 2 else "skill:pick", {"n": n})
    await client.publish_observation(execution_id, "someone-else", {"n": "not a's"})
    seen: list[int] = []
    async with client.session(execution_id, agent_id="a", skills=["pick"], from_revision=0) as session:
        first = await session.submit({"x": 1}, base_revision=0)
        async for observation in session.observations():
            seen.append(observation.sequence)
            if len(seen) == 4:
                break
        async for event in session.revisions():
            assert isinstance(event, RevisionEvent) and event.revision == first.revision
            break
    async with client.session(execution_id, agent_id="a", skills=["pick"], after_sequence=seen[-1]) as session:
        await client.publish_observation(execution_id, "*", {"n": "live"})
        async for observation in session.observations():
            seen.append(observation.sequence)
            if len(seen) == 7:
                break
    assert seen == [1, 2, 3, 4, 5, 6, 8]


async def test_a_consumer_group_over_sessions_hands_each_observation_to_one_member(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    got: dict[str, list[int]] = {"m1": [], "m2": []}
    done = asyncio.Event()

    async def member(name: str) -> None:
        async with client.session(execution_id, agent_id=name, skills=["pick"], group="pickers") as session:
            async for observation in session.observations():
                got[name].append(observation.sequence)
                await session.ack([observation.sequence])
                if sum(map(len, got.values())) == 20:
                    done.set()
                if done.is_set():
                    return

    async def group_exists() -> bool:
        try:
            return await client.ack_observations(execution_id, "pickers", [], agent_id="m1") == 0
        except NotFoundError:
            return False

    members = [asyncio.create_task(member(name)) for name in got]
    await eventually(group_exists)
    for n in range(20):
        await client.publish_observation(execution_id, "skill:pick", {"n": n})
    await asyncio.wait_for(done.wait(), 30)
    for task in members:
        task.cancel()
    await asyncio.gather(*members, return_exceptions=True)
    assert sorted(got["m1"] + got["m2"]) == list(range(1, 21))  # each once, to one member


@pytest.mark.parametrize("engine_config", [EngineConfig(max_stream_in_flight=2)])
async def test_a_session_whose_client_does_not_read_stops_being_read(
    server_address: str, client: StateClient, engine_config: EngineConfig
) -> None:
    """Results big enough to fill gRPC's send window: the server then stops answering, so it stops reading
    submits (2 in flight at most), and the head stops well short of what was sent until the client reads."""
    execution_id = (await client.create_execution()).execution_id
    fixed_window = [("grpc.http2.bdp_probe", 0)]  # the receive window stays 64 KB instead of growing to MBs
    channel = grpc.aio.insecure_channel(server_address, options=fixed_window)
    call = pb_grpc.StateServiceStub(channel).Session()
    await call.write(opening(execution_id))
    total, big = 50, "x" * 64_000  # each result echoes its 64 KB change; all of them fit in one state

    async def write_all() -> None:
        for n in range(total):
            await call.write(submit(n + 1, {f"k{n}": big}))

    writing = asyncio.create_task(write_all())
    stalled_at = await eventually(lambda: _head_when_stalled(client, execution_id), timeout=30)
    print(f"the head stalled at {stalled_at} of {total}")
    assert stalled_at < total / 2
    results = [(await read_kind(call, "result")).result for _ in range(total)]
    await writing
    assert [r.sequence for r in results] == list(range(1, total + 1))
    assert all(r.HasField("response") for r in results)
    assert (await client.get_state(execution_id)).revision == total
    await channel.close()


async def _head_when_stalled(client: StateClient, execution_id: str) -> int | None:
    """The head revision once it stopped moving for half a second (None while it moves or is 0)."""
    before = (await client.get_state(execution_id)).revision
    await asyncio.sleep(0.5)  # a stall is the absence of an event: it can only be seen by waiting
    after = (await client.get_state(execution_id)).revision
    return after if after == before and after > 0 else None


async def test_unanswered_submits_are_resent_after_a_restart_and_applied_once(db_path: Path) -> None:
    server = RestartableServer(db_path)
    await server.start()
    try:
        async with StateClient(server.address) as client:
            execution_id = (await client.create_execution()).execution_id
            async with client.session(execution_id, agent_id="a") as session:
                submits = [asyncio.create_task(session.submit({f"k{n}": n}, base_revision=0)) for n in range(300)]
                await eventually(lambda: any(s.done() for s in submits))
                await server.stop()  # cuts the stream with submits unanswered (some committed, some not)
                await server.start()
                results = await asyncio.gather(*submits)
            history = [e async for e in client.history(execution_id)]
    finally:
        await server.stop()
    assert len(history) == 300  # every submit applied exactly once
    by_revision = {e.revision: e for e in history}
    for n, result in enumerate(results):
        assert by_revision[result.revision].applied_patch == {f"k{n}": n}
    assert any(r.duplicate for r in results) or len({r.revision for r in results}) == 300


async def test_a_resubmission_on_a_new_stream_returns_the_first_result(
    stub: pb_grpc.StateServiceStub, client: StateClient
) -> None:
    execution_id = (await client.create_execution()).execution_id
    call = stub.Session()
    await call.write(opening(execution_id))
    await call.write(submit(1, {"x": 1}, client_patch_id="once"))
    first = (await read_kind(call, "result")).result.response
    call.cancel()
    again = stub.Session()
    await again.write(opening(execution_id))
    await again.write(submit(1, {"x": 1}, client_patch_id="once"))
    repeated = (await read_kind(again, "result")).result.response
    again.cancel()
    assert repeated.duplicate and (repeated.revision, repeated.state_hash) == (first.revision, first.state_hash)
    assert (await client.get_state(execution_id)).revision == 1


@pytest.mark.parametrize("engine_config", [EngineConfig(progress_interval=0.2)])
async def test_an_idle_session_is_sent_progress_with_the_head(
    stub: pb_grpc.StateServiceStub, client: StateClient, engine_config: EngineConfig
) -> None:
    execution_id = (await client.create_execution()).execution_id
    await client.submit_patch(execution_id, {"x": 1}, agent_id="b", base_revision=0)
    call = stub.Session()
    await call.write(opening(execution_id))
    opened = await call.read()
    assert opened.WhichOneof("kind") == "progress" and opened.progress.head_revision == 1
    await client.submit_patch(execution_id, {"y": 1}, agent_id="b", base_revision=1)
    later = await asyncio.wait_for(call.read(), 5)
    assert later.WhichOneof("kind") == "progress" and later.progress.head_revision == 2
    call.cancel()


async def test_the_sdk_session_raises_each_submits_own_error(client: StateClient) -> None:
    execution_id = (await client.create_execution(initial_state={"owner": "nobody"})).execution_id
    await client.submit_patch(execution_id, {"owner": "b"}, agent_id="b", base_revision=0)
    async with client.session(execution_id, agent_id="a") as session:
        assert session.head_revision == 1
        lost, bad, good = await asyncio.gather(
            session.submit({"owner": "a"}, base_revision=0),
            session.submit({"big": "x" * (2 << 20)}, base_revision=1),
            session.submit({"x": 1}, base_revision=1),
            return_exceptions=True,
        )
    assert isinstance(lost, ConflictError) and "conflict at /owner" in lost.message
    assert isinstance(bad, ValidationError)
    assert not isinstance(good, BaseException) and good.revision == 2
    with pytest.raises(Exception, match="the session is closed"):
        await session.submit({"x": 2}, base_revision=2)


async def test_opening_an_unknown_execution_raises_on_entering(client: StateClient) -> None:
    with pytest.raises(NotFoundError):
        async with client.session("no-such-execution", agent_id="a"):
            pass


async def test_the_blocking_client_has_sessions_too(server_address: str) -> None:
    def scenario() -> dict[str, object]:
        with SyncStateClient(server_address) as client:
            execution_id = client.create_execution().execution_id
            client.publish_observation(execution_id, "a", {"n": 1})
            with client.session(execution_id, agent_id="a") as session:
                assert session.submit({"x": 1}, base_revision=0).revision == 1
                for observation in session.observations():
                    assert observation.payload == {"n": 1}
                    break
            return client.get_state(execution_id).state

    assert await asyncio.to_thread(scenario) == {"x": 1}


async def test_a_credential_binds_the_sessions_agent_and_its_rights(db_path: Path) -> None:
    store = SqliteCredentialStore(db_path)
    running: RunningServer = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store)
    try:
        admin = await credentials.issue(store, "root", ["*"], rights=set(Right))
        reader = await credentials.issue(store, "reader", ["*"], rights={Right.READ})
        address = f"127.0.0.1:{running.port}"
        async with StateClient(address, token=admin.token) as root:
            execution_id = (await root.create_execution()).execution_id
        async with StateClient(address, token=reader.token) as client:
            with pytest.raises(PermissionDeniedError, match="is not this credential's agent"):
                async with client.session(execution_id, agent_id="root"):
                    pass
            async with client.session(execution_id, agent_id="reader") as session:
                with pytest.raises(PermissionDeniedError, match="may not write"):
                    await session.submit({"x": 1}, base_revision=0)
                assert session.head_revision == 0  # the refusal left the stream open
            assert (await client.get_state(execution_id)).revision == 0
    finally:
        await running.stop(grace=0)


async def test_a_revoked_credential_ends_its_open_session(db_path: Path) -> None:
    store = SqliteCredentialStore(db_path)
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store)
    try:
        admin = await credentials.issue(store, "root", ["*"], rights=set(Right))
        writer = await credentials.issue(store, "writer", ["*"], rights={Right.READ, Right.WRITE})
        address = f"127.0.0.1:{running.port}"
        async with StateClient(address, token=admin.token) as root:
            execution_id = (await root.create_execution()).execution_id
        async with (
            StateClient(address, token=writer.token) as client,
            client.session(execution_id, agent_id="writer") as session,
        ):
            assert (await session.submit({"n": 0}, base_revision=0)).revision == 1
            await credentials.revoke(store, writer.credential.token_id)

            async def refused() -> bool:  # within the guard's cache time (2 s), as for every call
                try:
                    await session.submit({"n": 1}, base_revision=session.head_revision)
                except UnauthenticatedError as e:
                    return "revoked" in e.message
                except UnavailableError:
                    pass  # sent as the session ended: its outcome is unknown, the next one is refused
                return False

            await eventually(refused, timeout=15)
    finally:
        await running.stop(grace=0)


async def test_a_session_that_gives_up_opening_leaves_nothing_running(db_path: Path) -> None:
    server = RestartableServer(db_path)
    await server.start()
    address = server.address
    await server.stop()
    async with StateClient(address) as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                async with client.session("x", agent_id="a"):
                    pass
        running = [t for t in asyncio.all_tasks() if "Session._run" in repr(t.get_coro())]
        assert running == []


async def test_a_status_the_server_ends_the_session_with_is_not_taken_for_a_cut(client: StateClient) -> None:
    """An ack the group refuses ends the stream INVALID_ARGUMENT: the session ends with it (it does not
    reopen as it would after a cut), and says so to every later use."""
    execution_id = (await client.create_execution()).execution_id
    async with client.session(execution_id, agent_id="a", skills=["pick"], group="g") as session:
        await session.ack(list(range(1, 2001)))
        with pytest.raises(ValidationError, match="2,000 in one acknowledgement"):
            async for _ in session.observations():
                pass
        with pytest.raises(ValidationError, match="2,000 in one acknowledgement"):
            await session.submit({"x": 1}, base_revision=0)
    assert (await client.get_state(execution_id)).revision == 0


async def test_a_writer_only_session_receives_no_observations(
    stub: pb_grpc.StateServiceStub, client: StateClient
) -> None:
    execution_id = (await client.create_execution()).execution_id
    for n in range(5):
        await client.publish_observation(execution_id, "*", {"n": n})
    async with client.session(execution_id, agent_id="a", receive_observations=False) as session:
        assert (await session.submit({"x": 1}, base_revision=0)).revision == 1
        with pytest.raises(ValueError, match="receive_observations=False"):
            async for _ in session.observations():
                pass
    call = stub.Session()
    await call.write(opening(execution_id, group="g", without_observations=True))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call.read()
    assert "a consumer group's member receives its observations" in (refused.value.details() or "")


async def test_the_observations_of_an_ended_session_end_every_time(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    async with client.session(execution_id, agent_id="a") as session:
        pass
    for _ in range(2):
        assert [o async for o in session.observations()] == []


async def test_a_revoked_credential_ends_its_open_watch(db_path: Path) -> None:
    store = SqliteCredentialStore(db_path)
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store)
    try:
        admin = await credentials.issue(store, "root", ["*"], rights=set(Right))
        reader = await credentials.issue(store, "reader", ["*"], rights={Right.READ})
        address = f"127.0.0.1:{running.port}"
        async with StateClient(address, token=admin.token) as root, StateClient(address, token=reader.token) as client:
            execution_id = (await root.create_execution()).execution_id
            watch = client.watch(execution_id, resume=False)
            await root.submit_patch(execution_id, {"n": 0}, agent_id="root", base_revision=0)
            assert (await anext(watch)).revision == 1
            await credentials.revoke(store, reader.credential.token_id)

            async def ended() -> bool:  # at its next message past the guard's cache time (2 s)
                head = (await root.get_state(execution_id)).revision
                await root.submit_patch(execution_id, {"n": head}, agent_id="root", base_revision=head)
                try:
                    await asyncio.wait_for(anext(watch), 5)
                except UnauthenticatedError as e:
                    return "revoked" in e.message
                return False

            await eventually(ended, timeout=15, interval=0.5)
    finally:
        await running.stop(grace=0)
