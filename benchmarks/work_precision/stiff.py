"""Stiff test problems with exact or independent references, for tolerance proportionality
(global error / rtol) and work-precision of every solver the toolkit ships (issue 16).

Self-contained (no imports from the rest of `work_precision`), so the tests load it too:

- `heat(n)`: 1-D heat equation u_t = u_xx on (0, 1), u = 0 at both ends, n interior
  points (second differences), rough initial data (the indicator of [1/4, 3/4]), t = 0.05.
  It is the gradient flow of L(u) = ½ uᵀ A u (A = −Δ_h). Exact solution of the
  semi-discrete system by its sine series (the eigenvectors of Δ_h), ρ = 4 (n+1)².
- `brusselator(n)`: the Brusselator with diffusion (Hairer & Wanner II, §IV.1), α = 1/50,
  u(0) = u(1) = 1, v(0) = v(1) = 3, u₀ = 1 + sin 2πx, v₀ = 3, t = 10 (ρ ≈ 8α(n+1)²). Not a
  gradient flow. Reference: scipy's Radau (an implicit method none of the tested solvers
  shares) at rtol 1e-13 with the exact Jacobian.
- `quartic(d)`: gradient flow of L(θ) = ½ θᵀ H θ + (c/4) Σ θ_i⁴, H symmetric positive
  definite with eigenvalues geometric in [1, ρ_H], t = 1. Reference: scipy Radau as above.

Each problem is a `StiffProblem`: field f(t, y) in JAX, y₀, t₁, the reference y(t₁), and
ρ (the Jacobian's spectral radius at y₀ or a bound on it).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate

jax.config.update("jax_enable_x64", True)

__all__ = [
    "PROBLEMS",
    "StiffProblem",
    "brusselator",
    "global_error",
    "heat",
    "multistage",
    "quartic",
    "solve",
    "with_inert",
]


@dataclasses.dataclass(frozen=True)
class StiffProblem:
    name: str
    field: Callable  # (t, y, args) -> dy/dt, JAX
    y0: np.ndarray
    t1: float
    y_ref: np.ndarray  # y(t1), exact or independent reference
    rho: float  # spectral radius of the Jacobian (at y0, or bound)
    reference: str  # how y_ref was obtained
    gradient_flow: bool


def global_error(y, y_ref) -> float:
    """Relative global error max |y − y_ref| / max |y_ref|."""
    y, y_ref = np.asarray(y, np.float64), np.asarray(y_ref, np.float64)
    return float(np.max(np.abs(y - y_ref)) / np.max(np.abs(y_ref)))


def _laplacian_1d(n: int) -> np.ndarray:
    dx2 = (n + 1) ** 2
    return dx2 * (
        np.diag(-2.0 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    )


@functools.cache
def heat(n: int = 200, t1: float = 0.05) -> StiffProblem:
    x = np.arange(1, n + 1) / (n + 1)
    u0 = ((x >= 0.25) & (x <= 0.75)).astype(np.float64)
    # eigenvectors sin(kπx_j), eigenvalues −4(n+1)² sin²(kπ/(2(n+1)))
    k = np.arange(1, n + 1)
    s = np.sin(np.pi * np.outer(x, k))  # (j, k); S S = (n+1)/2 I
    lam = -4.0 * (n + 1) ** 2 * np.sin(k * np.pi / (2 * (n + 1))) ** 2
    coef = (2.0 / (n + 1)) * (s.T @ u0)
    y_ref = s @ (coef * np.exp(lam * t1))
    dx2 = float((n + 1) ** 2)

    def field(t, u, args):
        up = jnp.concatenate([u[1:], jnp.zeros(1, u.dtype)])
        um = jnp.concatenate([jnp.zeros(1, u.dtype), u[:-1]])
        return dx2 * (up - 2.0 * u + um)

    return StiffProblem(
        f"heat N={n}", field, u0, t1, y_ref, float(-lam.min()), "exact (sine series)", True
    )


@functools.cache
def brusselator(n: int = 100, t1: float = 10.0, alpha: float = 1.0 / 50.0) -> StiffProblem:
    x = np.arange(1, n + 1) / (n + 1)
    c = alpha * (n + 1) ** 2
    y0 = np.concatenate([1.0 + np.sin(2 * np.pi * x), 3.0 * np.ones(n)])

    def np_field(t, y):
        u, v = y[:n], y[n:]
        up = np.concatenate([u[1:], [1.0]])
        um = np.concatenate([[1.0], u[:-1]])
        vp = np.concatenate([v[1:], [3.0]])
        vm = np.concatenate([[3.0], v[:-1]])
        du = 1.0 + u * u * v - 4.4 * u + c * (up - 2 * u + um)
        dv = 3.4 * u - u * u * v + c * (vp - 2 * v + vm)
        return np.concatenate([du, dv])

    lap = _laplacian_1d(n) * alpha

    def np_jac(t, y):
        u, v = y[:n], y[n:]
        j = np.zeros((2 * n, 2 * n))
        j[:n, :n] = lap + np.diag(2 * u * v - 4.4)
        j[:n, n:] = np.diag(u * u)
        j[n:, :n] = np.diag(3.4 - 2 * u * v)
        j[n:, n:] = lap + np.diag(-u * u)
        return j

    def field(t, y, args):
        u, v = y[:n], y[n:]
        one, three = jnp.ones(1, y.dtype), 3.0 * jnp.ones(1, y.dtype)
        up = jnp.concatenate([u[1:], one])
        um = jnp.concatenate([one, u[:-1]])
        vp = jnp.concatenate([v[1:], three])
        vm = jnp.concatenate([three, v[:-1]])
        du = 1.0 + u * u * v - 4.4 * u + c * (up - 2 * u + um)
        dv = 3.4 * u - u * u * v + c * (vp - 2 * v + vm)
        return jnp.concatenate([du, dv])

    sol = scipy.integrate.solve_ivp(
        np_field, (0.0, t1), y0, method="Radau", rtol=1e-13, atol=1e-13, jac=np_jac
    )
    rho = float(np.max(np.abs(np.linalg.eigvals(np_jac(0.0, y0)))))
    return StiffProblem(
        f"Brusselator N={n}", field, y0, t1, sol.y[:, -1], rho, "scipy Radau rtol 1e-13", False
    )


@functools.cache
def quartic(d: int = 200, rho_h: float = 1.0e4, c: float = 1.0, t1: float = 1.0) -> StiffProblem:
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    h = (q * np.geomspace(1.0, rho_h, d)) @ q.T
    h = 0.5 * (h + h.T)
    y0 = rng.standard_normal(d)

    def np_field(t, y):
        return -(h @ y) - c * y**3

    def np_jac(t, y):
        return -h - np.diag(3 * c * y**2)

    hj = jnp.asarray(h)

    def field(t, y, args):
        return -(hj @ y) - c * y**3

    sol = scipy.integrate.solve_ivp(
        np_field, (0.0, t1), y0, method="Radau", rtol=1e-13, atol=1e-13, jac=np_jac
    )
    rho = float(np.max(np.abs(np.linalg.eigvalsh(np_jac(0.0, y0)))))
    return StiffProblem(
        f"quadratic+quartic d={d}", field, y0, t1, sol.y[:, -1], rho, "scipy Radau rtol 1e-13", True
    )


@functools.cache
def multistage(m: int = 50, n: int = 200, t1: float = 20.0) -> StiffProblem:
    """The multi-stage default, small: `TwoLayer(m, d=1, α=1)`, tanh, target f₁ on n paper
    points, squared error, key 0, t = 20, θ flattened. Reference: scipy Radau at rtol 1e-13
    with the autodiff Hessian as Jacobian."""
    from jax.flatten_util import ravel_pytree

    import flows
    from flows.models import TwoLayer

    prob = flows.make_problem(TwoLayer(m=m, d=1, alpha=1.0), flows.paper_data("f1", n=n), key=0)
    flat0, unravel = ravel_pytree(prob.theta0)

    def field(t, y, args):
        return -ravel_pytree(prob.grad(unravel(y)))[0]

    jf = jax.jit(lambda y: field(0.0, y, None))
    jj = jax.jit(jax.jacfwd(lambda y: field(0.0, y, None)))
    y0 = np.asarray(flat0, np.float64)
    sol = scipy.integrate.solve_ivp(
        lambda t, y: np.asarray(jf(y)),
        (0.0, t1),
        y0,
        method="Radau",
        rtol=1e-13,
        atol=1e-13,
        jac=lambda t, y: np.asarray(jj(y)),
    )
    rho = float(np.max(np.abs(np.linalg.eigvalsh(np.asarray(jj(y0))))))
    return StiffProblem(
        f"multistage m={m} n={n}", field, y0, t1, sol.y[:, -1], rho, "scipy Radau rtol 1e-13", True
    )


def with_inert(problem: StiffProblem, n_inert: int) -> StiffProblem:
    """`problem` with `n_inert` inert components appended (y = 0, dy/dt = 0: parameters
    that do not move, like the neurons of a wide net that stay put while a few move). The
    solution and the error of the original components are unchanged and the inert ones
    carry no error, so an error control in the max norm takes the same steps with or
    without them, while the RMS norm divides the error by sqrt(1 + n_inert/size): the
    controller then lets the moving components' error grow by up to that factor."""
    k = problem.y0.size

    def field(t, y, args):
        return jnp.concatenate([problem.field(t, y[:k], args), jnp.zeros_like(y[k:])])

    pad = np.zeros(n_inert)
    return StiffProblem(
        f"{problem.name} + {n_inert} inert",
        field,
        np.concatenate([problem.y0, pad]),
        problem.t1,
        np.concatenate([problem.y_ref, pad]),
        problem.rho,
        problem.reference,
        problem.gradient_flow,
    )


