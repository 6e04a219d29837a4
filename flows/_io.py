"""Files the toolkit writes and reads back: one atomic writer, folder locks, the cleanup of
temporaries left by killed writes, and the refusal of HDF5 files that would make a reader
follow paths out of the file.

Knows nothing of sweeps or experiments; `_trajectory` and `_sweep` build on it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from ._errors import ConfigError, WriteError

__all__ = [
    "INDEX_NAME",
    "LOCK_NAME",
    "REPORT_NAME",
    "FolderBusy",
    "add_owned_file",
    "check_lock_file",
    "check_regular_or_absent",
    "hdf5_hazard",
    "lock_folder",
    "netcdf_arrays_writable",
    "remove_stale_temporaries",
    "temporary_target",
    "write_atomic",
    "write_netcdf",
    "write_netcdf_arrays",
]

#: The lock file `lock_folder` keeps in a folder (never deleted: unlinking a lock file that
#: another process is about to open would let two processes lock different files).
LOCK_NAME = ".lock"
#: The first line of a lock file flows created (`lock_folder`); the holder's pid follows.
#: A `.lock` without it is not flows': it is never written to, truncated or removed.
_LOCK_MAGIC = b"flows folder lock 1\n"
#: A lock file of flows before `_LOCK_MAGIC`: the holder's pid alone. Locked and read as
#: such (never written to: a pid file of another program looks the same).
_LEGACY_LOCK = re.compile(rb"^[0-9]{1,10}\n$")

# `write_atomic` names its temporary `.<target name>.<nonce>.<tag>.tmp`: `nonce`, 8 random
# hex digits; `tag`, the owner tag (`owner_tag`) of the target name and the nonce. Only a
# name with a valid tag proves that this user's flows created the file; when no owner key
# can be kept, the temporary is named `.<target name>.<nonce>.tmp` and is never taken for
# debris (an interrupted write then leaves it).
_TEMPORARY = re.compile(
    r"^\.(?P<target>.+)\.(?P<nonce>[0-9a-f]{8})(?:\.(?P<tag>[0-9a-f]{16}))?\.tmp$"
)

# ---------------------------------------------------------------------------------------
# Ownership proofs: an owner key kept outside every folder flows writes into

#: Environment variable naming the file of the owner key (default: `owner_key_path()`).
OWNER_KEY_ENV = "FLOWS_OWNER_KEY"


def owner_key_path() -> Path:
    """`$FLOWS_OWNER_KEY`, else `$XDG_STATE_HOME/flows/owner-key`, else
    `~/.local/state/flows/owner-key`: a random secret of this user, created on first use."""
    env = os.environ.get(OWNER_KEY_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "flows" / "owner-key"


def _read_owner_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != 64:
            return None
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return None  # a key another user planted proves nothing
        text = os.pread(fd, 64, 0).decode("ascii")
        return bytes.fromhex(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


@functools.cache
def _owner_key_at(path: str) -> bytes | None:
    where = Path(path)
    key = _read_owner_key(where)
    if key is not None:
        return key
    tmp = None
    try:
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".owner-key.", suffix=".tmp", dir=where.parent)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32))
            fh.flush()
            os.fsync(fh.fileno())
        # a link appears complete or not at all; two processes racing keep the first key
        with contextlib.suppress(FileExistsError):
            os.link(tmp, where)
    except OSError:
        return None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return _read_owner_key(where)


def owner_key() -> bytes | None:
    """This user's owner key (32 random bytes, created on first use with O_EXCL semantics,
    mode 0600, outside every folder flows writes into), or None where it cannot be kept
    (then nothing flows left behind is ever recognized as its own, so nothing is removed).
    """
    return _owner_key_at(str(owner_key_path()))


def owner_tag(*parts: str) -> str | None:
    """A 16-hex-digit HMAC of `parts` under `owner_key()`: what flows writes into a name or
    a marker to prove later that it created the file (a recipe nobody without the key can
    follow). None without a key."""
    key = owner_key()
    if key is None:
        return None
    msg = "\0".join(("flows-owner", *parts)).encode("utf-8", "surrogateescape")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()[:16]


def _tag_ok(tag: object, *parts: str) -> bool:
    want = owner_tag(*parts)
    return isinstance(tag, str) and want is not None and hmac.compare_digest(tag, want)


def create_owned_temporary(folder: str | os.PathLike, target: str, *, mode: int = 0o600) -> str:
    """Create (O_CREAT | O_EXCL, never following a link) a new temporary file in `folder`
    for the file `target`, named `.<target>.<nonce>.<tag>.tmp` with a fresh random nonce and
    its owner tag; returns its path. `proven_temporary_target` recognizes exactly such
    names later."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        nonce = secrets.token_hex(4)
        tag = owner_tag("tmp", target, nonce)
        name = f".{target}.{nonce}" + (f".{tag}" if tag else "") + ".tmp"
        path = os.path.join(os.fspath(folder), name)
        try:
            fd = os.open(path, flags, mode)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise FileExistsError(errno.EEXIST, "no free temporary name", os.fspath(folder))


