"""Files the toolkit writes and reads back: one atomic writer, folder locks, the cleanup of
temporaries left by killed writes, and the refusal of HDF5 files that would make a reader
follow paths out of the file.

Knows nothing of sweeps or experiments; `_trajectory` and `_sweep` build on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from ._errors import ConfigError

__all__ = [
    "INDEX_NAME",
    "LOCK_NAME",
    "REPORT_NAME",
    "FolderBusy",
    "add_owned_file",
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


#: The manifest of the files the toolkit wrote into an output folder. Only files it lists
#: (or, in folders written before manifests existed, the experiment's own file names next to
#: its `results.json`) are ever replaced; anything else in the folder is the user's.
MANIFEST = ".flows-owned.json"
_TMP_MARK = ".flows-tmp-pid"
#: The HTML report `flows check` and `flows simulate` write into their output folder, and
#: the index `flows check all` writes above the experiments' folders. Both are owned
#: outputs: listed in the folder's manifest, never written over a file of the user's.
REPORT_NAME = "report.html"
INDEX_NAME = "index.html"


def check_output_path(path: str | os.PathLike, *, flag: str = "--out") -> Path:
    """Refuse, before anything is computed, an output path that cannot become a folder we
    write into: a file, a path under a file, or a place where nothing can be created.
    Creates nothing.

    **Returns:** the path. **Raises:** `ConfigError` naming `flag`.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"`{flag}` {str(path)!r} is a file; give a folder (it is created).")
    probe = path
    while not probe.exists():
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


def _owned(final: Path, experiment: str | None, names: tuple[str, ...]) -> set[str]:
    """Names in `final` that the toolkit wrote (see `MANIFEST`)."""
    try:
        return set(json.loads((final / MANIFEST).read_text())["files"])
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError):
        return set()  # an unreadable manifest owns nothing: refuse rather than guess
    try:  # a folder written before manifests: our results.json marks our file names
        old = json.loads((final / "results.json").read_text())
        if old.get("experiment") == experiment and "flows-theory" in old.get("versions", {}):
            return {n for n in names if (final / n).exists()}
    except (OSError, ValueError, AttributeError):
        pass
    return set()


def _conflicts(final: Path, experiment: str | None, names) -> list[str]:
    if not final.is_dir():
        return []
    owned = _owned(final, experiment, tuple(names))
    return sorted(n for n in names if (final / n).exists() and n not in owned)


def _conflict_error(final: Path, conflicts: list[str], kept: Path | None = None) -> ConfigError:
    where = f" This run's outputs were kept in {str(kept)!r}." if kept else ""
    return ConfigError(
        f"{str(final)!r} holds {', '.join(conflicts)} that flows did not write; it never "
        f"overwrites them. Move them away or choose another `--out`.{where}"
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class OutputDir:
    """Collects an experiment's outputs in a hidden temporary folder next to `final`, and
    moves them into place only when everything has been written (`commit`).

    Into an existing `final` it moves only its own files, replacing only files the toolkit
    wrote there before (`MANIFEST`); a file of the user's with one of its names is refused
    up front (`ConfigError`), and every other file in the folder is left alone. A crash
    leaves no half-written folder behind as if complete: the manifest is marked incomplete
    while files are moved and complete after the last one (`results.json`) is in place.

    **Arguments:** `final`, the folder; `names`, the files the experiment writes (every
    written name must be one of them); `experiment`, its name (for folders written before
    manifests).
    """

    def __init__(self, final: Path, names: tuple[str, ...], experiment: str | None = None):
        self.final = Path(final)
        self.names = tuple(names)
        self.experiment = experiment
        check_output_path(self.final)
        conflicts = _conflicts(self.final, experiment, self.names)
        if conflicts:
            raise _conflict_error(self.final, conflicts)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self._clean_stale()
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.final.name}.", dir=self.final.parent))
        (self.tmp / _TMP_MARK).write_text(str(os.getpid()))

    @staticmethod
    def preflight(final: Path, names: tuple[str, ...], experiment: str | None = None) -> None:
        """The checks of the constructor, creating nothing: run them before computing."""
        check_output_path(final)
        conflicts = _conflicts(Path(final), experiment, names)
        if conflicts:
            raise _conflict_error(Path(final), conflicts)

    def _clean_stale(self) -> None:
        """Remove temporary folders of earlier runs that were killed (their pid is gone)."""
        for d in self.final.parent.glob(f".{self.final.name}.*"):
            mark = d / _TMP_MARK
            try:
                pid = int(mark.read_text())
            except (OSError, ValueError):
                continue
            if pid != os.getpid() and not _pid_alive(pid):
                shutil.rmtree(d, ignore_errors=True)

    def path(self, name: str) -> Path:
        if name not in self.names:
            raise ValueError(f"{name!r} is not among the declared outputs {self.names}")
        return self.tmp / name

    def _write_manifest(self, folder: Path, files, complete: bool) -> None:
        text = json.dumps(
            {"files": sorted(files), "complete": complete, "written_by": "flows"}, indent=1
        )
        write_atomic(folder / MANIFEST, lambda tmp: Path(tmp).write_text(text))

    def commit(self) -> list[Path]:
        (self.tmp / _TMP_MARK).unlink()
        names = sorted(p.name for p in self.tmp.iterdir())
        # results.json last: its presence with a complete manifest marks a finished run
        names.sort(key=lambda n: n == "results.json")
        if not self.final.exists():
            self._write_manifest(self.tmp, names, complete=True)
            os.replace(self.tmp, self.final)
            return [self.final / n for n in names]
        conflicts = _conflicts(self.final, self.experiment, names)
        if conflicts:  # a user's file appeared while we computed
            kept = self.final.with_name(f"{self.final.name}.new-{os.getpid()}")
            os.replace(self.tmp, kept)
            raise _conflict_error(self.final, conflicts, kept)
        stale = _owned(self.final, self.experiment, self.names) - set(names)
        self._write_manifest(self.final, set(names) | stale, complete=False)
        for n in names:
            os.replace(self.tmp / n, self.final / n)
        for n in stale:  # ours, from an earlier run, not rewritten now
            (self.final / n).unlink(missing_ok=True)
        self._write_manifest(self.final, names, complete=True)
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
    as written by the toolkit, next to what an `OutputDir` committed there before.

    For a file added after the outputs of a run were committed (the HTML report). A file
    `name` that exists and that the toolkit did not write is refused (`ConfigError`), as
    `OutputDir` refuses it; a folder without a manifest gets one listing only `name`.

    **Returns:** the path written.
    """
    final = Path(final)
    conflicts = _conflicts(final, experiment, (name,))
    if conflicts:
        raise _conflict_error(final, conflicts)
    try:
        manifest = json.loads((final / MANIFEST).read_text())
        files = set(manifest["files"])
        complete = bool(manifest.get("complete", True))
    except FileNotFoundError:
        files, complete = _owned(final, experiment, ()), True
    except (OSError, ValueError, KeyError, TypeError):
        raise _conflict_error(final, [name]) from None
    path = write_atomic(final / name, write)
    text = json.dumps(
        {"files": sorted(files | {name}), "complete": complete, "written_by": "flows"}, indent=1
    )
    write_atomic(final / MANIFEST, lambda tmp: Path(tmp).write_text(text))
    return path
