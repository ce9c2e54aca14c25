"""Reading a package folder from disk into the file map that RegisterSkill takes."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from .frontmatter import FrontMatterError, split_front_matter
from .links import relative_links
from .package import SKILL_FILE, PackageLimits

SKIPPED_NAMES = frozenset({".git", ".DS_Store", "__pycache__", "node_modules"})


class PackageReadError(OSError):
    """The folder cannot be read as a package (not a folder, no SKILL.md, over a limit)."""


@dataclass(frozen=True)
class PackageFiles:
    """What RegisterSkill sends: the file map and the key of the package folder in it."""

    files: dict[str, bytes]
    folder: str


OUTSIDE_LEVELS = 2
"""How far above its folder a package may link to files that are sent with it: `plugin/skills/NAME/` may
link `../../CONNECTORS.md`, never `../../../../etc/passwd`."""


def read_package_dir(folder: Path, limits: PackageLimits = PackageLimits()) -> PackageFiles:
    """The package's files keyed `.../NAME/...`, plus the files outside it that SKILL.md links to.

    Keys are relative to the deepest folder holding the package and every linked outside file, so a link
    `../../CONNECTORS.md` from `plugin/skills/NAME/` becomes the key `CONNECTORS.md` beside
    `skills/NAME/SKILL.md`. Outside files are read only within OUTSIDE_LEVELS folders above the package and
    never from hidden folders: a hostile SKILL.md cannot make this read, and send, other files of the disk.
    Symbolic links and hidden tool folders are not followed.
    """
    folder = folder.resolve()
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
        if len(files) == limits.max_files:
            raise PackageReadError(f"{folder}: more than {limits.max_files} files")
        size = path.stat().st_size
        if size > limits.max_file_bytes:
            raise PackageReadError(f"{path}: {size} bytes, more than the limit of {limits.max_file_bytes}")
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
    try:
        _, body, _ = split_front_matter(skill_bytes.decode("utf-8"))
    except (UnicodeDecodeError, FrontMatterError):
        return []  # loading will report it; there are no links to follow
    library = folder.parents[OUTSIDE_LEVELS - 1] if len(folder.parents) >= OUTSIDE_LEVELS else folder.parent
    targets = []
    for link in relative_links(body):
        target = Path(posixpath.normpath(posixpath.join(folder.as_posix(), link.target)))
        if target.is_relative_to(folder) or not target.is_relative_to(library):
            continue
        hidden = any(part.startswith(".") for part in target.relative_to(library).parts)
        if not hidden and target.is_file() and not target.is_symlink():
            targets.append(target)
    return targets