def _fsync_file(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str | os.PathLike) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - file systems that refuse fsync on a folder
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Write a file so that readers (and a crash) see either the old file or the complete
    new one, never a partial one.

    `write(tmp)` creates the file at `tmp`, a hidden name in the same folder
    (`.<name>.<random>.tmp`); it is then fsynced, renamed onto `path`, and the folder is
    fsynced so that the rename itself survives a power loss. If `write` raises (or the
    process is interrupted), the temporary is removed; a process killed outright leaves it,
    and `remove_stale_temporaries` recognizes it by its name.

    Public as `flows.write_atomic`, for a plug-in's own outputs; `write_netcdf` and the
    toolkit's own files (reports, manifests, sweep points, …) are written through it.

    **Arguments:** `path` the file to write (its folder is created); `write` a callable
    that writes the whole file at the path it is given.

    **Returns:** `path`, as a `Path`.

    **Raises:** `WriteError` (an `OSError`) when the file cannot be written — a full disk,
    a folder you cannot write to, a folder in the way at `path` — naming the file and what
    to try; the file there before, if any, is untouched. An exception from `write` that is
    not an `OSError` passes through unchanged (the temporary removed).
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
            kind = "a folder" if path.is_dir() else "not a regular file"
            raise IsADirectoryError(errno.EISDIR, f"{kind} is in the way", str(path))
        tmp = create_owned_temporary(path.parent, path.name)
        # keep the unique name but let the writer create the file: writers such as netCDF's
        # refuse or mishandle an existing file, and a fresh file gets the usual permissions
        # rather than mkstemp's 0600
        os.unlink(tmp)
        write(tmp)
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None and os.path.lexists(tmp):
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise _write_error(path, exc) from exc
        raise
    _fsync_dir(path.parent)
    return path


def _write_error(path: Path, exc: OSError) -> WriteError:
    cause = exc.strerror or str(exc) or type(exc).__name__
    advice = {
        errno.ENOSPC: "free some space or choose another --out",
        errno.EDQUOT: "free some space or choose another --out",
        errno.EFBIG: "the file exceeds the size limit of this process or file system "
        "(`ulimit -f`); raise it or save less (e.g. fewer --n-save points)",
        errno.EROFS: "choose a writable --out",
        errno.EACCES: "choose a folder you can write to",
    }.get(exc.errno or 0, "check the disk and the folder, then rerun")
    err = WriteError(
        exc.errno or errno.EIO,
        f"could not write {str(path)!r}: {cause}; the file there before (if any) is "
        f"untouched and no temporary was left. What to try: {advice}.",
    )
    return err


def write_netcdf(path: str | os.PathLike, ds, encoding: dict | None = None) -> Path:
    """Write the xarray Dataset `ds` as netCDF-4 (h5netcdf) at `path`, atomically
    (`write_atomic`).

    The file is serialized in memory first and then written with ordinary file writes: HDF5
    writing straight to a file that hits a full disk or a file-size limit crashed the whole
    process (segmentation fault in its close, measured with h5py 3.16); an ordinary write
    fails with `OSError`, which becomes a `WriteError` naming the file and the cause. The
    cost is one copy of the file in memory while it is written.

    **Returns:** `path`, as a `Path`.
    """
    data = ds.to_netcdf(None, engine="h5netcdf", encoding=encoding or {})

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    return write_atomic(path, write)


#: The array kinds `write_netcdf_arrays` writes itself (floats get a NaN `_FillValue`, as
#: xarray gives them; integers none): `netcdf_arrays_writable` says no to anything else.
_PLAIN_FLOATS = ("float32", "float64")
_PLAIN_INTS = ("int8", "int16", "int32", "int64")


