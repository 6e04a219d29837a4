"""Are saves between steps as accurate as step ends? Dense output against step ends, for
every shipped solver.

For each solver (`flows.SOLVERS`, built as `flows.simulate` builds them:
`flows.make_solver`, the PID controller of `flows.pid_controller`), problem and
rtol in {1e-4, 1e-6, 1e-8, 1e-10} (atol = rtol · 1e-3), one adaptive solve saves every
step end and its dense output (`SaveAt(steps=True, dense=True)`). From that one solve (so
with the same step sequence):

- the step-end error: the largest error of the observable over the step ends;
- the between-step error: the largest error of the observable at the midpoints of the
  steps, read from the solve's interpolant (what `SaveAt(ts=...)` saves between steps);

both against a reference (a closed form, or Dopri8 at rtol 1e-13). The ratio
between-step / step-end error (`window`) is the figure of merit (target ≤ 2). Also
reported: `local`, the 90th percentile over the steps of the midpoint error divided by
the largest step-end error of the steps around it (k − 2 … k + 2), which a global error
growing along the run cannot hide.

Problems (float64, small, so that the whole table runs in a few minutes on 2 cores):

- `linear`: y' = A y, two damped rotations (ω = 2, 0.5) and a decay, t ∈ [0, 10];
  closed form. Not stiff.
- `prothero`: Prothero–Robinson, y_i' = −λ_i (y_i − g_i(t)) + g_i'(t), g_i = sin(ω_i t +
  φ_i), λ_i log-spaced 1 … 10⁴, t ∈ [0, 3]; closed form g + (y(0) − g(0)) e^{−λ t}.
  Stiff, non-autonomous.
- `heat`: heat equation u_t = u_xx on (0, 1), Dirichlet, 30 interior points (ρ ≈ 3.8·10³),
  u(0) = x(1 − x)(1 + x), t ∈ [0, 0.3]; closed form by the eigenvectors of the
  difference matrix. Stiff, symmetric.
- `tanh-net`: gradient flow of a 2-layer tanh net (`flows.make_problem`, 6 hidden units,
  3 inputs, 24 samples, squared error), θ ∈ R^30, t ∈ [0, 30]; reference Dopri8 at rtol
  1e-13, atol 1e-16.
- `offset`: an observable that is the difference of two large, nearly equal terms:
  a, b Prothero–Robinson components following M + sin t and M + sin t − 0.01 cos 3t with
  M = 10⁴ (λ = 50, 200), plus 8 stiff components (λ up to 3·10³) following M; observable
  a − b (size 0.01: the controller sees |y| ≈ M). Closed form.

The kvaerno5-cg solver (conjugate gradients: symmetric Jacobians only) is run on the
symmetric problems (prothero, heat, tanh-net, offset), not on `linear`.

Writes `benchmarks/results/dense_output.md` and `dense_output.json`.

    python benchmarks/bench_dense_output.py [--solvers rock4,eserk4] [--problems heat]
        [--rtols 1e-6,1e-10] [--out-name dense_output]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import diffrax
import equinox as eqx
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402
from flows import STEP_TO_SAVES, make_solver, pid_controller  # noqa: E402

OUT = Path(__file__).parent / "results"
RTOLS = (1e-4, 1e-6, 1e-8, 1e-10)
SOLVER_NAMES = ("tsit5", "dopri5", "dopri8", "kvaerno5", "kvaerno5-cg", "rkc", "eserk4", "rock4")
SYMMETRIC_ONLY = {"kvaerno5-cg"}
MAX_STEPS = 20_000
TARGET = 2.0
#: Solvers whose saves are also measured stepping to them (`pid_controller(step_ts=…)`)
STEPPED = frozenset({"dopri8", "kvaerno5", "kvaerno5-cg", "rkc", "eserk4", "rock4"})
T_NET = 200.0
N_SAVE = 100


# --- problems ------------------------------------------------------------------------


class Case(eqx.Module):
    """A problem: vector field f(t, y), y(0), [t0, t1], the observable, and the exact
    observable at given times (None: a Dopri8 reference is computed)."""

    name: str = eqx.field(static=True)
    field: object = eqx.field(static=True)
    y0: jax.Array
    t1: float = eqx.field(static=True)
    observable: object = eqx.field(static=True)
    exact: object = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)


def _linear() -> Case:
    # blocks: damped rotation (σ, ω) = (0.1, 2), (0.02, 0.5); decay 0.3
    rot = ((0.1, 2.0), (0.02, 0.5))
    A = np.zeros((5, 5))
    for i, (s, w) in enumerate(rot):
        A[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[-s, w], [-w, -s]]
    A[4, 4] = -0.3
    Aj = jnp.asarray(A)
    y0 = np.array([1.0, 0.5, -0.7, 1.2, 2.0])

    def exact(ts):
        ts = np.asarray(ts)[:, None]
        out = np.empty((ts.shape[0], 5))
        for i, (s, w) in enumerate(rot):
            a, b = y0[2 * i], y0[2 * i + 1]
            c, sn, e = np.cos(w * ts[:, 0]), np.sin(w * ts[:, 0]), np.exp(-s * ts[:, 0])
            out[:, 2 * i] = e * (c * a + sn * b)
            out[:, 2 * i + 1] = e * (-sn * a + c * b)
        out[:, 4] = np.exp(-0.3 * ts[:, 0]) * y0[4]
        return out

    return Case(
        "linear", lambda t, y, args: Aj @ y, jnp.asarray(y0), 10.0, lambda y: y, exact, False
    )


def _prothero_parts(lam, om, ph, amp, base, c0):
    lam, om, ph, amp, base, c0 = (np.asarray(v, float) for v in (lam, om, ph, amp, base, c0))

    def g(t, xp=jnp):
        return base + amp * xp.sin(om * t + ph)

    def dg(t, xp=jnp):
        return amp * om * xp.cos(om * t + ph)

    lj = jnp.asarray(lam)

    def field(t, y, args):
        return -lj * (y - g(t)) + dg(t)

    def exact_state(ts):
        ts = np.asarray(ts)[:, None]
        return g(ts, np) + c0 * np.exp(-lam * ts)

    y0 = jnp.asarray(g(0.0, np) + c0)
    return field, y0, exact_state


def _prothero() -> Case:
    n = 8
    lam = np.logspace(0, 3, n)
    field, y0, exact = _prothero_parts(
        lam, np.linspace(0.5, 3.0, n), np.linspace(0, 1, n), np.ones(n), np.zeros(n), 0.5
    )
    return Case("prothero", field, y0, 2.0, lambda y: y, exact, True)


def _heat() -> Case:
    n = 30
    dx = 1.0 / (n + 1)
    L = (
        np.diag(-2.0 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    ) / dx**2
    x = np.arange(1, n + 1) * dx
    u0 = x * (1 - x) * (1 + x)
    lam, V = np.linalg.eigh(L)
    c = V.T @ u0
    Lj = jnp.asarray(L)

    def exact(ts):
        ts = np.asarray(ts)[:, None]
        return (np.exp(lam[None, :] * ts) * c[None, :]) @ V.T

    return Case("heat", lambda t, y, args: Lj @ y, jnp.asarray(u0), 0.3, lambda y: y, exact, True)


def _tanh_net() -> Case:
    d, m, n = 3, 6, 24
    rng = np.random.default_rng(0)
    X = 3.0 * rng.standard_normal((n, d))
    y = np.sin(X @ np.array([1.0, -0.5, 0.3])) + 0.2 * X[:, 0]

    def net(theta, x):
        W = theta[: m * d].reshape(m, d)
        a = theta[m * d :]
        return jnp.tanh(x @ W.T) @ a

    theta0 = jnp.asarray(np.concatenate([rng.standard_normal(m * d), rng.standard_normal(m)]))
    prob = flows.make_problem(net, flows.from_arrays(X, y), theta0=theta0)
    return Case(
        "tanh-net",
        lambda t, th, args: -prob.grad(th),
        prob.theta0,
        T_NET,
        lambda y: y,
        None,
        True,
    )


def _offset() -> Case:
    M = 1e4
    n_stiff = 8
    lam = np.concatenate([[50.0, 200.0], np.logspace(2, np.log10(3e3), n_stiff)])
    om = np.concatenate([[1.0, 1.0], np.ones(n_stiff)])
    amp = np.concatenate([[1.0, 1.0], np.zeros(n_stiff)])
    base = np.full(2 + n_stiff, M)
    c0 = np.concatenate([[0.3, -0.2], 0.5 * np.ones(n_stiff)])
    f_ab, y0, ex_ab = _prothero_parts(lam, om, np.zeros(2 + n_stiff), amp, base, c0)
    # b follows M + sin t − 0.01 cos 3t: add the extra term to component 1's target
    lam_b = float(lam[1])

    def field(t, y, args):
        extra = -0.01 * jnp.cos(3 * t)
        dextra = 0.03 * jnp.sin(3 * t)
        f = f_ab(t, y, args)
        return f.at[1].add(lam_b * extra + dextra)

    def exact_state(ts):
        s = ex_ab(ts)
        ts = np.asarray(ts)
        # particular solution of the extra forcing on b: −0.01 cos 3t, with its transient
        s[:, 1] += -0.01 * np.cos(3 * ts) + 0.01 * np.exp(-lam_b * ts)
        return s

    def observable(y):
        return y[..., :1] - y[..., 1:2]

    return Case(
        "offset",
        field,
        y0,
        3.0,
        observable,
        lambda ts: observable(exact_state(ts)),
        True,
    )


PROBLEMS = {
    "linear": _linear,
    "prothero": _prothero,
    "heat": _heat,
    "tanh-net": _tanh_net,
    "offset": _offset,
}


# --- solves ----------------------------------------------------------------------------


def _diffeqsolve(case: Case, solver, controller, saveat):
    return diffrax.diffeqsolve(
        diffrax.ODETerm(case.field),
        solver,
        0.0,
        case.t1,
        None,
        case.y0,
        stepsize_controller=controller,
        saveat=saveat,
        max_steps=MAX_STEPS,
        throw=False,
    )


@eqx.filter_jit
def _solve(case: Case, solver, controller):
    sol = _diffeqsolve(case, solver, controller, diffrax.SaveAt(steps=True, dense=True))
    ts = sol.ts
    n = sol.stats["num_accepted_steps"]
    # midpoints of the accepted steps (the padding beyond n evaluates at t1)
    prev = jnp.concatenate([jnp.zeros((1,), ts.dtype), ts[:-1]])
    idx = jnp.arange(ts.shape[0])
    mids = jnp.where(idx < n, 0.5 * (prev + ts), case.t1)
    ends = jnp.where(idx < n, ts, case.t1)
    y_mid = jax.vmap(sol.evaluate)(mids)
    y_end = jax.vmap(sol.evaluate)(ends)  # ≈ sol.ys at the step ends (checked)
    y_uni = jax.vmap(sol.evaluate)(_uniform(case))
    return ends, mids, sol.ys, y_end, y_mid, y_uni, n, sol.result


def _uniform(case: Case):
    return jnp.linspace(0.0, case.t1, N_SAVE + 1)[1:]


@eqx.filter_jit
def _solve_to_saves(case: Case, solver, controller):
    """The toolkit's remedy for a Hermite dense output: step to the save times."""
    sol = _diffeqsolve(case, solver, controller, diffrax.SaveAt(ts=_uniform(case)))
    return sol.ys, sol.stats["num_accepted_steps"], sol.result


