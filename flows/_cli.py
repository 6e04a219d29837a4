"""Command line: `flows check`, `flows simulate`, `flows sweep`, `flows derive` (also
`python -m flows`).

Exit status: 0 success (no applicable check failed), 1 a check or identity failed (sweep:
a grid point failed), 2 bad input, 3 a solver failure (the message names the time reached
and what to try).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from pathlib import Path

from ._errors import ConfigError, SolverError
from ._resources import check_memory, two_layer_bytes
from ._validate import as_float, as_int, as_seed, as_tolerance

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _experiments():
    from .experiments import EXPERIMENTS

    return EXPERIMENTS


class _Parser(argparse.ArgumentParser):
    """argparse that reads `--rtol -1e-6` as a (bad) value, not as a missing argument: its
    negative-number pattern knows no exponents, so `-1e-6` looked like an unknown flag."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|nan|infinity)$", re.IGNORECASE
        )


def _typed(flag: str, convert, **kwargs):
    """An argparse type: `convert(flag, float/int(text), **kwargs)` from `flows._validate`,
    with its `ConfigError` turned into argparse's error (exit 2, the flag named)."""

    def parse(text):
        try:
            value = float(text) if convert in _FLOATS else int(text)
        except ValueError:
            kind = "a number" if convert in _FLOATS else "an integer"
            raise argparse.ArgumentTypeError(f"{flag} must be {kind}; got {text!r}") from None
        try:
            return convert(flag, value, **kwargs)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).replace(f"`{flag}`", flag)) from None

    # what the value must be, for tests that generate invalid values from the parser
    parse.domain = (convert.__name__, kwargs)
    return parse


_FLOATS = (as_float, as_tolerance)


def _positive_float(flag):
    return _typed(flag, as_float, positive=True)


def _count(flag, minimum=1):
    return _typed(flag, as_int, minimum=minimum)


#: `flows simulate` flags that act for each experiment (the rest is refused, exit 2).
SIMULATE_FLAGS = {
    "multistage": {
        "m",
        "alpha",
        "target",
        "data",
        "n",
        "t1",
        "seed",
        "solver",
        "rtol",
        "atol",
        "n_save",
        "max_steps",
        "save_params",
        "method",
        "lr",
        "progress",
    },
    "bias-plateau": {"k", "r", "delta", "seed"},
    "linear-teacher": {"k", "init", "slope", "seed", "t1"},
}
#: Defaults of the multistage simulate flags (the others default to the experiment's config).
_SIM_DEFAULTS = {
    "m": 1000,
    "alpha": 1.0,
    "target": "f1",
    "data": "paper",
    "n": 1000,
    "t1": None,
    "seed": 0,
    "solver": "tsit5",
    "rtol": 1e-6,
    "atol": 1e-9,
    "n_save": 401,
    "max_steps": 200_000,
    "save_params": "ends",
    "method": "flow",
    "lr": 1e-3,
    "progress": False,
    "k": None,
    "r": None,
    "delta": None,
    "init": None,
    "slope": None,
}


def _solver_names() -> list[str]:
    from ._simulate import SOLVERS

    return sorted(SOLVERS)


