"""The tolerance contract of the solver classes used directly in diffrax (issue 49, item 2).

A user who writes `diffrax.diffeqsolve(ODETerm(f), flows.RKC2(), …,
stepsize_controller=diffrax.PIDController(rtol, atol))` gets the solver `flows.simulate`
builds (`flows.make_solver`: Tsit5 non-stiff steps, the controller's tolerances and error
norm): diffrax hands the class the controller's tolerances as it does to its implicit
solvers (`AbstractStabilizedSolver`). This measures err/rtol and evaluations of

- `bare`: the class with no arguments, as in the line above;
- `given`: the class given the controller's tolerances, `Cls(tolerances=(rtol, atol))`;
- `toolkit`: its `make_solver` twin;
- `no-tol`: the class with a non-stiff method that needs no tolerances and so takes none
  (`RKC2(nonstiff='bs3')`, `ROCK4(nonstiff='none')`, `ESERK4(nonstiff='none')`): plain
  local error control, what a bare class was before it took the controller's,

all four with the same plain `diffrax.PIDController(rtol, atol = 1e-3 rtol)` and
`dt0=None` (diffrax's first step), on the heat equation and two more problems of
`benchmarks/work_precision/stiff.py` and a small multi-stage net (m = 50, n = 200, t = 20),
rtol 1e-3 … 1e-8. One compilation per (variant,
problem): rtol and atol are traced.

Run: `python benchmarks/bench_bare_contract.py [--quick] [--solvers etdrk4 --merge]
[--problems multistage --merge]`; writes
`benchmarks/results/bare_contract.md` and `.json`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

_HERE = Path(__file__).parent
_STIFF = _HERE / "work_precision" / "stiff.py"

RTOLS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
ATOL_FACTOR = 1e-3
BAND = (0.1, 3.0)
#: solver name in `make_solver` → the public class
CLASSES = {"rkc": "RKC2", "rock4": "ROCK4", "eserk4": "ESERK4", "etdrk4": "ETDRK4"}
#: problem key → size (heat N = 200 is the issue's case; the tests use the smaller ones).
#: The small multi-stage net is the kind of flow the toolkit is for (one stiff outlier of
#: the Hessian after its first stage, where ETDRK4 applies); the other three have a stiff
#: bulk.
SIZES = {
    "heat": dict(n=200),
    "brusselator": dict(n=40),
    "quartic": dict(d=50),
    "multistage": dict(m=50, n=200),
}
QUICK_SIZES = SIZES | {"heat": dict(n=100)}
VARIANTS = ("bare", "given", "toolkit", "no-tol")
#: ETDRK4 takes no tolerances of its own (the controller's error test on its estimate is
#: all): only its bare class (its `make_solver` twin masks the toolkit's (θ, E) state)
VARIANTS_OF = {"etdrk4": ("bare",)}
#: the non-stiff method that needs no tolerances (`no-tol`)
NO_TOL_NONSTIFF = {"rkc": "bs3", "rock4": "none", "eserk4": "none"}


def stiff_module():
    """`benchmarks/work_precision/stiff.py` (loaded once, as the tests load it)."""
    if "wp_stiff" not in sys.modules:
        spec = importlib.util.spec_from_file_location("wp_stiff", _STIFF)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["wp_stiff"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["wp_stiff"]


def build(variant: str, name: str, rtol, atol):
    """The solver object of `variant` for solver `name` at (rtol, atol)."""
    import flows

    cls = getattr(flows, CLASSES[name])
    if variant == "bare" or name == "etdrk4":
        return cls()
    if variant == "given":
        return cls(tolerances=(rtol, atol))
    if variant == "toolkit":
        return flows.make_solver(name, 1e-6, 1e-9)
    if variant == "no-tol":
        return cls(nonstiff=NO_TOL_NONSTIFF[name])
    raise ValueError(variant)


def solve(problem, name: str, variant: str, rtols=RTOLS, *, make=None) -> list[dict]:
    """err/rtol, steps, rejected steps and evaluations (the solver's own count on accepted
    steps plus Hessian-vector products, `flows.rkc_eval_counts`) of `variant` of solver
    `name` on `problem` with `diffrax.PIDController(rtol, 1e-3 rtol)`, `dt0=None`.
    `make(rtol, atol)`: another solver object instead (traced tolerances)."""
    from flows import etd_eval_counts, rkc_eval_counts

    s = stiff_module()

    @eqx.filter_jit
    def run(rtol, y0):
        atol = ATOL_FACTOR * rtol
        if make is not None:
            solver = make(rtol, atol)
        else:
            solver = build(variant, name, rtol, atol)
            if variant == "toolkit":  # make_solver's object at this solve's tolerances
                solver = eqx.tree_at(lambda x: x.tolerances, solver, (rtol, atol))
        return diffrax.diffeqsolve(
            diffrax.ODETerm(problem.field),
            solver,
            0.0,
            problem.t1,
            None,
            y0,
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
            saveat=diffrax.SaveAt(t1=True, solver_state=True),
            max_steps=1_000_000,
            throw=False,
        )

    y0 = jnp.asarray(problem.y0)
    out = []
    for rtol in rtols:
        start = time.perf_counter()
        sol = run(jnp.asarray(rtol), y0)
        jax.block_until_ready(sol.ys)
        c = etd_eval_counts(sol) if name == "etdrk4" else rkc_eval_counts(sol)
        assert sol.ys is not None
        err = s.global_error(sol.ys[-1], problem.y_ref)
        out.append(
            dict(
                rtol=float(rtol),
                err=err,
                err_rtol=err / float(rtol),
                steps=int(sol.stats["num_steps"]),
                rejected=int(sol.stats["num_rejected_steps"]),
                evals=int(c["vf_evals"]) + int(c["jvp_evals"]),
                ok=bool(sol.result == diffrax.RESULTS.successful),
                wall_s=time.perf_counter() - start,
            )
        )
    return out


def run_all(
    out_dir: Path,
    *,
    quick: bool = False,
    solvers=tuple(CLASSES),
    merge: bool = False,
    problems=tuple(SIZES),
) -> dict:
    s = stiff_module()
    sizes = {k: v for k, v in (QUICK_SIZES if quick else SIZES).items() if k in problems}
    results: dict = {}
    merged_from = None
    if merge:  # keep the other solvers' rows of the last run, rerun these
        old = json.loads((out_dir / "bare_contract.json").read_text())
        if old["quick"] != quick:
            raise SystemExit("--merge: the saved table was written with another --quick")
        results, merged_from = old["results"], old.get("merged_from", old["date"])
    for key, kw in sizes.items():
        p = s._build(key, kw)
        rows = dict(results.get(p.name, {}).get("rows", {}))
        for name in solvers:
            for variant in VARIANTS_OF.get(name, VARIANTS):
                rows[f"{name}/{variant}"] = r = solve(p, name, variant)
                cells = [f"{x['err_rtol']:.2g}({x['evals']})" for x in r]
                print(p.name, name, variant, cells, flush=True)
        results[p.name] = dict(rho=p.rho, t1=p.t1, rows=rows)
        _write(out_dir, results, quick, (merged_from, solvers, problems) if merge else None)
    return results


def _cell(r: dict) -> str:
    txt = f"{r['err_rtol']:.2g} ({r['evals']})"
    if not r["ok"]:
        return f"**failed** {txt}"
    return txt if BAND[0] <= r["err_rtol"] <= BAND[1] else f"**{txt}**"


def _write(out_dir: Path, results: dict, quick: bool, merged=None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = dict(
        rtols=list(RTOLS),
        band=list(BAND),
        quick=quick,
        machine=platform.platform(),
        cores=os.cpu_count(),
        load_average=os.getloadavg(),
        date=time.strftime("%Y-%m-%d"),
    )
    note = []
    if merged is not None:
        meta["merged_from"] = merged[0]
        note = [
            f"Rows of {', '.join(merged[1])} on {', '.join(merged[2])} rerun on {meta['date']} "
            f"(`--merge`); the others as written on {merged[0]} (their code unchanged since).",
            "",
        ]
    (out_dir / "bare_contract.json").write_text(json.dumps(dict(results=results, **meta), indent=1))
    lines = [
        "# The tolerance contract of the solver classes used directly in diffrax",
        "",
        "Written by `python benchmarks/bench_bare_contract.py` "
        f"({'--quick, ' if quick else ''}{meta['date']}, {meta['cores']} cores, loaded). "
        "Global relative error at t1 divided by rtol, in brackets the solver's own "
        "evaluation count on accepted steps plus Hessian-vector products "
        "(`flows.rkc_eval_counts`). Every solve: `diffrax.diffeqsolve` with "
        "`diffrax.PIDController(rtol, atol=1e-3 rtol)` and `dt0=None`. Rows: `bare` the "
        "class with no arguments (`flows.RKC2()`), `given` the class given the "
        "controller's tolerances (`flows.RKC2(tolerances=(rtol, atol))`), `toolkit` its "
        "`make_solver` twin (what `flows.simulate` uses), `no-tol` the class with a "
        "non-stiff method that takes no tolerances (`RKC2(nonstiff='bs3')`, "
        "`ROCK4(nonstiff='none')`, `ESERK4(nonstiff='none')`: plain local error control, "
        "what a bare class was before it took the controller's tolerances); `etdrk4/bare` "
        "`flows.ETDRK4()` (rank 1, Tsit5 steps where no direction is stiff; counts "
        "`flows.etd_eval_counts`, its power steps included). `bare`, "
        "`given` and `toolkit` take the same steps. **Bold**: outside the band "
        f"err/rtol ∈ [{BAND[0]:g}, {BAND[1]:g}]. Last column: accepted (rejected) steps "
        "at the loosest and the tightest rtol.",
        "",
        *note,
    ]
    for pname, res in results.items():
        lines += [
            f"## {pname} (ρ ≈ {res['rho']:.3g}, t1 = {res['t1']:g})",
            "",
            "| solver | " + " | ".join(f"rtol {r:g}" for r in RTOLS) + " | steps |",
            "|---|" + "---|" * (len(RTOLS) + 1),
        ]
        for label, rows in res["rows"].items():
            cells = " | ".join(_cell(r) for r in rows)
            a, b = rows[0], rows[-1]
            steps = f"{a['steps']} ({a['rejected']}) → {b['steps']} ({b['rejected']})"
            lines.append(f"| {label} | {cells} | {steps} |")
        lines.append("")
    (out_dir / "bare_contract.md").write_text("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="heat N = 100 instead of 200")
    ap.add_argument("--solvers", nargs="*", default=list(CLASSES), choices=list(CLASSES))
    ap.add_argument("--out", default=str(_HERE / "results"))
    ap.add_argument(
        "--merge",
        action="store_true",
        help="rerun only --solvers (on --problems) and keep the other rows of the saved table",
    )
    ap.add_argument("--problems", nargs="*", default=list(SIZES), choices=list(SIZES))
    args = ap.parse_args(argv)
    run_all(
        Path(args.out),
        quick=args.quick,
        solvers=tuple(args.solvers),
        merge=args.merge,
        problems=tuple(args.problems),
    )


if __name__ == "__main__":
    main()
