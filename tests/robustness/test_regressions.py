"""One numbered test per bug the robustness work found, each failing on the code before its fix.

001 (issue 4) lives where it was found: tests/integration/test_concurrency.py::
test_a_conflict_is_answered_only_once_the_winning_revision_can_be_read (ABORTED was sent before the
winning revision was durable, so the loser's immediate re-read saw the old state).
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from skillstate.clients import SkillRegistryClient, StateClient, ValidationError, read_package_dir
from skillstate.server.engine import canonical
from skillstate.server.errors import InvalidArgumentError
from skillstate.server.limits import DEFAULT_LIMITS
from skillstate.skills.v1 import skills_pb2


def test_002_duplicate_json_keys_are_refused_not_resolved_to_the_last() -> None:
    with pytest.raises(InvalidArgumentError, match="patch_json: duplicate key 'n'"):
        canonical.parse('{"n": 1, "n": 2}', "patch_json", DEFAULT_LIMITS)


def front_matter(extra: str) -> dict[str, bytes]:
    return {"x/SKILL.md": f"---\nname: x\ndescription: d\n{extra}---\n# X\n".encode()}


async def test_003_front_matter_nested_10000_deep_is_refused_not_internal(server_address: str) -> None:
    async with SkillRegistryClient(server_address) as registry:
        with pytest.raises(ValidationError, match="nested deeper than 32 levels"):
            await registry.register_skill(front_matter("metadata: " + "[" * 10_000 + "]" * 10_000 + "\n"))


async def test_004_front_matter_with_yaml_aliases_is_refused(server_address: str) -> None:
    laughs = 'a: &a ["lol","lol"]\nb: &b [*a,*a]\nc: [*b,*b]\n'
    async with SkillRegistryClient(server_address) as registry:
        with pytest.raises(ValidationError, match=r"aliases \(\*name\) are not allowed"):
            await registry.register_skill(front_matter(laughs))


async def test_005_an_unknown_render_level_is_invalid_not_internal(server_address: str) -> None:
    async with grpc.aio.insecure_channel(server_address) as channel:
        expand = channel.unary_unary(
            "/skillstate.skills.v1.SkillRegistryService/Expand",
            request_serializer=skills_pb2.ExpandRequest.SerializeToString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await expand(skills_pb2.ExpandRequest(hydration_id="h", macro_id="m", level=42))  # type: ignore[arg-type]
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "level: 42 is not a render level" in (caught.value.details() or "")


async def test_006_a_reversed_history_range_is_refused(client: StateClient) -> None:
    await client.create_execution("x")
    with pytest.raises(ValidationError, match="to_revision: 2 is before from_revision 5"):
        await client.get_history("x", from_revision=5, to_revision=2)


def test_007_skills_add_does_not_send_files_a_link_points_to_far_outside(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b" / "c" / "skill"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: skill\ndescription: d\n---\n[x](../../../../secret)\n")
    (tmp_path / "secret").write_text("private")
    assert sorted(read_package_dir(folder).files) == ["skill/SKILL.md"]


def test_008_json_deeper_than_the_parser_allows_is_named_as_too_deep() -> None:
    deep = "[" * 2000 + "]" * 2000
    with pytest.raises(InvalidArgumentError, match="nesting depth over 1024 exceeds the limit of 64"):
        canonical.parse(deep, "patch_json", DEFAULT_LIMITS)


async def test_009_catching_up_skips_revisions_this_server_committed_while_it_read() -> None:
    """Found by bench/scale_out.py with three replicas: a catch-up read revisions 17.. from the log while this
    server's own revision 17 committed, then refused the log as corrupt ("revision 17 follows 17")."""
    from skillstate.server.engine.state_engine import StateEngine
    from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

    log = MemoryRevisionLog()
    engine = StateEngine(log)
    await engine.start()
    try:
        await engine.create_execution("x", "", "")
        for n in (1, 2):
            await engine.submit_patch("x", "a", n - 1, f'{{"n": {n}}}')
        execution = await engine._executions.get("x")
        read = await log.read_revisions("x", after=1)  # read while revision 2 was still this server's own
        assert execution.catch_up(read) == [] and execution.committed == 2
        assert (await engine.get_state("x")).state_json == '{"n":2}'
    finally:
        await engine.close()
