"""The sweep's output folder: atomic writes of its files, the refusal of a folder that
holds something else (or a sweep with other settings), of anything standing where a file
will be written, and the folder's lock (see `flows._sweep.engine` for the layout)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import ConfigError
from .._io import (
    LOCK_NAME,
    FolderBusy,
    check_lock_file,
    check_regular_or_absent,
    is_flows_lock,
    lock_folder,
    proven_temporary_target,
    write_atomic,
    write_netcdf,
)
from .points import _point_dataset
from .spec import AbstractSweepSpec

if TYPE_CHECKING:
    import xarray as xr


def _write_netcdf_atomic(ds: xr.Dataset, path: Path) -> Path:
    encoding = {
        v: {"zlib": True, "complevel": 4}
        for v in ds.data_vars
        if ds[v].dtype.kind in "fiu" and ds[v].ndim > 0
    }
    return write_netcdf(path, ds, encoding)


def _write_text_atomic(path: Path, text: str) -> Path:
    return write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def _write_point(points_dir: Path, rec: dict, spec: AbstractSweepSpec) -> Path:
    return _write_netcdf_atomic(_point_dataset(rec, spec), points_dir / f"{rec['id']}.nc")


def _check_out(out: Path, spec: AbstractSweepSpec) -> bool:
    """Refuse a folder holding something else; True when it already holds this sweep."""
    fresh = (
        f"Refusing to mix results: use a new --out, or delete {out} to start fresh "
        "(its results will be lost)."
    )
    if not out.exists():
        return False
    if not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder.")
    manifest = out / "manifest.json"
    if not manifest.exists():
        # our lock, and our temporaries of an interrupted first write, do not make it a
        # foreign folder; anything flows cannot prove it made (a `.lock` of the user's or
        # of another program, a file named like a temporary) does
        ours = {
            LOCK_NAME,
            "manifest.json",
            "sweep.nc",
            *([spec.figure_name] if spec.figure_name else []),
        }
        if any(
            not (
                (p.name == LOCK_NAME and is_flows_lock(p, legacy=False))
                or proven_temporary_target(p.name) in ours
            )
            for p in out.iterdir()
        ):
            raise ConfigError(
                f"--out {out} exists, is not empty and holds no sweep (no manifest.json). "
                "Choose a new or empty folder."
            )
        return False
    try:
        man = json.loads(manifest.read_text(encoding="utf-8"))
        old_exp, old_cfg = man["experiment"], man["config"]
        old_cfg = spec.upgrade_settings(old_cfg)  # folders written before a setting existed
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{manifest} is unreadable ({exc}). {fresh}") from None
    if old_exp != spec.experiment:
        raise ConfigError(
            f"{out} holds a sweep of experiment {old_exp!r}, not {spec.experiment!r}. {fresh}"
        )
    new_cfg = spec.settings()
    diff = [k for k in sorted(set(old_cfg) | set(new_cfg)) if old_cfg.get(k) != new_cfg.get(k)]
    if diff:
        was = ", ".join(f"{k}={old_cfg.get(k)!r}" for k in diff)
        now = ", ".join(f"{k}={new_cfg.get(k)!r}" for k in diff)
        grid = ", ".join(a.flag for a in spec.axes)
        raise ConfigError(
            f"{out} holds a sweep with different settings ({was}); this sweep asks for {now}. "
            f"{fresh} Only the grid ({grid}) may change between runs into one folder."
        )
    return True


def _check_paths(out: Path, spec: AbstractSweepSpec, points: list[tuple]) -> None:
    """Refuse, before computing, anything in `out` that stands where the sweep writes a file
    and is not a regular file (a folder, a link, a FIFO): the lock, the manifest, the
    combined file, the figure, and the files of this grid's points; and a `points` that is
    not a folder."""
    check_lock_file(out)
    tops = ["manifest.json", "sweep.nc", *([spec.figure_name] if spec.figure_name else [])]
    for name in tops:
        check_regular_or_absent(out / name, f"the sweep's {name}")
    points_dir = out / "points"
    if os.path.lexists(points_dir) and (points_dir.is_symlink() or not points_dir.is_dir()):
        raise ConfigError(
            f"{str(points_dir)!r} must be the sweep's folder of point files; it is a file or a "
            "link. Move it away or choose another --out."
        )
    if points_dir.is_dir():
        for p in points:
            check_regular_or_absent(points_dir / f"{spec.point_id(p)}.nc", "a point's file")


@contextlib.contextmanager
def _locked(out: Path):
    """The sweep's exclusive hold on `out` (see `lock_folder`), refused with a
    `ConfigError` while another sweep holds it."""
    hold = contextlib.ExitStack()
    try:  # only taking the lock is translated: errors of the sweep itself pass unchanged
        hold.enter_context(lock_folder(out))
    except FolderBusy as exc:
        who = f" (process {exc.holder})" if exc.holder is not None else ""
        raise ConfigError(
            f"another sweep is running on {out}{who}: two sweeps writing one folder would mix "
            "their results. Wait for it to finish (then rerun this command to add this grid), "
            "or use another --out."
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"--out {out}: cannot create the folder or its lock file ({exc}). Choose a folder "
            "you can write to."
        ) from None
    with hold:
        yield