@eqx.filter_jit
def _reference(case: Case, ts):
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(case.field),
        diffrax.Dopri8(),
        0.0,
        case.t1,
        None,
        case.y0,
        stepsize_controller=diffrax.PIDController(rtol=1e-13, atol=1e-16),
        saveat=diffrax.SaveAt(ts=ts),
        max_steps=200_000,
    )
    return sol.ys


def _exact(case: Case, ts: np.ndarray) -> np.ndarray:
    if case.exact is not None:
        return np.asarray(case.exact(ts))
    order = np.argsort(ts)
    ys = np.asarray(_reference(case, jnp.asarray(ts[order])))
    out = np.empty_like(ys)
    out[order] = ys
    return np.asarray(case.observable(out))


def measure(case: Case, name: str, rtol: float) -> dict:
    atol = rtol * 1e-3
    solver = make_solver(name, rtol, atol)
    ctrl = pid_controller(jnp.asarray(rtol), jnp.asarray(atol))
    start = time.perf_counter()
    ends, mids, ys, y_end, y_mid, y_uni, n, result = _solve(case, solver, ctrl)
    n = int(n)
    wall = time.perf_counter() - start
    if not bool(result == diffrax.RESULTS.successful):
        return {"failed": str(result), "steps": n}
    ends, mids = np.asarray(ends)[:n], np.asarray(mids)[:n]
    ys, y_end, y_mid = (np.asarray(v)[:n] for v in (ys, y_end, y_mid))
    # the interpolant at a step end (the next step's at its start, or this one's at its end)
    assert np.allclose(ys, y_end, rtol=1e-12, atol=1e-12 * np.abs(ys).max()), "dense ≠ step end"
    ref = _exact(case, np.concatenate([ends, mids]))
    ref_end, ref_mid = ref[:n], ref[n:]
    obs = lambda y: np.asarray(case.observable(jnp.asarray(y)))  # noqa: E731
    e_end = np.max(np.abs(obs(ys) - ref_end).reshape(n, -1), axis=1)
    e_mid = np.max(np.abs(obs(y_mid) - ref_mid).reshape(n, -1), axis=1)
    # step k's midpoint against the step ends k−3 … k+1 (e_end[k] is the end of step k;
    # its start is e_end[k−1]); the first step starts at the exact y(0)
    padded = np.concatenate([[0.0, 0.0, 0.0], e_end, [0.0]])
    near = np.max(np.stack([padded[i : i + n] for i in range(5)]), axis=0)
    floor = 1e-3 * e_end.max()
    local = e_mid / np.maximum(near, floor)
    uni = np.asarray(_uniform(case))
    ref_uni = _exact(case, uni)
    e_uni = np.abs(obs(np.asarray(y_uni)) - ref_uni).max()
    out = {}
    if name in STEPPED:  # the mechanism, measured where the interpolant is in doubt
        ctrl2 = pid_controller(jnp.asarray(rtol), jnp.asarray(atol), step_ts=_uniform(case))
        y_s, n_s, res_s = _solve_to_saves(case, solver, ctrl2)
        if bool(res_s == diffrax.RESULTS.successful):
            e_s = np.abs(obs(np.asarray(y_s)) - ref_uni).max()
            out = {"saves_after": float(e_s / e_end.max()), "steps_after": int(n_s)}
    return out | {
        "steps": n,
        "saves_before": float(e_uni / e_end.max()),
        "end_err": float(e_end.max()),
        "mid_err": float(e_mid.max()),
        "window": float(e_mid.max() / max(e_end.max(), 1e-300)),
        "local_p90": float(np.percentile(local, 90)),
        "local_max": float(local.max()),
        "wall_s": wall,
    }


