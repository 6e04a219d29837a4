"""Command line: `flows check`, `flows simulate`, `flows sweep`, `flows derive` (also
`python -m flows`).

The parser is generated from the experiment registry (`flows.experiments.EXPERIMENTS`):
each paper declares its own `simulate` and `sweep` flags.

Exit status: 0 success (no applicable check failed), 1 a check or identity failed
(sweep: a grid point failed), 2 bad input (before anything is computed or written; also
an environment variable JAX cannot start with, `JAX_PLATFORMS` or `XLA_FLAGS`: the
message names it and how to unset it), 3 a solver failure or a failed accuracy
certificate (the message names the time reached and what to try) or a result that could
not be written (disk full, file too large: the file and the cause named, the previous
file untouched; stdout to a full disk or `/dev/full`: one line "flows: error: cannot
write output: <cause>" on stderr), 130 interrupted (Ctrl-C), 141 the reader of the
output went away (`flows derive | head -1`): no message and no traceback, as a Unix tool
that SIGPIPE ended (128 + 13, what the shell shows for `cat`; Python's recommended
pattern — stdout pointed at /dev/null, then exit — with 141 rather than 1, which here
means a failed check).

Output survives any terminal: where stdout's or stderr's encoding lacks the toolkit's
characters (`PYTHONIOENCODING=ascii`, a latin-1 terminal) they are written in ASCII
(→ "->", ≤ "<=", θ "theta", x² "x^2", ȧ "a'", anything else as a `\\u` escape), never an
error (`_spell_unencodable`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import _flows_launch as launch

from . import _compile
from . import _flags as fl
from ._errors import ConfigError, SolverError, WriteError
from ._flags import Flag
from ._io import REPORT_NAME

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _enable_cache() -> None:
    """Turn the persistent compilation cache on; a folder that cannot be used, and later a
    cache entry that cannot be read or written, are one line each on stderr ("flows:
    warning: …") and the run goes on uncached."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _compile.enable_compilation_cache()
    for w in caught:
        print(f"flows: warning: {w.message}", file=sys.stderr)
    default = warnings.showwarning
    if getattr(default, "flows_cache_lines", False):  # already installed (main called again)
        return

    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "persistent compilation cache" in text or "persistent cache" in text:
            first = text.splitlines()[0] if text else text
            print(f"flows: warning: {first} (compiled again; the run goes on)", file=sys.stderr)
            return
        default(message, category, filename, lineno, file, line)

    show.flows_cache_lines = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def _experiments():
    from .experiments import EXPERIMENTS

    return EXPERIMENTS


class _Parser(argparse.ArgumentParser):
    """argparse that reads `--rtol -1e-6` as a (bad) value, not as a missing argument: its
    negative-number pattern knows no exponents, so `-1e-6` looked like an unknown flag."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # `--r` must not silently mean `--rtol`
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|nan|infinity)$", re.IGNORECASE
        )


#: Options every `flows sweep <experiment>` has (the engine's, not the experiment's).
SWEEP_ENGINE_FLAGS = (
    Flag("out", "output folder (created, or resumed)", required=True),
    Flag("scheduler", "Dask scheduler address (tcp://host:8786)"),
    Flag(
        "connect_timeout",
        "seconds to wait for the scheduler (default 10)",
        fl.positive("--connect-timeout"),
        default=10.0,
    ),
    Flag("no_plot", "do not write the sweep's figure", action="store_true"),
    Flag("quiet", "print only the summary", action="store_true"),
)


#: The table layouts of `flows check --format`.
FORMATS = ("auto", "wide", "compact", "json")


def build_parser() -> argparse.ArgumentParser:
    """The parser, generated from the experiment registry: each experiment's own flags
    under `flows simulate <name>` and `flows sweep <name>` (a flag it does not declare is
    refused by argparse, exit 2)."""
    exps = _experiments()
    p = _Parser(prog="flows", description=launch.DESCRIPTION)
    launch.add_top_level(p)
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help=launch.COMMANDS["check"])
    c.add_argument(
        "experiment",
        nargs="?",
        default="all",
        choices=[*sorted(exps), "all"],
        help="the paper to check, or 'all' (default: every paper)",
    )
    c.add_argument("--quick", action="store_true", help="smaller, faster version")
    c.add_argument("--out", default="results", help="output folder (default: ./results)")
    c.add_argument(
        "--format",
        default="auto",
        choices=FORMATS,
        help="table layout: auto (fitted to the terminal; default), wide (fixed columns), "
        "compact (one block per claim) or json (machine-readable, on stdout; progress on "
        "stderr)",
    )
    c.add_argument(
        "--width",
        type=fl.count("--width", 20),
        default=None,
        help="characters per line of the table (default: the terminal's width)",
    )
    c.add_argument(
        "--no-report", action="store_true", help="do not write report.html (and index.html)"
    )

    s = sub.add_parser("simulate", help=launch.COMMANDS["simulate"])
    s_sub = s.add_subparsers(dest="experiment", required=True, metavar="experiment")
    for name in sorted(exps):
        e = exps[name]
        sp = s_sub.add_parser(name, help=e.title, description=f"{e.title}. {type(e).__doc__}")
        for flag in e.simulate_flags:
            flag.add_to(sp)
        sp.add_argument("--out", required=True, help="output folder; writes OUT/trajectory.nc")
        sp.add_argument(
            "--overwrite",
            action="store_true",
            help="replace an existing OUT/trajectory.nc and OUT/report.html (refused otherwise)",
        )
        sp.add_argument("--no-report", action="store_true", help="do not write OUT/report.html")

    w = sub.add_parser(
        "sweep",
        help=launch.COMMANDS["sweep"],
        description="Every point is written atomically to OUT/points/, the combined results "
        "to OUT/sweep.nc. Rerunning the same command resumes (completed points are skipped, "
        "failed ones retried); a larger grid extends the folder. Exit status: 0 all points "
        "ok, 1 some failed, 2 bad input.",
    )
    w_sub = w.add_subparsers(dest="experiment", required=True, metavar="experiment")
    for name in sorted(exps):
        e = exps[name]
        if not e.has_sweep:
            continue
        wp = w_sub.add_parser(name, help=e.title, description=e.title)
        for flag in (*e.sweep_flags, *SWEEP_ENGINE_FLAGS):
            flag.add_to(wp)

    d = sub.add_parser("derive", help=launch.COMMANDS["derive"])
    d.add_argument("paper", nargs="?", default="all")
    d.add_argument(
        "--time-budget",
        dest="time_budget",
        type=fl.positive("--time-budget"),
        default=20.0,
        help="seconds of symbolic work per identity before it is checked numerically "
        "instead (default 20; a slow or loaded machine may need more for 'proved')",
    )
    return p


def terminal_width(fallback: int = 120) -> int:
    """Columns of the terminal (`COLUMNS` if set; `fallback` when not a terminal)."""
    return max(shutil.get_terminal_size((fallback, 24)).columns, 20)


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


class _StampedLines(io.TextIOBase):
    """A text stream that passes whole lines on to `target`, each changed by `edit(line)`
    (e.g. prefixed with the time elapsed); used to time the progress lines that
    experiments and sweeps print."""

    def __init__(self, target, edit):
        self.target, self.edit, self._buf = target, edit, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self.target.write(self.edit(line) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._buf:
            self.target.write(self.edit(self._buf))
            self._buf = ""
        self.target.flush()


def _fit(text: str, width: int, indent: int) -> str:
    """`text` wrapped to `width` with a hanging indent; words (paths) are never split."""
    import textwrap

    return textwrap.fill(
        text,
        width,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _previous_wall_s(folder: Path) -> float | None:
    """The wall time recorded by the last run in `folder` (its results.json), if any."""
    try:
        value = float(json.loads((folder / "results.json").read_text())["wall_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if value > 0 else None


def _cmd_check(args) -> int:
    from ._checks import any_failed, format_checks, json_safe
    from ._io import INDEX_NAME, OutputDir

    exps = _experiments()
    names = sorted(exps) if args.experiment == "all" else [args.experiment]
    out = Path(args.out)
    report = not args.no_report
    for name in names:  # refuse a bad --out before minutes of computing
        OutputDir.preflight(out / name, exps[name].outputs if report else exps[name].files, name)
    if report and len(names) > 1:
        OutputDir.preflight(out, (INDEX_NAME,))
    as_json = args.format == "json"
    width = args.width or terminal_width()
    mode = "quick" if args.quick else "default"
    # progress goes where the table does not: stderr for json, else stdout
    progress_stream = sys.stderr if as_json else sys.stdout
    command_start = time.perf_counter()
    previous = {n: _previous_wall_s(out / n) for n in names}
    failed = False
    done: list[dict] = []

    def stamp(line: str) -> str:
        if not line.strip():
            return line
        return _fit(f"[{_duration(time.perf_counter() - command_start):>7}] {line}", width, 10)

    for k, name in enumerate(names, 1):
        exp = exps[name]
        cfg = exp.default_config(quick=args.quick)
        if (last := previous[name]) is not None:
            print(
                _fit(
                    f"[{k}/{len(names)}] {name}: starting; the last run in this folder took "
                    f"{_duration(last)}",
                    width,
                    4,
                ),
                file=progress_stream,
                flush=True,
            )
        start = time.perf_counter()
        with contextlib.redirect_stdout(_StampedLines(progress_stream, stamp)) as stamped:
            try:
                result = exp.run(cfg, out)
            finally:
                stamped.flush()
        wall = time.perf_counter() - start
        files = [str(f) for f in result.files]
        report_path = None
        if report:
            report_path = _write_report(exp, result, out, mode=mode, wall_s=wall)
            if report_path is not None:
                files.append(str(report_path))
        failed |= any_failed(result.checks)
        done.append(
            {
                "name": name,
                "title": exp.title,
                "mode": mode,
                "wall_s": wall,
                "failed": any_failed(result.checks),
                "checks": result.checks,
                "files": files,
                "report": f"{name}/{report_path.name}" if report_path else None,
            }
        )
        if as_json:
            _progress_line(k, names, done, command_start, previous, progress_stream, width)
            continue
        print(f"\n== {name} ({mode}; {wall:.0f}s) ==")
        print(format_checks(result.checks, args.format, width))
        print(_fit("wrote: " + ", ".join(files), width, 2))
        if len(names) > 1:
            _progress_line(k, names, done, command_start, previous, progress_stream, width)
    if report and len(names) > 1:
        index = _write_index(out, done, mode=mode, wall_s=time.perf_counter() - command_start)
        if index is not None and not as_json:
            print(_fit(f"wrote: {index}", width, 2))
    if as_json:
        payload = {
            "experiments": [
                {**{k: v for k, v in e.items() if k != "checks"},
                 "checks": [c.to_dict() for c in e["checks"]]}
                for e in done
            ],
            "failed": failed,
        }  # fmt: skip
        print(json.dumps(json_safe(payload), indent=1, ensure_ascii=False))
    return EXIT_FAILED if failed else EXIT_OK


def _progress_line(k, names, done, command_start, previous, stream, width) -> None:
    """'[k/n] name done in …; elapsed …, about … left' after each experiment: the estimate
    uses the wall time of the last run in each remaining folder where there is one, else
    the mean of the experiments finished now."""
    elapsed = time.perf_counter() - command_start
    left = names[k:]
    mean = sum(e["wall_s"] for e in done) / len(done)
    est = sum(previous.get(n) or mean for n in left)
    tail = f"; about {_duration(est)} left (estimate)" if left else "; all done"
    print(
        _fit(
            f"[{k}/{len(names)}] {done[-1]['name']} done in {_duration(done[-1]['wall_s'])}; "
            f"elapsed {_duration(elapsed)}{tail}",
            width,
            4,
        ),
        file=stream,
        flush=True,
    )


def _write_report(exp, result, out: Path, *, mode: str, wall_s: float) -> Path | None:
    """`out/<name>/report.html`; a report that cannot be written is a warning (the results
    are already in place), not a failure of the check."""
    from .experiments.base import write_report

    try:
        return write_report(exp, result, out, mode=mode, wall_s=wall_s, command=_command())
    except Exception as exc:  # noqa: BLE001 - the checks and results stand without it
        print(
            f"flows: warning: report.html not written ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )
        return None


def _write_index(out: Path, done: list[dict], *, mode: str, wall_s: float) -> Path | None:
    from ._io import INDEX_NAME, add_owned_file, versions
    from ._report import index_report

    page = index_report(done, mode=mode, command=_command(), wall_s=wall_s, versions=versions())
    try:
        return add_owned_file(
            out, INDEX_NAME, lambda tmp: Path(tmp).write_text(page, encoding="utf-8")
        )
    except (ConfigError, OSError) as exc:
        print(f"flows: warning: {INDEX_NAME} not written: {exc}", file=sys.stderr)
        return None


def _command() -> list[str]:
    return ["flows", *sys.argv[1:]]


def _save_trajectory(traj, out: Path, rtol: float | None, overwrite: bool) -> Path:
    """Write OUT/trajectory.nc, unless the flow's accuracy certificate failed (exit 3)."""
    if rtol is not None:
        from ._stats import SolveStats, certificate, describe_certificate

        if not traj.stats.get("certificate"):  # every flow has one; a hand-made run may not
            cert = certificate(traj.observables, rtol)
            st = traj.stats
            st = (
                st.replace(certificate=cert)
                if isinstance(st, SolveStats)
                else {**st, "certificate": cert}
            )
            traj.stats = st
        cert = traj.stats["certificate"]
        if not cert["ok"]:
            raise SolverError(
                describe_certificate(cert) + " Nothing was written.",
                t_reached=float(traj.times[-1]),
                reason="certificate",
            )
    from ._io import FolderBusy, lock_folder, remove_stale_temporaries

    try:
        with lock_folder(out.parent):  # one writer; temporaries of killed writes are removed
            remove_stale_temporaries(out.parent, {out.name, REPORT_NAME}.__contains__)
            if out.exists() and not overwrite:  # appeared while we computed
                raise _exists_error(out)
            return traj.save(out)
    except FolderBusy as exc:
        raise ConfigError(
            f"another flows process is writing into {str(out.parent)!r} ({exc}); wait for it "
            "or choose another --out."
        ) from None


def _exists_error(out: Path) -> ConfigError:
    return ConfigError(
        f"{str(out)!r} exists; flows does not overwrite it. Choose another --out, or pass "
        "--overwrite to replace it."
    )


def _flag_values(args, flags) -> dict:
    return {f.name: getattr(args, f.name) for f in flags}


def _cmd_simulate(args) -> int:
    from ._io import check_lock_file, check_output_path, check_regular_or_absent

    exp = _experiments()[args.experiment]
    fl.refuse_inapplicable(exp.simulate_flags, args)  # a flag its --method ignores
    out = check_output_path(args.out) / "trajectory.nc"
    report = out.with_name(REPORT_NAME)
    check_lock_file(out.parent)
    for target in (out, report):
        check_regular_or_absent(target, "the " + target.name)  # even with --overwrite
        if target.exists() and not args.overwrite:
            raise _exists_error(target)
    options = _flag_values(args, exp.simulate_flags)
    start = time.perf_counter()
    run = exp.simulate(options, progress=bool(options.get("progress")))
    traj = run.traj
    path = _save_trajectory(traj, out, run.rtol, args.overwrite)
    written = [path]
    if not args.no_report:
        page = _simulate_page(exp, traj, time.perf_counter() - start)
        written.append(_save_beside(report, page, args.overwrite))
    st = traj.stats
    line = (
        f"{traj.config.get('method', 'gradient flow')}: loss {traj.loss[0]:.6g} → "
        f"{traj.loss[-1]:.6g} at t = {traj.times[-1]:g}; {st['vf_evals']} gradient "
        f"evaluations, {st['wall_s']:.2f}s"
    )
    if "energy_residual" in traj.observables:
        line += f"; max energy residual {traj.observables['energy_residual'].max():.2e}"
    print(line)
    print("wrote:", ", ".join(str(p) for p in written))
    return EXIT_OK


def _simulate_page(exp, traj, wall_s: float) -> str:
    """The short report.html of one `flows simulate` run."""
    import numpy as np

    from ._report import Curve, simulate_report

    finals = {}
    for key, arr in traj.observables.items():
        a = np.asarray(arr)
        if a.ndim == 1 and len(a) and np.issubdtype(a.dtype, np.number):
            finals[f"{key}(t = {float(traj.times[-1]):g})"] = float(a[-1])
    loss = np.asarray(traj.loss, dtype=float)
    return simulate_report(
        name=exp.name,
        title=exp.title,
        config=traj.config,
        stats=dict(traj.stats),
        curves=[Curve("loss", np.asarray(traj.times, float).tolist(), loss.tolist())],
        finals=finals,
        wall_s=wall_s,
        command=_command(),
        files=["trajectory.nc", REPORT_NAME],
    )


def _save_beside(path: Path, text: str, overwrite: bool) -> Path:
    """Write `path` (next to the trajectory just saved) atomically under the folder's lock;
    a file that appeared meanwhile is not replaced without --overwrite."""
    from ._io import FolderBusy, lock_folder, write_atomic

    try:
        with lock_folder(path.parent):
            if path.exists() and not overwrite:
                raise _exists_error(path)
            return write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    except FolderBusy as exc:
        raise ConfigError(
            f"another flows process is writing into {str(path.parent)!r} ({exc}); wait for it "
            "or choose another --out."
        ) from None


def _cmd_sweep(args) -> int:
    from ._io import check_output_path

    exp = _experiments()[args.experiment]
    fl.refuse_inapplicable(exp.sweep_flags, args)  # a flag its --method ignores
    check_output_path(args.out)
    timer = _SweepTimer()
    try:
        with contextlib.redirect_stdout(_StampedLines(sys.stdout, timer.edit)) as stamped:
            try:
                result = exp.sweep(
                    args.out,
                    _flag_values(args, exp.sweep_flags),
                    scheduler=args.scheduler,
                    connect_timeout=args.connect_timeout,
                    plot=not args.no_plot,
                    progress=not args.quiet,
                )
            finally:
                stamped.flush()
    except KeyboardInterrupt:
        print(
            f"flows: sweep interrupted; completed points are saved in {args.out}/points. "
            "Rerun the same command to resume.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if args.quiet:
        print(result.summary)
    return EXIT_OK if result.ok else EXIT_FAILED


class _SweepTimer:
    """Adds the time elapsed and an estimate of the time left to the sweep's per-point
    progress lines ('[7/12] m=1000 … (elapsed 1.2 min, about 50s left)'). The estimate is
    the mean time per point finished in this command, times the points left."""

    _POINT = re.compile(r"^\[(\d+)/(\d+)\] ")

    def __init__(self):
        self.start = time.perf_counter()
        self.first: int | None = None  # the counter of the first point finished here

    def edit(self, line: str) -> str:
        m = self._POINT.match(line)
        if not m:
            return line
        i, n = int(m.group(1)), int(m.group(2))
        if self.first is None:
            self.first = i
        elapsed = time.perf_counter() - self.start
        ran = i - self.first + 1
        tail = f"about {_duration(elapsed / ran * (n - i))} left" if i < n else "last point"
        return f"{line} (elapsed {_duration(elapsed)}, {tail})"


def _cmd_derive(args) -> int:
    """`flows derive [paper]`: settle the symbolic identities of every registered paper
    that declares them (`AbstractExperiment.identities`), or of one."""
    import importlib

    from reduced import derive

    papers = {n: e.identities for n, e in _experiments().items() if e.identities}
    if args.paper not in ("all", *papers):
        raise ConfigError(f"unknown paper {args.paper!r}; choose one of {['all', *papers]}.")
    names = list(papers) if args.paper == "all" else [args.paper]
    identities = []
    for name in names:
        module = papers[name]
        try:
            identities.extend(importlib.import_module(module).IDENTITIES)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(
                f"paper {name!r} declares identities in {module!r}, which cannot be read: {exc}"
            ) from exc
    results = [derive.settle(i, args.time_budget) for i in identities]
    print(derive.format_table(results))
    return EXIT_FAILED if any(r.status == "fails" for r in results) else EXIT_OK


#: errno values of a write that failed for want of room or of a working disk (exit 3).
_DISK_ERRNOS = frozenset(
    getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EROFS") if hasattr(errno, n)
)


def _write_failure(exc: OSError) -> str:
    """The message of a failed write: `WriteError`s already name the file and what to try;
    an `OSError` raised by another writer (a figure into the staging folder) gets the file,
    the cause, and the assurance that nothing was half-written as complete."""
    if isinstance(exc, WriteError):
        return str(exc)
    where = f" {exc.filename!r}" if exc.filename else " a result file"
    return (
        f"could not write{where}: {exc.strerror or exc}; nothing was written as complete "
        "(outputs are moved into place only when all are written). Free some space or "
        "choose another --out."
    )


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in str(exc)


def main(argv=None, *, check_environment: bool = False) -> int:
    """Run the command line; returns the exit status (see the module docstring).

    `check_environment` (the console script): first refuse a `JAX_PLATFORMS` or
    `XLA_FLAGS` that JAX cannot start with (`_check_environment`; free when neither is
    set)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a refused flag (2, message printed)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        if check_environment:
            _check_environment()
        if not args.no_cache and not _compile.cache_disabled_by_env():
            _enable_cache()
        if args.command == "check":
            return _cmd_check(args)
        if args.command == "simulate":
            return _cmd_simulate(args)
        if args.command == "sweep":
            return _cmd_sweep(args)
        return _cmd_derive(args)
    except ConfigError as exc:
        print(f"flows: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SolverError as exc:
        print(f"flows: solver failure: {exc}", file=sys.stderr)
        return EXIT_SOLVER
    except OSError as exc:  # a result that could not be written: named, never a traceback
        if not isinstance(exc, WriteError) and exc.errno not in _DISK_ERRNOS:
            raise
        print(f"flows: error: {_write_failure(exc)}", file=sys.stderr)
        return EXIT_SOLVER
    except KeyboardInterrupt:
        print(_INTERRUPT_MESSAGE, end="", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not _out_of_memory(exc):
            raise
        print(
            "flows: error: out of memory; the problem is too large for this machine. "
            "Reduce the width (--m) or the number of samples (--n).",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT


#: Seconds the main thread gets to turn Ctrl-C into KeyboardInterrupt before the watchdog
#: ends the process (it cannot while it is blocked inside an XLA compilation or solve).
INTERRUPT_GRACE_S = 2.0
_INTERRUPT_MESSAGE = (
    "flows: interrupted; nothing partial was written as complete (a sweep's finished "
    "points are kept: rerun the same command to resume).\n"
)


def _watch_interrupts() -> None:
    """Make Ctrl-C effective while the main thread is inside XLA: Python runs its SIGINT
    handler only between bytecodes, so a long compile or solve ignored Ctrl-C until it
    finished. CPython's C-level handler also writes the signal number to the wakeup fd; a
    thread reading it waits `INTERRUPT_GRACE_S` for the ordinary KeyboardInterrupt path,
    then exits with status 130. Outputs are written atomically, so nothing half-written
    remains."""
    import socket
    import threading

    r, w = socket.socketpair()
    w.setblocking(False)
    signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)

    def watch():
        while signal.SIGINT not in r.recv(64):
            pass
        time.sleep(INTERRUPT_GRACE_S)
        with contextlib.suppress(OSError):  # stderr gone (closed pipe, full disk): exit anyway
            os.write(2, _INTERRUPT_MESSAGE.encode())
        os._exit(EXIT_INTERRUPTED)

    threading.Thread(target=watch, name="flows-interrupt-watch", daemon=True).start()
    _watch_interrupts.sockets = (r, w)  # keep them open for the life of the process


def _quiet_interrupts(unraisable, _default=sys.unraisablehook) -> None:
    """`sys.unraisablehook` of the command line: a KeyboardInterrupt raised where Python
    cannot propagate it (measured: inside JAX's garbage-collection callback during a
    compilation) is dropped silently — the interrupt watcher ends the run with the message
    and status 130 within `INTERRUPT_GRACE_S` — instead of printing "Exception ignored …
    Traceback" above that message. Anything else goes to Python's default hook."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    _default(unraisable)


# ---- the environment JAX starts in ----------------------------------------------------

#: Seconds a probe of `XLA_FLAGS` may take before it is given up (the run then goes on).
ENV_PROBE_TIMEOUT_S = 120.0
#: The probes, run as `python -c`: a bare XLA CPU client (≈0.3 s: parses XLA_FLAGS, and XLA
#: aborts the process on a flag it refuses), then, only if that failed, what the run does.
_PROBE_XLA = "from jaxlib import xla_client\nxla_client.make_cpu_client()\n"
_PROBE_JAX = "import jax\njax.devices()\n"
#: An error or fatal line of XLA's log: "F1203 14:43:40.766182 4510 file.cc:234] message".
_XLA_LOG = re.compile(r"^([EF])\d{4} [\d:.]+\s+\d+ [^\]\s]+\] (.*)$", re.MULTILINE)


def _unset_advice(name: str) -> str:
    import shlex

    return f"`unset {name}`, or run `env -u {name} {shlex.join(_command())}`"


def _probe(code: str, env: dict) -> subprocess.CompletedProcess | None:
    """`code` run by this Python in a child process with `env`; None when it could not be
    run or took longer than `ENV_PROBE_TIMEOUT_S` (no verdict)."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=ENV_PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _xla_complaint(stderr: str) -> str | None:
    """What XLA said when it refused its flags: the error lines (the cause), else the fatal
    one; None when the log has neither (the failure was not XLA's)."""
    lines = _XLA_LOG.findall(stderr)
    said = [m for level, m in lines if level == "E"] or [m for level, m in lines]
    text = " ".join(m.strip() for m in said).rstrip(".")
    return text[:400] + (" ..." if len(text) > 400 else "") if text else None


def _check_environment() -> None:
    """Refuse (`ConfigError`, exit 2) an environment that JAX cannot start in, before
    anything runs, naming the variable and how to unset it.

    - `XLA_FLAGS`: XLA parses it when the first backend starts and, on a flag it does not
      know, a value it cannot read or a first word without "--" (read as a file name),
      logs a fatal line and ends the process (status 1, no Python exception). That cannot
      be caught in this process, so it is tried first in a child process: a bare XLA CPU
      client (measured 0.3 s; every XLA flag, GPU ones included, is known to it), and only
      if that fails, `jax.devices()` as the run would call it (2 s), so that nothing the
      run would accept is refused.
    - `JAX_PLATFORMS`: a backend that is unknown or cannot start here (`cuda` without a
      GPU or its plugin) raises a Python exception (an empty `AssertionError` for `cuda`
      with jax 0.10) on the first use of JAX; tried here in this process, at the cost of
      starting the backend the run starts anyway.

    Neither set (the common case): nothing is done."""
    flags = os.environ.get("XLA_FLAGS", "")
    platforms = os.environ.get("JAX_PLATFORMS", "")
    if flags:
        cheap = _probe(_PROBE_XLA, dict(os.environ))
        if cheap is not None and cheap.returncode != 0:
            env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")  # no GPU memory
            full = _probe(_PROBE_JAX, env)
            said = None if full is None or full.returncode == 0 else _xla_complaint(full.stderr)
            if said is None and full is not None and full.returncode != 0 and not platforms:
                said = ([""] + full.stderr.strip().splitlines())[-1][-300:] or "it ended"
            if said is not None:
                raise ConfigError(
                    f"XLA_FLAGS={flags!r} is refused by XLA: {said}. "
                    "XLA would abort the run; each flag must be written --name=value, one "
                    "of the flags XLA knows. Fix the value or unset it: "
                    f"{_unset_advice('XLA_FLAGS')}."
                )
    if platforms.strip():
        import jax

        try:
            jax.devices()
        except Exception as exc:  # RuntimeError, or jax's bare AssertionError for `cuda`
            said = re.sub(r"\s*\(set JAX_PLATFORMS=.*\)\s*$", "", str(exc)).strip().rstrip(".")
            said = said or (
                "no such backend here: is its plugin installed (e.g. jax[cuda12] for cuda) "
                "and the device visible?"
            )
            raise ConfigError(
                f"JAX_PLATFORMS={platforms!r} names a backend JAX cannot start on this "
                f"machine ({said}). Unset it to let JAX choose: "
                f"{_unset_advice('JAX_PLATFORMS')}; or name a backend this machine has "
                "(JAX_PLATFORMS=cpu)."
            ) from None


# ---- output that survives any terminal, and a reader that goes away --------------------

#: 128 + SIGPIPE: the reader of stdout (or stderr) went away (see the module docstring).
EXIT_BROKEN_PIPE = 141
#: stdout or stderr could not be written (a full disk, `/dev/full`): as a result file.
EXIT_CANNOT_WRITE = EXIT_SOLVER
#: The name `codecs` knows `_spell_unencodable` by (the error handler of stdout and stderr).
OUTPUT_ERRORS = "flows-ascii"

#: ASCII spellings of the characters the toolkit prints; Greek letters are spelled by name
#: (θ "theta", Σ "Sigma"), super- and subscripts as ^ and _ (x² "x^2", θ₀ "theta_0").
ASCII_SPELLINGS = {
    "\u2212": "-",  # minus sign
    "\u2013": "-",
    "\u2014": "--",
    "\u2016": "||",
    "\u00b7": "*",
    "\u00d7": "x",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2260": "!=",
    "\u2248": "~=",
    "\u2272": "<~",
    "\u2273": ">~",
    "\u226a": "<<",
    "\u226b": ">>",
    "\u2261": "==",
    "\u221d": "~",
    "\u00b1": "+/-",
    "\u2213": "-/+",
    "\u2192": "->",
    "\u2190": "<-",
    "\u21a6": "|->",
    "\u21d2": "=>",
    "\u21d4": "<=>",
    "\u21b3": "->",
    "\u2032": "'",
    "\u2026": "...",
    "\u22ef": "...",
    "\u2207": "grad ",
    "\u2202": "d",
    "\u221a": "sqrt",
    "\u222b": "int ",
    "\u221e": "inf",
    "\u2208": " in ",
    "\u2205": "{}",
    "\u27e8": "<",
    "\u27e9": ">",
    "\u00bd": "1/2",
    "\u00bc": "1/4",
    "\u00a7": "sec. ",
    "\u00b0": " deg",
    "\u2713": "ok",
    "\u2717": "x",
    "\u2022": "*",
    "\u0307": "'",  # combining dot above: a time derivative, ȧ "a'"
    "\u0302": "_hat",
    "\u0304": "_bar",
    "\u0303": "_tilde",
    "\u00a0": " ",
}


def ascii_spelling(text: str) -> str:
    """`text` in ASCII: the toolkit's characters spelled (`ASCII_SPELLINGS`, Greek letters
    by name, x² "x^2", θ₀ "theta_0", accents dropped); anything else as a `\\u` escape."""
    import unicodedata

    out: list[str] = []
    script, run = "", ""  # a run of super- or subscripts, written as one ^(...) or _...

    def close() -> None:
        nonlocal script, run
        if script:
            body = ascii_spelling(run)
            wrap = script == "^" and len(body) > 1 and not body.isalnum()
            out.append(script + (f"({body})" if wrap else body))
        script, run = "", ""

    for ch in unicodedata.normalize("NFD", text):
        tag, _, base = unicodedata.decomposition(ch).partition(" ")
        kind = {"<super>": "^", "<sub>": "_"}.get(tag, "")
        if kind:
            if kind != script:
                close()
            script = kind
            run += "".join(chr(int(h, 16)) for h in base.split())
            continue
        close()
        name = unicodedata.name(ch, "")
        if ch.isascii():
            out.append(ch)
        elif ch in ASCII_SPELLINGS:
            out.append(ASCII_SPELLINGS[ch])
        elif name.startswith("GREEK ") and " LETTER " in name:
            letter = name.rsplit(" ", 1)[1].lower().replace("lamda", "lambda")
            out.append(letter.capitalize() if " CAPITAL " in name else letter)
        elif (compat := unicodedata.normalize("NFKC", ch)) != ch:
            out.append(ascii_spelling(compat))  # ℓ "l", ″ "''", ℝ "R"
        elif unicodedata.combining(ch):
            pass  # an accent
        else:
            out.append(ch.encode("ascii", "backslashreplace").decode("ascii"))
    close()
    return "".join(out)


def _spell_unencodable(exc: UnicodeError) -> tuple[str | bytes, int]:
    """The `codecs` error handler of stdout and stderr (`OUTPUT_ERRORS`): characters the
    stream's encoding lacks are written in ASCII (`ascii_spelling`). A byte that a file
    name carried in as a surrogate (`surrogateescape`) is written back as that byte."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    run = exc.object[exc.start : exc.end]
    if 0xDC80 <= ord(run[0]) <= 0xDCFF:
        return bytes([ord(run[0]) - 0xDC00]), exc.start + 1
    n = next((i for i, c in enumerate(run) if 0xDC80 <= ord(c) <= 0xDCFF), len(run))
    return ascii_spelling(run[:n]), exc.start + n


class _OutputLost(BaseException):
    """stdout or stderr could not be written (its reader went away, the disk is full).
    Ends the command: a BaseException, so that no `except Exception` takes it for the
    failure of one computation (a sweep's grid point) and goes on computing."""

    def __init__(self, fd: int, error: OSError):
        super().__init__(fd, error)
        self.fd, self.error = fd, error


class _OutputFile(io.FileIO):
    """File descriptor 1 or 2 under `sys.stdout` / `sys.stderr` (`_guard_output`): a write
    that fails raises `_OutputLost` naming the descriptor."""

    def write(self, data):
        try:
            return super().write(data)
        except OSError as exc:
            raise _OutputLost(self.fileno(), exc) from None


def _guard_output() -> None:
    """Put stdout and stderr on `_OutputFile`s, with the encoding they had and
    `_spell_unencodable` for what it lacks. Costs microseconds; a stream that is not a
    file descriptor (a test's capture, a closed one) is left as it is."""
    import codecs

    codecs.register_error(OUTPUT_ERRORS, _spell_unencodable)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = stream.fileno()
            stream.flush()
            encoding = stream.encoding
        except (AttributeError, OSError, ValueError):
            continue
        wrapped = io.TextIOWrapper(
            io.BufferedWriter(_OutputFile(fd, "w", closefd=False)),
            encoding=encoding,
            errors=OUTPUT_ERRORS,
            line_buffering=stream.line_buffering,
            write_through=getattr(stream, "write_through", False),
        )
        setattr(sys, name, wrapped)


def _finish_output(code: int, lost: _OutputLost | None = None) -> int:
    """Flush stdout and stderr — a failure shows here, not in Python's last flush, where it
    can only print a traceback — and return the exit status: `code`, or after a lost
    output (`lost`, or one found now) `EXIT_BROKEN_PIPE` (its reader went away; silent) or
    `EXIT_CANNOT_WRITE` (one line on stderr). A descriptor that failed is pointed at
    /dev/null, so that the next flush, and Python's at exit, succeed."""
    first = lost
    for _ in range(4):  # each stream fails at most once: then it writes to /dev/null
        if lost is not None:
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, lost.fd)
                os.close(null)
            lost = None
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
            break
        except _OutputLost as exc:
            first, lost = first or exc, exc
    if first is None:
        return code
    if isinstance(first.error, BrokenPipeError):
        return EXIT_BROKEN_PIPE
    if first.fd != 2:
        cause = first.error.strerror or str(first.error) or type(first.error).__name__
        with contextlib.suppress(OSError):
            os.write(2, f"flows: error: cannot write output: {cause}\n".encode(errors="replace"))
    return EXIT_CANNOT_WRITE


def entry(startup_handler=None) -> None:
    """Run the program (the console script `flows` comes here through `_flows_launch`,
    `python -m flows` directly). After Ctrl-C, exit at once: interpreter teardown while
    XLA's compiler threads were still running crashed (segmentation fault).

    `startup_handler`: the SIGINT handler the launcher installed for the imports; replaced
    by Python's default (`KeyboardInterrupt`) once the watcher runs, so that no Ctrl-C
    falls between the two.

    stdout and stderr are put on `_guard_output`'s streams first (ASCII where the terminal
    lacks a character; a closed pipe or a full disk ends the command with 141 or 3, see
    `_finish_output`), and the environment is checked (`_check_environment`)."""
    _guard_output()
    _watch_interrupts()
    sys.unraisablehook = _quiet_interrupts
    if startup_handler is not None and signal.getsignal(signal.SIGINT) is startup_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = _finish_output(main(check_environment=True))
    except _OutputLost as lost:
        code = _finish_output(EXIT_OK, lost)
    if code == EXIT_INTERRUPTED:
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
