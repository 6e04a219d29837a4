"""The Hessian-aware solvers — `ETDRK4` (exponential time differencing with the Hessian's
outlier as its linear part) and the Krylov exponential Rosenbrock solvers (`EXPRB43`,
`EXPRB32`) — against gradient descent and the stabilized explicit solvers (RKC2, ROCK4)
on the multi-stage net, at GD η = 1e-3's error.

One process, one vector field for every row: the flat autodiff field y ↦ −∇L of
`TwoLayer(m, d=1, α=1)`, tanh, target f₁ on the paper data (1000 points), key 0, to
t = 20 (the `multistage` case of `bench_work_precision.py`). Every solver runs in
`diffrax.diffeqsolve` with the toolkit's controller, `flows.pid_controller(rtol, atol =
1e-3 rtol, solver=…)` (RMS norm; diffrax's I-controller, for ETDRK4 its PI controller
that may shrink the step after an accepted one, `PredictivePIDController`; the row
`etdrk4-i` is ETDRK4 under the I-controller, `etdrk4-hold` under diffrax's PI controller
with pcoeff = icoeff = 0.3, the toolkit's before, `etdrk4-jvp` ETDRK4 with its products J v
by `jax.jvp` instead of field differences, `etdrk4-none` ETDRK4 without its Tsit5 steps
where no direction is stiff), t1 saved only; RKC2 and ROCK4 as `flows.simulate` builds
them (Tsit5 non-stiff steps, the controller's tolerances). GD is θ ← θ − η∇L in one
jitted loop. Reference: Dopri8 at rtol 1e-11, atol 1e-13. Error: max |θ(20) − θ_ref(20)|.

Counts come from a separate, identical solve whose field counts its calls on the host:
gradients (field evaluations: ETDRK4's default power steps among them) and Hessian-vector
products (`jax.jvp` of the field: the Krylov bases, `etdrk4-jvp`'s power steps,
RKC2/ROCK4's power iterations) separately, rejected steps included. A Hessian-vector
product costs more than a gradient; its measured cost (in gradients, on this machine, in
the same process) converts them to gradient-equivalents.

Wall times: compilation excluded (each solver is compiled once, rtol is traced); rounds
interleave GD and every solver so that a change of machine load hits all of them, and
each ratio is the median over rounds of (GD wall / solver wall) in the same round.

The work-precision curve of each solver is read at GD's error by log–log interpolation
between the two tolerances whose errors bracket it (no extrapolation).

Usage: `python benchmarks/bench_krylov.py [--m 1000] [--rounds 3] [--out tables.md]
[--solvers etdrk4,exprb43,…] [--json rows.json]` (the tables of
`benchmarks/results/krylov.md` come from such runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import diffrax
import jax
import numpy as np
from jax.flatten_util import ravel_pytree

jax.config.update("jax_enable_x64", True)

import flows  # noqa: E402
from flows import ETDRK4, EXPRB32, EXPRB43  # noqa: E402
from flows.models import TwoLayer  # noqa: E402

T1 = 20.0
LR = 1e-3
ATOL_FACTOR = 1e-3
GRIDS = {
    "etdrk4": (3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5),
    "etdrk4-jvp": (3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5),
    "etdrk4-none": (3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5),
    "etdrk4-i": (1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5),
    "etdrk4-hold": (3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5),
    "exprb43": (1e-4, 3e-5, 1e-5),
    "exprb32": (3e-5, 1e-5),
    "rkc2": (1e-4, 3e-5, 1e-5),
    "rock4": (1e-3, 3e-4, 1e-4),
}


def build(m: int):
    prob = flows.make_problem(TwoLayer(m=m, d=1, alpha=1.0), flows.paper_data("f1"), key=0)
    flat0, unravel = ravel_pytree(prob.theta0)

    def field(y):
        return -ravel_pytree(prob.grad(unravel(y)))[0]

    return prob, flat0, field


class Counter:
    """Host-side counts of the field's gradients and Hessian-vector products."""

    def __init__(self):
        self.grads = 0
        self.hvps = 0

    def wrap(self, field):
        def inc_g():
            self.grads += 1

        def inc_h():
            self.hvps += 1

        @jax.custom_jvp
        def f(y):
            jax.debug.callback(inc_g)
            return field(y)

        @f.defjvp
        def f_jvp(primals, tangents):
            jax.debug.callback(inc_h)
            return jax.jvp(field, primals, tangents)

        return f


def make_solver(name: str, rtol, atol):
    if name in ("etdrk4", "etdrk4-i", "etdrk4-hold"):
        return ETDRK4()
    if name == "etdrk4-jvp":
        return ETDRK4(products="jvp")
    if name == "etdrk4-none":
        return ETDRK4(nonstiff="none")
    if name == "exprb43":
        return EXPRB43()
    if name == "exprb32":
        return EXPRB32()
    if name == "rkc2":
        return flows.RKC2(nonstiff="tsit5", tolerances=(rtol, atol))
    if name == "rock4":
        return flows.ROCK4(nonstiff="tsit5", tolerances=(rtol, atol))
    if name == "dopri8":
        return diffrax.Dopri8()
    raise ValueError(name)


