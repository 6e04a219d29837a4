"""Files the toolkit writes and reads back: one atomic writer, folder locks, the cleanup of
temporaries left by killed writes, and the refusal of HDF5 files that would make a reader
follow paths out of the file.

Knows nothing of sweeps or experiments; `_trajectory` and `_sweep` build on it.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

__all__ = [
    "LOCK_NAME",
    "FolderBusy",
    "hdf5_hazard",
    "lock_folder",
    "remove_stale_temporaries",
    "temporary_target",
    "write_atomic",
]

#: The lock file `lock_folder` keeps in a folder (never deleted: unlinking a lock file that
#: another process is about to open would let two processes lock different files).
LOCK_NAME = ".lock"

# `write_atomic` names its temporary `.<target name>.<8 characters>.tmp`: the characters
# are `tempfile.mkstemp`'s random name sequence (a-z, 0-9, _). Only names of exactly this
# shape are ever taken for the debris of an interrupted write.
_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp$")


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

    **Arguments:** `path` the file to write (its folder is created); `write` a callable
    that writes the whole file at the path it is given.

    **Returns:** `path`, as a `Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    # keep the unique name but let the writer create the file: writers such as netCDF's
    # refuse or mishandle an existing file, and a fresh file gets the usual permissions
    # rather than mkstemp's 0600
    os.unlink(tmp)
    try:
        write(tmp)
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return path


def temporary_target(name: str) -> str | None:
    """The name of the file that the `write_atomic` temporary `name` was to become, or None
    when `name` is not shaped like one of its temporaries."""
    match = _TEMPORARY.match(name)
    return match.group("target") if match else None


def remove_stale_temporaries(folder: str | os.PathLike, owned: Callable[[str], bool]) -> list[Path]:
    """Delete the temporaries that killed `write_atomic` calls left in `folder` (not below).

    Only regular files named exactly as `write_atomic` names its temporaries, and only
    those whose target name the caller writes (`owned(target)` is true), are deleted: a
    file the toolkit did not write is never touched. Call it only while holding the
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
        target = temporary_target(entry.name)
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
    # O_NOFOLLOW: a planted symlink must not make us write our pid into another file
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusy(folder, _holder(fd)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield folder
    finally:
        os.close(fd)  # releases the lock


def _holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        return int(text) if text else None
    except (OSError, ValueError):
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