PROBLEMS = {
    "heat": heat,
    "brusselator": brusselator,
    "quartic": quartic,
    "multistage": multistage,
}

ATOL_FACTOR = 1e-3  # atol = 1e-3 · rtol
# solvers whose Newton tolerances are static floats (one compilation per rtol)
STATIC_TOLERANCES = ("kvaerno5-cg",)


def solve(
    problem: StiffProblem,
    name: str,
    rtols,
    *,
    count_evals: bool = False,
    timed: bool = False,
    make: Callable | None = None,
    error_norm: str = "rms",
) -> list[dict]:
    """Solve `problem` with the toolkit's solver `name` (`flows._solvers.make_solver`: the
    objects `flows.simulate` uses, with its PID controller and atol = 1e-3 rtol) at each
    rtol: one compilation (rtol traced), the toolkit's first step (`initial_step`).
    Returns per rtol: `err` (relative global error at t1), `err_rtol`, `steps`,
    `rejected`, `vf_evals` (stabilized solvers: their own count on accepted steps plus
    Hessian-vector products; others: host-callback count with `count_evals`, plus
    kvaerno5-cg's CG products, else from the step count where diffrax's solver has a fixed
    count), `jvp_evals` (kvaerno5-cg's CG products, counted with `count_evals`), `result`,
    `wall_s` (with `timed`:
    the solve alone — compiled by an untimed first call; else it includes compilation at
    the first rtol). `make`: instead of the toolkit's solver `name`, `make(rtol, atol)`
    builds the solver (static tolerances: one compilation per rtol). `error_norm`: the
    controller's norm, 'rms' (default) or 'max' (`flows.simulate(error_norm=...)`; the
    stabilized solvers are built with the same)."""
    import time

    import diffrax
    import equinox as eqx

    from flows import (
        EVALS_PER_STEP,
        FIRST_STEP_STABILITY,
        AbstractStabilizedSolver,
        initial_step,
        make_solver,
        pid_controller,
        rkc_eval_counts,
        spectral_radius,
    )

    calls = [0]
    products = [0]  # kvaerno5-cg: its CG's Jacobian-vector products

    def count(_):
        calls[0] += 1

    def count_products(k):
        products[0] += int(k)

    def field(t, y, args):
        if count_evals:
            jax.debug.callback(count, t)
        return problem.field(t, y, args)

    def build_named(r, a):  # kvaerno5-cg: its CG's products counted here
        return make_solver(name, r, a, on_products=count_products if count_evals else None)

    build = make if make is not None else build_named
    probe = build(1e-6, 1e-9)
    stabilized = isinstance(probe, AbstractStabilizedSolver)

    @eqx.filter_jit
    def run(rtol, y0, fixed):
        atol = ATOL_FACTOR * rtol
        # a solver whose tolerances are static floats (the implicit ones): built per rtol
        solver = fixed if fixed is not None else make_solver(name, 1e-6, 1e-9, error_norm)
        if stabilized:
            solver = eqx.tree_at(lambda s: s.tolerances, solver, (rtol, atol))
        rho = spectral_radius(lambda y: problem.field(0.0, y, None), y0, 20)
        classic = not (stabilized or isinstance(solver, diffrax.AbstractImplicitSolver))
        dt0 = initial_step(
            lambda t, y: problem.field(t, y, None),
            0.0,
            y0,
            rtol=rtol,
            atol=atol,
            order=int(solver.order(diffrax.ODETerm(field)) or 1),
            rho=1.2 * rho,
            stability=FIRST_STEP_STABILITY if classic else None,
            span=problem.t1,
        )
        return diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            solver,
            0.0,
            problem.t1,
            dt0,
            y0,
            stepsize_controller=pid_controller(rtol, atol, error_norm),
            saveat=diffrax.SaveAt(t1=True, solver_state=stabilized),
            max_steps=1_000_000,
            throw=False,
        )

    y0 = jnp.asarray(problem.y0)
    out = []
    for i, rtol in enumerate(rtols):
        fixed = None
        if name in STATIC_TOLERANCES or make is not None:
            fixed = build(float(rtol), ATOL_FACTOR * float(rtol))
        if timed and (i == 0 or fixed is not None):
            # compile (once; per rtol for the implicit solvers, whose Newton tolerances are
            # static), so
            # that wall_s is the solve alone
            jax.block_until_ready(run(jnp.asarray(rtol), y0, fixed).ys)
        calls[0] = products[0] = 0
        start = time.perf_counter()
        sol = run(jnp.asarray(rtol), y0, fixed)
        jax.block_until_ready(sol.ys)
        wall = time.perf_counter() - start
        steps = int(sol.stats["num_steps"])
        if stabilized:
            c = rkc_eval_counts(sol)
            evals = int(c["vf_evals"]) + int(c["jvp_evals"])
        elif count_evals:
            evals = calls[0] + products[0]
        else:
            evals = EVALS_PER_STEP[name] * steps + 1 if name in EVALS_PER_STEP else -1
        assert sol.ys is not None
        err = global_error(sol.ys[-1], problem.y_ref)
        out.append(
            dict(
                rtol=float(rtol),
                err=err,
                err_rtol=err / float(rtol),
                steps=steps,
                rejected=int(sol.stats["num_rejected_steps"]),
                vf_evals=evals,
                jvp_evals=products[0],
                result=str(sol.result == diffrax.RESULTS.successful),
                wall_s=wall,
            )
        )
    return out


