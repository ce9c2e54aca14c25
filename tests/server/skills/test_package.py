"""The Agent Skills format, rule by rule, in lenient and strict loading."""

from __future__ import annotations

import pytest

from skillstate.server.errors import InvalidArgumentError
from skillstate.server.skills.diagnostics import Severity, SkillFormatError
from skillstate.server.skills.package import PackageLimits, ResourceKind, SkillPackage, load_package

BODY = "# Demo\n\nDo the thing.\n"


def skill(
    front: str, body: str = BODY, folder: str = "demo", extra: dict[str, bytes] | None = None
) -> dict[str, bytes]:
    """A file map holding `folder/SKILL.md` with this front matter, plus the `extra` files."""
    return {f"{folder}/SKILL.md": f"---\n{front}\n---\n{body}".encode(), **(extra or {})}


def rules(package: SkillPackage) -> list[str]:
    return [d.rule for d in package.warnings]


def error_rules(files: dict[str, bytes], folder: str = "", *, strict: bool) -> list[str]:
    with pytest.raises(SkillFormatError) as caught:
        load_package(files, folder, strict=strict)
    return [d.rule for d in caught.value.diagnostics if d.severity is Severity.ERROR]


GOOD = "name: demo\ndescription: Does the thing when asked."


def test_a_conforming_package_loads_without_warnings_in_both_modes() -> None:
    for strict in (False, True):
        package = load_package(skill(GOOD + "\nlicense: MIT\nmetadata:\n  author: me"), strict=strict)
        assert (package.name, package.description, package.license) == ("demo", "Does the thing when asked.", "MIT")
        assert package.metadata == {"author": "me"}
        assert package.warnings == ()
        assert package.body == BODY and package.body_line == 8  # `---`, five lines, `---`, then the body


DEVIATIONS = [
    # (front matter, the rule it breaks)
    ("name: Demo\ndescription: d", "name.lowercase"),
    ("name: -demo\ndescription: d", "name.hyphens"),
    ("name: de--mo\ndescription: d", "name.hyphens"),
    ("name: de_mo\ndescription: d", "name.characters"),
    ("name: other\ndescription: d", "name.folder"),
    ("name: " + "a" * 65 + "\ndescription: d", "name.length"),
    ("description: d", "name.required"),
    ("name: demo\ndescription: " + "d" * 1025, "description.length"),
    ("name: demo\ndescription: d\ncompatibility: " + "c" * 501, "compatibility.length"),
    ("name: demo\ndescription: d\ncompatibility:\n  python: '3.11'", "compatibility.type"),
    ("name: demo\ndescription: d\nmetadata: just text", "metadata.type"),
    ("name: demo\ndescription: d\nallowed-tools:\n  a: b", "allowed-tools.type"),
    ("name: demo\ndescription: d\nversion: '1.0'", "front-matter.keys"),
]


@pytest.mark.parametrize(("front", "rule"), DEVIATIONS)
def test_a_deviation_is_a_warning_when_lenient_and_an_error_when_strict(front: str, rule: str) -> None:
    package = load_package(skill(front))
    assert rule in rules(package)
    assert all(d.severity is Severity.WARNING for d in package.warnings)
    assert rule in error_rules(skill(front), strict=True)


def test_a_missing_name_falls_back_to_the_folder_name() -> None:
    assert load_package(skill("description: d"), "demo").name == "demo"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("# no front matter\n", "front-matter.missing"),
        ("---\nname: demo\ndescription: d\n", "front-matter.unclosed"),
        ("---\n- a list\n---\n", "front-matter.mapping"),
        ("---\nname: [unclosed\n---\n", "front-matter.yaml"),
        ("---\nname: demo\n---\nbody\n", "description.required"),
        ("---\nname: demo\ndescription: '  '\n---\nbody\n", "description.required"),
    ],
)
def test_what_cannot_be_used_is_an_error_in_both_modes(text: str, rule: str) -> None:
    for strict in (False, True):
        assert error_rules({"demo/SKILL.md": text.encode()}, strict=strict) == [rule]


def test_flow_style_is_not_strict_yaml_but_loads_leniently_as_the_client_guidance_asks() -> None:
    files = skill("name: demo\ndescription: d\nallowed-tools: [Read, Write]")
    assert error_rules(files, strict=True) == ["front-matter.yaml"]
    package = load_package(files)
    assert package.allowed_tools == ("Read", "Write")
    assert rules(package) == ["front-matter.yaml"]


def test_an_unquoted_colon_in_a_value_is_repaired_leniently() -> None:
    files = skill("name: demo\ndescription: Use when: the user asks")
    assert error_rules(files, strict=True) == ["front-matter.yaml"]
    package = load_package(files)
    assert package.description == "Use when: the user asks"
    assert rules(package) == ["front-matter.yaml"]


def test_values_are_strings_whichever_parser_read_them() -> None:
    package = load_package(skill("name: demo\ndescription: d\nmetadata: {version: 1.0, beta: true}"))
    assert package.metadata == {"version": "1.0", "beta": "true"}


