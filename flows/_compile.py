"""Compilation that is paid once: programs free of host callbacks, and JAX's persistent
compilation cache in a per-user folder.

Why the toolkit's solves were never cached across processes (measured, jaxlib 0.10.2): JAX
refuses to write any program that contains a host callback ("Not writing persistent cache
entry … because it uses host callbacks"), and every `diffrax.diffeqsolve` contains some —
equinox's run-time checks (`eqx.error_if`: "saveat.ts must be increasing", the sign of
dt0) are `jax.pure_callback`s under equinox's default `EQX_ON_ERROR=raise`. The toolkit
validates those arguments in Python before compiling, so inside its own solves the checks
are traced in equinox's 'nan' mode (`callback_free`): a failed check turns the result into
NaN, which the solve's NaN detection then reports, instead of raising from a callback.
Programs that count evaluations by a host callback (`count_evals=True`, the loss clock,
implicit solvers under 'auto') stay out of the cache.

Nothing here imports JAX at module level, so the command line can decide about the cache
before JAX is loaded.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

#: Environment variable that turns the command line's persistent cache off (any value but
#: '', '0').
NO_CACHE_ENV = "FLOWS_NO_CACHE"
#: Environment variable naming the cache folder (default: `default_cache_dir()`).
CACHE_DIR_ENV = "FLOWS_CACHE_DIR"
#: Size bound of the cache folder: when it is exceeded, `enable_compilation_cache` removes
#: the oldest entries (by the time they were written) down to 3/4 of it.
DEFAULT_MAX_BYTES = 2 * 1024**3
#: Programs that compile faster than this are not written. JAX's default is 1 s; 0 here:
#: a command also compiles ~50 small programs (0.02–0.1 s each, eager set-up operations),
#: 1.8 s of a warm `flows simulate multistage --m 200 --t1 5`, and reading them back is
#: cheaper (that command's folder: 106 files, 800 kB).
MIN_COMPILE_SECONDS = 0.0


def default_cache_dir() -> Path:
    """`$FLOWS_CACHE_DIR`, else `$XDG_CACHE_HOME/flows/jax`, else `~/.cache/flows/jax`."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "flows" / "jax"


def cache_disabled_by_env() -> bool:
    """Whether `FLOWS_NO_CACHE` turns the cache off."""
    return os.environ.get(NO_CACHE_ENV, "") not in ("", "0")


def _usable_folder(path: Path) -> str | None:
    """None when `path` is (or can be made) a writable folder of our own; else why not."""
    try:
        if path.is_symlink() and not path.exists():
            return "it is a dangling symbolic link"
        path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            return "it is not a folder"
        probe = path / f".flows-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


_ENABLED: Path | None = None


def enable_compilation_cache(
    path: str | os.PathLike | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    min_compile_s: float = MIN_COMPILE_SECONDS,
) -> Path | None:
    """Turn on JAX's persistent compilation cache in `path` (default `default_cache_dir()`),
    bounded to `max_bytes`: when the folder holds more, its oldest entries (by the time they
    were written) are removed first, down to 3/4 of the bound. Returns the folder, or None
    when it cannot be used: then a one-line warning says why and the run goes on uncached.
    Programs that compiled in less than `min_compile_s` are not written.

    Concurrent processes may share the folder. JAX writes an entry in one piece and never
    replaces one; a reader that meets an entry being written, or a corrupt one (truncated,
    edited: its zlib checksum fails), gets JAX's warning, compiles the program itself and
    goes on. Programs compiled before the call are not written.

    The bound is kept here, once per call, rather than by JAX's own eviction
    (`jax_compilation_cache_max_size`), which re-reads every entry's access time on every
    write under a folder lock: quadratic in the number of entries (a cold test suite
    writes ~6000).
    """
    global _ENABLED
    folder = Path(path).expanduser() if path is not None else default_cache_dir()
    why = _usable_folder(folder)
    if why is not None:
        warnings.warn(
            f"compilation cache off: cannot use {folder} ({why}); set "
            f"{CACHE_DIR_ENV} to a writable folder or {NO_CACHE_ENV}=1 to silence this.",
            stacklevel=2,
        )
        return None
    trim_cache(folder, max_bytes)
    import jax
    from jax.experimental.compilation_cache import compilation_cache as cc

    # JAX decides once per process whether the cache is used, at the first compilation;
    # reset so that a cache turned on after some compilation still takes effect
    cc.reset_cache()
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_s))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", -1)
    _ENABLED = folder
    return folder