FULL_SIZES = {
    "heat": dict(n=200),
    "heat1000": dict(n=1000),
    "brusselator": dict(n=100),
    "quartic": dict(d=200),
    "multistage": dict(m=50, n=200),
}
QUICK_SIZES = {
    "heat": dict(n=100),
    "brusselator": dict(n=40),
    "quartic": dict(d=50),
    "multistage": dict(m=20, n=100),
}
# Non-stiff controls: the same flows made mild (ρ·t1 ≈ 20–50), where every solver's step is
# set by its error estimate, not by stability — so err/rtol there measures how each
# solver's local error control maps to the global error of a dissipative gradient flow.
NONSTIFF_SIZES = {
    "heat": dict(n=10),
    "quartic": dict(d=50, rho_h=20.0),
    "multistage": dict(m=20, n=100, t1=2.0),
}
SOLVERS = (
    "tsit5",
    "dopri5",
    "dopri8",
    "kvaerno5",
    "kvaerno5-cg",
    "rkc",
    "eserk4",
    "rock4",
)
RTOLS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


def _build(key: str, kw: dict) -> StiffProblem:
    return (heat if key.startswith("heat") else PROBLEMS[key])(**kw)


BAND = (0.1, 3.0)  # the target for err/rtol


def run_all(
    out_dir,
    *,
    quick: bool = False,
    solvers=SOLVERS,
    rtols=RTOLS,
    problems=None,
    error_norm: str = "rms",
    nonstiff: bool = False,
) -> dict:
    """Every solver on every problem (`problems`: keys of `FULL_SIZES`/`QUICK_SIZES`, default
    all) at every rtol, the controller (and the stabilized solvers) measuring the error in
    `error_norm` ('rms', diffrax's default, or 'max'): writes
    `work_precision_stiff[_<problems>][_max][_quick]` `.md` (err/rtol
    and evaluation tables), `.json` and `.png` (error vs evaluations and vs wall, log–log)
    under `out_dir`, rewritten after each problem (an interrupted run leaves the problems
    it finished). `nonstiff`: instead the mild versions of the flows (`NONSTIFF_SIZES`),
    written to `work_precision_nonstiff[...]`.
    Evaluations: Tsit5/Dopri5/Dopri8 from the step count (`EVALS_PER_STEP`, exact: FSAL /
    fixed stages, checked against a callback count in the tests), RKC2/ESERK4 their own
    count, the implicit solvers by a host callback (which costs them wall time)."""
    from pathlib import Path

    from flows import EVALS_PER_STEP

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = NONSTIFF_SIZES if nonstiff else QUICK_SIZES if quick else FULL_SIZES
    stem = "work_precision_nonstiff" if nonstiff else "work_precision_stiff"
    if problems is not None:  # a subset (e.g. run in parallel): its own files
        stem += "_" + "-".join(k for k in sizes if k in problems)
    stem += "_max" if error_norm == "max" else ""
    stem += "_quick" if quick else ""
    results = {}
    for key, kw in sizes.items():
        if problems is not None and key not in problems:
            continue
        p = _build(key, kw)
        rows = {}
        for name in solvers:
            if name == "kvaerno5" and p.y0.size >= 1000:
                continue  # dense Jacobian LU per step: minutes at N = 1000
            count = name not in EVALS_PER_STEP and name not in ("rkc", "eserk4", "rock4")
            rows[name] = solve(p, name, rtols, count_evals=count, timed=True, error_norm=error_norm)
            print(p.name, name, [f"{r['err_rtol']:.2g}" for r in rows[name]], flush=True)
        results[p.name] = dict(rho=p.rho, t1=p.t1, reference=p.reference, rows=rows)
        _write(out_dir, stem, results, rtols, error_norm, nonstiff)
    return results


