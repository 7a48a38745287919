"""How `tucano serve` and `tucano worker` set up the Python process they run in."""

from __future__ import annotations

import gc

# Allocations between two young-generation collections (CPython's default is 700). A server
# allocates a few dozen objects per request or delivery; at the default it spends several
# percent of its time collecting. Measured with bench/deliveries.py: about 6 us less CPU per
# delivery, with no growth in memory.
YOUNG_GENERATION_THRESHOLD = 10_000


def tune_garbage_collector() -> None:
    """Call once the process is set up, before it serves: what was loaded at start-up (modules,
    the app, settings) is frozen out of every later collection, and collections are rarer."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)
