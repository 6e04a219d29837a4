"""Command line: `flows check`, `flows simulate`, `flows sweep`, `flows derive` (also
`python -m flows`).

The parser is generated from the experiment registry (`flows.experiments.EXPERIMENTS`):
each paper declares its own `simulate` and `sweep` flags.

Exit status: 0 success (no applicable check failed), 1 a check or identity failed (sweep:
a grid point failed), 2 bad input (before anything is computed or written), 3 a solver
failure or a failed accuracy certificate (the message names the time reached and what to
try), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from pathlib import Path

from . import _flags as fl
from ._errors import ConfigError, SolverError
from ._flags import Flag

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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


def build_parser() -> argparse.ArgumentParser:
    """The parser, generated from the experiment registry: each experiment's own flags
    under `flows simulate <name>` and `flows sweep <name>` (a flag it does not declare is
    refused by argparse, exit 2)."""
    exps = _experiments()
    p = _Parser(
        prog="flows",
        description="Exact gradient flows of small networks vs reduced models and theorems.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help="run an experiment and check the paper's claims")
    c.add_argument("experiment", nargs="?", default="all", choices=[*sorted(exps), "all"])
    c.add_argument("--quick", action="store_true", help="smaller, faster version")
    c.add_argument("--out", default="results", help="output folder (default: ./results)")

    s = sub.add_parser("simulate", help="integrate one gradient flow and save trajectory.nc")
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
            help="replace an existing OUT/trajectory.nc (refused otherwise)",
        )

    w = sub.add_parser(
        "sweep",
        help="run a grid of gradient flows (batched, resumable, optionally on Dask)",
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

    d = sub.add_parser("derive", help="check the symbolic derivations (sympy)")
    d.add_argument("paper", nargs="?", default="all")
    return p


def _cmd_check(args) -> int:
    from ._checks import any_failed, format_table
    from ._io import OutputDir

    exps = _experiments()
    names = sorted(exps) if args.experiment == "all" else [args.experiment]
    for name in names:  # refuse a bad --out before minutes of computing
        OutputDir.preflight(Path(args.out) / name, exps[name].files, name)
    failed = False
    for name in names:
        exp = exps[name]
        cfg = exp.default_config(quick=args.quick)
        start = time.perf_counter()
        report = exp.run(cfg, Path(args.out))
        print(
            f"\n== {name} ({'quick' if args.quick else 'default'}; "
            f"{time.perf_counter() - start:.0f}s) =="
        )
        print(format_table(report.checks))
        print("wrote:", ", ".join(str(f) for f in report.files))
        failed |= any_failed(report.checks)
    return EXIT_FAILED if failed else EXIT_OK


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
            remove_stale_temporaries(out.parent, {out.name}.__contains__)
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
    from ._io import check_output_path

    exp = _experiments()[args.experiment]
    out = check_output_path(args.out) / "trajectory.nc"
    if out.exists() and not args.overwrite:
        raise _exists_error(out)
    options = _flag_values(args, exp.simulate_flags)
    run = exp.simulate(options, progress=bool(options.get("progress")))
    traj = run.traj
    path = _save_trajectory(traj, out, run.rtol, args.overwrite)
    st = traj.stats
    line = (
        f"{traj.config.get('method', 'gradient flow')}: loss {traj.loss[0]:.6g} → "
        f"{traj.loss[-1]:.6g} at t = {traj.times[-1]:g}; {st['vf_evals']} gradient "
        f"evaluations, {st['wall_s']:.2f}s"
    )
    if "energy_residual" in traj.observables:
        line += f"; max energy residual {traj.observables['energy_residual'].max():.2e}"
    print(line)
    print("wrote:", path)
    return EXIT_OK


def _cmd_sweep(args) -> int:
    from ._io import check_output_path

    exp = _experiments()[args.experiment]
    check_output_path(args.out)
    try:
        result = exp.sweep(
            args.out,
            _flag_values(args, exp.sweep_flags),
            scheduler=args.scheduler,
            connect_timeout=args.connect_timeout,
            plot=not args.no_plot,
            progress=not args.quiet,
        )
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


def _cmd_derive(args) -> int:
    try:
        from reduced import derive
    except ImportError as exc:  # pragma: no cover - only before the module exists
        raise ConfigError(f"symbolic derivations are not available: {exc}") from exc
    if args.paper not in ("all", *derive.PAPERS):
        raise ConfigError(f"unknown paper {args.paper!r}; choose one of {['all', *derive.PAPERS]}.")
    results = derive.run(args.paper)
    print(derive.format_table(results))
    return EXIT_FAILED if any(r.status == "fails" for r in results) else EXIT_OK


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in str(exc)


def main(argv=None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a refused flag (2, message printed)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
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
        os.write(2, _INTERRUPT_MESSAGE.encode())
        os._exit(EXIT_INTERRUPTED)

    threading.Thread(target=watch, name="flows-interrupt-watch", daemon=True).start()
    _watch_interrupts.sockets = (r, w)  # keep them open for the life of the process


def entry() -> None:
    """Console-script entry point (also `python -m flows`). After Ctrl-C, exit at once:
    interpreter teardown while XLA's compiler threads were still running crashed
    (segmentation fault)."""
    _watch_interrupts()
    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