def _cell(r: dict) -> str:
    x = r["err_rtol"]
    txt = f"{x:.2g} ({r['vf_evals']})"
    if r["result"] != "True":
        return f"**failed** {txt}"
    return txt if BAND[0] <= x <= BAND[1] else f"**{txt}**"


def _write(
    out_dir, stem: str, results: dict, rtols, error_norm: str = "rms", nonstiff: bool = False
) -> None:
    import json
    import os
    import platform

    (out_dir / f"{stem}.json").write_text(
        json.dumps(
            dict(
                results=results,
                rtols=list(rtols),
                error_norm=error_norm,
                nonstiff=nonstiff,
                band=list(BAND),
                machine=platform.platform(),
                cores=os.cpu_count(),
                load_average=os.getloadavg(),
            ),
            indent=1,
        )
    )
    kind = "non-stiff" if nonstiff else "stiff"
    lines = [
        f"# Tolerance proportionality and work-precision on {kind} problems (issue 16)",
        "",
        f"Written by `python benchmarks/bench_work_precision.py --{kind.replace('-', '')}` "
        "(`benchmarks/work_precision/stiff.py`); figure: the `.png` of the same name "
        "(relative error at t1 against vector-field evaluations and against wall time, "
        "log–log). Global relative error at t1 (max |y − y_ref| / max |y_ref|) divided by "
        f"rtol; atol = 1e-3 rtol, diffrax PIDController with the {error_norm.upper()} norm "
        f"of the scaled error (`error_norm='{error_norm}'`), the toolkit's solver objects "
        "(`make_solver`) and first step. In brackets: vector-field evaluations (Tsit5/Dopri "
        "from the step count, rejected steps included; implicit solvers: host-callback "
        "count of the field's evaluations — one per Newton iteration — and, for "
        "`kvaerno5-cg`, its CG's Hessian-vector products (one per CG iteration, counted by "
        "`HessianCG.on_solve`; each costs ≈ 2 gradients); dense `kvaerno5` builds its "
        "Jacobian from Jacobian-vector products the callback does not see, so compare it "
        "by wall time; RKC2/ESERK4: their own count on accepted steps plus Hessian-vector "
        "products). **Bold**: outside the target band err/rtol ∈ "
        f"[{BAND[0]:g}, {BAND[1]:g}]. Last column: accepted steps at the loosest and at "
        "the tightest rtol (a step count that hardly changes with rtol is set by "
        "stability, not by the error estimate). Wall times (json, figure) exclude "
        "compilation and were measured on a shared, loaded machine.",
        "",
    ]
    for pname, res in results.items():
        lines += [
            f"## {pname} (ρ ≈ {res['rho']:.3g}, t1 = {res['t1']:g}, reference: {res['reference']})",
            "",
            "| solver | "
            + " | ".join(f"rtol {r:g}" for r in rtols)
            + " | err/rtol range | steps |",
            "|---|" + "---|" * (len(rtols) + 2),
        ]
        for name, rows in res["rows"].items():
            ratios = [r["err_rtol"] for r in rows]
            rng = f"{min(ratios):.2g} … {max(ratios):.2g}"
            steps = f"{rows[0]['steps']} → {rows[-1]['steps']}"
            cells = " | ".join(_cell(r) for r in rows)
            lines.append(f"| {name} | {cells} | {rng} | {steps} |")
        lines.append("")
    (out_dir / f"{stem}.md").write_text("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:  # pragma: no cover - matplotlib is a dependency of the benchmarks
        return
    n = len(results)
    fig, axes = plt.subplots(2, n, figsize=(4 * n, 7), squeeze=False)
    # one colour per solver in every panel (a problem that skips a solver keeps the others')
    names = list(dict.fromkeys(name for res in results.values() for name in res["rows"]))
    colour = {name: f"C{i}" for i, name in enumerate(names)}
    for j, (pname, res) in enumerate(results.items()):
        for name, rows in res["rows"].items():
            err = [max(r["err"], 1e-16) for r in rows]
            kw = dict(label=name, color=colour[name])
            axes[0, j].loglog([max(r["vf_evals"], 1) for r in rows], err, "o-", **kw)
            axes[1, j].loglog([max(r["wall_s"], 1e-4) for r in rows], err, "o-", **kw)
        for ax in axes[:, j]:
            ax.xaxis.set_minor_formatter(NullFormatter())  # overlapping minor labels
        axes[0, j].set_title(pname, fontsize=9)
        axes[0, j].set_xlabel("vector-field evaluations")
        axes[1, j].set_xlabel("wall time [s] (loaded machine)")
        axes[0, j].set_ylabel("relative error at t1")
        axes[1, j].set_ylabel("relative error at t1")
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    axes[0, 0].legend(handles.values(), handles.keys(), fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / f"{stem}.png", dpi=110)
    plt.close(fig)
