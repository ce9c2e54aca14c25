"""Reading a package folder from disk into the file map RegisterSkill sends, as the server resolves it."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from skillstate.clients import PackageReadError, SkillRegistryClient, read_package_dir
from skillstate.server.skills.package import PackageLimits, load_package


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_folder_its_links_outside_and_nothing_else(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    folder = plugin / "skills" / "demo"
    write(
        folder / "SKILL.md",
        "---\nname: demo\ndescription: d\n---\nSee [c](../../CONNECTORS.md) and [r](references/r.md).\n",
    )
    write(folder / "references" / "r.md", "r")
    write(folder / ".git" / "config", "not part of the package")
    write(plugin / "CONNECTORS.md", "connectors")
    write(plugin / "UNLINKED.md", "not linked")
    (folder / "link.md").symlink_to(plugin / "UNLINKED.md")

    sent = read_package_dir(folder)

    assert sent.folder == "skills/demo"
    assert sorted(sent.files) == ["CONNECTORS.md", "skills/demo/SKILL.md", "skills/demo/references/r.md"]
    assert load_package(sent.files, sent.folder, strict=True).warnings == ()


def test_a_folder_without_skill_md_or_over_a_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PackageReadError, match=r"no SKILL\.md"):
        read_package_dir(tmp_path)
    write(tmp_path / "demo" / "SKILL.md", "---\nname: demo\ndescription: d\n---\n")
    write(tmp_path / "demo" / "big.txt", "x" * 101)
    with pytest.raises(PackageReadError, match="101 bytes"):
        read_package_dir(tmp_path / "demo", max_file_bytes=100)


def test_a_hostile_link_cannot_make_the_reader_send_other_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "libraries" / "plugin" / "skills" / "evil"
    links = "[a](../../../../secret.txt) [b](../../.env) [c](../../../other/notes.md) [d](../../README.md)"
    write(folder / "SKILL.md", f"---\nname: evil\ndescription: d\n---\n{links}\n")
    write(home / "secret.txt", "the user's secret")
    write(home / "libraries" / "other" / "notes.md", "another library")
    write(home / "libraries" / "plugin" / ".env", "TOKEN=1")
    write(home / "libraries" / "plugin" / "README.md", "within two levels: sent")

    sent = read_package_dir(folder)

    assert sorted(sent.files) == ["README.md", "skills/evil/SKILL.md"]
    assert not any(b"the user's secret" in content or b"TOKEN=1" in content for content in sent.files.values())


def test_the_reader_follows_the_links_the_server_resolves_and_no_others(tmp_path: Path) -> None:
    folder = tmp_path / "lib" / "skills" / "demo"
    body = (
        '[inline](../A.md#part) ![image](<../B%20C.md> "title") [query](../D.md?x=1)\n'
        "[ref]: ../E.md\n"
        "```\n[fenced](../F.md)\n```\n"
        "~~~~\n[tilde](../G.md)\n~~~\n[still fenced](../H.md)\n~~~~\n"
        "[url](https://example.com/I.md) [absolute](/J.md) [scheme](file:../K.md) [anchor](#L)\n"
    )
    write(folder / "SKILL.md", f"---\nname: demo\ndescription: d\n---\n{body}")
    for name in ("A.md", "B C.md", "D.md", "E.md", "F.md", "G.md", "H.md", "I.md", "J.md", "K.md"):
        write(folder.parent / name, name)

    sent = read_package_dir(folder)

    assert sorted(sent.files) == ["A.md", "B C.md", "D.md", "E.md", "demo/SKILL.md"]
    package = load_package(sent.files, sent.folder)
    external = {r.path for r in package.resources if r.kind == "external" and r.present}
    assert external == {"A.md", "B C.md", "D.md", "E.md"}


def test_without_front_matter_nothing_outside_is_read(tmp_path: Path) -> None:
    write(tmp_path / "lib" / "demo" / "SKILL.md", "[a](../A.md)\n")
    write(tmp_path / "lib" / "A.md", "a")
    assert sorted(read_package_dir(tmp_path / "lib" / "demo").files) == ["demo/SKILL.md"]


def test_the_default_limits_are_the_servers() -> None:
    defaults = inspect.signature(read_package_dir).parameters
    assert defaults["max_files"].default == PackageLimits().max_files
    assert defaults["max_file_bytes"].default == PackageLimits().max_file_bytes


async def test_register_folder_sends_what_the_reader_reads(tmp_path: Path, server_address: str) -> None:
    folder = tmp_path / "plugin" / "skills" / "demo"
    write(folder / "SKILL.md", "---\nname: demo\ndescription: d\n---\n# Demo\nSee [c](../../CONNECTORS.md).\n")
    write(tmp_path / "plugin" / "CONNECTORS.md", "connectors")
    async with SkillRegistryClient(server_address) as registry:
        registered = await registry.register_folder(str(folder), strict=True)
        skill = await registry.get_skill("demo", include_files=True)
        with pytest.raises(PackageReadError, match=r"no SKILL\.md"):
            await registry.register_folder(tmp_path)
    assert (registered.name, registered.version, registered.warnings) == ("demo", 1, ())
    assert skill.folder == "skills/demo"
    assert skill.files == read_package_dir(folder).files
