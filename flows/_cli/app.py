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
import math
import os
import re
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import _compile
from .._errors import ConfigError, SolverError, WriteError
from .._io import REPORT_NAME
from . import flags as fl
from . import text as words
from .check import _cmd_check, _duration, _StampedLines
from .env import _check_environment, _command, _jit_kept_on
from .flags import Flag
from .output import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SOLVER,
    _finish_output,
    _guard_output,
    _OutputLost,
    path_refusal,
)


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
    from ..experiments import EXPERIMENTS

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
    p = _Parser(prog="flows", description=words.DESCRIPTION)
    words.add_top_level(p)
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help=words.COMMANDS["check"])
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
    c.add_argument(
        "--jobs",
        type=fl.count("--jobs", 1),
        default=None,
        help="papers run at once, each in its own worker process sharing the compilation "
        "cache; results as a serial run's (default: the cores here; 1: one at a time in "
        "this process)",
    )

    s = sub.add_parser("simulate", help=words.COMMANDS["simulate"])
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
        sp.add_argument(
            "--global-error",
            dest="global_error",
            action="store_true",
            help="also estimate the run's global error by a companion solve at tolerances "
            "10x tighter (about 1.5-2.5x the run's time): its estimate is printed, saved in "
            "OUT/trajectory.nc (variables global_error.<observable>) and bounds the final "
            "loss's error floor",
        )

    w = sub.add_parser(
        "sweep",
        help=words.COMMANDS["sweep"],
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

    d = sub.add_parser("derive", help=words.COMMANDS["derive"])
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


def _save_trajectory(traj, out: Path, rtol: float | None, overwrite: bool) -> Path:
    """Write OUT/trajectory.nc, unless the flow's accuracy certificate failed or its final
    loss is smaller than the error it can be known to (exit 3, nothing written)."""
    from .._solve.significance import describe_unresolved
    from .._solve.stats import SolveStats, certificate, describe_certificate

    if rtol is not None and not traj.stats.get("certificate"):
        # every flow has one; a hand-made run may not
        cert = certificate(traj.observables, rtol)
        st = traj.stats
        traj.stats = (
            st.replace(certificate=cert)
            if isinstance(st, SolveStats)
            else {**st, "certificate": cert}
        )
    res = traj.stats.get("resolution") if isinstance(traj.stats, Mapping) else None
    unresolved = describe_unresolved(res) if res and not res["resolved"] else ""
    failed = rtol is not None and not traj.stats["certificate"]["ok"]
    if failed or unresolved:
        why = [describe_certificate(traj.stats["certificate"])] if failed else []
        raise SolverError(
            " ".join([*why, ("Also " if why else "") + unresolved, "Nothing was written."]),
            t_reached=float(traj.times[-1]),
            reason="certificate" if failed else "unresolved",
        )
    from .._io import FolderBusy, lock_folder, remove_stale_temporaries

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
    from .._io import check_lock_file, check_output_path, check_regular_or_absent

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
    startup = _process_age()
    from .._solve.global_error import global_error_by_default
    from .._solve.significance import format_resolved

    with global_error_by_default(args.global_error):
        run = exp.simulate(options, progress=bool(options.get("progress")))
    traj = run.traj
    ge = getattr(traj, "global_error", None)  # a plug-in's hand-made run may lack it
    if args.global_error and ge is not None and not ge.missing:
        for name, est in ge.observables.items():  # beside the run's own, per save
            traj.observables[f"global_error.{name}"] = est
    simulated = time.perf_counter()
    path = _save_trajectory(traj, out, run.rtol, args.overwrite)
    saved = time.perf_counter()
    written = [path]
    if not args.no_report:
        stages = _stage_times(traj.stats, simulated - start, saved - simulated, startup)
        page = _simulate_page(exp, traj, stages, time.perf_counter() - start)
        written.append(_save_beside(report, page, args.overwrite))
    st = traj.stats
    res = st.get("resolution")  # the final loss with the digits its error floor leaves it
    end = format_resolved(traj.loss[-1], res["floor"]) if res else f"{traj.loss[-1]:.6g}"
    line = (
        f"{traj.config.get('method', 'gradient flow')}: loss {traj.loss[0]:.6g} → "
        f"{end} at t = {traj.times[-1]:g}; {st['vf_evals']} gradient "
        f"evaluations, {st['wall_s']:.2f}s"
    )
    if "energy_residual" in traj.observables:
        line += f"; max energy residual {traj.observables['energy_residual'].max():.2e}"
    print(line)
    if args.global_error:
        if ge is None:
            print("global error: not estimated (this run is not an exact flow)")
        elif ge.missing:
            print(f"global error: not estimated: {ge.missing}")
        else:
            print(
                f"global error of the final loss ≈ {ge.observables['loss'][-1]:.2g} (companion "
                f"solve at tolerances /{ge.factor:g}; {ge.cost:.2g}× the run's time)"
            )
    print("wrote:", ", ".join(str(p) for p in written))
    return EXIT_OK


def _process_age() -> float | None:
    """Seconds since this process started (Linux: /proc), None where not known: the
    start-up before the command ran (Python, JAX and flows imported)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0 <= age < 86_400 else None


def _stage_times(
    stats, simulate_s: float, save_s: float, startup_s: float | None
) -> list[tuple[str, float, str]]:
    """Where the time of one `flows simulate` went, as (stage, seconds, what it covers):
    start-up (when known), the solver's compilation and solve (its statistics), the rest
    of the experiment's `simulate` and the saving; the report adds its own stage."""

    def stat(key: str) -> float | None:
        v = stats.get(key) if hasattr(stats, "get") else None
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    compile_s, solve_s = stat("compile_s"), stat("wall_s")
    stages: list[tuple[str, float, str]] = []
    if startup_s is not None:
        stages.append(("start-up", startup_s, "Python, JAX and flows imported"))
    if compile_s is not None:
        stages.append(
            ("compile/trace", compile_s, "tracing and compiling the solver loop (or reading it "
             "from the compilation cache)")
        )  # fmt: skip
    if solve_s is not None:
        stages.append(("solve", solve_s, "integrating the flow"))
    rest = simulate_s - (compile_s or 0.0) - (solve_s or 0.0)
    stages.append(
        ("set-up and checks", max(rest, 0.0), "data, model and problem built; observables "
         "gathered; accuracy certificate")
    )  # fmt: skip
    stages.append(("saving results", save_s, "trajectory.nc written"))
    return stages


def _simulate_page(exp, traj, stages: list[tuple[str, float, str]], wall_s: float) -> str:
    """The short report.html of one `flows simulate` run: the loss curve, the stage times
    (`stages`, plus the building of this page), and the final value of every scalar
    observable with its description (the experiment's `observables.DESCRIPTIONS`; those in
    its `LEFT_OUT`, and vectors, are named below the table with the reason)."""
    import numpy as np

    from .._report.html import Curve, simulate_report

    begin = time.perf_counter()
    described, left_out = _observable_notes(exp, traj)
    t_end = float(traj.times[-1])
    finals: dict[str, Any] = {}
    for key, arr in traj.observables.items():
        a = np.asarray(arr)
        if key in left_out or not np.issubdtype(a.dtype, np.number) or not len(a):
            continue
        if key not in described:
            left_out[key] = "no description recorded; the whole curve is in trajectory.nc"
        elif a.ndim == 1:
            finals[key] = float(a[-1])
        elif a.ndim == 2 and a.shape[1] <= MAX_VECTOR_SHOWN:
            finals[key] = [float(v) for v in a[-1]]
        else:
            left_out[key] = f"{a[-1].size} values at each time; in trajectory.nc"
    loss = np.asarray(traj.loss, dtype=float)

    def page(report_s: float | None) -> str:
        shown = [*stages, ("report", report_s, "this page built")] if report_s else stages
        # the wall time is the stages' sum: from the process's start when that is known
        return simulate_report(
            name=exp.name,
            title=exp.title,
            config=traj.config,
            stats=dict(traj.stats),
            curves=[Curve("loss", np.asarray(traj.times, float).tolist(), loss.tolist())],
            finals=finals,
            descriptions={k: v for k, v in described.items() if k in traj.observables},
            final_time=t_end,
            left_out={
                k: v
                for k, v in left_out.items()
                # the engine's bookkeeping is in trajectory.nc where θ was saved
                if k in traj.observables or (k in ENGINE_LEFT_OUT and len(traj.param_times))
            },
            stages=shown,
            wall_s=sum(t for _, t, _ in shown) if shown else wall_s,
            command=_command(),
            files=["trajectory.nc", REPORT_NAME],
        )

    page(None)  # built once to time it; the page shows that time (the second build is alike)
    return page(time.perf_counter() - begin)


#: Longest vector observable (per class, mode, …) whose final value the report lists.
MAX_VECTOR_SHOWN = 12

#: Observables every run of the engine may carry, with their descriptions.
ENGINE_OBSERVABLES = {
    "energy": "∫₀ᵗ ‖∇L(θ(s))‖² ds, integrated with the flow: the loss the flow has dissipated",
    "energy_residual": "|L(0) − L(t) − ∫₀ᵗ ‖∇L‖² ds|: the energy identity's residual, an "
    "accuracy certificate of the solve (0 for the exact flow)",
}
#: Engine bookkeeping that is no observable of the run.
ENGINE_LEFT_OUT = {"param_saved": "bookkeeping (1 where θ was saved), not an observable"}


def _observable_notes(exp, traj) -> tuple[dict[str, str], dict[str, str]]:
    """(name → description, name → why it is left out of the summary) for the observables
    of a run of `exp`: the loss (its recorded definition), the engine's own (energy,
    non-smooth counts), and the experiment's (`DESCRIPTIONS` and `LEFT_OUT` of the
    `observables` module beside the experiment's, where it has one)."""
    import importlib

    from .._nonsmooth import KINK_OBSERVABLES

    loss = ""
    problem = traj.config.get("problem") if isinstance(traj.config, dict) else None
    if isinstance(problem, dict):
        loss = str(problem.get("loss") or "")
    described = {
        "loss": loss or "the objective integrated by the flow",
        **ENGINE_OBSERVABLES,
        **KINK_OBSERVABLES,
    }
    left_out = dict(ENGINE_LEFT_OUT)
    package = type(exp).__module__.rpartition(".")[0]
    try:
        module = importlib.import_module(package + ".observables") if package else None
    except ImportError:
        module = None
    described.update(getattr(module, "DESCRIPTIONS", {}) or {})
    left_out.update(getattr(module, "LEFT_OUT", {}) or {})
    return described, left_out


def _save_beside(path: Path, text: str, overwrite: bool) -> Path:
    """Write `path` (next to the trajectory just saved) atomically under the folder's lock;
    a file that appeared meanwhile is not replaced without --overwrite."""
    from .._io import FolderBusy, lock_folder, write_atomic

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
    from .._io import check_output_path

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
        if args.command == "sweep":  # a timeout for a scheduler not asked for: refused
            fl.refuse_unmet_needs(args, {"connect_timeout": ("scheduler", "tcp://host:8786")})
        if check_environment:
            _check_environment()
        if not args.no_cache and not _compile.cache_disabled_by_env():
            _enable_cache()
        with _jit_kept_on():  # JAX_DISABLE_JIT: the solver is compiled ahead of time
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
        refused = None if isinstance(exc, WriteError) else path_refusal(exc)
        if refused is not None:  # a path the OS refuses (too long, a loop, …): bad input
            print(f"flows: error: {refused}", file=sys.stderr)
            return EXIT_BAD_INPUT
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
    _compile.tune_gc_for_command()
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
