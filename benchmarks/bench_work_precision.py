"""Work-precision benchmark: error against a tight reference vs wall time and vector-field
evaluations, for the exact flow, gradient descent, scipy and torchdiffeq, in one process.

Cases (`--case`):

- `multistage`: the multi-stage default, m = 5000, α = 1, target f₁, the paper's data
  (1000 points on [−15, 15]), squared error, t = 20 (10 000 parameters).
- `linear-teacher`: the late phase of the linear-teacher default (`flows check
  linear-teacher`): leaky-ReLU ±v net, k = 10 per type, slope 0.1, v = 1, init 1e-4,
  2-D symmetric Gaussians (n = 100, mean 3·e₁, seed 0), mean logistic loss, t = 10³
  (40 parameters; L(t) ~ 1/t there). t = 10³ keeps gradient descent at η = 10⁻⁴
  (10⁷ steps, ~1.5 min on 2 cores) feasible.
- `bias-plateau`: §4's r-homogeneous example as `flows check bias-plateau` runs it
  (k = 4, d = 16, r = 4, δ = 0.1, class-summed cross-entropy, 68 parameters) to the check's
  horizon t ≈ 253 (1.5 × the reduced model's take-off time of the third class).

Methods (rows): the toolkit's solvers (every name in `flows.SOLVERS`, so a new solver
such as 'rkc' is picked up) at several tolerances — on the linear teacher with the
physical, log and loss clocks — plus, when `flows.make_problem` accepts them, the same
solvers with `vector_field="fused"` and with `dtype="float32"`; gradient descent at
η = 1e-2, 1e-3, 1e-4 (the papers' method; η = 1e-3 is the baseline of the ratios);
`scipy.integrate.solve_ivp` (RK45, DOP853; LSODA and BDF with a dense Jacobian up to
`flows.MAX_IMPLICIT_PARAMS` parameters) driving the same jitted vector field;
torchdiffeq's dopri5 on a PyTorch port of the same objective (`work_precision/torch_port.py`;
skipped with a message when torch or torchdiffeq is not installed). Error: max |θ(t) − θ_ref(t)|
over all parameters (and relative to max |θ_ref|) against Dopri8 at rtol 1e-11. Wall
times exclude compilation and warm-up; every method runs in this one process, so the
ratios hold on a noisy machine.

    python benchmarks/bench_work_precision.py                       # both cases, full size
    python benchmarks/bench_work_precision.py --case multistage     # ~80 min, 2 quiet cores
    python benchmarks/bench_work_precision.py --case linear-teacher # ~6 min
    python benchmarks/bench_work_precision.py --case bias-plateau   # ~6 min
    python benchmarks/bench_work_precision.py --quick               # smoke test, tiny sizes
    python benchmarks/bench_work_precision.py --exclude 'η=1e-04'   # drop rows by label
    python benchmarks/bench_work_precision.py --repeat 3            # fastest of 3 per row
    python benchmarks/bench_work_precision.py --stiff               # stiff problems, ~6 min
    python benchmarks/bench_work_precision.py --nonstiff            # mild controls, ~1 min
    python benchmarks/bench_work_precision.py --stiff --problems brusselator,quartic

`--stiff` runs `work_precision/stiff.py` instead: every solver the toolkit ships on the
heat equation (N = 200, 1000; exact), the Brusselator (N = 100), a quadratic + quartic
flow (d = 200) and the small multi-stage problem (scipy Radau references) at rtol 1e-3 …
1e-8, writing `work_precision_stiff.md/.json/.png` (err/rtol and evaluations).
`--nonstiff` runs the same solvers on mild versions of the three gradient flows (heat
N = 10, quartic d = 50 with ρ_H = 20, multi-stage m = 20 to t = 2: ρ·t1 ≈ 20–50), where
no solver is stability-limited, writing `work_precision_nonstiff.*`.

Writes `work_precision_<case>.md` (headline ratios and the table), `.png` (error vs wall
time and vs evaluations, log–log) and `.json` (rows, machine, versions, settings) under
`--out` (default benchmarks/results; `--quick` appends `_quick` to the names). The headline
includes the toolkit's defaults (Tsit5, rtol 1e-6, atol 1e-9) against GD η = 1e-3: wall
time, error and evaluation ratios at whatever error each reaches (what the former
`bench_multistage.py` reported).

This file is the command line; the benchmark is the package `work_precision/` next to it:
`cases` (the problems), `methods` (the rows and their runners), `run` (reference, rows,
provenance, files), `report` (headline, Markdown, plot).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the `work_precision` package lives next to this file
    sys.path.insert(0, str(HERE))

from work_precision import cases, methods, report, run  # noqa: E402

__all__ = ["RESULTS", "cases", "main", "methods", "report", "run"]

RESULTS = HERE / "results"


def main(argv=None) -> list[dict]:
    """Run the chosen cases; returns one dict per case (`case`, `rows`, `headline`,
    `files`)."""
    p = argparse.ArgumentParser(description=(__doc__ or "work-precision benchmark").splitlines()[0])
    p.add_argument("--case", choices=[*cases.CASES, "all"], default="all")
    p.add_argument(
        "--stiff",
        action="store_true",
        help="instead: every solver on the stiff problems of work_precision/stiff.py "
        "(err/rtol tables, work-precision figure)",
    )
    p.add_argument(
        "--nonstiff",
        action="store_true",
        help="instead: every solver on mild versions of the stiff set's gradient flows "
        "(ρ·t1 ≈ 20–50; work_precision_nonstiff.*): err/rtol where no step is "
        "stability-limited",
    )
    p.add_argument(
        "--problems",
        default=None,
        help="with --stiff: comma-separated subset of heat,heat1000,brusselator,quartic,"
        "multistage (written to work_precision_stiff_<subset>.*; default all); with "
        "--nonstiff: of heat,quartic,multistage",
    )
    p.add_argument(
        "--error-norm",
        choices=("rms", "max"),
        default="rms",
        help="with --stiff/--nonstiff: the step-size controller's norm (and the stabilized "
        "solvers'); "
        "'max' writes work_precision_stiff[_<subset>]_max.*",
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, few methods (smoke test)")
    p.add_argument("--out", default=str(RESULTS), help="output folder")
    p.add_argument("--repeat", type=int, default=1, help="runs per method; the fastest counts")
    p.add_argument("--only", default=None, help="regex: run only rows whose label matches")
    p.add_argument("--m", type=int, default=None, help="the multistage case's width (default 5000)")
    p.add_argument("--exclude", default=None, help="regex: drop rows whose label matches")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: the cores JAX uses)",
    )
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be ≥ 1")
    if args.stiff and args.nonstiff:
        p.error("--stiff and --nonstiff: choose one")
    if args.nonstiff and args.quick:
        p.error("--nonstiff has no --quick sizes (it takes ~2 min as it is)")
    if args.stiff or args.nonstiff:
        from work_precision import stiff

        problems = None if args.problems is None else args.problems.split(",")
        sizes = (
            stiff.NONSTIFF_SIZES
            if args.nonstiff
            else stiff.QUICK_SIZES
            if args.quick
            else stiff.FULL_SIZES
        )
        if problems is not None and not set(problems) <= set(sizes):
            p.error(f"--problems: choose from {','.join(sizes)}; got {args.problems!r}")
        res = stiff.run_all(
            args.out,
            quick=args.quick,
            problems=problems,
            error_norm=args.error_norm,
            nonstiff=args.nonstiff,
        )
        return [dict(case="nonstiff" if args.nonstiff else "stiff", results=res)]
    methods.set_torch_threads(args.torch_threads)
    names = list(cases.CASES) if args.case == "all" else [args.case]
    width = {"m": args.m} if args.m is not None else {}
    return [
        run.run_case(cases.CASES[n](args.quick, **(width if n == "multistage" else {})), args)
        for n in names
    ]


if __name__ == "__main__":
    main()