def _fmt(r: dict | None, key: str) -> str:
    if r is None:
        return "—"
    if "failed" in r:
        return "fail"
    return f"{r[key]:.2g}"


def write(results: list[dict], name: str, elapsed: float) -> None:
    OUT.mkdir(exist_ok=True)
    meta = {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "diffrax": diffrax.__version__,
        "machine": platform.machine(),
        "elapsed_s": elapsed,
        "target": TARGET,
    }
    (OUT / f"{name}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    rtols = sorted({r["rtol"] for r in results}, reverse=True)
    problems = list(dict.fromkeys(r["problem"] for r in results))
    solvers = list(dict.fromkeys(r["solver"] for r in results))
    by = {(r["solver"], r["problem"], r["rtol"]): r for r in results}
    lines = [
        "# Dense output against step ends",
        "",
        "`python benchmarks/bench_dense_output.py` "
        f"({elapsed:.0f} s; jax {jax.__version__}, diffrax {diffrax.__version__}).",
        "",
        "Cell: `window` = largest error of the observable at the steps' midpoints (the "
        "solver's interpolant) / largest error at the step ends, same solve; in brackets "
        "`local` (90th percentile over steps of the midpoint error / the largest step-end "
        f"error of the steps around it). Target: window ≤ {TARGET:g}. atol = rtol·1e-3. "
        "After →: the largest error over "
        f"{N_SAVE} equally spaced saves when the solve steps to them "
        "(`pid_controller(step_ts=...)`) / the largest step-end error of the plain solve. "
        f"`flows.simulate` steps to its saves with {', '.join(sorted(STEP_TO_SAVES))} "
        "(`flows.STEP_TO_SAVES`); for the stabilized solvers it costs 2.3–2.5× the "
        "evaluations on the multistage check's 401 saves, so they interpolate.",
        "",
    ]
    for prob in problems:
        lines += [f"## {prob}", "", "| solver | " + " | ".join(f"rtol {t:g}" for t in rtols) + " |"]
        lines.append("|---" * (len(rtols) + 1) + "|")
        for s in solvers:
            cells = []
            for t in rtols:
                r = by.get((s, prob, t))
                if r is None or "failed" in r:
                    cells.append(_fmt(r, "window"))
                else:
                    flag = " **!**" if r["window"] > TARGET else ""
                    after = r.get("saves_after")
                    tail = "" if after is None else f" → {after:.2g}"
                    cells.append(f"{r['window']:.2g} ({r['local_p90']:.2g}){flag}{tail}")
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## step-end error / steps",
        "",
        "| solver | problem | " + " | ".join(f"rtol {t:g}" for t in rtols) + " |",
    ]
    lines.append("|---" * (len(rtols) + 2) + "|")
    for s in solvers:
        for prob in problems:
            cells = []
            for t in rtols:
                r = by.get((s, prob, t))
                if r is None or "failed" in r:
                    cells.append("—")
                else:
                    st = (
                        r["steps"] if "steps_after" not in r else f"{r['steps']}→{r['steps_after']}"
                    )
                    cells.append(f"{r['end_err']:.1e} / {st}")
            lines.append(f"| {s} | {prob} | " + " | ".join(cells) + " |")
    (OUT / f"{name}.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solvers", default=",".join(SOLVER_NAMES))
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--rtols", default=",".join(f"{t:g}" for t in RTOLS))
    ap.add_argument("--out-name", default="dense_output")
    a = ap.parse_args(argv)
    start = time.perf_counter()
    results = []
    for pname in a.problems.split(","):
        case = PROBLEMS[pname]()
        for s in a.solvers.split(","):
            if s in SYMMETRIC_ONLY and not case.symmetric:
                continue
            for t in (float(v) for v in a.rtols.split(",")):
                r = measure(case, s, t)
                r.update(solver=s, problem=pname, rtol=t)
                results.append(r)
                print(
                    f"{pname:9s} {s:12s} rtol {t:7.0e}: "
                    + (
                        f"window {r['window']:7.3g}  local p90 {r['local_p90']:7.3g} max "
                        f"{r['local_max']:7.3g}  end {r['end_err']:.2e}  steps {r['steps']}"
                        f"  saves {r['saves_before']:.3g} → {r.get('saves_after', np.nan):.3g}"
                        f" steps {r.get('steps_after', '')}"
                        if "failed" not in r
                        else f"FAILED {r['failed']}"
                    ),
                    flush=True,
                )
    write(results, a.out_name, time.perf_counter() - start)


if __name__ == "__main__":
    main()
