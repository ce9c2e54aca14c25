"""The path index (paths.py) against states and writes computed independently, whatever the history."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.engine import paths as paths_module
from skillstate.server.engine.mergepatch import written_paths
from skillstate.server.engine.path_index import BUNDLE, PathIndex
from skillstate.server.engine.paths import LOWEST, PathNode, value_at
from skillstate.server.engine.undo import apply_in_place

from .merge_reference import ABSENT, at, merge_patch, prefix_of, written

KEYS = st.sampled_from(["a", "b", "c"])
LEAVES = st.one_of(st.none(), st.integers(0, 3), st.sampled_from(["s", "t"]))
PATCHES = st.dictionaries(
    KEYS,
    st.recursive(LEAVES, lambda inner: st.dictionaries(KEYS, inner, max_size=3), max_leaves=6),
    min_size=1,
    max_size=3,
)
AGENTS = st.sampled_from(["ada", "bob"])


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[tuple[int, str], dict[str, Any]]]]:
    """An initial state and patches committed one after another, each with a stamp on a base before it."""
    initial = merge_patch({}, draw(PATCHES))
    steps = []
    for revision in range(1, draw(st.integers(1, 10)) + 1):
        steps.append(((draw(st.integers(0, revision - 1)), draw(AGENTS)), draw(PATCHES)))
    return initial, steps


def play(
    initial: dict[str, Any],
    steps: list[tuple[tuple[int, str], dict[str, Any]]],
    *,
    start: int = 0,
    durable: bool = True,
    bundle: int = BUNDLE,
) -> tuple[PathIndex, list[dict[str, Any]]]:
    """An index of steps[start:], recorded on the state after steps[:start]; and every state, from revision 0."""
    states = [copy.deepcopy(initial)]
    for _, patch in steps:
        states.append(merge_patch(states[-1], patch))
    index = PathIndex(start, lambda path: False, bundle)
    head = copy.deepcopy(states[start])
    for revision, (stamp, patch) in enumerate(steps[start:], start=start + 1):
        touched = written_paths(head, patch, patch)
        index.record(revision, stamp, "", patch, touched, apply_in_place(head, patch), durable=durable)
        assert head == states[revision]
    return index, states


def node_at(index: PathIndex, path: tuple[str, ...]) -> PathNode | None:
    node: PathNode | None = index.root
    for key in path:
        node = node.child(key) if node is not None else None
    return node


def all_paths(states: list[dict[str, Any]], steps: list[tuple[Any, dict[str, Any]]]) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()

    def walk(value: Any, prefix: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            for key, member in value.items():
                found.add((*prefix, key))
                walk(member, (*prefix, key))

    for value in [*states, *(patch for _, patch in steps)]:
        walk(value, ())
    return found


def writes(states: list[dict[str, Any]], steps: list[tuple[Any, dict[str, Any]]]) -> list[set[tuple[str, ...]]]:
    """The paths each revision wrote (merge_reference.written), revision 1 first."""
    return [set(written(states[number], patch)) for number, (_, patch) in enumerate(steps)]


@given(histories())
def test_every_path_answers_what_it_held_and_who_wrote_it_at_every_base(history: tuple) -> None:
    initial, steps = history
    index, states = play(initial, steps)
    wrote = writes(states, steps)
    head = states[-1]
    for path in all_paths(states, steps):
        node = node_at(index, path)
        for base in range(len(steps) + 1):
            later = [paths for paths in wrote[base:]]
            exactly = any(path in paths for paths in later)
            at_or_below = any(prefix_of(path, q) for paths in later for q in paths) or any(
                path == q for _, patch in steps[base:] for q, _ in named(patch)
            )
            assert (node is not None and node.written > base) == exactly, (path, base)
            assert (node is not None and node.below > base) == at_or_below, (path, base)
            if not any(prefix_of(q, path) and q != path for paths in later for q in paths):
                current = at(head, path)
                found = value_at(node, current if current is not ABSENT else paths_module.MISSING, base)
                expected = at(states[base], path)
                assert (ABSENT if found is paths_module.MISSING else found) == expected, (path, base)


def named(patch: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], bool]]:
    """Every path a patch names, and whether it puts a value or a deletion there (covering what is below)."""
    found = []
    for key, value in patch.items():
        path = (*prefix, key)
        found.append((path, not isinstance(value, dict)))
        if isinstance(value, dict):
            found.extend(named(value, path))
    return found


@given(histories())
def test_stamps_are_the_greatest_of_the_writes_that_name_each_path(history: tuple) -> None:
    initial, steps = history
    index, _ = play(initial, steps)
    stamps: dict[tuple[str, ...], tuple[int, str]] = {}
    covers: dict[tuple[str, ...], tuple[int, str]] = {}
    for stamp, patch in steps:
        for path, covering in named(patch):
            stamps[path] = max(stamps.get(path, LOWEST), stamp)
            if covering:
                covers[path] = max(covers.get(path, LOWEST), stamp)
    for path, stamp in stamps.items():
        node = node_at(index, path)
        assert node is not None and (node.stamp, node.cover) == (stamp, covers.get(path, LOWEST)), path


def dump(node: PathNode) -> Any:
    """What a node holds, its children by key; and its children's order must follow their newest writes."""
    children = list((node.children or {}).values())
    assert [c.below for c in children] == sorted(c.below for c in children), "children out of write order"
    assert all(c.parent is node for c in children)
    return (
        node.below,
        node.stamp,
        node.cover,
        list(node.revisions or []),
        list(node.replaced or []),
        {child.key: dump(child) for child in sorted(children, key=lambda c: c.key)},
    )


