"""How `tucano serve` and `tucano worker` set up the Python process they run in."""

from __future__ import annotations

import contextlib
import gc
import os
import resource

# Allocations between two young-generation collections (CPython's default is 700): a server
# allocates a few dozen objects per request or delivery (docs/adr/database.md has the figure).
YOUNG_GENERATION_THRESHOLD = 10_000


def tune_garbage_collector() -> None:
    """Call once the process is set up, before it serves: what was loaded at start-up (modules,
    the app, settings) is frozen out of every later collection, and collections are rarer."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one and return it. A worker holds a socket
    per attempt in flight, up to over a thousand while receivers hang, and many systems start
    services with a soft limit of 1,024 under a far higher hard one (Go's runtime raises it the
    same way)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return open_files_limit()


def open_files_limit() -> int:
    """The soft limit on open files (a large number when there is none)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


# Threads for the event loop's DNS lookups (libuv's pool; 4 unless set). Deliveries resolve their
# hosts there, and a host slow to resolve holds a thread for seconds: with four, a few such hosts
# stalled every other delivery's lookup.
RESOLVER_THREADS = 64


def size_resolver_threads() -> None:
    """Call before the event loop starts. An operator's own UV_THREADPOOL_SIZE is kept."""
    os.environ.setdefault("UV_THREADPOOL_SIZE", str(RESOLVER_THREADS))
