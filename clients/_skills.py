"""The async client of the skill registry."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from skillstate.skills.v1 import skills_pb2 as pb
from skillstate.skills.v1 import skills_pb2_grpc as pb_grpc

from ._packages import read_package_dir
from ._rpc import RpcClient
from ._skill_types import (
    Diagnostic,
    Hydrated,
    LibraryStats,
    MacroRevision,
    Registered,
    Skill,
    SkillSummary,
    level_name,
)


class SkillRegistryClient(RpcClient):
    """Talks to the skill registry of one skillstate server.

    Registering is idempotent (the same content leaves the current version as it is), so it is retried like
    the reads; removing is not.
    """

    _stub_class = pb_grpc.SkillRegistryServiceStub

    async def register_skill(self, files: Mapping[str, bytes], *, folder: str = "", strict: bool = False) -> Registered:
        """Register a package given as {relative path: bytes} (see docs/skills.md for the layout)."""
        request = pb.RegisterSkillRequest(files=dict(files), folder=folder, strict=strict)
        reply = await self._call("RegisterSkill", request)
        warnings = tuple(Diagnostic.from_pb(d) for d in reply.warnings)
        return Registered(reply.name, reply.version, reply.section_count, warnings, reply.unchanged, reply.digest)

    async def register_folder(self, folder: str | Path, *, strict: bool = False) -> Registered:
        """Register the package in a folder on disk, with the files outside it that its SKILL.md links to
        (`read_package_dir`, whose PackageReadError says why a folder cannot be sent)."""
        sent = read_package_dir(folder)
        return await self.register_skill(sent.files, folder=sent.folder, strict=strict)

    async def list_skills(self, page_size: int = 0) -> AsyncIterator[SkillSummary]:
        """Every current skill, by name, fetched a page at a time."""
        token = ""
        while True:
            request = pb.ListSkillsRequest(page_size=page_size, page_token=token)
            reply = await self._call("ListSkills", request)
            for summary in reply.skills:
                yield SkillSummary.from_pb(summary)
            token = reply.next_page_token
            if not token:
                return

    async def get_skill(self, name: str, *, version: int = 0, include_files: bool = False) -> Skill:
        request = pb.GetSkillRequest(name=name, version=version, include_files=include_files)
        return Skill.from_pb(await self._call("GetSkill", request))

    async def remove_skill(self, name: str) -> int:
        """Take a skill out of the library; returns the version that was current."""
        reply = await self._call("RemoveSkill", pb.RemoveSkillRequest(name=name), retry=False)
        return int(reply.removed_version)

    async def hydrate(
        self, query: str, *, budget_tokens: int = 3000, skill_names: Sequence[str] = (), requester: str = ""
    ) -> Hydrated:
        """The smallest sufficient, dependency-closed context for a task, within the budget. With `requester` (an
        agent's id), a hydration of its own, to report on once, where identical requests would share one."""
        request = pb.HydrateRequest(
            query=query, budget_tokens=budget_tokens, skill_names=list(skill_names), requester=requester
        )
        return Hydrated.from_pb(await self._call("Hydrate", request))

    async def expand(self, hydration_id: str, macro_id: str, level: str = "full") -> str:
        """One macro of a recent hydration at a level: name, contract, outline or full (its exact text)."""
        request = pb.ExpandRequest(
            hydration_id=hydration_id, macro_id=macro_id, level=pb.RenderLevel.Value(f"RENDER_LEVEL_{level.upper()}")
        )
        return str((await self._call("Expand", request)).text)

    async def report_outcome(
        self, hydration_id: str, *, success: bool, failed_macro_ids: Sequence[str] = ()
    ) -> list[MacroRevision]:
        """Tell the registry how an execution from a hydrated context went (once per hydration)."""
        request = pb.ReportOutcomeRequest(
            hydration_id=hydration_id, success=success, failed_macro_ids=list(failed_macro_ids)
        )
        reply = await self._call("ReportOutcome", request, retry=False)
        return [MacroRevision(r.macro_id, None if r.retired else level_name(r.level)) for r in reply.revisions]

    async def library_stats(self) -> LibraryStats:
        """The library's size and how well MotifZip compresses it (computed once per library change)."""
        reply = await self._call("GetLibraryStats", pb.GetLibraryStatsRequest())
        return LibraryStats(
            reply.skills,
            reply.sections,
            reply.macros,
            reply.compression_ratio,
            reply.dependency_preservation,
            reply.verifier_reachability,
            reply.raw_tokens,
            reply.active_tokens,
        )
