"""The gRPC face of the skill registry: check the request, call the registry, fill the reply."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc

from skillstate.skills.v1 import skills_pb2 as pb
from skillstate.skills.v1 import skills_pb2_grpc as pb_grpc

from ..auth.guard import Guard
from ..errors import InvalidArgumentError, LimitExceededError
from ..metrics import NO_METRICS, Metrics
from ..skills.contracts import Contract
from ..skills.diagnostics import Diagnostic
from ..skills.macros import Level
from ..skills.registry import SkillRegistry
from ..skills.snapshot import SkillView
from ..skills.tokens import count_tokens
from .handlers import add_service
from .page_tokens import SKILL_PAGES, decode_page_token, encode_page_token


def add_skill_registry_service(
    servicer: SkillRegistryServicer, server: grpc.aio.Server, guard: Guard, metrics: Metrics
) -> None:
    add_service(servicer, server, pb, "SkillRegistryService", guard, metrics)


class SkillRegistryServicer(pb_grpc.SkillRegistryServiceServicer):
    """Implements skillstate.skills.v1.SkillRegistryService over a SkillRegistry."""

    def __init__(
        self, registry: SkillRegistry, metrics: Metrics = NO_METRICS, max_message_bytes: int = 4 << 20
    ) -> None:
        self._registry = registry
        self._metrics = metrics
        self._max_message_bytes = max_message_bytes

    async def RegisterSkill(self, request: pb.RegisterSkillRequest, context: Any) -> pb.RegisterSkillResponse:
        registered = await self._registry.register(dict(request.files), request.folder, request.strict)
        return pb.RegisterSkillResponse(
            name=registered.name,
            version=registered.version,
            section_count=registered.section_count,
            warnings=[_diagnostic(d) for d in registered.warnings],
            unchanged=registered.unchanged,
            digest=registered.digest,
        )

    async def ListSkills(self, request: pb.ListSkillsRequest, context: Any) -> pb.ListSkillsResponse:
        token = request.page_token
        after = decode_page_token(token, SKILL_PAGES, "ListSkills", str) if token else ""
        views, more = await self._registry.page(request.page_size, after)
        token = encode_page_token(SKILL_PAGES, views[-1].stored.name) if more else ""
        return pb.ListSkillsResponse(skills=[_summary(v) for v in views], next_page_token=token)

    async def GetSkill(self, request: pb.GetSkillRequest, context: Any) -> pb.GetSkillResponse:
        view = await self._registry.get(request.name, request.version)
        # a large graph is a large message (every edge one): built and measured in a thread, off the loop
        reply = await asyncio.to_thread(_skill_reply, view, request.include_files)
        size = await asyncio.to_thread(reply.ByteSize)
        if size > self._max_message_bytes:
            raise LimitExceededError(
                f"GetSkill: the reply for skill {request.name!r} would be {size:,} bytes, over the message limit of "
                f"{self._max_message_bytes:,}" + ("; ask without include_files" if request.include_files else "")
            )
        return reply

    async def RemoveSkill(self, request: pb.RemoveSkillRequest, context: Any) -> pb.RemoveSkillResponse:
        return pb.RemoveSkillResponse(removed_version=await self._registry.remove(request.name))

    async def Hydrate(self, request: pb.HydrateRequest, context: Any) -> pb.HydrateResponse:
        started = time.perf_counter()
        hydration = await self._registry.hydrate(
            request.query, request.budget_tokens, list(request.skill_names), request.requester
        )
        self._metrics.hydrated(time.perf_counter() - started)
        sections = [
            pb.HydratedSection(skill=name, index=index, title=title, role=role)
            for name, index, title, role in self._registry.hydrated_sections(hydration)
        ]
        coverage = hydration.coverage
        return pb.HydrateResponse(
            context=hydration.context,
            token_count=hydration.token_count,
            hydration_id=hydration.hydration_id,
            sections=sections,
            coverage=pb.Coverage(
                anchors=coverage.anchors,
                anchors_covered=coverage.anchors_covered,
                anchors_uncoverable=coverage.anchors_uncoverable,
                dependencies_closed=coverage.dependencies_closed,
                verifier_reachable=coverage.verifier_reachable,
            ),
            source_skills=hydration.source_skills,
            whole_skill_fallback=hydration.whole_skill_fallback,
            macros=[
                pb.HydratedMacro(
                    macro_id=b.macro.macro_id,
                    name=b.macro.name,
                    skill=b.occurrence.skill,
                    first_index=b.occurrence.start,
                    section_count=b.occurrence.length,
                    level=_LEVEL[b.level],
                )
                for b in hydration.macros
            ],
        )

    async def Expand(self, request: pb.ExpandRequest, context: Any) -> pb.ExpandResponse:
        if request.level and request.level not in _LEVEL_OF:
            raise InvalidArgumentError(f"level: {request.level} is not a render level")
        level = _LEVEL_OF[request.level] if request.level else Level.FULL
        text = await self._registry.expand(request.hydration_id, request.macro_id, level)
        return pb.ExpandResponse(text=text, token_count=count_tokens(text))

    async def ReportOutcome(self, request: pb.ReportOutcomeRequest, context: Any) -> pb.ReportOutcomeResponse:
        revisions = await self._registry.report_outcome(request.hydration_id, request.success, request.failed_macro_ids)
        return pb.ReportOutcomeResponse(
            revisions=[
                pb.MacroRevision(
                    macro_id=r.macro_id,
                    level=_LEVEL[r.level] if r.level else pb.RENDER_LEVEL_UNSPECIFIED,
                    retired=r.level is None,
                )
                for r in revisions
            ]
        )

    async def GetLibraryStats(self, request: pb.GetLibraryStatsRequest, context: Any) -> pb.GetLibraryStatsResponse:
        stats, compression = await self._registry.stats()
        return pb.GetLibraryStatsResponse(
            skills=stats.skills,
            sections=stats.sections,
            macros=stats.macros,
            compression_ratio=stats.compression_ratio,
            dependency_preservation=stats.dependency_preservation,
            verifier_reachability=stats.verifier_reachability,
            raw_tokens=compression.raw_tokens,
            active_tokens=compression.active_tokens,
        )


_LEVEL = {level: pb.RenderLevel.Value(f"RENDER_LEVEL_{level.name}") for level in Level}
_LEVEL_OF = {value: level for level, value in _LEVEL.items()}


def _diagnostic(diagnostic: Diagnostic) -> pb.Diagnostic:
    return pb.Diagnostic(
        file=diagnostic.file, line=diagnostic.line or 0, rule=diagnostic.rule, message=diagnostic.message
    )


def _summary(view: SkillView) -> pb.SkillSummary:
    return pb.SkillSummary(
        name=view.package.name,
        version=view.stored.version,
        description=view.package.description,
        section_count=len(view.graph.nodes),
        token_count=sum(view.node_tokens),
        digest=view.stored.digest,
        registered_at_ms=int(view.stored.registered_at * 1000),
    )


def _contract(contract: Contract) -> pb.Contract:
    return pb.Contract(
        inputs=[pb.Signature(name=s.name, kind=s.kind) for s in contract.inputs],
        outputs=[pb.Signature(name=s.name, kind=s.kind) for s in contract.outputs],
        resources=contract.resources,
        guards=contract.guards,
        verifies=contract.verifies,
        state_changing=contract.state_changing,
    )


def _skill_reply(view: SkillView, include_files: bool) -> pb.GetSkillResponse:
    package, graph = view.package, view.graph
    return pb.GetSkillResponse(
        skill=_summary(view),
        sections=[
            pb.Section(
                index=node.index,
                title=node.title,
                heading_path=node.heading_path,
                role=node.role.value,
                is_step=node.is_step,
                file=node.provenance.file,
                first_line=node.provenance.first_line,
                last_line=node.provenance.last_line,
                token_count=view.node_tokens[node.index],
                contract=_contract(node.contract),
                text=node.text,
            )
            for node in graph.nodes
        ],
        edges=[pb.Edge(source=e.source, target=e.target, kind=e.kind.value, label=e.label) for e in graph.edges],
        resources=[
            pb.Resource(path=r.path, kind=r.kind.value, linked_from=r.linked_from, present=r.present)
            for r in package.resources
        ],
        warnings=[_diagnostic(d) for d in package.warnings],
        license=package.license or "",
        compatibility=package.compatibility or "",
        metadata=dict(package.metadata),
        allowed_tools=package.allowed_tools,
        files=dict(package.files) if include_files else {},
        folder=package.folder,
    )
