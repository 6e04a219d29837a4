"""Command line: `flows check`, `flows simulate`, `flows sweep`, `flows derive` (also
`python -m flows`).

Exit status: 0 success (no applicable check failed), 1 a check or identity failed (sweep:
a grid point failed), 2 bad input, 3 a solver failure (the message names the time reached
and what to try).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ._errors import ConfigError, SolverError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SOLVER = 0, 1, 2, 3


def _experiments():
    from .experiments import EXPERIMENTS

    return EXPERIMENTS


def _positive_float(name):
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number; got {text!r}") from None
        if not v > 0 or v != v or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be > 0 and finite; got {text}")
        return v

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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
        "--solver --rtol --atol --method --lr). bias-plateau: §4's r-homogeneous net "
        "(--k --r --delta; t1 from the reduced model's blow-up times). linear-teacher: the "
        "leaky-ReLU ±v net on symmetric Gaussians, loss clock (--k --init --slope --t1).",
    )
    s.add_argument("experiment", choices=["multistage", "bias-plateau", "linear-teacher"])
    s.add_argument("--m", type=int, default=1000, help="width (default 1000)")
    s.add_argument("--alpha", type=float, default=1.0, help="init exponent α (default 1)")
    s.add_argument("--target", default="f1", help="f1, f2 or f3 (default f1)")
    s.add_argument("--data", default="paper", choices=["paper", "assumption"])
    s.add_argument("--n", type=int, default=1000, help="number of data points")
    s.add_argument(
        "--t1",
        type=float,
        default=None,
        help="final time (multistage default 20, linear-teacher 1e8)",
    )
    s.add_argument("--seed", type=int, default=0, help="PRNG seed (default 0)")
    s.add_argument("--solver", default="tsit5", help="tsit5, dopri5, dopri8, kvaerno5, rkc or auto")
    s.add_argument("--rtol", type=float, default=1e-6)
    s.add_argument("--atol", type=float, default=1e-9)
    s.add_argument("--n-save", type=int, default=401, help="number of save times")
    s.add_argument("--max-steps", type=int, default=200_000, help="solver step budget")
    s.add_argument("--save-params", default="ends", choices=["all", "ends", "none"])
    s.add_argument(
        "--method",
        default="flow",
        choices=["flow", "gd"],
        help="exact gradient flow (default) or gradient descent",
    )
    s.add_argument(
        "--lr",
        type=_positive_float("--lr"),
        default=1e-3,
        help="learning rate for --method gd (default 1e-3)",
    )
    s.add_argument("--out", required=True, help="output folder; writes OUT/trajectory.nc")
    s.add_argument("--progress", action="store_true")
    s.add_argument("--k", type=int, default=None, help="classes / neurons per type")
    s.add_argument("--r", type=int, default=None, help="bias-plateau: homogeneity degree")
    s.add_argument("--delta", type=float, default=None, help="bias-plateau: init scale δ")
    s.add_argument("--init", type=float, default=None, help="linear-teacher: init scale")
    s.add_argument("--slope", type=float, default=None, help="linear-teacher: leaky slope")

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
    w.add_argument("--target", default="f1", help="f1, f2 or f3 (default f1)")
    w.add_argument("--data", default="paper", choices=["paper", "assumption"])
    w.add_argument("--n", type=int, default=1000, help="number of data points (default 1000)")
    w.add_argument(
        "--solver", default="tsit5", help="a solver of flows.SOLVERS, e.g. tsit5 (default) or rkc"
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
    w.add_argument("--rtol", type=float, default=1e-6)
    w.add_argument("--atol", type=float, default=1e-9)
    w.add_argument("--beta", type=float, default=0.1, help="T_d threshold β (default 0.1)")
    w.add_argument("--n-save", type=int, default=401, help="save times per run (default 401)")
    w.add_argument(
        "--margin",
        type=float,
        default=8.0,
        help="horizon τ₁ = (2α−1)/2·ln m + margin, in the theorems' time (default 8)",
    )
    w.add_argument("--max-steps", type=int, default=200_000, help="solver step budget per run")
    w.add_argument("--batch-size", type=int, default=8, help="most runs per vmapped batch")
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

    exps = _experiments()
    names = sorted(exps) if args.experiment == "all" else [args.experiment]
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


def _simulate_other(args):
    from ._separable_data import symmetric_gaussians
    from ._teacher_observables import teacher_observables
    from .experiments import bias_plateau, linear_teacher

    if args.experiment == "bias-plateau":
        cfg = _set(bias_plateau.Config(), k=args.k, r=args.r, delta=args.delta, seed=args.seed)
        return bias_plateau.run_homogeneous(cfg).traj
    cfg = _set(linear_teacher.Config(), k=args.k, slope=args.slope, seed=args.seed, t1=args.t1)
    data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
    obs = teacher_observables(teacher=data.teacher, beta=cfg.beta)
    init = cfg.small_init if args.init is None else args.init
    return linear_teacher.run_flow(cfg, data, init, obs)


def _cmd_simulate(args) -> int:
    if args.experiment != "multistage":
        traj = _simulate_other(args)
        path = traj.save(Path(args.out) / "trajectory.nc")
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

        traj = gradient_descent(
            problem,
            learning_rate=args.lr,
            t1=cfg.t1,
            n_save=args.n_save,
            save_params=args.save_params,
            observables=multistage_observables,
        )
        if traj.stats["result"] != "successful":
            raise SolverError(
                f"gradient descent diverged: {traj.stats['result']}. Try a smaller --lr.",
                t_reached=float("nan"),
                reason="diverged",
            )
    traj.config["experiment"] = {"name": "multistage", **vars(args)}
    path = traj.save(Path(args.out) / "trajectory.nc")
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
        return 130
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


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
