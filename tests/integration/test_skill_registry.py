"""The skill registry end to end: the real server on a loopback port, driven by the real client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bench.synthetic import SyntheticSkill, generate_library
from skillstate.clients import HydratedMacro, NotFoundError, SkillRegistryClient, ValidationError
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.backends import open_log, open_skill_store

from ..conftest import RestartableServer
from ..postgres import postgres_schema, postgres_url  # noqa: F401 - fixtures

SKILL = """---
name: {name}
description: Ship a customer's order and confirm delivery.
{extra}---
# Ship an order

## Prerequisites

Only run this if the carrier API token is set.

## Workflow

1. Read the order from `order.json`.
2. Create the shipping label and save it as `label.pdf`.
3. Verify that `label.pdf` names the customer.

## Resources

See [the carrier guide](references/carrier.md).
"""


def package(name: str = "ship-order", extra: str = "", folder: str | None = None) -> dict[str, bytes]:
    folder = folder or name
    return {
        f"{folder}/SKILL.md": SKILL.format(name=name, extra=extra).encode(),
        f"{folder}/references/carrier.md": b"# Carrier\n",
    }


async def test_register_version_list_get_hydrate_and_remove(server_address: str) -> None:
    async with SkillRegistryClient(server_address) as skills:
        first = await skills.register_skill(package())
        assert (first.name, first.version, first.unchanged, first.warnings) == ("ship-order", 1, False, ())
        again = await skills.register_skill(package())
        assert (again.version, again.unchanged, again.digest) == (1, True, first.digest)
        changed = await skills.register_skill(package(extra="license: MIT\n"))
        assert (changed.version, changed.unchanged) == (2, False)

        summaries = [s async for s in skills.list_skills(page_size=1)]
        assert [(s.name, s.version) for s in summaries] == [("ship-order", 2)]

        skill = await skills.get_skill("ship-order", include_files=True)
        assert [s.role for s in skill.sections][:3] == ["intent", "precondition", "operation"]
        assert skill.files == package(extra="license: MIT\n") and skill.folder == "ship-order"
        assert any(kind == "verifies" for _, _, kind, _ in skill.edges)
        old = await skills.get_skill("ship-order", version=1)
        assert old.summary.version == 1 and old.summary.digest == first.digest

        hydrated = await skills.hydrate("ship the order label", budget_tokens=2000)
        assert hydrated.source_skills == ("ship-order",)
        assert hydrated.dependencies_closed and hydrated.verifier_reachable
        assert hydrated.token_count <= 2000 and "Verify that `label.pdf`" in hydrated.context

        assert await skills.remove_skill("ship-order") == 2
        assert [s async for s in skills.list_skills()] == []
        with pytest.raises(NotFoundError, match="ship-order"):
            await skills.remove_skill("ship-order")
        assert (await skills.get_skill("ship-order", version=2)).summary.version == 2  # history stays
        assert (await skills.register_skill(package())).version == 3  # numbering continues


async def test_bad_input_is_refused_with_the_rule_named(server_address: str) -> None:
    async with SkillRegistryClient(server_address) as skills:
        with pytest.raises(ValidationError, match=r"name\.folder"):
            await skills.register_skill(package(folder="elsewhere"), strict=True)
        lenient = await skills.register_skill(package(folder="elsewhere"))
        assert [w.rule for w in lenient.warnings] == ["name.folder"]
        with pytest.raises(ValidationError, match=r"description\.required"):
            await skills.register_skill({"x/SKILL.md": b"---\nname: x\n---\n"})
        with pytest.raises(ValidationError, match="relative POSIX path"):
            await skills.register_skill({"../SKILL.md": b""})
        with pytest.raises(ValidationError, match="budget_tokens"):
            await skills.hydrate("ship", budget_tokens=0)
        with pytest.raises(ValidationError, match="query"):
            await skills.hydrate("   ")
        with pytest.raises(NotFoundError, match="nope"):
            await skills.hydrate("ship", skill_names=["nope"])
        with pytest.raises(NotFoundError):
            await skills.get_skill("ship-order", version=9)


async def test_a_restart_keeps_the_library(restartable: RestartableServer) -> None:
    async with SkillRegistryClient(restartable.address) as skills:
        await skills.register_skill(package())
        await skills.register_skill(package("pack-box"))
        await skills.remove_skill("pack-box")
        before = await skills.hydrate("ship the order label", budget_tokens=2000)
    await restartable.stop()
    await restartable.start()
    async with SkillRegistryClient(restartable.address) as skills:
        assert [(s.name, s.version) async for s in skills.list_skills()] == [("ship-order", 1)]
        after = await skills.hydrate("ship the order label", budget_tokens=2000)
    assert after == before


async def test_library_stats_measure_the_compression_of_planted_routines(server_address: str) -> None:
    async with SkillRegistryClient(server_address) as skills:
        empty = await skills.library_stats()
        assert (empty.skills, empty.macros, empty.compression_ratio) == (0, 0, 1.0)
        for skill in generate_library(40, seed=5):
            await skills.register_skill(skill.files, folder=skill.folder, strict=True)
        stats = await skills.library_stats()
        assert (stats.skills, stats.macros > 0) == (40, True)
        assert stats.compression_ratio == stats.raw_tokens / stats.active_tokens > 1.0
        assert (stats.dependency_preservation, stats.verifier_reachability) == (1.0, 1.0)
        await skills.remove_skill(generate_library(1, seed=5)[0].name)
        assert (await skills.library_stats()).skills == 39


async def test_expand_and_report_outcome_revise_a_shared_routine(server_address: str) -> None:
    library = generate_library(40, seed=5)
    async with SkillRegistryClient(server_address) as skills:
        for skill in library:
            await skills.register_skill(skill.files, folder=skill.folder)
        hydrations = [await skills.hydrate(s.task.rsplit(" (", 1)[0]) for s in library]
        with_macro = next(h for h in hydrations if any(m.level != "full" for m in h.macros))
        macro = next(m for m in with_macro.macros if m.level != "full")
        assert f"[macro {macro.macro_id}" in with_macro.context
        full = await skills.expand(with_macro.hydration_id, macro.macro_id)
        assert full.startswith("#") and full not in with_macro.context
        outline = await skills.expand(with_macro.hydration_id, macro.macro_id, "outline")
        assert "outline" in outline and len(outline) < len(full)
        revisions = await skills.report_outcome(
            with_macro.hydration_id, success=False, failed_macro_ids=[macro.macro_id]
        )
        assert [(r.macro_id, r.level) for r in revisions] == [(macro.macro_id, "outline")]
        with pytest.raises(NotFoundError, match="expired"):  # one report per hydration
            await skills.report_outcome(with_macro.hydration_id, success=True)
        with pytest.raises(NotFoundError, match="expired"):
            await skills.expand("no-such-hydration", macro.macro_id)
        with pytest.raises(ValidationError, match="failed_macro_ids"):
            await skills.report_outcome(hydrations[-1].hydration_id, success=False, failed_macro_ids=["m-nope"])


async def test_each_requester_of_one_context_gets_a_hydration_of_its_own_to_report_once(server_address: str) -> None:
    library = generate_library(10, seed=5)
    async with SkillRegistryClient(server_address) as skills:
        for skill in library:
            await skills.register_skill(skill.files, folder=skill.folder)
        query = library[0].task.rsplit(" (", 1)[0]
        shared = [await skills.hydrate(query) for _ in range(2)]
        ada, bob = [await skills.hydrate(query, requester=agent) for agent in ("ada", "bob")]
        assert shared[0].hydration_id == shared[1].hydration_id  # no requester: one hydration for both
        assert len({shared[0].hydration_id, ada.hydration_id, bob.hydration_id}) == 3
        assert {(h.context, h.sections, h.macros) for h in (*shared, ada, bob)} == {
            (ada.context, ada.sections, ada.macros)
        }
        for hydrated in (ada, bob, shared[0]):  # each reported once, whichever went first
            await skills.report_outcome(hydrated.hydration_id, success=True)
            with pytest.raises(NotFoundError, match="expired"):
                await skills.report_outcome(hydrated.hydration_id, success=True)
        assert (await skills.hydrate(query, requester="ada")).hydration_id == ada.hydration_id  # deterministic


async def test_a_restart_keeps_what_evidence_decided(restartable: RestartableServer) -> None:
    library = generate_library(40, seed=5)
    async with SkillRegistryClient(restartable.address) as skills:
        for skill in library:
            await skills.register_skill(skill.files, folder=skill.folder)
        for skill in library:
            query = skill.task.rsplit(" (", 1)[0]
            hydrated = await skills.hydrate(query)
            if any(m.level == "contract" for m in hydrated.macros):
                break
        macro = next(m for m in hydrated.macros if m.level == "contract")
        await skills.report_outcome(hydrated.hydration_id, success=False, failed_macro_ids=[macro.macro_id])
    await restartable.stop()
    await restartable.start()
    async with SkillRegistryClient(restartable.address) as skills:
        again = await skills.hydrate(query)
    assert [m.level for m in again.macros if m.name == macro.name and m.skill == macro.skill] == ["outline"]


class RestartableOn(RestartableServer):
    """A RestartableServer on any `--db` value: a SQLite file or a PostgreSQL URL."""

    def __init__(self, db: str) -> None:
        super().__init__(Path(db))
        self.db = db

    async def start(self) -> None:
        self._running = await start_server(open_log(self.db), self.address, skills=open_skill_store(self.db))
        self.port = self._running.port


@pytest.fixture(params=["sqlite", "postgres"])
async def restartable_on(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[RestartableOn]:
    db = request.getfixturevalue("postgres_url") if request.param == "postgres" else str(db_path)
    server = RestartableOn(db)
    await server.start()
    yield server
    await server.stop()


def at_contract(macro: HydratedMacro) -> bool:
    return macro.level == "contract"


async def shown_in_summary(
    skills: SkillRegistryClient, library: list[SyntheticSkill], wanted: Callable[[HydratedMacro], bool] = at_contract
) -> tuple[str, HydratedMacro]:
    """A task whose context shows a macro `wanted` (by default: at its contract), and that macro."""
    for skill in library:
        query = skill.task.rsplit(" (", 1)[0]
        hydrated = await skills.hydrate(query)
        for macro in hydrated.macros:
            if wanted(macro):
                return query, macro
    raise AssertionError("no context shows such a macro")


async def test_a_restart_goes_on_counting_evidence_with_the_hydrations_it_refers_to(
    restartable_on: RestartableOn,
) -> None:
    """docs/skills.md: a macro expanded in half of at least three uses gets a higher level. Two uses (one
    expanded) before a restart and a third, expanded before it and reported after it, reach that only if the
    counts and the hydration's expansion both outlived the restart."""
    library = generate_library(40, seed=5)
    async with SkillRegistryClient(restartable_on.address) as skills:
        for skill in library:
            await skills.register_skill(skill.files, folder=skill.folder)
        query, macro = await shown_in_summary(skills, library)
        first = await skills.hydrate(query)
        await skills.expand(first.hydration_id, macro.macro_id)
        assert await skills.report_outcome(first.hydration_id, success=True) == []
        second = await skills.hydrate(query)
        assert await skills.report_outcome(second.hydration_id, success=True) == []  # 2 uses, 1 expanded
        third = await skills.hydrate(query)
        await skills.expand(third.hydration_id, macro.macro_id)
        other = next(s for s in library if s.task.rsplit(" (", 1)[0] != query)
        kept = await skills.hydrate(other.task.rsplit(" (", 1)[0])
        kept_texts = {m.macro_id: await skills.expand(kept.hydration_id, m.macro_id, "outline") for m in kept.macros}
    await restartable_on.stop()
    await restartable_on.start()
    async with SkillRegistryClient(restartable_on.address) as skills:
        revisions = await skills.report_outcome(third.hydration_id, success=True)  # 3 uses, 2 expanded
        assert [(r.macro_id, r.level) for r in revisions] == [(macro.macro_id, "outline")]
        with pytest.raises(NotFoundError, match=r"hydration_id: .* unknown or expired"):  # reported: forgotten
            await skills.expand(third.hydration_id, macro.macro_id)
        assert kept_texts and {
            m: await skills.expand(kept.hydration_id, m, "outline") for m in kept_texts
        } == kept_texts  # fmt: skip
        again = await skills.hydrate(query)
    where = (macro.skill, macro.first_index, macro.section_count)  # its id may differ: a restart recompresses
    assert [m.level for m in again.macros if (m.skill, m.first_index, m.section_count) == where] == ["outline"]


async def test_expand_and_report_outcome_refuse_a_hydration_whose_skill_changed_since(
    restartable_on: RestartableOn,
) -> None:
    library = generate_library(40, seed=5)
    async with SkillRegistryClient(restartable_on.address) as skills:
        for skill in library:
            await skills.register_skill(skill.files, folder=skill.folder)
        query, macro = await shown_in_summary(skills, library)
        hydrated = await skills.hydrate(query)
    await restartable_on.stop()
    await restartable_on.start()
    async with SkillRegistryClient(restartable_on.address) as skills:
        changed = next(s for s in library if s.name == macro.skill)
        files = {path: text + b"\n## Notes\n\nNothing else changed.\n" for path, text in changed.files.items()}
        assert (await skills.register_skill(files, folder=changed.folder)).version == 2
        stale = (
            rf"hydration_id: skill '{macro.skill}' is at version 2, hydration {hydrated.hydration_id} showed version 1"
        )
        with pytest.raises(NotFoundError, match=stale):
            await skills.expand(hydrated.hydration_id, macro.macro_id)
        with pytest.raises(NotFoundError, match=stale):
            await skills.report_outcome(hydrated.hydration_id, success=False, failed_macro_ids=[macro.macro_id])
