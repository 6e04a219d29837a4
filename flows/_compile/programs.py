"""Programs kept traced: `jax.export` entries beside JAX's cache, keyed by everything
that determines them (`program_key`), read back only when they prove to be what was
asked."""

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
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from .jax_cache import (
    _MAGIC,
    NO_CACHE_ENV,
    PROGRAM_SUFFIX,
    PROGRAMS_DIR,
    _warn,
    compilation_cache_dir,
)

_P = ParamSpec("_P")
_R = TypeVar("_R")


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

    from .._io import owner_tag

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
    from .._io import create_owned_temporary, owner_tag

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
        folder = compilation_cache_dir()
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

    folder = compilation_cache_dir()
    if persist and folder is not None:
        program = persisted_program(fn, args, folder / PROGRAMS_DIR)
        if program is not None:
            return program
    # compiled ahead of time even inside `jax.disable_jit()` (JAX refuses to lower there):
    # an uncompiled solve would run op by op, ~100× slower
    with callback_free(), jax.disable_jit(False):
        return compile_lowered(eqx.filter_jit(fn).lower(*args))
