"""JAX's persistent compilation cache in a per-user folder, and compiling with it: the
programs free of host callbacks that it can keep (`callback_free`), `compile_lowered` and
`compile_program`. Nothing here imports JAX at module level."""

from __future__ import annotations

import contextlib
import os
import warnings
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


#: Sub-folder of the cache folder that holds the exported programs.
PROGRAMS_DIR = "flows-programs"
#: Name ending of an exported program (`<function>-<key><suffix>`).
PROGRAM_SUFFIX = "-program"
#: First line of an entry; the key, the SHA-256 of the payload and the entry's owner tag
#: (`flows._io.owner_tag` of the key and the digest, '-' where no owner key can be kept)
#: follow, one line each.
_MAGIC = b"flows exported program 2\n"


def _warn(text: str) -> None:
    # "persistent cache" in the text: the command line prints it as one line (`flows._cli.app`)
    warnings.warn(f"persistent cache: {text}", RuntimeWarning, stacklevel=3)


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

    from .._io import proven_temporary_target

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
