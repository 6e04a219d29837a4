"""Output folders that hold the user's files too: the manifest of the files the toolkit
wrote, the checks of an output path, and `OutputDir` (staged, then moved into place)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from .._errors import ConfigError
from .atomic import write_atomic
from .locks import LOCK_NAME, check_regular_or_absent
from .ownership import _tag_ok, owner_tag

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
