"""The bad-input corpus (bad_inputs.json): malformed, hostile and boundary requests to every RPC, each
expecting its status code and a message naming what is wrong, and none changing anything.

Each case names the RPC, the caller (a kind of credential), the request's fields (or raw bytes that do not
decode), the status and a text the message must contain. A few values are made at run time, where a file
would be absurd: `{"$nested": N}` (JSON N levels deep), `{"$string_json": N}` (a JSON object holding an
N-character string), `{"$text": N}`, `{"$package": NAME}` (a skill package from PACKAGES),
`{"$token_of": "skills"}` (a page token the skill registry issued).
"""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from skillstate.server.auth.credentials import issue, revoke
from skillstate.server.auth.guard import RULES, Mode
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore
from skillstate.skills.v1 import skills_pb2, skills_pb2_grpc
from skillstate.state.v1 import state_pb2, state_pb2_grpc

CORPUS = json.loads((Path(__file__).parent / "bad_inputs.json").read_text())
SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "name": {"type": "string"},
        "m": {"type": "object"},
        "owned": {"type": "string", "x-owner": "root"},
    },
}


def skill_md(name: str, body: str = "# Title\n\n1. Do the thing.\n", front: str = "") -> bytes:
    return f"---\nname: {name}\ndescription: A skill for the bad-input corpus.\n{front}---\n{body}".encode()


def zip_bomb() -> bytes:
    """A small zip that inflates to 100 MB of zeros."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros.bin", bytes(100 << 20))
    return buffer.getvalue()


def yaml_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        lines.append(f"{level}: &{level} [*{previous},*{previous},*{previous},*{previous},*{previous},*{previous}]")
    return "\n".join(lines) + "\n"


PACKAGES: dict[str, Any] = {
    "evil": lambda: {"evil/SKILL.md": skill_md("evil")},
    "climb": lambda: {"../outside/SKILL.md": skill_md("outside")},
    "absolute": lambda: {"/etc/skillstate/SKILL.md": skill_md("absolute")},
    "outside-link": lambda: {
        "linker/SKILL.md": skill_md("linker", "# Links\n\nSee [passwd](../../../../etc/passwd).\n")
    },
    "zip-bomb": lambda: {"bomb/SKILL.md": zip_bomb()},
    "gzip-bomb": lambda: {"big/SKILL.md": skill_md("big", "x" * (5 << 20))},
    "many-files": lambda: {"many/SKILL.md": skill_md("many"), **{f"many/f{i}.md": b"x" for i in range(1001)}},
    "not-utf8": lambda: {"bytes/SKILL.md": b"---\nname: bytes\n---\n\xff\xfe\xfd"},
    "deep-yaml": lambda: {"deep/SKILL.md": skill_md("deep", front="metadata: " + "[" * 10000 + "]" * 10000 + "\n")},
    "yaml-bomb": lambda: {"laughs/SKILL.md": skill_md("laughs", front=yaml_bomb())},
}


class World:
    """The server, a channel per kind of caller, and a fingerprint of everything a request could change."""

    def __init__(self, server: RunningServer, tokens: dict[str, str | None]) -> None:
        self.server, self.tokens = server, tokens
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        self.state = state_pb2_grpc.StateServiceStub(self.channel)
        self.skills = skills_pb2_grpc.SkillRegistryServiceStub(self.channel)

    def metadata(self, caller: str) -> tuple[tuple[str, str], ...]:
        token = self.tokens[caller]
        if caller == "malformed":
            return (("authorization", "Bearer nope"),)
        return (("authorization", f"Bearer {token}"),) if token else ()

    async def fingerprint(self) -> tuple[Any, ...]:
        """What a request could change; the last item is the sequence of an observation published to probe
        whether any other was published (two fingerprints in a row differ in it by one)."""
        admin = self.metadata("admin")
        states = [
            await self.state.GetState(state_pb2.GetStateRequest(execution_id=name), metadata=admin)
            for name in ("orders", "elsewhere")
        ]
        history = await self.state.GetHistory(state_pb2.GetHistoryRequest(execution_id="orders"), metadata=admin)
        listed = await self.skills.ListSkills(skills_pb2.ListSkillsRequest(), metadata=admin)
        probe = await self.state.PublishObservation(
            state_pb2.PublishObservationRequest(execution_id="elsewhere", to="probe", payload_json="{}"), metadata=admin
        )
        missing = []
        for name in ("new", "nope", "orders-2"):
            try:
                await self.state.GetState(state_pb2.GetStateRequest(execution_id=name), metadata=admin)
                missing.append(f"{name} exists")
            except grpc.aio.AioRpcError as e:
                missing.append(e.code().name)
        skills = sorted((s.name, s.version) for s in listed.skills)
        return [s.SerializeToString() for s in states], history.head_revision, skills, missing, probe.sequence


@pytest.fixture
async def world(db_path: Path) -> AsyncIterator[World]:
    store = SqliteCredentialStore(db_path)
    server = await start_server(
        SqliteRevisionLog(db_path), "127.0.0.1:0", skills=SqliteSkillStore(db_path), credentials=store,
        auth=Mode.REQUIRED,
    )  # fmt: skip
    admin = (await issue(store, "root", ["*"], rights=set(Right))).token
    writer = (await issue(store, "writer", ["orders"], rights={Right.READ, Right.WRITE})).token
    reader = (await issue(store, "reader", ["orders"], rights={Right.READ})).token
    revoked = await issue(store, "gone", ["*"], rights=set(Right))
    await revoke(store, revoked.credential.token_id)
    expired = await issue(store, "late", ["*"], rights=set(Right), expires_in=0.01)
    forged = writer[: writer.rindex("_") + 1] + "A" * 43
    tokens = {"admin": admin, "writer": writer, "reader": reader, "revoked": revoked.token, "expired": expired.token,
              "forged": forged, "anonymous": None, "malformed": "x"}  # fmt: skip
    this = World(server, tokens)
    meta = this.metadata("admin")
    for name in ("orders", "elsewhere"):
        await this.state.CreateExecution(
            state_pb2.CreateExecutionRequest(execution_id=name, schema_json=json.dumps(SCHEMA)), metadata=meta
        )
    await this.state.SubmitPatch(
        state_pb2.SubmitPatchRequest(execution_id="orders", agent_id="root", base_revision=0, patch_json='{"n":1}'),
        metadata=meta,
    )
    for name in ("ship-order", "pack-box"):
        request = skills_pb2.RegisterSkillRequest(files={f"{name}/SKILL.md": skill_md(name)})
        await this.skills.RegisterSkill(request, metadata=meta)
    await asyncio.sleep(0.02)  # not a wait for the server: the "expired" caller's token (0.01 s) is past its life
    yield this
    await this.channel.close()
    await server.stop(grace=0)


async def made(value: Any, world: World) -> Any:
    """A corpus value with its run-time parts made."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, argument),) = value.items()
        if key == "$nested":
            return '{"a":' + "[" * argument + "]" * argument + "}"
        if key == "$string_json":
            return json.dumps({"name": "x" * argument})
        if key == "$text":
            return "x" * argument
        if key == "$token_of":
            page = await world.skills.ListSkills(
                skills_pb2.ListSkillsRequest(page_size=1), metadata=world.metadata("admin")
            )
            return page.next_page_token
    return value


