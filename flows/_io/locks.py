"""Folder locks: one process writes into a folder at a time; a `.lock` flows did not
create is never written to, truncated or removed."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from .._errors import ConfigError
from .ownership import create_owned_temporary

#: The lock file `lock_folder` keeps in a folder (never deleted: unlinking a lock file that
#: another process is about to open would let two processes lock different files).
LOCK_NAME = ".lock"
#: The first line of a lock file flows created (`lock_folder`); the holder's pid follows.
#: A `.lock` without it is not flows': it is never written to, truncated or removed.
_LOCK_MAGIC = b"flows folder lock 1\n"
#: A lock file of flows before `_LOCK_MAGIC`: the holder's pid alone. Locked and read as
#: such (never written to: a pid file of another program looks the same).
_LEGACY_LOCK = re.compile(rb"^[0-9]{1,10}\n$")


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