def netcdf_arrays_writable(variables: dict, attrs: dict) -> bool:
    """Whether `write_netcdf_arrays` writes these variables and attributes exactly as
    xarray would (plain float and signed-integer arrays, text attributes, names without
    `/`, one length per dimension, a variable named like a dimension only as its
    coordinate); when not, build an xarray Dataset and use `write_netcdf` (which writes
    the rest, or refuses it with xarray's message)."""
    import numpy as np

    sizes: dict[str, int] = {}
    for name, (dims, arr, var_attrs) in variables.items():
        if "/" in name or any("/" in d for d in dims) or len(dims) != np.ndim(arr):
            return False
        for dim, size in zip(dims, np.shape(arr), strict=True):
            if sizes.setdefault(dim, size) != size:
                return False
        if np.asarray(arr).dtype.name not in _PLAIN_FLOATS + _PLAIN_INTS:
            return False
        if not all(isinstance(v, str) for v in var_attrs.values()):
            return False
    if any(name in sizes and dims != (name,) for name, (dims, _, _) in variables.items()):
        return False
    return all(isinstance(v, str) for v in attrs.values())


def write_netcdf_arrays(
    path: str | os.PathLike,
    variables: dict[str, tuple[tuple[str, ...], Any, dict[str, str]]],
    attrs: dict[str, str],
    *,
    compress: frozenset[str] | set[str] = frozenset(),
    complevel: int = 4,
) -> Path:
    """Write plain arrays as netCDF-4 (h5netcdf) at `path`, atomically (`write_atomic`),
    without xarray: the file `write_netcdf(path, xr.Dataset(...), encoding)` writes for the
    same variables, attribute for attribute, with none of xarray's import cost (xarray
    loads pandas, and with Dask installed `dask.array`, `scipy.fftpack` and `distributed`
    on the way to a write: most of a short command's saving time).

    **Arguments:** `variables`, `{name: (dims, array, attributes)}` in the order xarray
    lists a Dataset's variables (data variables in insertion order, then coordinates);
    `attrs`, the file's attributes; `compress`, the variables written with zlib at
    `complevel` (xarray's `{"zlib": True, "complevel": complevel}` encoding). Only what
    `netcdf_arrays_writable` accepts (else `ValueError`).

    Like `write_netcdf`, the file is serialized in memory first and then written with
    ordinary file writes (a full disk is a `WriteError`, never a crash in HDF5).

    **Returns:** `path`, as a `Path`.
    """
    import io

    import h5netcdf
    import numpy as np

    if not netcdf_arrays_writable(variables, attrs):
        raise ValueError(
            "write_netcdf_arrays writes float and signed-integer arrays with text "
            "attributes only; build an xarray Dataset and use write_netcdf."
        )
    buf = io.BytesIO()
    # the calls xarray's h5netcdf backend makes, in its order: file attributes, then the
    # dimensions (in the order the variables name them), then every variable (created with
    # its fill value, then its attributes), then the data
    with h5netcdf.File(
        buf, mode="w", invalid_netcdf=False, decode_vlen_strings=True, format="NETCDF4"
    ) as f:
        for key, value in attrs.items():
            f.attrs[key] = value
        sizes: dict[str, int] = {}
        for dims, arr, _ in variables.values():
            sizes |= dict(zip(dims, np.shape(arr), strict=True))
        for dim, size in sizes.items():
            f.dimensions[dim] = size
        targets = []
        for name, (dims, arr, var_attrs) in variables.items():
            arr = np.asarray(arr)
            kwargs: dict = {}
            if arr.shape:  # xarray sets no filters or chunks on scalars
                kwargs["chunks"] = None
                if name in compress:
                    kwargs.update(compression="gzip", compression_opts=complevel)
            fill = arr.dtype.type(np.nan) if arr.dtype.name in _PLAIN_FLOATS else None
            var = f.create_variable(
                name, dimensions=dims, dtype=arr.dtype, fillvalue=fill, **kwargs
            )
            for key, value in var_attrs.items():
                var.attrs[key] = value
            targets.append((var, arr))
        for var, arr in targets:
            var[...] = arr
    data = buf.getvalue()

    def write(tmp: str) -> None:
        with open(tmp, "wb") as out:
            out.write(data)

    return write_atomic(path, write)


