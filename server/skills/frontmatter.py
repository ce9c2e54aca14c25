"""Reading a SKILL.md: its YAML front matter and its Markdown body.

The format's reference validator (skills-ref) reads front matter with strictyaml: no flow collections
(`[a, b]`), no anchors or tags, every scalar a string. Strict loading does the same, so its verdicts are
the reference's. Lenient loading, as the format's client guidance asks, also accepts what a general YAML
parser reads (with a warning), and repairs the commonest authoring slip, a plain value holding `: `.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import strictyaml
import yaml

DELIMITER = "---"


class FrontMatterError(ValueError):
    """The front matter is missing, unclosed, or not YAML a loader accepts."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True, slots=True)
class SkillText:
    """A SKILL.md split into its parts; line numbers are 1-based lines of the file."""

    front_matter: dict[str, Any]
    body: str
    body_line: int
    """The file line the body starts on."""
    notes: tuple[str, ...] = ()
    """What lenient reading had to accept or repair (empty when strict YAML read it as it is)."""


def read_skill_text(text: str, *, strict: bool) -> SkillText:
    """Split and parse a SKILL.md; raises FrontMatterError naming the rule it breaks."""
    yaml_text, body, body_line = split_front_matter(text)
    front_matter, notes = parse_yaml(yaml_text, strict=strict)
    return SkillText(front_matter, body, body_line, notes)


def split_front_matter(text: str) -> tuple[str, str, int]:
    """(YAML text, body, body's first line). The front matter runs from a first line `---` to the next."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != DELIMITER:
        raise FrontMatterError("front-matter.missing", "SKILL.md must start with a line `---`")
    for index in range(1, len(lines)):
        if lines[index].rstrip() == DELIMITER:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :]), index + 2
    raise FrontMatterError("front-matter.unclosed", "not closed by a line `---`")


MAX_YAML_DEPTH = 32
"""Front matter nests a few levels (metadata: key: value); deeper is refused before the parser recurses."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases (a "billion laughs" expands a few lines into billions of nodes)
    and without nesting deeper than MAX_YAML_DEPTH (the composer recurses once per level)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._refuse("aliases (*name) are not allowed")
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                self._refuse(f"nested deeper than {MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _refuse(self, problem: str) -> None:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        raise yaml.composer.ComposerError(None, None, problem, mark)


def parse_yaml(yaml_text: str, *, strict: bool) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The front matter as a mapping, and notes on what lenient reading accepted."""
    try:
        return _as_mapping(strictyaml.load(yaml_text).data), ()
    except strictyaml.YAMLError as e:
        strict_error = _describe(e)
    if strict:
        raise FrontMatterError("front-matter.yaml", f"not strict YAML: {strict_error}")
    try:
        loaded = yaml.load(yaml_text, Loader=_BoundedLoader)
        note = f"front matter is not strict YAML ({strict_error}); read with a general YAML parser"
    except yaml.YAMLError:
        repaired = _quote_plain_values(yaml_text)
        try:
            loaded = yaml.load(repaired, Loader=_BoundedLoader)
        except yaml.YAMLError as e:
            raise FrontMatterError("front-matter.yaml", f"not YAML: {_describe(e)}") from e
        note = "front matter values containing `: ` were read as quoted strings"
    return _as_mapping(_stringify(loaded)), (note,)


def _as_mapping(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise FrontMatterError("front-matter.mapping", "must be a YAML mapping of keys to values")
    return {str(key): value for key, value in data.items()}


def _stringify(value: Any) -> Any:
    """Scalars as strings, as strictyaml reads them (a general parser turns `1.0` into a float)."""
    if isinstance(value, dict):
        return {str(k): _stringify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify(v) for v in value]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_PLAIN_VALUE = re.compile(r"^(?P<key>[A-Za-z0-9_-]+):[ \t]+(?P<value>[^'\"\s|>\[{&*!#][^\n]*:\s[^\n]*)$", re.MULTILINE)


def _quote_plain_values(yaml_text: str) -> str:
    """Quote top-level plain values that hold `: `, which YAML would read as a nested mapping."""
    return _PLAIN_VALUE.sub(lambda m: f"{m['key']}: '{m['value'].rstrip().replace(chr(39), chr(39) * 2)}'", yaml_text)


def _describe(error: Exception, limit: int = 300) -> str:
    """A parser's multi-line message on one line, cut at `limit` characters."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