def _targets() -> list[str]:
    from ._data import TARGETS

    return sorted(TARGETS)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="flows",
        description="Exact gradient flows of small networks vs reduced models and theorems.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help="run an experiment and check the paper's claims")
    names = sorted(_experiments())
    c.add_argument("experiment", nargs="?", default="all", choices=names + ["all"])
    c.add_argument("--quick", action="store_true", help="smaller, faster version")
    c.add_argument("--out", default="results", help="output folder (default: ./results)")

    s = sub.add_parser(
        "simulate",
        help="integrate one gradient flow and save trajectory.nc",
        description="multistage: the two-layer net (--m --alpha --target --data --n --t1 "
        "--seed --solver --rtol --atol --n-save --max-steps --save-params --method --lr "
        "--progress). bias-plateau: §4's r-homogeneous net (--k --r --delta --seed; t1 from "
        "the reduced model's blow-up times). linear-teacher: the leaky-ReLU ±v net on "
        "symmetric Gaussians, loss clock (--k --init --slope --seed --t1). A flag that does "
        "not act on the chosen experiment is refused (exit 2).",
        argument_default=argparse.SUPPRESS,
    )
    s.add_argument("experiment", choices=sorted(SIMULATE_FLAGS))
    s.add_argument("--m", type=_count("--m"), help="width (default 1000)")
    s.add_argument("--alpha", type=_typed("--alpha", as_float), help="init exponent α (default 1)")
    s.add_argument("--target", choices=_targets(), help="target function (default f1)")
    s.add_argument("--data", choices=["paper", "assumption"], help="data set (default paper)")
    s.add_argument("--n", type=_count("--n", 2), help="number of data points (default 1000)")
    s.add_argument(
        "--t1",
        type=_positive_float("--t1"),
        help="final time (multistage default 20, linear-teacher 1e8)",
    )
    s.add_argument("--seed", type=_typed("--seed", as_seed), help="PRNG seed (default 0)")
    s.add_argument(
        "--solver",
        choices=["auto", *_solver_names()],
        help="ODE solver (default tsit5; auto picks rkc or tsit5 from rtol)",
    )
    s.add_argument("--rtol", type=_typed("--rtol", as_tolerance, example="1e-6"))
    s.add_argument("--atol", type=_typed("--atol", as_tolerance, example="1e-9"))
    s.add_argument("--n-save", type=_count("--n-save", 2), help="save times (default 401)")
    s.add_argument("--max-steps", type=_count("--max-steps"), help="solver step budget")
    s.add_argument("--save-params", choices=["all", "ends", "none"], help="default ends")
    s.add_argument(
        "--method",
        choices=["flow", "gd"],
        help="exact gradient flow (default) or gradient descent",
    )
    s.add_argument(
        "--lr", type=_positive_float("--lr"), help="learning rate for --method gd (default 1e-3)"
    )
    s.add_argument(
        "--out", required=True, default=None, help="output folder; writes OUT/trajectory.nc"
    )
    s.add_argument(
        "--overwrite",
        action="store_true",
        default=False,
        help="replace an existing OUT/trajectory.nc (refused otherwise)",
    )
    s.add_argument("--progress", action="store_true", help="print a progress meter")
    s.add_argument("--k", type=_count("--k"), help="classes / neurons per type")
    s.add_argument("--r", type=_count("--r"), help="bias-plateau: homogeneity degree")
    s.add_argument("--delta", type=_positive_float("--delta"), help="bias-plateau: init scale δ")
    s.add_argument("--init", type=_positive_float("--init"), help="linear-teacher: init scale")
    s.add_argument(
        "--slope",
        type=_typed("--slope", as_float, lo=0.0, hi=1.0),
        help="linear-teacher: leaky slope in [0, 1)",
    )

    w = sub.add_parser(
        "sweep",
        help="run a grid of gradient flows (batched, resumable, optionally on Dask)",
        description="multistage: the descent-time grid m × α × seeds (T_p, T_d, loss and K̂ "
        "curves per point). Runs of one width are batched with vmap; every point is written "
        "atomically to OUT/points/, the combined results to OUT/sweep.nc and the figure to "
        "OUT/descent_time.png. Rerunning the same command resumes (completed points are "
        "skipped, failed ones retried); a larger grid extends the folder. Exit status: 0 all "
        "points ok, 1 some failed, 2 bad input.",
    )
    w.add_argument("experiment", choices=["multistage"])
    w.add_argument("--m", required=True, help="widths, comma-separated (e.g. 1000,5000)")
    w.add_argument("--alpha", required=True, help="init exponents α > 1/2 (e.g. 0.75,1.0)")
    w.add_argument("--seeds", default="0", help="seeds: a range 0-2 or a list 0,1,2 (default 0)")
    w.add_argument("--target", default="f1", choices=_targets(), help="default f1")
    w.add_argument("--data", default="paper", choices=["paper", "assumption"])
    w.add_argument(
        "--n", type=_count("--n", 2), default=1000, help="number of data points (default 1000)"
    )
    w.add_argument(
        "--solver",
        default="tsit5",
        choices=_solver_names(),
        help="ODE solver, e.g. tsit5 (default) or rkc",
    )
    w.add_argument(
        "--vector-field",
        default="autodiff",
        choices=["autodiff", "fused"],
        help="autodiff (default) or the hand-derived fused two-layer field",
    )
    w.add_argument(
        "--dtype",
        default="float64",
        choices=["float64", "float32"],
        help="precision of data, θ and the solve (default float64)",
    )
    w.add_argument("--rtol", type=_typed("--rtol", as_tolerance, example="1e-6"), default=1e-6)
    w.add_argument("--atol", type=_typed("--atol", as_tolerance, example="1e-9"), default=1e-9)
    w.add_argument(
        "--beta",
        type=_typed("--beta", as_float, lo=0.0, hi=1.0),
        default=0.1,
        help="T_d threshold β in (0, 1) (default 0.1)",
    )
    w.add_argument(
        "--n-save", type=_count("--n-save", 2), default=401, help="save times per run (default 401)"
    )
    w.add_argument(
        "--margin",
        type=_typed("--margin", as_float, nonnegative=True),
        default=8.0,
        help="horizon τ₁ = (2α−1)/2·ln m + margin, in the theorems' time (default 8)",
    )
    w.add_argument(
        "--max-steps", type=_count("--max-steps"), default=200_000, help="step budget per run"
    )
    w.add_argument(
        "--batch-size", type=_count("--batch-size"), default=8, help="most runs per vmapped batch"
    )
    w.add_argument("--out", required=True, help="output folder (created, or resumed)")
    w.add_argument("--scheduler", default=None, help="Dask scheduler address (tcp://host:8786)")
    w.add_argument(
        "--connect-timeout",
        type=_positive_float("--connect-timeout"),
        default=10.0,
        help="seconds to wait for the scheduler (default 10)",
    )
    w.add_argument("--no-plot", action="store_true", help="do not write descent_time.png")
    w.add_argument("--quiet", action="store_true", help="print only the summary")

    d = sub.add_parser("derive", help="check the symbolic derivations (sympy)")
    d.add_argument("paper", nargs="?", default="all")
    return p


