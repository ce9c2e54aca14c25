"""The path index of one execution: recording what each revision wrote, folding what no base needs any
more, taking back revisions a failed commit lost, and joining an index read back from the log.

Nothing older than the oldest base a patch may still have (compaction, `Limits.max_base_lag`) is needed:
`fold` drops it a few bundles of revisions at a time as commits go on. Revisions not yet durable keep an
undo of what they changed here, so that a failed commit takes them back (`rollback`). paths.py says what a
node holds and how a merge reads it.
"""

from __future__ import annotations

import bisect
import collections
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .canonical import JSON
from .mergepatch import MISSING, Path, get_path
from .paths import KEPT, NOT_TEXT, PathNode, Stamp, TextWrite
from .undo import Restore, Undo

BUNDLE = 1024
"""Revisions whose nodes are folded together (`fold`)."""


@dataclass(slots=True)
class _Saved:
    """A node's fields before a revision that is not durable yet changed them."""

    node: PathNode
    below: int
    stamp: Stamp
    cover: Stamp
    created: bool


class PathIndex:
    """The path metadata of one execution, from revision `start` on: a merge on a base at or after `start` is
    answered from it (Timeline.extend reaches further back first)."""

    def __init__(self, start: int, is_text: Callable[[Path], bool], bundle: int = BUNDLE) -> None:
        self.root = PathNode("", None)
        self._bundle_size = bundle
        self.start = start
        """Revisions after it are indexed."""
        self._is_text = is_text
        self._bundles: collections.deque[tuple[int, list[PathNode]]] = collections.deque()
        """(last revision, the nodes its revisions changed) of each closed bundle, oldest first: what `fold`
        visits."""
        self._bundle: list[PathNode] = []
        self._bundle_id = 0
        self._bundle_first = self._bundle_last = start
        self._pending: collections.deque[tuple[int, list[_Saved]]] = collections.deque()
        """Revisions not durable yet, oldest first, with what each changed."""
        self._saving: list[_Saved] | None = None
        self._saved: set[int] = set()

    def untouched_since(self, base: int, keys: Iterable[str]) -> bool:
        """True if no revision after `base` (at or after `start`) wrote at or below any top-level member `keys`."""
        children = self.root.children
        if children:
            for key in keys:
                child = children.get(key)
                if child is not None and child.below > base:
                    return False
        return True

    def record(
        self,
        revision: int,
        stamp: Stamp,
        client_patch_id: str,
        submitted: dict[str, JSON],
        written: tuple[Path, ...],
        undo: Undo,
        *,
        durable: bool,
    ) -> None:
        """Index the revision that just changed the head (`undo` takes it back): the paths it wrote (`written`)
        and what they held, and the stamps of what its agent submitted. One not `durable` yet can be taken back by
        `rollback` until `committed` says it is."""
        if revision - self._bundle_first >= self._bundle_size:
            self._close_bundle()
            self._bundle_first = revision
        self._bundle_last = revision
        self._saving = None if durable else []
        try:
            for path in written:
                node = self._reach(self.root, path, revision)
                self._version(node, revision, _replaced(undo, path), stamp, client_patch_id, submitted, path)
            self._stamp(self.root, submitted, stamp, (), revision)
            if self._saving is not None:
                self._pending.append((revision, self._saving))
        finally:
            self._saving = None
            self._saved.clear()

    def committed(self, revision: int) -> None:
        """Revisions up to `revision` are durable: what would take them back is dropped."""
        pending = self._pending
        while pending and pending[0][0] <= revision:
            pending.popleft()

    def rollback(self, durable: int) -> None:
        """Take back every revision after `durable` (a failed commit), newest first."""
        parents: dict[int, PathNode] = {}
        while self._pending and self._pending[-1][0] > durable:
            for saved in reversed(self._pending.pop()[1]):
                node = saved.node
                node.below, node.stamp, node.cover = saved.below, saved.stamp, saved.cover
                _drop_versions_after(node, durable)
                parent = node.parent
                if parent is None:
                    continue
                assert parent.children is not None
                if saved.created:
                    del parent.children[node.key]
                    node.parent = None
                else:
                    parents[id(parent)] = parent
        for parent in parents.values():  # a write taken back had moved its child to the end
            _sort_children(parent)

    def fold(self, oldest_base: int, bundles: int = 4) -> bool:
        """Drop what no merge on a base at or after `oldest_base` reads, from at most `bundles` bundles of
        revisions that all lie at or before it (called after each commit: each call's work stays small);
        returns whether more is left to fold."""
        if self._bundle and self._bundle_last <= oldest_base:
            self._close_bundle()
        while bundles and self._bundles and self._bundles[0][0] <= oldest_base:
            for node in self._bundles.popleft()[1]:
                _fold(node, oldest_base)
            bundles -= 1
        return bool(self._bundles) and self._bundles[0][0] <= oldest_base

    def prepend(self, older: PathIndex) -> None:
        """Take in the index of the revisions before this one's start (read back from the log); this index
        then starts where that one does. Revisions not durable yet stay undoable, down to what came before."""
        assert older.start < self.start and not older._pending
        merged: list[PathNode] = []
        pending: dict[int, list[_Saved]] = {}
        for _, changes in self._pending:
            for saved in changes:
                pending.setdefault(id(saved.node), []).append(saved)

        def take(mine: PathNode, theirs: PathNode) -> None:
            merged.append(mine)
            mine.below = max(mine.below, theirs.below)
            mine.stamp, mine.cover = max(mine.stamp, theirs.stamp), max(mine.cover, theirs.cover)
            if theirs.revisions:
                assert theirs.replaced is not None
                mine.revisions = theirs.revisions + (mine.revisions or array("q"))
                mine.replaced = theirs.replaced + (mine.replaced or [])
            for saved in pending.get(id(mine), ()):  # a rollback goes back to what the older revisions left
                saved.below, saved.created = max(saved.below, theirs.below), False
                saved.stamp, saved.cover = max(saved.stamp, theirs.stamp), max(saved.cover, theirs.cover)
            if theirs.children:
                children = mine.children if mine.children is not None else {}
                mine.children = children
                for key, child in theirs.children.items():
                    take(children.get(key) or children.setdefault(key, PathNode(key, mine, child.text)), child)
                _sort_children(mine)

        take(self.root, older.root)
        for first in reversed(range(0, len(merged), self._bundle_size)):  # folded a bundle at a time, as others
            self._bundles.appendleft((self.start, merged[first : first + self._bundle_size]))
        self.start = older.start

    def _note(self, node: PathNode, created: bool = False) -> None:
        """Before `node` changes for the revision being recorded: bundle it, and remember what it was if that
        revision is not durable."""
        if node.bundle != self._bundle_id:
            node.bundle = self._bundle_id
            self._bundle.append(node)
        if self._saving is not None and id(node) not in self._saved:
            self._saved.add(id(node))
            self._saving.append(_Saved(node, node.below, node.stamp, node.cover, created))

    def _reach(self, node: PathNode, path: Path, revision: int, start: int = 0) -> PathNode:
        """The node of `path` (below `node`, from `path[start]` on), created where missing, each on the way
        marked as reached by `revision` and moved last among its siblings."""
        self._note(node)
        node.below = revision
        for depth in range(start, len(path)):
            key = path[depth]
            children = node.children
            if children is None:
                children = node.children = {}
            child = children.get(key)
            if child is None:
                child = children[key] = PathNode(key, node, self._is_text(path[: depth + 1]))
                self._note(child, created=True)
            else:
                self._note(child)
                if child.below != revision and next(reversed(children)) != key:
                    del children[key]  # to the end: children stay in the order of their newest writes
                    children[key] = child
            child.below = revision
            node = child
        return node

    def _version(
        self,
        node: PathNode,
        revision: int,
        replaced: Any,
        stamp: Stamp,
        client_patch_id: str,
        submitted: dict[str, JSON],
        path: Path,
    ) -> None:
        if node.revisions is None:
            node.revisions, node.replaced = array("q"), []
        assert node.replaced is not None
        if node.text:
            intent = get_path(submitted, path)
            if intent is not MISSING and intent is not None and not isinstance(intent, str):
                intent = NOT_TEXT
            replaced = TextWrite(replaced, stamp, client_patch_id, intent)
        node.revisions.append(revision)
        node.replaced.append(replaced)

    def _stamp(self, node: PathNode, patch: dict[str, JSON], stamp: Stamp, path: Path, revision: int) -> None:
        """Each path the submitted patch names takes its stamp; a value or a deletion also covers the path."""
        for key, value in patch.items():
            here = (*path, key)
            child = self._reach(node, here, revision, start=len(path))
            if child.stamp < stamp:
                child.stamp = stamp
            if isinstance(value, dict):
                self._stamp(child, value, stamp, here, revision)
            elif child.cover < stamp:
                child.cover = stamp

    def _close_bundle(self) -> None:
        if self._bundle:
            self._bundles.append((self._bundle_last, self._bundle))
        self._bundle = []
        self._bundle_id += 1


