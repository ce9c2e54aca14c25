"""`text` merges of large strings: diffs correct against a plain apply, cost bounded before it is paid and
refused past the bound, and large merges computed in a worker while the event loop keeps answering."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import random
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.engine.textdiff import Edit, cells, edits, spans
from skillstate.server.engine.textmerge import TextEdit, TextMerges, merge_text
from skillstate.server.errors import LimitExceededError
from skillstate.server.limits import DEFAULT_LIMITS, Limits
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

TEXT = {"type": "object", "properties": {"doc": {"type": "string", "x-merge": "text"}}}


def applied(original: str, script: list[Edit]) -> str:
    """The edits applied one after another, written independently of the server's replay."""
    out, at = [], 0
    for start, end, inserted in script:
        assert at <= start <= end <= len(original), "edits are in order and do not overlap"
        out += [original[at:start], inserted]
        at = end
    return "".join([*out, original[at:]])


TEXTS = st.text(alphabet=st.sampled_from("ab\n é😀"), max_size=80)


@given(TEXTS, TEXTS)
def test_the_edits_turn_the_original_into_the_text(original: str, text: str) -> None:
    assert applied(original, edits(spans(original, text))) == text


def document(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(f"{i}: {' '.join(rng.choice(['alpha', 'beta', 'gamma']) for _ in range(6))}\n" for i in range(lines))


def test_a_few_edits_of_a_large_document_cost_little_however_far_apart() -> None:
    """The common ends and the unique lines leave only the edited lines to diff."""
    original = document(30_000, seed=1)
    lines = original.splitlines(keepends=True)
    lines[5], lines[29_000] = "5: rewritten\n", "29000: also rewritten\n"
    text = "".join(lines)
    differing = spans(original, text)
    assert cells(differing) < 10_000
    assert applied(original, edits(differing)) == text


def test_two_writers_editing_a_large_string_both_keep_their_edits() -> None:
    original = document(20_000, seed=2)
    lines = original.splitlines(keepends=True)
    first = "".join(["HEADER\n", *lines])
    second = "".join([*lines[:-1], "FOOTER\n"])
    merged = merge_text(original, [TextEdit((0, "a"), "", first), TextEdit((0, "b"), "", second)])
    assert merged == "".join(["HEADER\n", *lines[:-1], "FOOTER\n"])


def test_a_merge_that_would_cost_too_much_is_refused_before_it_runs() -> None:
    rng = random.Random(3)
    original = "".join(rng.choice("ab") for _ in range(20_000))
    rewritten = "".join(rng.choice("ab") for _ in range(20_000))
    started = time.perf_counter()
    with pytest.raises(LimitExceededError, match=r"over the limit of 25,000,000 \(max_text_diff_cells\)"):
        merge_text(original, [TextEdit((0, "a"), "", rewritten), TextEdit((0, "b"), "", original + "x")])
    assert time.perf_counter() - started < 5, "refused from the bound, not after doing the work"
    assert cells(spans(original, rewritten)) > DEFAULT_LIMITS.max_text_diff_cells


def test_a_merge_with_too_many_edits_is_refused() -> None:
    original = "".join(f"line {i}\n" for i in range(6000))
    scattered = "".join(f"line {i}{'!' if i % 2 else ''}\n" for i in range(6000))  # 3,000 lines edited
    with pytest.raises(LimitExceededError, match=r"3,000 changes to the string, over the limit of 1,000"):
        merge_text(original, [TextEdit((0, "a"), "", scattered)], Limits(max_text_merge_edits=1000))
    assert len(merge_text(original, [TextEdit((0, "a"), "", scattered)])) == len(scattered)


async def test_a_large_text_merge_waits_in_the_worker_while_the_loop_keeps_answering() -> None:
    worker = concurrent.futures.ThreadPoolExecutor(1)
    gate = threading.Event()
    worker.submit(gate.wait)  # the worker is busy until the test opens the gate
    engine = StateEngine(MemoryRevisionLog(), EngineConfig(), worker=worker)
    await engine.start()
    try:
        original = document(5_000, seed=4)
        await engine.create_execution("x", json.dumps(TEXT), json.dumps({"doc": original}))
        await engine.submit_patch("x", "a", 0, json.dumps({"doc": "A\n" + original}))
        stale = asyncio.ensure_future(engine.submit_patch("x", "b", 0, json.dumps({"doc": original + "B\n"})))
        for _ in range(100):  # the merge is parked in the worker; reads are answered meanwhile
            assert (await engine.get_state("x")).revision == 1
        assert not stale.done()
        gate.set()
        result = await asyncio.wait_for(stale, 30)
        assert result.revision == 2
        assert json.loads((await engine.get_state("x")).state_json)["doc"] == "A\n" + original + "B\n"
    finally:
        gate.set()
        await engine.close()
        worker.shutdown()


async def test_a_refused_text_merge_changes_nothing_and_says_which_limit() -> None:
    engine = StateEngine(MemoryRevisionLog(), EngineConfig(limits=Limits(max_text_diff_cells=1_000)))
    await engine.start()
    try:
        original = document(2_000, seed=5)
        await engine.create_execution("x", json.dumps(TEXT), json.dumps({"doc": original}))
        await engine.submit_patch("x", "a", 0, json.dumps({"doc": original[::-1]}))  # at head: no merge
        with pytest.raises(LimitExceededError, match="max_text_diff_cells"):
            await engine.submit_patch("x", "b", 0, json.dumps({"doc": original.upper()}))
        assert (await engine.get_state("x")).revision == 1
    finally:
        await engine.close()


def test_where_a_merge_runs_never_changes_its_result() -> None:
    """The worker and the loop run the same pure function: a large merge gives what merge_text gives."""
    original = document(3_000, seed=6)
    edits_ = [
        TextEdit((0, "a"), "", original.replace("alpha", "ALPHA", 50)),
        TextEdit((0, "b"), "", original.replace("beta", "BETA", 50)),
    ]
    merges = TextMerges(DEFAULT_LIMITS)

    async def deferred_then_answered() -> str:
        from skillstate.server.engine.textmerge import Deferred

        with pytest.raises(Deferred) as caught:
            merges(original, edits_)
        await merges.run(caught.value)
        return merges(original, edits_)

    try:
        assert asyncio.run(deferred_then_answered()) == merge_text(original, edits_)
    finally:
        merges.close()


def test_concurrent_line_inserts_stay_whole_lines() -> None:
    """Found by the robustness suite: a diff cut inside a word ("agent-5" and "agent-0" share "agent-")
    replaced text nobody changed, and a concurrent insert landed in pieces. Inserted lines stay lines."""
    base = "agent-5-11\nagent-1-11\nagent-2-4\nagent-3-2\nagent-0-7\n"
    head = (
        "agent-0-26\nagent-5-11\nagent-0-24\nagent-3-20\nagent-1-11\nagent-5-26\nagent-2-4\nagent-3-2\n"
        "agent-1-15\nagent-0-7\n"
    )
    mine = "agent-5-11\nagent-1-28\nagent-1-11\nagent-2-4\nagent-3-2\nagent-0-7\n"
    assert all(inserted == "" or inserted.endswith("\n") for _, _, inserted in edits(spans(base, head)))
    merged = merge_text(base, [TextEdit((98, ""), "", head), TextEdit((41, "agent-1"), "agent-1-28", mine)])
    assert sorted(merged.splitlines()) == sorted(set(head.splitlines()) | set(mine.splitlines()))


def test_a_short_merge_that_differs_everywhere_goes_to_the_worker() -> None:
    """Length is not cost: 15,000 characters that share no line cost 25M cells (a quarter of a second), so
    such a merge is deferred to the worker, while a short one with a small diff runs at once."""
    import random

    from skillstate.server.engine.textmerge import Deferred

    letters = random.Random(4)
    original = "".join("".join(letters.choices("abcdefghij", k=49)) + "\n" for _ in range(100))
    rewritten = "".join(letters.choices("klmnopqrst", k=4_990))
    merges = TextMerges(DEFAULT_LIMITS)
    try:
        with pytest.raises(Deferred):
            merges(original, [TextEdit((0, "a"), "", rewritten), TextEdit((0, "b"), "", original + "Z")])
        small = [TextEdit((0, "a"), "", "A" + original), TextEdit((0, "b"), "", original + "Z")]
        assert merges(original, small) == "A" + original + "Z"
    finally:
        merges.close()