def test_allowed_tools_as_a_string_or_a_block_list() -> None:
    assert load_package(skill(GOOD + "\nallowed-tools: Read Bash(git:*)")).allowed_tools == ("Read", "Bash(git:*)")
    assert load_package(skill(GOOD + "\nallowed-tools:\n  - Read\n  - Write")).allowed_tools == ("Read", "Write")


def test_crlf_line_ends_and_a_byte_order_mark_are_read() -> None:
    text = "\ufeff---\r\nname: demo\r\ndescription: d\r\n---\r\n# Body\r\n"
    package = load_package({"demo/SKILL.md": text.encode()}, strict=True)
    assert package.description == "d" and package.body == "# Body\n"


def test_links_become_resources_with_their_lines_and_missing_targets_are_warnings() -> None:
    body = (
        "# Demo\n"
        "Read [the guide](references/guide.md#setup) first.\n"  # file line 6
        "Run [it](scripts/run.py), see ![chart](assets/chart.svg) and [shared](../CONNECTORS.md).\n"
        "[web](https://example.com) [anchor](#demo) [gone](references/gone.md)\n"
        "```\n[in code](references/code.md)\n```\n"
    )
    extra = {
        "demo/references/guide.md": b"guide",
        "demo/scripts/run.py": b"print()",
        "demo/assets/chart.svg": b"<svg/>",
        "demo/notes.txt": b"notes",
        "CONNECTORS.md": b"connectors",
    }
    files = skill(GOOD, body, extra=extra)
    for strict in (False, True):  # broken links are about content, not the format
        package = load_package(files, "demo", strict=strict)
        by_path = {r.path: r for r in package.resources}
        assert by_path["demo/references/guide.md"].kind is ResourceKind.REFERENCE
        assert by_path["demo/references/guide.md"].linked_from == (6,)
        assert by_path["demo/scripts/run.py"].kind is ResourceKind.SCRIPT
        assert by_path["demo/assets/chart.svg"].kind is ResourceKind.ASSET
        assert by_path["demo/notes.txt"].kind is ResourceKind.FILE and by_path["demo/notes.txt"].linked_from == ()
        assert by_path["CONNECTORS.md"].kind is ResourceKind.EXTERNAL and by_path["CONNECTORS.md"].present
        assert not by_path["demo/references/gone.md"].present
        assert "demo/references/code.md" not in by_path  # fenced code is not a link
        assert [(d.rule, d.line) for d in package.warnings] == [("link.missing", 8)]


def test_a_link_outside_the_files_sent_is_a_warning() -> None:
    package = load_package(skill(GOOD, "See [x](../../elsewhere.md).\n"))
    assert rules(package) == ["link.outside"]


@pytest.mark.parametrize(
    ("files", "rule"),
    [
        ({"demo/README.md": b"x"}, "skill-file"),
        ({"SKILL.md": b"---\nname: demo\ndescription: d\n---\n"}, "skill-file"),
        ({"a/SKILL.md": b"x", "b/SKILL.md": b"x"}, "skill-file"),
        ({"demo/SKILL.md": b"---\nname: demo\ndescription: \xff\n---\n"}, "encoding"),
        ({}, "files.empty"),
    ],
)
def test_a_map_without_one_readable_skill_file_is_refused(files: dict[str, bytes], rule: str) -> None:
    assert error_rules(files, strict=False) == [rule]


def test_the_folder_picks_the_package_when_the_map_holds_several() -> None:
    files = {**skill(GOOD), **skill("name: other\ndescription: o", folder="other")}
    assert load_package(files, "other").name == "other"
    assert error_rules(files, "missing", strict=False) == ["skill-file"]


@pytest.mark.parametrize("path", ["/abs/SKILL.md", "demo/../SKILL.md", "demo//SKILL.md", "demo\\SKILL.md", "./x"])
def test_paths_must_be_relative_posix_paths(path: str) -> None:
    with pytest.raises(InvalidArgumentError, match="relative POSIX path"):
        load_package({**skill(GOOD), path: b"x"})


def test_limits_are_checked_before_parsing() -> None:
    limits = PackageLimits(max_files=2, max_file_bytes=100, max_package_bytes=150)
    with pytest.raises(InvalidArgumentError, match="3 files, more than the limit of 2"):
        load_package({**skill(GOOD), "demo/a": b"", "demo/b": b""}, limits=limits)
    with pytest.raises(InvalidArgumentError, match="demo/a is 101 bytes"):
        load_package({**skill(GOOD), "demo/a": b"x" * 101}, limits=limits)
    with pytest.raises(InvalidArgumentError, match="in all, more than the limit of 150"):
        load_package({**skill(GOOD), "demo/a": b"x" * 100}, limits=limits)


def test_the_digest_names_the_exact_content() -> None:
    first, same = load_package(skill(GOOD)), load_package(skill(GOOD))
    assert first.digest == same.digest
    assert load_package(skill(GOOD, BODY + "more\n")).digest != first.digest
    assert load_package(skill(GOOD, extra={"demo/x": b""})).digest != first.digest
