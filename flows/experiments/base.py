"""What every experiment returns, and how its outputs are written."""

from __future__ import annotations

import abc
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from .._checks import Check
from .._errors import ConfigError
from .._flags import Flag
from .._trajectory import Trajectory, versions

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclasses.dataclass
class Report:
    """Result of `flows check <experiment>`: the checks, the files written and a summary."""

    name: str
    checks: list[Check]
    files: list[Path]
    results: dict


#: The manifest of the files the toolkit wrote into an output folder. Only files it lists
#: (or, in folders written before manifests existed, the experiment's own file names next to
#: its `results.json`) are ever replaced; anything else in the folder is the user's.
MANIFEST = ".flows-owned.json"
_TMP_MARK = ".flows-tmp-pid"


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
        from .._trajectory import write_atomic

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


def write_results_json(path: Path, name: str, config: dict, checks, extra: dict) -> None:
    payload = {
        "experiment": name,
        "config": config,
        "versions": versions(),
        "checks": [c.to_dict() for c in checks],
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2, default=_default))


def _default(o):
    try:
        import numpy as np

        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, Mapping):  # e.g. a trajectory's `SolveStats`: its JSON form
        return dict(o)
    return str(o)


@overload
def new_figure(
    nrows: Literal[1] = 1, ncols: Literal[1] = 1, **kwargs: Any
) -> tuple[Figure, Axes]: ...
@overload
def new_figure(nrows: int, ncols: int, **kwargs: Any) -> tuple[Figure, np.ndarray]: ...
def new_figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A figure and its axes, without pyplot: no global backend switch, no figure manager,
    so library plotting neither leaks figures nor breaks a notebook's inline backend.

    The axes are `fig.subplots(nrows, ncols, **kwargs)`: one `Axes` for a 1 × 1 grid, else
    an array of them (typed as such for the default `squeeze=True`)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=kwargs.pop("figsize", None))
    return fig, fig.subplots(nrows, ncols, **kwargs)


def mpl_rcparams():
    """matplotlib's rcParams (imported lazily, like the rest of the plotting)."""
    import matplotlib

    return matplotlib.rcParams


# ---------------------------------------------------------------------------------------
# The plug-in interface


@dataclasses.dataclass
class Simulated:
    """What `AbstractExperiment.simulate` returns: the run, and the rtol its accuracy
    certificate is judged against (None for a discrete baseline such as GD)."""

    traj: Trajectory
    rtol: float | None


class AbstractExperiment(abc.ABC):
    """One paper as a plug-in: `flows check|simulate|sweep <name>` are generated from it.

    A member declares `name` (the CLI name), `title` (the paper), `files` (what `run`
    writes into `out/<name>/`), `simulate_flags` and `sweep_flags`, and implements
    `default_config`, `run` and `simulate`; `sweep` is optional (the CLI then has no
    `flows sweep <name>`).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    files: ClassVar[tuple[str, ...]]
    simulate_flags: ClassVar[tuple[Flag, ...]]
    sweep_flags: ClassVar[tuple[Flag, ...]] = ()

    @abc.abstractmethod
    def default_config(self, quick: bool = False):
        """The built-in configuration (`quick`: a smaller, faster one)."""

    @abc.abstractmethod
    def run(self, cfg, out: Path, *, progress: bool = True) -> Report:
        """`flows check <name>`: every run and check; outputs under `out/<name>/`."""

    @abc.abstractmethod
    def simulate(self, options: dict, *, progress: bool = False) -> Simulated:
        """`flows simulate <name>`: one run from the given flags (name → value; absent
        flags take the experiment's defaults)."""

    def sweep(self, out: Path, options: dict, **engine) -> Any:
        """`flows sweep <name>`: a resumable grid through `flows.sweep`'s engine."""
        raise ConfigError(f"`flows sweep {self.name}` is not available.")

    @property
    def has_sweep(self) -> bool:
        return type(self).sweep is not AbstractExperiment.sweep