def temporary_target(name: str) -> str | None:
    """The name of the file that the `write_atomic` temporary `name` was to become, or None
    when `name` is not shaped like one of its temporaries."""
    match = _TEMPORARY.match(name)
    return match.group("target") if match else None


def proven_temporary_target(name: str) -> str | None:
    """`temporary_target(name)` when `name` also carries a valid owner tag (`owner_tag`):
    proof that this user's flows created the file (`create_owned_temporary`); else None."""
    match = _TEMPORARY.match(name)
    if not match or not _tag_ok(match.group("tag"), "tmp", match["target"], match["nonce"]):
        return None
    return match.group("target")


def remove_stale_temporaries(folder: str | os.PathLike, owned: Callable[[str], bool]) -> list[Path]:
    """Delete the temporaries that killed `write_atomic` calls left in `folder` (not below).

    Only regular files named exactly as `write_atomic` names its temporaries, with a valid
    owner tag (`proven_temporary_target`: proof that flows created them), and only those
    whose target name the caller writes (`owned(target)` is true), are deleted: a file the
    toolkit did not write — whatever its name — is never touched. Call it only while holding the
    folder's lock (`lock_folder`), so that no write in progress loses its temporary.

    **Returns:** the paths deleted.
    """
    removed = []
    folder = Path(folder)
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return removed
    for entry in entries:
        target = proven_temporary_target(entry.name)
        if target is None or not owned(target):
            continue
        try:
            if not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                continue
            os.unlink(entry.path)
        except FileNotFoundError:  # gone meanwhile: nothing to do
            continue
        removed.append(folder / entry.name)
    if removed:
        _fsync_dir(folder)
    return removed


class FolderBusy(OSError):
    """`lock_folder`: another process holds the folder's lock. `holder` is the process id
    it recorded (None when unknown)."""

    def __init__(self, folder: Path, holder: int | None):
        who = f"process {holder}" if holder is not None else "another process"
        super().__init__(f"{folder} is locked by {who}")
        self.folder = folder
        self.holder = holder