def _replaced(undo: Undo, path: Path) -> Any:
    """The value at `path` that the change whose undo this is replaced, or KEPT. A replaced value is out of the
    state for good, so it may be kept as it is; what the change left in place is not, as later changes
    mutate the head."""
    node: Any = undo
    for depth, key in enumerate(path):
        item = node.get(key)
        if item is None:
            return KEPT
        if isinstance(item, Restore):
            return item.value if depth == len(path) - 1 else get_path(item.value, path[depth + 1 :])
        node = item
    return KEPT


def _sort_children(node: PathNode) -> None:
    assert node.children is not None
    node.children = dict(sorted(node.children.items(), key=lambda item: item[1].below))


def _drop_versions_after(node: PathNode, durable: int) -> None:
    revisions = node.revisions
    if revisions:
        keep = bisect.bisect_right(revisions, durable)
        del revisions[keep:]
        assert node.replaced is not None
        del node.replaced[keep:]


def _fold(node: PathNode, oldest_base: int) -> None:
    """Drop the versions no base at or after `oldest_base` reads, and the node itself (and parents left
    empty) once nothing of it can decide a merge."""
    if node.parent is None:
        return  # the root, or already removed
    revisions = node.revisions
    if revisions:
        dropped = bisect.bisect_right(revisions, oldest_base)
        if dropped:
            assert node.replaced is not None
            del revisions[:dropped]
            del node.replaced[:dropped]
            if not revisions:
                node.revisions = node.replaced = None
    while (
        node.parent is not None
        and not node.children
        and not node.revisions
        and node.below <= oldest_base
        and node.stamp[0] < oldest_base
    ):
        parent = node.parent
        assert parent.children is not None
        del parent.children[node.key]
        node.parent = None
        node = parent