def _cmd_check(args) -> int:
    from ._checks import any_failed, format_table
    from .experiments.base import OutputDir

    exps = _experiments()
    names = sorted(exps) if args.experiment == "all" else [args.experiment]
    for name in names:  # refuse a bad --out before minutes of computing
        OutputDir.preflight(Path(args.out) / name, exps[name].FILES, name)
    failed = False
    for name in names:
        mod = exps[name]
        cfg = mod.default_config(quick=args.quick)
        start = time.perf_counter()
        report = mod.run(cfg, Path(args.out))
        print(
            f"\n== {name} ({'quick' if args.quick else 'default'}; "
            f"{time.perf_counter() - start:.0f}s) =="
        )
        print(format_table(report.checks))
        print("wrote:", ", ".join(str(f) for f in report.files))
        failed |= any_failed(report.checks)
    return EXIT_FAILED if failed else EXIT_OK


def _set(cfg, **changes):
    import dataclasses

    return dataclasses.replace(cfg, **{k: v for k, v in changes.items() if v is not None})


def _simulate_args(args) -> argparse.Namespace:
    """The flags given, refused where they do not act on the experiment, plus defaults."""
    given = {k for k in vars(args) if k not in ("command", "experiment", "out", "overwrite")}
    allowed = SIMULATE_FLAGS[args.experiment]
    ignored = sorted(given - allowed)
    if ignored:
        flag = lambda k: "--" + k.replace("_", "-")
        raise ConfigError(
            f"`flows simulate {args.experiment}` does not use "
            f"{', '.join(flag(k) for k in ignored)}; its flags are "
            f"{', '.join(flag(k) for k in sorted(allowed))} (and --out, --overwrite)."
        )
    return argparse.Namespace(**{**_SIM_DEFAULTS, **vars(args)})


def _simulate_other(args):
    from ._separable_data import symmetric_gaussians
    from ._teacher_observables import teacher_observables
    from .experiments import bias_plateau, linear_teacher

    if args.experiment == "bias-plateau":
        cfg = _set(bias_plateau.Config(), k=args.k, r=args.r, delta=args.delta, seed=args.seed)
        return bias_plateau.run_homogeneous(cfg).traj, cfg.rtol
    cfg = _set(linear_teacher.Config(), k=args.k, slope=args.slope, seed=args.seed, t1=args.t1)
    data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
    obs = teacher_observables(teacher=data.teacher, beta=cfg.beta)
    init = cfg.small_init if args.init is None else args.init
    return linear_teacher.run_flow(cfg, data, init, obs), cfg.rtol


