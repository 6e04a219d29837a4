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

**Programs kept traced** (`compile_program(..., persist=True)`): the persistent cache saves
the XLA compilation, not the tracing and lowering before it — 1 s of CPU of a warm `flows
simulate multistage --m 200 --t1 5` (its whole solve program traced through diffrax), more
than the compile read back from the cache (0.2 s) and the solve (0.4 s). With the cache on,
such a program is exported (`jax.export`: its StableHLO, traced once) into the folder's
`flows-programs/` under a key of everything that determines it (`program_key`), and later
processes deserialize it instead of tracing; the compilation of the deserialized program is
then a hit of JAX's cache. Cold and warm runs call the same deserialized program, so they
give bit-for-bit the same results, and these are those of the plain (uncached) program.

`jax_cache` (the folder, its trimming, enabling and disabling the cache), `programs`
(compiling: `callback_free`, `compile_lowered`, `compile_program`, and the exported
programs), `process` (the command's garbage collector, the memory-map limit). Re-exports
only.
"""

from .jax_cache import (
    CACHE_DIR_ENV,
    DEFAULT_MAX_BYTES,
    MIN_COMPILE_SECONDS,
    NO_CACHE_ENV,
    PROGRAM_SUFFIX,
    PROGRAMS_DIR,
    cache_disabled_by_env,
    compilation_cache_dir,
    default_cache_dir,
    disable_compilation_cache,
    enable_compilation_cache,
    trim_cache,
)
from .process import (
    COMMAND_GC_FULL_EVERY,
    MAP_PRESSURE,
    map_usage,
    register_cache,
    relieve_map_pressure,
    tune_gc_for_command,
)
from .programs import (
    PersistedProgram,
    callback_free,
    compile_lowered,
    compile_program,
    jit_kept_on,
    persisted_program,
    program_key,
)

__all__ = [
    "CACHE_DIR_ENV",
    "DEFAULT_MAX_BYTES",
    "MIN_COMPILE_SECONDS",
    "NO_CACHE_ENV",
    "PROGRAMS_DIR",
    "PROGRAM_SUFFIX",
    "cache_disabled_by_env",
    "compilation_cache_dir",
    "default_cache_dir",
    "disable_compilation_cache",
    "enable_compilation_cache",
    "trim_cache",
    "COMMAND_GC_FULL_EVERY",
    "MAP_PRESSURE",
    "map_usage",
    "register_cache",
    "relieve_map_pressure",
    "tune_gc_for_command",
    "PersistedProgram",
    "callback_free",
    "compile_lowered",
    "compile_program",
    "jit_kept_on",
    "persisted_program",
    "program_key",
]