@contextlib.contextmanager
def lock_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold an exclusive lock on `folder` (created if missing) for the `with` block.

    The lock is `flock` on `folder/.lock`, taken without waiting: when another process
    holds it, `FolderBusy` is raised at once. The operating system releases it when the
    process ends in any way (crash, `kill -9`), so a dead process never leaves the folder
    locked. The lock file records the holder's process id for the message of the next
    process; it stays in the folder.

    The lock file is created complete (written under a fresh O_EXCL name, then linked into
    place) and starts with flows' lock line (`_LOCK_MAGIC`); only such a file is ever
    written to. A `.lock` that is not flows' — a file of the user's, another program's
    pid file — is refused (`ConfigError`) and left exactly as it was; a lock file of an
    earlier flows (its pid alone) is locked but not written to.

    Where `fcntl` does not exist (Windows) the block runs without a lock.

    **Returns** (as the `with` target): the folder, as a `Path`.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no flock
        yield folder
        return
    lock = folder / LOCK_NAME
    check_lock_file(folder)
    try:
        _create_lock_file(folder)
        # O_NOFOLLOW: a planted symlink must not make us write our pid into another file
        fd = os.open(lock, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ConfigError(
            f"cannot open the lock file {str(lock)!r} ({exc.strerror}); remove it if it is "
            "not a plain file, or choose another --out."
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(_foreign_lock_text(lock, "not a regular file"))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusy(folder, _holder(fd)) from None
        head = os.pread(fd, len(_LOCK_MAGIC) + 64, 0)
        if head.startswith(_LOCK_MAGIC):  # ours: only the pid after our line is rewritten
            os.ftruncate(fd, len(_LOCK_MAGIC))
            os.pwrite(fd, f"{os.getpid()}\n".encode(), len(_LOCK_MAGIC))
        elif not _LEGACY_LOCK.match(head):  # replaced since the check: not ours
            raise ConfigError(_foreign_lock_text(lock, "it does not start with flows' lock line"))
        yield folder
    finally:
        os.close(fd)  # releases the lock


def _create_lock_file(folder: Path) -> None:
    """Create `folder/.lock` as flows' lock file, complete, unless something is there."""
    if os.path.lexists(folder / LOCK_NAME):
        return
    tmp = create_owned_temporary(folder, LOCK_NAME, mode=0o644)
    try:
        with open(tmp, "r+b") as fh:
            fh.write(_LOCK_MAGIC)
        try:
            os.link(tmp, folder / LOCK_NAME)  # fails, changing nothing, if one appeared
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: exclusive create, then fill
            with contextlib.suppress(FileExistsError):
                fd = os.open(
                    folder / LOCK_NAME,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                    0o644,
                )
                try:
                    os.write(fd, _LOCK_MAGIC)
                finally:
                    os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _foreign_lock_text(lock: Path, why: str) -> str:
    return (
        f"{str(lock)!r} is not a lock file of flows ({why}): it may be a file of yours or of "
        "another program, so flows neither writes to it nor removes it. Move it away (or "
        "delete it if it is yours and unused), or choose another --out."
    )


def check_lock_file(folder: str | os.PathLike) -> None:
    """Refuse (`ConfigError`) a `folder/.lock` that is not a regular file (a symbolic link,
    a folder, a FIFO), or a regular file that is not flows' lock file (a file of the user's
    or of another program): flows never writes through it, to it, nor removes it. Creates
    nothing."""
    lock = Path(folder) / LOCK_NAME
    check_regular_or_absent(lock, "flows' lock file")
    if not is_flows_lock(lock) and os.path.lexists(lock):
        raise ConfigError(_foreign_lock_text(lock, "it does not start with flows' lock line"))


def is_flows_lock(lock: str | os.PathLike, *, legacy: bool = True) -> bool:
    """Whether `lock` is a regular file holding flows' lock line (or, with `legacy`, the
    bare pid an earlier flows wrote)."""
    try:
        fd = os.open(lock, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.pread(fd, len(_LOCK_MAGIC) + 64, 0)
    except OSError:
        return False
    finally:
        os.close(fd)
    return head.startswith(_LOCK_MAGIC) or (legacy and bool(_LEGACY_LOCK.match(head)))


def check_regular_or_absent(path: str | os.PathLike, what: str) -> None:
    """Refuse (`ConfigError`) a `path` that exists as anything but a regular file (a folder,
    a symbolic link, a FIFO, a device) where flows is to write or read a file: it is never
    written through, followed or removed. Run it before computing."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # absent (or under a file: refused later)
        return
    except OSError as exc:
        raise ConfigError(f"cannot inspect {str(path)!r} ({exc.strerror}).") from None
    if stat.S_ISREG(mode):
        return
    kind = (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a symbolic link"
        if stat.S_ISLNK(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "not a regular file"
    )
    raise ConfigError(
        f"{str(path)!r} (where {what} goes) is {kind}; flows writes only regular files and "
        "never writes through, follows or removes anything else. Move it away or choose "
        "another --out."
    )


def _holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, len(_LOCK_MAGIC) + 32, 0)
        text = text.removeprefix(_LOCK_MAGIC).decode("ascii").strip()
        return int(text) if text else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def hdf5_hazard(source: str | os.PathLike | IO[bytes]) -> str | None:
    """Why the HDF5 (netCDF-4) file `source` must not be read back, or None when it is a
    plain, self-contained file.

    A file is refused when reading it could make HDF5 open or read other files: a dataset
    with external storage (its bytes live in any file named inside it, which a reader
    would then copy out), a virtual dataset (mapped onto other files), or a soft or
    external link anywhere in the file. Links are inspected, never followed. A file that
    HDF5 cannot open is refused too.

    **Arguments:** `source` a path or a binary file object (e.g. `io.BytesIO` of the bytes
    that will then be parsed, so that the file checked is the file read).

    **Returns:** a sentence naming the object and what it does, or None.
    """
    import h5py

    try:
        with h5py.File(source, "r") as f:
            return _hazard_in(f)
    except Exception as exc:  # noqa: BLE001 - any failure to parse: not a readable file
        return f"not a readable HDF5/netCDF-4 file ({type(exc).__name__}: {exc})"


def _hazard_in(f) -> str | None:
    import h5py

    def links_of(group) -> str | None:
        for name in group:
            link = group.get(name, getlink=True)
            if isinstance(link, h5py.HardLink):
                continue
            where = f"{group.name.rstrip('/')}/{name}"
            if isinstance(link, h5py.SoftLink):
                return f"{where!r} is a soft link (to {link.path!r})"
            if isinstance(link, h5py.ExternalLink):
                return f"{where!r} is an external link (to {link.path!r} in {link.filename!r})"
            return f"{where!r} is a link of an unsupported kind ({type(link).__name__})"
        return None

    def visit(name, obj) -> str | None:
        if isinstance(obj, h5py.Group):
            return links_of(obj)
        if isinstance(obj, h5py.Dataset):
            if obj.is_virtual:
                return f"dataset {obj.name!r} is a virtual dataset (its data lives in other files)"
            if obj.external:
                files = sorted({str(entry[0]) for entry in obj.external})
                return f"dataset {obj.name!r} uses external storage (its data lives in {files})"
        return None

    # `visititems` reaches every object through hard links (each once), never through soft
    # or external links, so the links themselves are checked group by group
    return links_of(f) or f.visititems(visit)


def versions() -> dict[str, str]:
    """Versions of the libraries a result depends on (saved with every result)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("flows-theory", "jax", "jaxlib", "diffrax", "equinox", "numpy", "sympy", "xarray"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


# ---------------------------------------------------------------------------------------
# Output folders that hold the user's files too


#: The manifest of the files the toolkit wrote into an output folder: for each, its size and
#: SHA-256 at the moment it was written. A listed file is ours only while it is still that
#: file (a plain name in the folder, a regular file, same size and digest): only such files
#: are ever replaced or removed. The manifest is data, never instructions — a tampered or
#: foreign entry (an absolute path, `../x`, a user's file, a file edited since) proves
#: nothing and is ignored; anything not proven ours is the user's.
MANIFEST = ".flows-owned.json"
_MANIFEST_FORMAT = 2
_TMP_MARK = ".flows-tmp-pid"
#: The HTML report `flows check` and `flows simulate` write into their output folder. It
#: and `INDEX_NAME` are owned outputs: listed in the folder's manifest, never written over
#: a file of the user's.
REPORT_NAME = "report.html"
#: The index page `flows check all` writes above the experiments' folders (an owned
#: output, like `REPORT_NAME`).
INDEX_NAME = "index.html"


def file_digest(path: str | os.PathLike) -> dict[str, int | str]:
    """`{"size": bytes, "sha256": hex}` of the regular file `path` (not following a
    symlink), as recorded in the manifest."""
    import hashlib

    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{os.fspath(path)!r} is not a regular file")
        size = 0
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return {"size": size, "sha256": h.hexdigest()}


def _plain_name(name: object) -> bool:
    """A file name directly inside a folder: no separator, not `.`/`..`, no NUL."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..", MANIFEST, LOCK_NAME)
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and os.path.basename(name) == name
    )


def _read_manifest(final: Path) -> tuple[dict[str, dict], bool] | None:
    """The manifest's `{name: digest}` entries with plain names (others dropped), and its
    `complete` flag; None when there is none. A manifest that cannot be read, or one written
    before entries carried digests, gives no entries: it proves nothing."""
    try:
        raw = json.loads((final / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError):
        return {}, True
    if not isinstance(raw, dict) or raw.get("format") != _MANIFEST_FORMAT:
        return {}, True
    files = raw.get("files")
    if not isinstance(files, dict):
        return {}, True
    entries = {
        n: d
        for n, d in files.items()
        if _plain_name(n)
        and isinstance(d, dict)
        and isinstance(d.get("size"), int)
        and isinstance(d.get("sha256"), str)
    }
    return entries, bool(raw.get("complete", True))


def _is_ours(final: Path, name: str, digest: dict) -> bool:
    """`final/name` is a regular file with the size and digest the manifest recorded."""
    try:
        st = os.lstat(final / name)
        if not stat.S_ISREG(st.st_mode) or st.st_size != digest["size"]:
            return False
        return file_digest(final / name)["sha256"] == digest["sha256"]
    except OSError:
        return False


def _owned(final: Path) -> dict[str, dict]:
    """The files in `final` that the toolkit can prove it wrote (see `MANIFEST`), with their
    digests. Folders without a manifest, or with one of an earlier format, own nothing."""
    found = _read_manifest(final)
    if found is None:
        return {}
    return {n: d for n, d in found[0].items() if _is_ours(final, n, d)}


def _write_manifest(folder: Path, files: dict[str, dict], complete: bool) -> None:
    text = json.dumps(
        {
            "format": _MANIFEST_FORMAT,
            "written_by": "flows",
            "complete": complete,
            "files": {n: files[n] for n in sorted(files)},
        },
        indent=1,
    )
    write_atomic(folder / MANIFEST, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def check_output_path(path: str | os.PathLike, *, flag: str = "--out") -> Path:
    """Refuse, before anything is computed, an output path that cannot become a folder we
    write into: a file, a path under a file, or a place where nothing can be created.
    Creates nothing.

    **Returns:** the path. **Raises:** `ConfigError` naming `flag`.
    """
    if not str(path).strip():
        raise ConfigError(f"`{flag}` is empty; give a folder (it is created), e.g. {flag} results.")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"`{flag}` {str(path)!r} is a file; give a folder (it is created).")
    probe = path
    while not probe.exists():
        if os.path.islink(probe):  # a symlink to nothing (or a loop): nothing can be made there
            raise ConfigError(
                f"`{flag}` {str(path)!r}: {str(probe)!r} is a symbolic link to a missing "
                f"target ({os.readlink(probe)!r}); remove the link or give another folder."
            )
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise ConfigError(
            f"`{flag}` {str(path)!r} lies under the file {str(probe)!r}; give a folder path."
        )
    try:  # os.access says yes to root everywhere; only a real create tells
        fd, tmp = tempfile.mkstemp(prefix=".flows-write-probe.", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise ConfigError(
            f"`{flag}` {str(path)!r}: cannot write in {str(probe)!r} ({exc.strerror}); "
            "choose a folder you can write to."
        ) from None
    return path


def _conflicts(final: Path, names) -> list[str]:
    """The names among `names` that exist in `final` (as anything: file, folder, link) and
    that the toolkit cannot prove it wrote."""
    if not final.is_dir():
        return []
    owned = _owned(final)
    return sorted(n for n in names if os.path.lexists(final / n) and n not in owned)


def _conflict_error(final: Path, conflicts: list[str], kept: Path | None = None) -> ConfigError:
    where = f" This run's outputs were kept in {str(kept)!r}." if kept else ""
    return ConfigError(
        f"{str(final)!r} holds {', '.join(conflicts)} that flows cannot prove it wrote (not "
        "in the folder's manifest with the same content: a file of yours, one edited since, "
        "or one written by an older flows without content digests); it never overwrites or "
        f"removes such files. Move them away or choose another `--out`.{where}"
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _staging_mark(folder_name: str, pid: int) -> str:
    """The marker a staging folder carries: its own name and the creating pid, sealed with
    their owner tag (`owner_tag`, keyed by this user's secret: a seal nobody can forge by
    following a public recipe), so that only folders made by `OutputDir` for this name are
    recognized. Without an owner key the seal is empty and the folder is never recognized
    (a killed run's staging folder is then left where it is)."""
    seal = owner_tag("staging", folder_name, str(pid)) or ""
    return json.dumps({"written_by": "flows", "folder": folder_name, "pid": pid, "seal": seal})


def _staging_pid(folder: Path) -> int | None:
    """The pid in `folder`'s staging marker when the marker is flows' own for this folder
    (a regular file, matching name and a seal made with this user's owner key); None
    otherwise."""
    mark = folder / _TMP_MARK
    try:
        if not stat.S_ISREG(os.lstat(mark).st_mode):
            return None
        raw = json.loads(mark.read_text(encoding="utf-8"))
        pid = raw["pid"]
        if not isinstance(pid, int) or isinstance(pid, bool):
            return None
        if not _tag_ok(raw.get("seal"), "staging", folder.name, str(pid)):
            return None
        if raw != json.loads(_staging_mark(folder.name, pid)):
            return None
        return pid
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
        return None


class OutputDir:
    """Collects an experiment's outputs in a hidden temporary folder next to `final`, and
    moves them into place only when everything has been written (`commit`).

    Into an existing `final` it moves only its own files, replacing only files the toolkit
    can prove it wrote there before (`MANIFEST`: same name, size and SHA-256); a file of the
    user's with one of its names is refused up front (`ConfigError`), and every other file in
    the folder is left alone. A crash leaves no half-written folder behind as if complete:
    the manifest is marked incomplete while files are moved and complete after the last one
    (`results.json`) is in place.

    **Arguments:** `final`, the folder; `names`, the files the experiment writes (every
    written name must be one of them); `experiment`, its name (kept for the callers; the
    manifest alone decides what is ours).
    """

    def __init__(self, final: Path, names: tuple[str, ...], experiment: str | None = None):
        self.final = Path(final)
        self.names = tuple(names)
        self.experiment = experiment
        self.preflight(self.final, self.names, experiment)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self._clean_stale()
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.final.name}.", dir=self.final.parent))
        (self.tmp / _TMP_MARK).write_text(_staging_mark(self.tmp.name, os.getpid()))

    @staticmethod
    def preflight(final: Path, names: tuple[str, ...], experiment: str | None = None) -> None:
        """The checks of the constructor, creating nothing: run them before computing."""
        check_output_path(final)
        check_regular_or_absent(Path(final) / MANIFEST, "flows' manifest")
        conflicts = _conflicts(Path(final), names)
        if conflicts:
            raise _conflict_error(Path(final), conflicts)

    def _clean_stale(self) -> None:
        """Empty and remove the staging folders of earlier runs that were killed: folders
        named as `mkdtemp` names ours, carrying our sealed marker, whose process is gone.
        Only the marker and files with this experiment's output names are removed, and the
        folder only once it is empty — anything else in it is left where it is."""
        shape = re.compile(rf"^\.{re.escape(self.final.name)}\.[a-z0-9_]{{8}}$")
        try:
            entries = list(os.scandir(self.final.parent))
        except OSError:
            return
        for entry in entries:
            if not shape.match(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            d = Path(entry.path)
            pid = _staging_pid(d)
            if pid is None or pid == os.getpid() or _pid_alive(pid):
                continue
            for name in (*self.names, _TMP_MARK):
                with contextlib.suppress(OSError):
                    if stat.S_ISREG(os.lstat(d / name).st_mode):
                        os.unlink(d / name)
            with contextlib.suppress(OSError):
                d.rmdir()  # refuses when something else is left: then it stays

    def path(self, name: str) -> Path:
        if name not in self.names:
            raise ValueError(f"{name!r} is not among the declared outputs {self.names}")
        return self.tmp / name

    def commit(self) -> list[Path]:
        (self.tmp / _TMP_MARK).unlink()
        names = sorted(p.name for p in self.tmp.iterdir())
        # results.json last: its presence with a complete manifest marks a finished run
        names.sort(key=lambda n: n == "results.json")
        digests = {n: file_digest(self.tmp / n) for n in names}
        if not self.final.exists():
            _write_manifest(self.tmp, digests, complete=True)
            os.replace(self.tmp, self.final)
            return [self.final / n for n in names]
        conflicts = _conflicts(self.final, names)
        if conflicts:  # a user's file appeared while we computed
            kept = self.final.with_name(f"{self.final.name}.new-{os.getpid()}")
            os.replace(self.tmp, kept)
            raise _conflict_error(self.final, conflicts, kept)
        owned = _owned(self.final)
        stale = {n: d for n, d in owned.items() if n in self.names and n not in digests}
        _write_manifest(self.final, {**owned, **digests}, complete=False)
        for n in names:
            os.replace(self.tmp / n, self.final / n)
        for n, d in stale.items():  # ours, from an earlier run, not rewritten now
            if _is_ours(self.final, n, d):  # proven again right before removal
                (self.final / n).unlink(missing_ok=True)
        kept_owned = {n: d for n, d in owned.items() if n not in stale}
        _write_manifest(self.final, {**kept_owned, **digests}, complete=True)
        self.tmp.rmdir()
        return [self.final / n for n in names]

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def add_owned_file(
    final: str | os.PathLike,
    name: str,
    write: Callable[[str], object],
    experiment: str | None = None,
) -> Path:
    """Write `final/name` atomically (`write_atomic`) and list it in the folder's manifest
    (with its size and digest) next to what an `OutputDir` committed there before.

    For a file added after the outputs of a run were committed (the HTML report). A file
    `name` that exists and that the toolkit cannot prove it wrote is refused
    (`ConfigError`), as `OutputDir` refuses it; a folder without a manifest gets one listing
    only `name`.

    **Returns:** the path written.
    """
    final = Path(final)
    conflicts = _conflicts(final, (name,))
    if conflicts:
        raise _conflict_error(final, conflicts)
    found = _read_manifest(final)
    complete = True if found is None else found[1]
    digest: dict = {}

    def write_and_digest(tmp: str) -> None:
        write(tmp)
        digest.update(file_digest(tmp))

    path = write_atomic(final / name, write_and_digest)
    _write_manifest(final, {**_owned(final), name: digest}, complete)
    return path