#: JAX's names for an entry and for its access-time record.
_ENTRY_SUFFIX, _ATIME_SUFFIX = "-cache", "-atime"


def trim_cache(folder: Path, max_bytes: int) -> int:
    """Remove the oldest entries of `folder` (by modification time; JAX writes an entry
    once and never updates it) until it holds at most 3/4 of `max_bytes`, when it holds more
    than `max_bytes`. Only JAX's entry files are touched; one that vanishes meanwhile
    (another process trimming) is skipped. Returns the number of entries removed."""
    entries = []
    total = 0
    with os.scandir(folder) as it:
        for e in it:
            if not e.name.endswith(_ENTRY_SUFFIX) or not e.is_file(follow_symlinks=False):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            entries.append((st.st_mtime, e.name, st.st_size))
            total += st.st_size
    if total <= max_bytes:
        return 0
    removed = 0
    for _, name, size in sorted(entries):
        if total <= 0.75 * max_bytes:
            break
        for victim in (name, name[: -len(_ENTRY_SUFFIX)] + _ATIME_SUFFIX):
            try:
                os.unlink(folder / victim)
            except OSError:
                pass
        total -= size
        removed += 1
    return removed


def disable_compilation_cache() -> None:
    """Turn the persistent cache off for programs compiled from now on."""
    global _ENABLED
    import jax
    from jax.experimental.compilation_cache import compilation_cache as cc

    cc.reset_cache()
    jax.config.update("jax_compilation_cache_dir", None)
    _ENABLED = None


def compilation_cache_dir() -> Path | None:
    """The folder `enable_compilation_cache` turned on in this process (None: off)."""
    return _ENABLED


@contextlib.contextmanager
def callback_free():
    """Trace equinox's run-time checks (`eqx.error_if`) without host callbacks while this
    context is open, so the program can be written to the persistent cache. Only the
    default mode ('raise') is changed; a user's `EQX_ON_ERROR=breakpoint`/'off'/'nan' is
    kept. Use it only around programs whose checked arguments the toolkit has validated.
    The mode is a module global of equinox: another thread that traces its own
    `eqx.error_if` while this context is open gets 'nan' mode too (the toolkit compiles
    from one thread)."""
    errors = sys.modules.get("equinox._errors")
    if errors is None or getattr(errors, "EQX_ON_ERROR", None) != "raise":
        yield
        return
    # equinox traces its checks through one jitted function whose trace cache does not
    # see the mode: dropped on entry (so ours are traced in 'nan' mode) and on exit (so a
    # user's own checks are never served our 'nan' traces)
    cached = getattr(getattr(errors, "branched_error_if_impl_jit", None), "_cached", None)
    clear = getattr(cached, "clear_cache", lambda: None)
    clear()
    setattr(errors, "EQX_ON_ERROR", "nan")  # noqa: B010 - a module global
    try:
        yield
    finally:
        setattr(errors, "EQX_ON_ERROR", "raise")  # noqa: B010
        clear()


def compile_program(fn, *args):
    """`eqx.filter_jit(fn)` lowered and compiled for `args` (arrays traced, the rest
    static), traced `callback_free` so the program can be cached across processes."""
    import equinox as eqx

    with callback_free():
        return eqx.filter_jit(fn).lower(*args).compile()


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