async def request_of(case: dict[str, Any], world: World) -> Any:
    module = skills_pb2 if case["rpc"] in SKILL_RPCS else state_pb2
    fields = {key: await made(value, world) for key, value in case["fields"].items()}
    if "$package" in fields:
        fields["files"] = PACKAGES[fields.pop("$package")]()
    return getattr(module, f"{case['rpc']}Request")(**fields)


STATE_SERVICE = state_pb2.DESCRIPTOR.services_by_name["StateService"].full_name
SKILLS_SERVICE = skills_pb2.DESCRIPTOR.services_by_name["SkillRegistryService"].full_name
SKILL_RPCS = {m.name for m in skills_pb2.DESCRIPTOR.services_by_name["SkillRegistryService"].methods}
STREAMING = {"Watch", "StreamObservations"}


async def session_refusal(open_call: Any, messages: list[bytes], metadata: Any) -> grpc.aio.AioRpcError | None:
    """Send a session's messages and read until the stream fails (its error) or stays open for 2 s (None)."""
    call = open_call(metadata=metadata)
    try:
        for message in messages:
            await call.write(message)
        while await asyncio.wait_for(call.read(), 2) is not grpc.aio.EOF:
            pass
    except grpc.aio.AioRpcError as e:
        return e
    except TimeoutError:
        return None
    finally:
        call.cancel()
    return None


async def call(case: dict[str, Any], world: World) -> grpc.aio.AioRpcError | None:
    service = (
        "skillstate.skills.v1.SkillRegistryService" if case["rpc"] in SKILL_RPCS else "skillstate.state.v1.StateService"
    )
    method = f"/{service}/{case['rpc']}"
    if "raw_hex" in case:
        payload = bytes.fromhex(case["raw_hex"])
    else:
        payload = (await request_of(case, world)).SerializeToString()
    compression = grpc.Compression.Gzip if case.get("gzip") else None
    metadata = world.metadata(case["caller"])
    try:
        if case["rpc"] == "Session":
            then = [state_pb2.SessionRequest(**m).SerializeToString() for m in case.get("then", ())]
            then += [bytes.fromhex(m) for m in case.get("then_hex", ())]
            return await session_refusal(world.channel.stream_stream(method), [payload, *then], metadata)
        if case["rpc"] in STREAMING:
            stream = world.channel.unary_stream(method)(payload, metadata=metadata, compression=compression)
            await asyncio.wait_for(stream.read(), 2)
            stream.cancel()
        else:
            await world.channel.unary_unary(method)(payload, metadata=metadata, compression=compression, timeout=30)
    except grpc.aio.AioRpcError as e:
        return e
    except TimeoutError:
        return None
    return None


def test_the_corpus_reaches_every_rpc() -> None:
    assert {case["rpc"] for case in CORPUS} == set(RULES)
    assert len(CORPUS) >= 100


def test_every_case_names_its_expected_message() -> None:
    """An empty message is in every answer: each case must say what the server's message names."""
    assert [f"{case['rpc']} / {case['name']}" for case in CORPUS if not case["message"].strip()] == []


@pytest.mark.timeout(300)
async def test_every_bad_input_is_refused_with_its_status_and_changes_nothing(world: World) -> None:
    wrong = []
    for case in CORPUS:
        before = await world.fingerprint()
        error = await call(case, world)
        got = (error.code().name, error.details() or "") if error is not None else ("OK", "")
        if got[0] != case["status"] or case["message"] not in got[1]:
            wrong.append(f"{case['rpc']} / {case['name']}: {got[0]} {got[1][:160]!r}, expected {case['status']} "
                         f"{case['message']!r}")  # fmt: skip
        after = await world.fingerprint()
        if after[:-1] != before[:-1] or after[-1] != before[-1] + 1:
            wrong.append(f"{case['rpc']} / {case['name']}: changed the server's state")
    assert wrong == [], "\n".join(wrong)
