"""One atomic writer (`write_atomic`: readers and a crash see the old file or the whole
new one) and the cleanup of the temporaries killed writes left, only those proven ours."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from .._errors import WriteError
from .ownership import _tag_ok, create_owned_temporary

# `write_atomic` names its temporary `.<target name>.<nonce>.<tag>.tmp`: `nonce`, 8 random
# hex digits; `tag`, the owner tag (`owner_tag`) of the target name and the nonce. Only a
# name with a valid tag proves that this user's flows created the file; when no owner key
# can be kept, the temporary is named `.<target name>.<nonce>.tmp` and is never taken for
# debris (an interrupted write then leaves it).
_TEMPORARY = re.compile(
    r"^\.(?P<target>.+)\.(?P<nonce>[0-9a-f]{8})(?:\.(?P<tag>[0-9a-f]{16}))?\.tmp$"
)


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
