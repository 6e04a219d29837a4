"""What a long command does to its own process: a garbage collector tuned for many
small objects, and the memory-map limit (the compiled-solve caches dropped before it is
reached)."""

from __future__ import annotations

from collections.abc import Callable

# --- the garbage collector of a command ------------------------------------------------

#: Full collections of a command: one per this many collections of the middle generation
#: (Python's default: 10).
COMMAND_GC_FULL_EVERY = 1000


def tune_gc_for_command() -> None:
    """Garbage collection for one command of the command line (not for a library user's
    process). Measured on a warm `flows simulate multistage --m 200 --t1 5` (4.4 s CPU):
    Python's full collections, each walking every object that importing and tracing made
    (millions), cost 0.3 s, and the collections of interpreter shutdown 0.5 s more. So full
    collections are made rare (`COMMAND_GC_FULL_EVERY`: the young generations still collect
    what tracing leaves, and a long command still collects fully from time to time), and
    at exit the surviving objects are frozen (`gc.freeze`): the process ends without
    walking them. Exit handlers (`atexit`, `weakref.finalize`) run as before."""
    import atexit
    import gc

    t0, t1, _ = gc.get_threshold()
    gc.set_threshold(t0, t1, COMMAND_GC_FULL_EVERY)
    atexit.register(gc.freeze)


# --- the memory-map limit: why a long process segfaulted --------------------------------
#
# Each XLA CPU executable keeps about three memory mappings (its JIT-compiled code and
# data) for as long as it is cached. The kernel caps the mappings of one process
# (`vm.max_map_count`, 65 530 by default): near it LLVM cannot map a new program
# ("LLVM compilation error: Cannot allocate memory") and the process dies with a
# segmentation fault. Measured (jaxlib 0.10.2, 2026-12-04; `benchmarks/bench_map_limit.py`):
# 3.0 mappings per executable, the crash at 21 500 cached executables, 65 046 mappings.
# The test suite, one long process of thousands of solves, hit it; so could a long
# session of a user's. The toolkit therefore drops its compiled programs before compiling
# a new one once half the limit is used (`relieve_map_pressure`, called on every cache
# miss of the solves); the persistent compilation cache makes the recompilations that
# follow disk reads.

#: Fraction of the process's memory-map limit above which compiled programs are dropped.
MAP_PRESSURE = 0.5

_CACHE_CLEARERS: list[Callable[[], None]] = []


def register_cache(clear: Callable[[], None]) -> None:
    """Register a cache of compiled programs to be cleared under map pressure."""
    _CACHE_CLEARERS.append(clear)


def map_usage() -> tuple[int, int] | None:
    """(memory mappings this process holds, the kernel's limit `vm.max_map_count`), or None
    where /proc does not say (not Linux)."""
    try:
        with open("/proc/sys/vm/max_map_count", encoding="ascii") as fh:
            limit = int(fh.read().strip())
        with open("/proc/self/maps", "rb") as fh:
            used = sum(1 for _ in fh)
    except (OSError, ValueError):
        return None
    return used, limit


def relieve_map_pressure(threshold: float = MAP_PRESSURE) -> bool:
    """Drop every cached compiled program (the toolkit's and JAX's) when this process holds
    more than `threshold` of its memory-map limit; whether it did."""
    usage = map_usage()
    if usage is None or usage[0] <= threshold * usage[1]:
        return False
    import jax

    for clear in _CACHE_CLEARERS:
        clear()
    jax.clear_caches()
    return True