@given(histories(), st.data())
def test_a_rollback_leaves_the_index_of_the_durable_revisions(history: tuple, data: st.DataObject) -> None:
    initial, steps = history
    durable = data.draw(st.integers(0, len(steps) - 1))
    expected, _ = play(initial, steps[:durable])
    index, _ = play(initial, steps[:durable])
    pending, states = play(initial, steps)  # the same, the later ones not durable: recorded on `index` below
    head = copy.deepcopy(states[durable])
    for revision, (stamp, patch) in enumerate(steps[durable:], start=durable + 1):
        touched = written_paths(head, patch, patch)
        index.record(revision, stamp, "", patch, touched, apply_in_place(head, patch), durable=False)
    assert dump(index.root) == dump(pending.root)
    index.rollback(durable)
    assert dump(index.root) == dump(expected.root)


@given(histories(), st.data())
def test_an_index_read_back_from_the_log_joins_the_one_that_follows_it(history: tuple, data: st.DataObject) -> None:
    """Joined while some later revisions are not durable yet (Timeline.extend finishing during a group
    commit), it equals the index of every revision, and, once those are taken back, the index of the durable
    ones (test_023's first half: a node two pending revisions wrote lost what the older index held)."""
    initial, steps = history
    split = data.draw(st.integers(1, len(steps)))
    durable = data.draw(st.integers(split, len(steps)))
    older, _ = play(initial, steps[:split])
    later, states = play(initial, steps[:durable], start=split)
    head = copy.deepcopy(states[durable])
    for revision, (stamp, patch) in enumerate(steps[durable:], start=durable + 1):
        touched = written_paths(head, patch, patch)
        later.record(revision, stamp, "", patch, touched, apply_in_place(head, patch), durable=False)
    later.prepend(older)
    assert later.start == 0 and dump(later.root) == dump(play(initial, steps)[0].root)
    later.rollback(durable)
    assert dump(later.root) == dump(play(initial, steps[:durable])[0].root)


@pytest.mark.parametrize("bundle", [1, 3])
@given(history=histories(), data=st.data())
def test_folding_keeps_every_answer_for_the_bases_still_allowed(
    history: tuple, data: st.DataObject, bundle: int
) -> None:
    """Folded up to an oldest base, the index answers every later base as before; in bundles of one revision,
    it holds nothing about paths no write after that base named."""
    initial, steps = history
    oldest = data.draw(st.integers(0, len(steps)))
    whole, states = play(initial, steps)
    folded, _ = play(initial, steps, bundle=bundle)
    folded.fold(oldest, bundles=len(steps) + 1)
    for path in all_paths(states, steps):
        mine, theirs = node_at(folded, path), node_at(whole, path)
        for base in range(oldest, len(steps) + 1):
            assert (mine is not None and mine.below > base) == (theirs is not None and theirs.below > base)
            assert (mine is not None and mine.written > base) == (theirs is not None and theirs.written > base)
            if mine is not None and theirs is not None:
                value = at(states[-1], path)
                value = paths_module.MISSING if value is ABSENT else value
                assert value_at(mine, value, base) == value_at(theirs, value, base) or any(
                    prefix_of(q, path) and q != path for paths in writes(states, steps)[base:] for q in paths
                )
        if bundle == 1:  # every bundle at or before the oldest base folded: nothing it needs no more is left
            if theirs is not None and theirs.below <= oldest and theirs.stamp[0] < oldest:
                assert mine is None, f"{path}: kept although nothing after {oldest} can need it"
            if mine is not None:
                assert all(revision > oldest for revision in mine.revisions or []), f"{path}: an old version kept"