def solve_fn(name: str, field):
    term = diffrax.ODETerm(lambda t, y, args: field(y))

    @jax.jit
    def solve(y0, rtol):
        atol = ATOL_FACTOR * rtol if name != "dopri8" else 1e-13
        solver = make_solver(name, rtol, atol)
        # the toolkit's controller for the solver (ETDRK4: PI, `PredictivePIDController`);
        # 'etdrk4-i': diffrax's I-controller, 'etdrk4-hold': diffrax's PI controller with
        # the toolkit's earlier coefficients (0.3, 0.3), which holds the step after an
        # accepted one where this one may shrink it — the comparisons
        if name == "etdrk4-hold":
            ctrl = diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=0.3, icoeff=0.3)
        else:
            ctrl = flows.pid_controller(rtol, atol, solver=None if name == "etdrk4-i" else solver)
        sol = diffrax.diffeqsolve(
            term,
            solver,
            0.0,
            T1,
            None,
            y0,
            stepsize_controller=ctrl,
            max_steps=200_000,
            saveat=diffrax.SaveAt(t1=True),
            throw=False,
        )
        return (
            sol.ys[-1],
            sol.result,
            sol.stats["num_accepted_steps"],
            sol.stats["num_rejected_steps"],
        )

    return solve


def gd_fn(field, n_steps: int):
    @jax.jit
    def gd(y0):
        return jax.lax.fori_loop(0, n_steps, lambda _, y: y + LR * field(y), y0)

    return gd


def timed(fn, *a):
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*a))
    return out, time.perf_counter() - start


def hvp_cost(field, y0, reps: int = 20) -> float:
    """Wall of one Hessian-vector product in gradients (jitted loops of each)."""

    @jax.jit
    def g(y):
        return jax.lax.fori_loop(0, reps, lambda _, z: z + 1e-9 * field(z), y)

    @jax.jit
    def h(y):
        return jax.lax.fori_loop(0, reps, lambda _, v: v + 1e-9 * jax.jvp(field, (y,), (v,))[1], y)

    timed(g, y0), timed(h, y0)
    tg = min(timed(g, y0)[1] for _ in range(3))
    th = min(timed(h, y0)[1] for _ in range(3))
    return th / tg


def at_error(rows: list[dict], target: float, key: str) -> float | None:
    """log–log interpolation of `key` at error `target` between bracketing rows."""
    pts = sorted((r["error"], r[key]) for r in rows if r["ok"])
    for (e0, v0), (e1, v1) in zip(pts, pts[1:], strict=False):
        if e0 <= target <= e1 and e0 > 0:
            if e1 == e0:
                return v0
            w = np.log(target / e0) / np.log(e1 / e0)
            if v0 <= 0 or v1 <= 0:  # a count that is 0 (no HVPs): linear in w
                return float(v0 + w * (v1 - v0))
            return float(np.exp(np.log(v0) + w * (np.log(v1) - np.log(v0))))
    return None


