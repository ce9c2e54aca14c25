"""Reading a skill package folder from disk into the file map that RegisterSkill takes (docs/skills.md).

The server never reads disks: a client sends the package's files and any file outside it that SKILL.md links
to. Finding those links needs only SKILL.md's body and its relative links outside fenced code, read as the
server reads them (server/skills/frontmatter.py, links.py, markdown.py), so the keys sent are the keys the
server resolves the links to.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

SKILL_FILE = "SKILL.md"
SKIPPED_NAMES = frozenset({".git", ".DS_Store", "__pycache__", "node_modules"})
OUTSIDE_LEVELS = 2
"""How far above its folder a package may link to files that are sent with it: `plugin/skills/NAME/` may
link `../../CONNECTORS.md`, never `../../../../etc/passwd`."""
MAX_FILES = 1000
"""Files in one package: the server's default limit (PackageLimits.max_files)."""
MAX_FILE_BYTES = 1 << 20
"""Bytes in one file: the server's default limit (PackageLimits.max_file_bytes)."""

_DELIMITER = "---"
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s+.*)?$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class PackageReadError(OSError):
    """The folder cannot be read as a package (not a folder, no SKILL.md, over a limit); nothing was sent."""


@dataclass(frozen=True)
class PackageFiles:
    """What RegisterSkill sends: the file map and the key of the package folder in it."""

    files: dict[str, bytes]
    folder: str


def read_package_dir(
    folder: str | Path, *, max_files: int = MAX_FILES, max_file_bytes: int = MAX_FILE_BYTES
) -> PackageFiles:
    """The package's files keyed `.../NAME/...`, plus the files outside it that SKILL.md links to.

    Keys are relative to the deepest folder holding the package and every linked outside file, so a link
    `../../CONNECTORS.md` from `plugin/skills/NAME/` becomes the key `CONNECTORS.md` beside
    `skills/NAME/SKILL.md`. Outside files are read only within OUTSIDE_LEVELS folders above the package and
    never from hidden folders: a hostile SKILL.md cannot make this read, and send, other files of the disk.
    Symbolic links and the folders in SKIPPED_NAMES are not followed.
    """
    folder = Path(folder).resolve()
    skill_file = folder / SKILL_FILE
    if not skill_file.is_file():
        raise PackageReadError(f"{folder}: no {SKILL_FILE} in this folder")
    inside = _files_under(folder)
    outside = _linked_outside(folder, skill_file.read_bytes())
    root = folder.parent
    for target in outside:
        while not target.is_relative_to(root):
            root = root.parent
    files: dict[str, bytes] = {}
    for path in sorted({*inside, *outside}):
        if len(files) == max_files:
            raise PackageReadError(f"{folder}: more than {max_files} files")
        size = path.stat().st_size
        if size > max_file_bytes:
            raise PackageReadError(f"{path}: {size} bytes, more than the limit of {max_file_bytes}")
        files[path.relative_to(root).as_posix()] = path.read_bytes()
    return PackageFiles(files, folder.relative_to(root).as_posix())


def _files_under(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part in SKIPPED_NAMES for part in relative.parts) or _under_symlink(path, folder):
            continue
        if path.is_file():
            found.append(path)
    return found


def _under_symlink(path: Path, folder: Path) -> bool:
    return any(p.is_symlink() for p in (path, *path.parents) if p.is_relative_to(folder) and p != folder)


def _linked_outside(folder: Path, skill_bytes: bytes) -> list[Path]:
    """Existing regular files outside `folder`, within OUTSIDE_LEVELS above it, that SKILL.md links to."""
    library = folder.parents[OUTSIDE_LEVELS - 1] if len(folder.parents) >= OUTSIDE_LEVELS else folder.parent
    targets = []
    for link in _relative_links(_body(skill_bytes)):
        target = Path(posixpath.normpath(posixpath.join(folder.as_posix(), link)))
        if target.is_relative_to(folder) or not target.is_relative_to(library):
            continue
        hidden = any(part.startswith(".") for part in target.relative_to(library).parts)
        if not hidden and target.is_file() and not target.is_symlink():
            targets.append(target)
    return targets


def _body(skill_bytes: bytes) -> str:
    """SKILL.md after its front matter, which runs from a first line `---` to the next; empty when there is
    none (loading will report it, and there are no links to follow)."""
    try:
        text = skill_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != _DELIMITER:
        return ""
    for index in range(1, len(lines)):
        if lines[index].rstrip() == _DELIMITER:
            return "\n".join(lines[index + 1 :])
    return ""


def _relative_links(body: str) -> Iterator[str]:
    """Targets of links to files (not URLs, anchors or absolute paths) outside fenced code, without their
    #fragment or ?query, percent-decoded. A fence closes on a line of its character, at least as long, with
    nothing else on it; an unclosed fence runs to the end, as in CommonMark."""
    fence: str | None = None
    for line in body.split("\n"):
        marker = _FENCE.match(line)
        if fence is not None:
            if marker and marker[1][0] == fence[0] and len(marker[1]) >= len(fence) and not marker[2].strip():
                fence = None
            continue
        if marker and not (marker[1][0] == "`" and "`" in marker[2]):
            fence = marker[1]
            continue
        targets = [m["target"] for m in _INLINE.finditer(line)]
        if definition := _DEFINITION.match(line):
            targets.append(definition["target"])
        for target in targets:
            path = unquote(target.split("#", 1)[0].split("?", 1)[0])
            if path and not _SCHEME.match(path) and not path.startswith("/"):
                yield path
