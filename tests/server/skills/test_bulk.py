"""Bulk builds collect garbage less often, and give the process its threshold back."""

import gc

from skillstate.server.skills.bulk import BULK_GC_THRESHOLDS, fewer_collections


def test_threshold_is_raised_for_the_duration_and_restored_after_nested_uses() -> None:
    before = gc.get_threshold()
    raised = tuple(max(bulk, now) for bulk, now in zip(BULK_GC_THRESHOLDS, before, strict=True))
    with fewer_collections():
        assert gc.get_threshold() == raised
        with fewer_collections():
            assert gc.get_threshold() == raised
        assert gc.get_threshold() == raised
    assert gc.get_threshold() == before


def test_threshold_is_restored_when_the_build_fails() -> None:
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise RuntimeError("build failed")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