def _save_trajectory(traj, out: Path, rtol: float | None, overwrite: bool) -> Path:
    """Write OUT/trajectory.nc, unless the flow's accuracy certificate failed (exit 3)."""
    if rtol is not None:
        from ._simulate import certificate, describe_certificate

        cert = traj.stats.get("certificate") or certificate(traj.observables, rtol)
        traj.stats["certificate"] = cert
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


def _cmd_simulate(args) -> int:
    from .experiments.base import check_output_path

    args = _simulate_args(args)
    out = check_output_path(args.out) / "trajectory.nc"
    if out.exists() and not args.overwrite:
        raise _exists_error(out)
    if args.experiment != "multistage":
        traj, rtol = _simulate_other(args)
        path = _save_trajectory(traj, out, rtol, args.overwrite)
        print(
            f"{traj.config.get('method', 'gradient flow')}: loss {traj.loss[0]:.6g} → "
            f"{traj.loss[-1]:.6g} at t = {traj.times[-1]:g}; {traj.stats['vf_evals']} gradient "
            f"evaluations, {traj.stats['wall_s']:.2f}s"
        )
        print("wrote:", path)
        return EXIT_OK
    from . import make_problem, multistage_observables
    from .experiments import multistage as ex
    from .models import TwoLayer

    cfg = ex.Config(
        m=args.m,
        alpha=args.alpha,
        target=args.target,
        data=args.data,
        n=args.n,
        seed=args.seed,
        t1=20.0 if args.t1 is None else args.t1,
        solver=args.solver,
        rtol=args.rtol,
        atol=args.atol,
    )
    check_memory(
        two_layer_bytes(cfg.n, cfg.m),
        f"--m {cfg.m} with --n {cfg.n}",
        "Reduce --m or --n.",
    )
    data = ex.make_data(cfg)
    problem = make_problem(TwoLayer(m=cfg.m, d=data.d, alpha=cfg.alpha), data, key=cfg.seed)
    if args.method == "flow":
        from . import simulate

        traj = simulate(
            problem,
            t1=cfg.t1,
            n_save=args.n_save,
            solver=cfg.solver,
            rtol=cfg.rtol,
            atol=cfg.atol,
            save_params=args.save_params,
            observables=multistage_observables,
            progress=args.progress,
            max_steps=args.max_steps,
        )
    else:
        from . import gradient_descent

        traj = gradient_descent(  # raises SolverError (exit 3) if it diverges
            problem,
            learning_rate=args.lr,
            t1=cfg.t1,
            n_save=args.n_save,
            save_params=args.save_params,
            observables=multistage_observables,
        )
    traj.config["experiment"] = {"name": "multistage", **vars(args)}
    rtol = cfg.rtol if args.method == "flow" else None
    path = _save_trajectory(traj, out, rtol, args.overwrite)
    st = traj.stats
    print(
        f"{traj.config['method']}: loss {traj.loss[0]:.6g} → {traj.loss[-1]:.6g} at t = "
        f"{traj.times[-1]:g}; {st['vf_evals']} gradient evaluations, {st['wall_s']:.2f}s; "
        f"max energy residual {traj.observables['energy_residual'].max():.2e}"
    )
    print("wrote:", path)
    return EXIT_OK


def _cmd_sweep(args) -> int:
    from ._sweep import sweep
    from .experiments.base import check_output_path

    check_output_path(args.out)
    try:
        result = sweep(
            args.out,
            m=args.m,
            alpha=args.alpha,
            seeds=args.seeds,
            experiment=args.experiment,
            target=args.target,
            data=args.data,
            n=args.n,
            solver=args.solver,
            rtol=args.rtol,
            atol=args.atol,
            beta=args.beta,
            n_save=args.n_save,
            margin=args.margin,
            max_steps=args.max_steps,
            vector_field=args.vector_field,
            dtype=args.dtype,
            batch_size=args.batch_size,
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