def write_md(out: dict, path: Path) -> None:
    """The rows and the read-off at GD's error as a markdown table."""
    gd = out["gd"]
    h = out["hvp_cost_in_gradients"]
    lines = [
        f"# Krylov exponential Rosenbrock vs GD, RKC2, ROCK4 — multistage m = {out['m']}",
        "",
        "Written by `python benchmarks/bench_krylov.py --m "
        f"{out['m']}` (one process; see its docstring). {out['n_params']} parameters, "
        f"t = {out['t1']:g}, float64, the autodiff field. GD η = {gd['lr']:g}: "
        f"{gd['steps']} gradients, error {gd['error']:.3g}, wall {gd['wall_s']:.2f} s "
        f"(median of {len(gd['walls'])} rounds). One Hessian-vector product = {h:.2f} "
        "gradients of wall on this machine (gradient-equivalents = gradients + that × HVPs). "
        f"Load average {out['load_start'][0]:.2f} at start, {out['load_end'][0]:.2f} at end "
        f"({out['cores']} cores).",
        "",
        "## At GD's error (log–log interpolation between the bracketing tolerances)",
        "",
        "| solver | gradients | HVPs | evals (grad + HVP) | gradient-equivalents | wall (s) "
        "| GD wall / wall | GD gradients / evals | GD gradients / gradient-equivalents |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for nm, s in out["at_gd_error"].items():
        if s["wall_s"] is None:
            lines.append(f"| {nm} | — | — | — | — | — | not bracketed | — | — |")
            continue
        lines.append(
            f"| {nm} | {s['grads']:.0f} | {s['hvps']:.0f} | {s['evals']:.0f} | "
            f"{s['grad_equiv']:.0f} | {s['wall_s']:.3g} | {s['gd_ratio']:.3g} | "
            f"{gd['steps'] / s['evals']:.3g} | {gd['steps'] / s['grad_equiv']:.3g} |"
        )
    lines += [
        "",
        "## Rows (counts by the host-callback field, rejected steps included)",
        "",
        "| solver | rtol | error | steps | rejected | gradients | HVPs | wall (s) | GD / wall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for nm, rows in out["rows"].items():
        for r in rows:
            lines.append(
                f"| {nm} | {r['rtol']:g} | {r['error']:.3g} | {r['steps']} | {r['rejected']} | "
                f"{r['grads']} | {r['hvps']} | {r['wall_s']:.3g} | {r['gd_ratio']:.3g} |"
            )
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--solvers", default="etdrk4,exprb43,exprb32,rkc2,rock4")
    ap.add_argument(
        "--out", default=None, help="write the tables here (results/krylov.md is curated)"
    )
    ap.add_argument("--json", default=None, help="also write the raw rows to this file")
    args = ap.parse_args(argv)
    names = args.solvers.split(",")
    load0 = os.getloadavg()
    prob, y0, field = build(args.m)

    print(
        f"multistage m = {args.m}: {y0.size} parameters; reference (dopri8 rtol 1e-11)", flush=True
    )
    ref, t_ref = timed(solve_fn("dopri8", field), y0, 1e-11)
    ref = np.asarray(ref[0])
    n_gd = int(round(T1 / LR))
    gd = gd_fn(field, n_gd)
    gd(y0).block_until_ready()  # compile
    ratio_h = hvp_cost(field, y0)
    print(f"one Hessian-vector product = {ratio_h:.2f} gradients (wall)", flush=True)

    solves = {nm: solve_fn(nm, field) for nm in names}
    rows = {nm: [] for nm in names}
    for nm in names:  # compile + warm up, errors, step counts; counts by callback
        for rtol in GRIDS[nm]:
            start = time.perf_counter()
            (y, res, acc, rej), _ = timed(solves[nm], y0, rtol)
            first = time.perf_counter() - start
            ok = bool(res == diffrax.RESULTS.successful)
            counter = Counter()
            cs = solve_fn(nm, counter.wrap(field))
            jax.block_until_ready(cs(y0, rtol))
            err = float(np.max(np.abs(np.asarray(y) - ref))) if ok else float("nan")
            rows[nm].append(
                dict(
                    rtol=rtol, ok=ok, error=err, steps=int(acc), rejected=int(rej),
                    grads=counter.grads, hvps=counter.hvps,
                    grad_equiv=counter.grads + ratio_h * counter.hvps,
                    evals=counter.grads + counter.hvps, first_call_s=first, walls=[],
                )
            )  # fmt: skip
            r = rows[nm][-1]
            print(
                f"{nm} rtol {rtol:g}: error {err:.3g}, {r['steps']} steps ({r['rejected']} "
                f"rejected), {r['grads']} gradients + {r['hvps']} HVPs",
                flush=True,
            )
    gd_y, _ = timed(gd, y0)
    gd_err = float(np.max(np.abs(np.asarray(gd_y) - ref)))
    gd_walls = []
    for rnd in range(args.rounds):
        _, w_gd = timed(gd, y0)
        gd_walls.append(w_gd)
        for nm in names:
            for r in rows[nm]:
                _, w = timed(solves[nm], y0, r["rtol"])
                r["walls"].append(w)
        print(f"round {rnd + 1}: GD {w_gd:.2f} s", flush=True)
    for nm in names:
        for r in rows[nm]:
            r["wall_s"] = float(np.median(r["walls"]))
            r["gd_ratio"] = float(
                np.median([g / w for g, w in zip(gd_walls, r["walls"], strict=True)])
            )
    gd_wall = float(np.median(gd_walls))
    summary = {}
    for nm in names:
        s = {
            k: at_error(rows[nm], gd_err, k)
            for k in ("wall_s", "grads", "hvps", "grad_equiv", "evals", "gd_ratio")
        }
        summary[nm] = s
    load1 = os.getloadavg()
    out = dict(
        m=args.m,
        n_params=int(y0.size),
        t1=T1,
        gd=dict(lr=LR, steps=n_gd, error=gd_err, wall_s=gd_wall, walls=gd_walls),
        hvp_cost_in_gradients=ratio_h,
        reference_wall_s=t_ref,
        rows=rows,
        at_gd_error=summary,
        load_start=load0,
        load_end=load1,
        machine=platform.platform(),
        cores=os.cpu_count(),
        versions=dict(jax=jax.__version__, diffrax=diffrax.__version__),
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    if args.out:
        write_md(out, Path(args.out))
    print(json.dumps(summary, indent=1))
    print(f"GD: error {gd_err:.3g}, wall {gd_wall:.2f} s")


if __name__ == "__main__":
    main()
