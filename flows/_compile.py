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
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import marshal
import os
import sys
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

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
        import tempfile

        # a fresh O_EXCL name: never a file of the user's that happens to have our name
        fd, probe = tempfile.mkstemp(prefix=".flows-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
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


#: Age in seconds after which a temporary file of an interrupted program write is removed.
_STALE_TMP_S = 3600.0


#: The first bytes of a JAX entry: zstd's frame magic, or a zlib header (`0x78`).
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _is_jax_entry(path: str, name: str) -> bool:
    """Whether `name` in the cache folder is an entry JAX wrote: named as JAX names them
    (`<name>-<64 hex digits>-cache`) and compressed as JAX writes them (zstd, or zlib with a
    valid header). A file of the user's, whatever its name, does not pass."""
    import re

    if not re.fullmatch(r"[^/]+-[0-9a-f]{64}" + re.escape(_ENTRY_SUFFIX), name):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    if head.startswith(_ZSTD_MAGIC):
        return True
    return len(head) >= 2 and head[0] == 0x78 and (head[0] * 256 + head[1]) % 31 == 0


def _is_program_entry(path: str, name: str) -> bool:
    """Whether `name` in `PROGRAMS_DIR` is an entry `_write_program` wrote: named
    `<function>-<48 hex digits>-program`, starting with `_MAGIC`."""
    import re

    if not re.fullmatch(r"[^/]+-[0-9a-f]{48}" + re.escape(PROGRAM_SUFFIX), name):
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(len(_MAGIC)) == _MAGIC
    except OSError:
        return False


def trim_cache(folder: Path, max_bytes: int) -> int:
    """Remove the oldest entries of `folder` (by modification time; JAX writes an entry
    once and never updates it) until it holds at most 3/4 of `max_bytes`, when it holds more
    than `max_bytes`. Only files the cache itself wrote are touched — JAX's entries
    (`_is_jax_entry`: JAX's name and compressed content), the toolkit's exported programs
    (`_is_program_entry`) and its own temporaries in `PROGRAMS_DIR` (names with a valid
    owner tag, `flows._io.proven_temporary_target`); anything else in the folder (e.g. a
    user's files, when `FLOWS_CACHE_DIR` names a folder of theirs) is neither counted nor
    removed. One that vanishes meanwhile (another process trimming) is skipped. Returns the
    number of entries removed."""
    import time

    from ._io import proven_temporary_target

    entries = []
    total = 0
    programs = folder / PROGRAMS_DIR
    for where, is_entry in ((folder, _is_jax_entry), (programs, _is_program_entry)):
        try:
            it = os.scandir(where)
        except OSError:  # no programs folder yet
            continue
        with it:
            for e in it:
                if not e.is_file(follow_symlinks=False):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if where is programs and e.name.endswith(".tmp"):
                    target = proven_temporary_target(e.name)
                    if target is not None and target.endswith(PROGRAM_SUFFIX):
                        if time.time() - st.st_mtime > _STALE_TMP_S:  # its writer was killed
                            with contextlib.suppress(OSError):
                                os.unlink(e.path)
                    continue
                if not is_entry(e.path, e.name):
                    continue
                entries.append((st.st_mtime, e.path, st.st_size))
                total += st.st_size
    if total <= max_bytes:
        return 0
    removed = 0
    for _, path, size in sorted(entries):
        if total <= 0.75 * max_bytes:
            break
        victims = [path]
        if path.endswith(_ENTRY_SUFFIX):
            atime = path[: -len(_ENTRY_SUFFIX)] + _ATIME_SUFFIX
            with contextlib.suppress(OSError):  # JAX's record: 8 bytes, a timestamp
                if os.lstat(atime).st_size == 8 and os.path.isfile(atime):
                    victims.append(atime)
        for victim in victims:
            with contextlib.suppress(OSError):
                os.unlink(victim)
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


def jit_kept_on(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """`fn` run with JAX's jit switched on, even inside `jax.disable_jit()` (or with
    `JAX_DISABLE_JIT=1`): the toolkit's solves are compiled ahead of time, which JAX refuses
    to do there, and op by op they would run ~100× slower. The flag keeps acting on the
    user's own code outside these calls."""

    @functools.wraps(fn)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        import jax

        with jax.disable_jit(False):
            return fn(*args, **kwargs)

    return wrapped


def compile_lowered(lowered):
    """`lowered.compile()`; where JAX's persistent cache hands back an entry that does not
    fit the program asked for (an entry copied over another key's: JAX fails on its own
    output layout), the program is compiled afresh with the cache off for that one compile,
    with a warning naming the folder — never a crash, never the wrong program's result."""
    try:
        return lowered.compile()
    except Exception as exc:
        folder = _ENABLED
        if folder is None:
            raise
        import jax
        from jax.experimental.compilation_cache import compilation_cache as cc

        _warn(
            f"a compiled program read from {folder} does not fit the program asked for "
            f"({type(exc).__name__}: {str(exc)[:80]}); compiled afresh without the cache. "
            f"Clear the folder, or set {NO_CACHE_ENV}=1, to stop this."
        )
        cc.reset_cache()
        jax.clear_caches()  # the unfit executable is also kept in memory, keyed alike
        jax.config.update("jax_enable_compilation_cache", False)
        try:
            return lowered.compile()
        finally:
            jax.config.update("jax_enable_compilation_cache", True)
            cc.reset_cache()


def compile_program(fn, *args, persist: bool = False):
    """`eqx.filter_jit(fn)` lowered and compiled for `args` (arrays traced, the rest
    static), traced `callback_free` so the program can be cached across processes.

    `persist`: with the persistent cache on (`enable_compilation_cache`), also keep the
    traced program in the cache folder, and read it from there instead of tracing when a
    previous process left it (`persisted_program`). Only for a `fn` whose result is arrays
    in tuples, lists and dicts, and whose program has no host callback; anything that
    cannot be keyed or exported is compiled as without `persist`."""
    import equinox as eqx
    import jax

    folder = _ENABLED
    if persist and folder is not None:
        program = persisted_program(fn, args, folder / PROGRAMS_DIR)
        if program is not None:
            return program
    # compiled ahead of time even inside `jax.disable_jit()` (JAX refuses to lower there):
    # an uncompiled solve would run op by op, ~100× slower
    with callback_free(), jax.disable_jit(False):
        return compile_lowered(eqx.filter_jit(fn).lower(*args))


# --- programs kept traced: jax.export entries beside JAX's cache ------------------------

#: Sub-folder of the cache folder that holds the exported programs.
PROGRAMS_DIR = "flows-programs"
#: Name ending of an exported program (`<function>-<key><suffix>`).
PROGRAM_SUFFIX = "-program"
#: First line of an entry; the key, the SHA-256 of the payload and the entry's owner tag
#: (`flows._io.owner_tag` of the key and the digest, '-' where no owner key can be kept)
#: follow, one line each.
_MAGIC = b"flows exported program 2\n"
#: Packages whose functions and classes may appear in a program's static part: they are
#: identified by name, with the package's version (or, for `flows` and `reduced`, the
#: digest of their source) in the key. Anything else (a user's observable, a class defined
#: in `__main__`) makes the program unkeyable: it is traced as usual.
_TRUSTED = frozenset(
    {"flows", "reduced", "jax", "jaxlib", "numpy", "diffrax", "equinox", "optimistix",
     "lineax", "jaxtyping", "builtins", "math", "operator", "functools"}
)  # fmt: skip
#: jax configuration options that do not shape a traced program (the cache's own).
_CONFIG_IGNORED = frozenset(
    {"jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
     "jax_persistent_cache_min_entry_size_bytes", "jax_compilation_cache_max_size",
     "jax_enable_compilation_cache", "jax_log_compiles", "jax_explain_cache_misses",
     "jax_logging_level", "jax_debug_log_modules", "jax_raise_persistent_cache_errors"}
)  # fmt: skip


class _Unkeyable(Exception):
    """A static value that `program_key` cannot identify across processes."""


def _trusted(module) -> bool:
    return isinstance(module, str) and module.split(".")[0] in _TRUSTED


def _named(obj) -> tuple | None:
    """("ref", module, qualname) for an object of a trusted package that its name finds
    again (a module-level function, jitted function, class, ufunc); else None."""
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not (isinstance(module, str) and _trusted(module) and isinstance(qual, str)):
        return None
    if "<" in qual:  # a local function or class: its name does not find it
        return None
    target = sys.modules.get(module)
    for part in qual.split("."):
        target = getattr(target, part, None)
    return ("ref", module, qual) if target is obj else None


def _describe(x, depth: int = 0):
    """A description of the static value `x` that is equal in two processes exactly when
    the values trace the same program (given `_environment`); `_Unkeyable` when `x` holds
    something that cannot be identified that way."""
    if depth > 64:
        raise _Unkeyable("nested too deeply")
    d = functools.partial(_describe, depth=depth + 1)
    t = type(x)
    if x is None or t in (bool, int, str, bytes):
        return (t.__name__, x)
    if t is float:
        return ("float", x.hex())
    if t in (tuple, list):
        return (t.__name__, tuple(d(v) for v in x))
    if t is dict:
        return ("dict", tuple(sorted(((d(k), d(v)) for k, v in x.items()), key=repr)))
    if t in (set, frozenset):
        return (t.__name__, tuple(sorted((d(v) for v in x), key=repr)))
    import numpy as np

    if isinstance(x, np.dtype):
        return ("dtype", str(x))
    if isinstance(x, np.ndarray | np.generic) or _is_jax_array(x):
        a = np.asarray(x)
        return ("array", a.shape, str(a.dtype), hashlib.sha256(a.tobytes()).hexdigest())
    if isinstance(x, enum.Enum):
        return ("enum", _named_or_fail(t), x.name)
    if isinstance(x, type):
        return _named_or_fail(x)
    if isinstance(x, types.MethodType):
        return ("method", d(x.__self__), d(x.__func__))
    if isinstance(x, functools.partial):
        return ("partial", d(x.func), d(x.args), d(x.keywords))
    named = _named(x)
    if named is not None:
        return named
    if isinstance(x, types.FunctionType):  # a lambda or a closure of a trusted module
        if not _trusted(x.__module__):
            raise _Unkeyable(f"function {x.__qualname__} of module {x.__module__}")
        try:
            cells = tuple(d(c.cell_contents) for c in x.__closure__ or ())
        except ValueError:  # an empty cell
            raise _Unkeyable(f"function {x.__qualname__} with an empty cell") from None
        code = hashlib.sha256(marshal.dumps(x.__code__)).hexdigest()
        return ("function", x.__module__, x.__qualname__, code, cells,
                d(x.__defaults__), d(x.__kwdefaults__))  # fmt: skip
    if dataclasses.is_dataclass(x):  # equinox modules, the toolkit's settings
        fields = tuple((f.name, d(getattr(x, f.name))) for f in dataclasses.fields(x))
        return ("object", _named_or_fail(t), fields)
    raise _Unkeyable(f"a value of type {t.__module__}.{t.__qualname__}")


def _named_or_fail(obj) -> tuple:
    named = _named(obj)
    if named is None:
        raise _Unkeyable(f"{obj!r} is not a named object of a trusted package")
    return named


def _is_jax_array(x) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.Array)


def _aval(leaf) -> tuple:
    """(shape, dtype, weakly typed) of an array argument: what its traced program sees."""
    return (tuple(leaf.shape), str(leaf.dtype), bool(getattr(leaf, "weak_type", False)))


def _source_digest(package: str) -> str:
    """SHA-256 of the source files (.py, .json) of an imported package; '' if not loaded."""
    file = getattr(sys.modules.get(package), "__file__", None)
    if not file:
        return ""
    root = Path(file).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


@functools.cache
def _environment_base() -> tuple:
    """The parts of a program's key fixed for the life of the process: Python, the
    versions of the packages it may use, the source of `flows` and `reduced`, the device."""
    import jax

    versions = tuple(
        (name, str(getattr(sys.modules.get(name), "__version__", None)))
        for name in sorted(_TRUSTED)
    )
    device = jax.devices()[0]
    return (
        sys.version,
        versions,
        _source_digest("flows"),
        _source_digest("reduced"),
        (jax.default_backend(), device.platform, device.device_kind, jax.device_count()),
    )


def _environment() -> tuple:
    """The key parts that can change within a process: jax's configuration and equinox's
    run-time-check mode (call inside `callback_free`, as the trace is)."""
    import jax

    config = tuple(
        (k, repr(v)) for k, v in sorted(jax.config.values.items()) if k not in _CONFIG_IGNORED
    )
    errors = sys.modules.get("equinox._errors")
    return (_environment_base(), config, getattr(errors, "EQX_ON_ERROR", None))


def program_key(fn, static, leaves) -> str | None:
    """Hex key of the program `fn` traces with static part `static` and array arguments
    `leaves`: a digest of `fn` and `static` described by value (`_describe`), the shapes and
    dtypes of `leaves`, and the environment (Python, package versions, the toolkit's source,
    the device, jax's configuration, equinox's check mode). None when something in `fn` or
    `static` cannot be identified across processes."""
    try:
        described = _describe((fn, static))
    except _Unkeyable:
        return None
    text = repr((_environment(), described, tuple(_aval(v) for v in leaves)))
    return hashlib.sha256(text.encode()).hexdigest()[:48]


class PersistedProgram:
    """A compiled program that was deserialized from (or just written as) an exported
    entry: called with the same arguments as `eqx.filter_jit(fn)`'s compiled program; the
    static part of the arguments is the one it was compiled for."""

    def __init__(self, compiled, treedef):
        self.compiled = compiled
        self.treedef = treedef

    def __call__(self, *args):
        import equinox as eqx
        import jax

        leaves, treedef = jax.tree_util.tree_flatten(eqx.filter(args, eqx.is_array))
        if treedef != self.treedef:
            raise ValueError("a persisted program called with arguments of another structure")
        return self.compiled(*leaves)


def _warn(text: str) -> None:
    # "persistent cache" in the text: the command line prints it as one line (`flows._cli`)
    warnings.warn(f"persistent cache: {text}", RuntimeWarning, stacklevel=3)


def persisted_program(fn, args, folder: Path) -> PersistedProgram | None:
    """`fn` compiled for `args` through its exported program in `folder`: read when an
    entry for its key is there, else traced, exported and written. None (compile it the
    usual way) when the program cannot be keyed, exported or serialized (no `flatbuffers`,
    a host callback, a result that is not plain containers of arrays). An entry that cannot
    be read (corrupt, foreign, truncated) and a folder that cannot be written are one
    warning each; the program is then traced afresh and the run goes on."""
    import importlib.util

    if importlib.util.find_spec("flatbuffers") is None:  # jax.export's serialization needs it
        return None
    import equinox as eqx
    import jax
    from jax import export

    dynamic, static = eqx.partition(args, eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(dynamic)
    with callback_free():
        key = program_key(fn, static, leaves)
    if key is None:
        return None
    path = folder / f"{getattr(fn, '__name__', 'program')}-{key}{PROGRAM_SUFFIX}"
    exported = _read_program(path, key, leaves)
    if exported is None:

        def flat(*lv):
            return fn(*eqx.combine(jax.tree_util.tree_unflatten(treedef, lv), static))

        # the key inside the program itself: an entry is taken only if the program it holds
        # was exported for the key recomputed here (`_read_program`)
        flat.__name__ = flat.__qualname__ = _exported_name(key)
        try:
            with callback_free():
                exported = export.export(jax.jit(flat))(*leaves)
        except Exception:  # a host callback, or another reason jax.export refuses it
            return None
        try:
            data = exported.serialize()
            # the program later processes read: called here too, so that every process
            # runs the same one
            exported = export.deserialize(data)
        except Exception:  # a result of custom pytree nodes: used here, not kept
            pass
        else:
            _write_program(path, key, bytes(data))

    def call(*lv):
        return exported.call(*lv)

    call.__name__ = call.__qualname__ = getattr(fn, "__name__", "program")
    compiled = compile_lowered(jax.jit(call).lower(*leaves))
    return PersistedProgram(compiled, treedef)


def _exported_name(key: str) -> str:
    """The name of the function exported for `key` (kept inside the serialized program)."""
    return f"flows_program_{key}"


def _read_program(path: Path, key: str, leaves):
    """The `jax.export.Exported` stored at `path` for `key`, or None: absent (silently), or
    unusable (with a warning).

    `key` is the one recomputed from the request (`program_key`), never read from the
    entry. The entry is used only when its header names that key, its payload has the
    digest it states, its owner tag is this user's for that key and digest (no one can
    write a valid one by following the format: another program's payload with its key and
    digest rewritten fails here), and the deserialized program was exported under that
    key (`_exported_name`) with this run's argument shapes."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # none yet (or no folder: see the write)
        return None
    except OSError as exc:
        _warn(f"cannot read {path} ({exc.strerror or type(exc).__name__}); traced again.")
        return None
    try:
        head, sep, rest = data.partition(b"\n")
        if not sep or head + b"\n" != _MAGIC:
            raise ValueError("not a flows program entry")
        stored_key, _, rest = rest.partition(b"\n")
        digest, _, rest = rest.partition(b"\n")
        tag, _, payload = rest.partition(b"\n")
        if stored_key.decode("ascii", "replace") != key:
            raise ValueError("written for another program")
        if hashlib.sha256(payload).hexdigest().encode() != digest:
            raise ValueError("its checksum does not match: truncated or altered")
        if not _entry_tag_ok(tag.decode("ascii", "replace"), key, digest.decode("ascii")):
            raise ValueError("its owner tag does not match: not written by flows for this program")
        from jax import export

        exported = export.deserialize(bytearray(payload))
        if exported.fun_name != _exported_name(key):
            raise ValueError("it holds another program than the one this run asks for")
        # (weak types are not serialized; they are in the key)
        avals = tuple((tuple(a.shape), str(a.dtype)) for a in exported.in_avals)
        if avals != tuple(_aval(v)[:2] for v in leaves):
            raise ValueError("its arguments differ from this run's")
    except Exception as exc:
        _warn(f"program entry {path} cannot be used ({exc}); traced again and rewritten.")
        return None
    return exported


def _entry_tag_ok(tag: str, key: str, digest: str) -> bool:
    """An entry's owner tag checked for `key` (the request's) and `digest`: with an owner
    key, it must be this user's tag; without one ('-' written), the check inside the
    program (`_exported_name`) is the only one."""
    import hmac

    from ._io import owner_tag

    want = owner_tag("program", key, digest)
    if want is None:
        return True
    return hmac.compare_digest(tag, want)


_WRITE_WARNED = False


def _write_program(path: Path, key: str, payload: bytes) -> None:
    """Write an entry atomically (a temporary file renamed over it: a reader sees the old
    entry, the new one or none, never half of one; two writers of one key both write whole
    entries of the same program). A folder that cannot be written: one warning a process."""
    global _WRITE_WARNED
    from ._io import create_owned_temporary, owner_tag

    digest = hashlib.sha256(payload).hexdigest()
    tag = owner_tag("program", key, digest) or "-"
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = create_owned_temporary(path.parent, path.name)  # O_EXCL, a name we can prove
        with open(tmp, "wb") as fh:
            fh.write(b"".join((_MAGIC, key.encode(), b"\n", digest.encode(), b"\n",
                               tag.encode(), b"\n", payload)))  # fmt: skip
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if not _WRITE_WARNED:
            _WRITE_WARNED = True
            _warn(f"cannot write {path.parent} ({exc.strerror or type(exc).__name__}).")


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
