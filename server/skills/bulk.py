"""Bulk builds allocate millions of long-lived objects (nodes, runs, index postings): collecting the young
generation every 700 allocations, CPython's default, then costs as much as the build itself, and the older
generations' passes over a growing heap add more. Measured MotifZip on synthetic skills: at 10K, 21.7 s with
the default thresholds and 13.3 s with a young threshold of 50,000; at 30K, 59 s with that alone, 50 s when
the older generations are also collected less often, 44 s with no collection at all."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

BULK_GC_THRESHOLDS = (50_000, 50, 100)
"""CPython's three thresholds while a bulk build runs (the defaults are 700, 10, 10): allocations between
young collections, young collections between middle ones, middle ones between full ones."""

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] = gc.get_threshold()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collection thresholds for the duration (process-wide; nested and concurrent uses restore
    them when the last one ends). Garbage is still collected, less often."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*(max(bulk, now) for bulk, now in zip(BULK_GC_THRESHOLDS, _saved, strict=True)))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)


def settle_long_lived() -> None:
    """Move every object alive now out of the collector's reach (gc.freeze). A full collection walks the
    whole heap while holding the GIL: with a library loaded that is 0.2 s at 1K skills and seconds at 10K,
    a stall of every call on the event loop. The library changes only by registration and removal, so it
    is frozen then; a skill removed later is still freed by reference counting (its graphs hold no cycles),
    and what would have been cyclic garbage at that moment is kept (a few objects per registration)."""
    gc.freeze()
