"""Three-way merge of concurrent edits of one string, on pycrdt's Text CRDT.

Each edit is the diff from the common original to one writer's text, replayed by its own CRDT client;
the CRDT merges them. Client ids are assigned by sorting the edits by stamp, so the same set of edits
always yields the same string, whatever order they arrived in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from pycrdt import Doc, Text

_ROOT = "text"


@dataclass(frozen=True, slots=True)
class TextEdit:
    """One writer's version of the string; stamp and client_patch_id order concurrent writers."""

    stamp: tuple[int, str]
    client_patch_id: str
    text: str


def merge_text(original: str, edits: Sequence[TextEdit]) -> str:
    """Merge every edit of `original`; inserts at one position come out in stamp order.

    Edits that produce the same text are one edit: two writers making the same change make it once.
    """
    seed: Doc[Text] = Doc(client_id=1)
    if original:
        seed.get(_ROOT, type=Text).insert(0, original)
    seed_update, seed_state = seed.get_update(), seed.get_state()
    merged: Doc[Text] = Doc(client_id=1)
    merged.apply_update(seed_update)
    first_of_each_text: dict[str, TextEdit] = {}
    for edit in sorted(edits, key=lambda e: (e.stamp, e.client_patch_id, e.text)):
        first_of_each_text.setdefault(edit.text, edit)  # the same edit made twice counts once
    ordered = list(first_of_each_text.values())
    for client_id, edit in enumerate(ordered, start=2):
        writer: Doc[Text] = Doc(client_id=client_id)
        writer.apply_update(seed_update)
        _replay_diff(writer.get(_ROOT, type=Text), original, edit.text)
        merged.apply_update(writer.get_update(seed_state))
    return str(merged.get(_ROOT, type=Text))


def _replay_diff(text: Text, old: str, new: str) -> None:
    """Turn `text` (holding old) into new with character-level inserts and deletes."""
    prefix = _common_prefix(old, new)
    suffix = _common_prefix(old[prefix:][::-1], new[prefix:][::-1])
    old_mid, new_mid = old[prefix : len(old) - suffix], new[prefix : len(new) - suffix]
    offsets = _utf8_offsets(old, prefix, len(old) - suffix)
    opcodes = SequenceMatcher(None, old_mid, new_mid, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(opcodes):  # back to front, so earlier offsets stay valid
        if tag in ("delete", "replace"):
            del text[offsets[i1] : offsets[i2]]
        if tag in ("insert", "replace"):
            text.insert(offsets[i1], new_mid[j1:j2])


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _utf8_offsets(s: str, start: int, stop: int) -> list[int]:
    """UTF-8 byte offsets (pycrdt indexes Text by bytes) of s[start + i] for i in 0..stop-start."""
    offsets = [len(s[:start].encode())]
    for ch in s[start:stop]:
        offsets.append(offsets[-1] + len(ch.encode()))
    return offsets
