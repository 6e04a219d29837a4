"""Are saves between steps as accurate as step ends? Dense output against step ends, for
every shipped solver, and the saves `flows.simulate` makes with each.

For each solver (`flows.SOLVERS`, built as `flows.simulate` builds them:
`flows.make_solver`, the PID controller of `flows.pid_controller`), problem and
rtol in {1e-4, 1e-6, 1e-8, 1e-10} (atol = rtol · 1e-3):

- `interpolant`: one adaptive solve saves every step end and its dense output
  (`SaveAt(steps=True, dense=True)`); the largest error of the observable at θ = 0.1,
  0.25, 0.5, 0.75, 0.9 of every step, read from the solver's interpolant (what
  `SaveAt(ts=...)` saves between steps; a cubic Hermite between stiff steps is at its
  worst off the midpoint), divided by the largest error at the step ends of the same
  solve. Against a reference (a closed form, or Dopri8 at rtol 1e-13).
- `saves`: what `flows.simulate` saves. A solver that interpolates
  (`flows.steps_to_saves` false): its interpolant, as above — a save may fall anywhere in a
  step. A solver that steps to its save times: a solve with `pid_controller(step_ts=…)`
  and 100 equally spaced saves, whose saves are step ends: the largest error at the saves
  over the largest step-end error of that solve (≤ 1), and (`vs plain`) over that of the
  plain solve (a different step sequence: its global error may differ).
- `save/tol`: the largest error at those saves over the tolerance scale carried to the
  observable (Σ over the state components it is made of, |coefficient| · (atol + rtol
  max_t |y_i|), the largest |y_i| over the run's step ends), which tells a ratio above 2
  from a step-end error far below what the controller was asked for. (Step ends and saves
  carry the global error, which may exceed this local scale.)
- cost: accepted steps, and vector-field evaluations (the stabilized solvers: their own
  count, accepted steps; explicit: evaluations per step × steps tried + 1; Kvaerno5: not
  counted), of the plain solve and of the solve that steps to saves.

Problems (float64, small, so that the whole table runs in minutes on 2 cores):

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

kvaerno5-cg is not run: the same method as kvaerno5 with another linear solver (its
table repeated kvaerno5's to within the Newton tolerance). etdrk4: `flows.ETDRK4()` under
its PI controller (as `simulate` drives it), without `flow_state_mask` (these states carry
no energy); its evaluations are its own count along the accepted steps.

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
from collections.abc import Callable
from pathlib import Path

import diffrax
import equinox as eqx
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402
from flows import (  # noqa: E402
    ETDRK4,
    EVALS_PER_STEP,
    AbstractStabilizedSolver,
    etd_eval_counts,
    make_solver,
    pid_controller,
    rkc_eval_counts,
    steps_to_saves,
)

OUT = Path(__file__).parent / "results"
RTOLS = (1e-4, 1e-6, 1e-8, 1e-10)
SOLVER_NAMES = ("tsit5", "dopri5", "dopri8", "kvaerno5", "rkc", "eserk4", "rock4", "etdrk4")
MAX_STEPS = 20_000
TARGET = 2.0
#: Where in each step the interpolant is read (fractions of the step)
THETAS = (0.1, 0.25, 0.5, 0.75, 0.9)
T_NET = 200.0
N_SAVE = 100


# --- problems ------------------------------------------------------------------------


class Case(eqx.Module):
    """A problem: vector field f(t, y), y(0), [t0, t1], the observable, the exact
    observable at given times (None: a Dopri8 reference is computed), and `obs_scale`:
    the observable of per-component tolerance scales, its coefficients made positive
    (None: the observable itself, for one that selects components)."""

    name: str = eqx.field(static=True)
    field: Callable = eqx.field(static=True)
    y0: jax.Array
    t1: float = eqx.field(static=True)
    observable: Callable = eqx.field(static=True)
    exact: Callable | None = eqx.field(static=True)
    obs_scale: Callable | None = eqx.field(static=True, default=None)


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

    return Case("linear", lambda t, y, args: Aj @ y, jnp.asarray(y0), 10.0, lambda y: y, exact)


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
    return Case("prothero", field, y0, 2.0, lambda y: y, exact)


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

    return Case("heat", lambda t, y, args: Lj @ y, jnp.asarray(u0), 0.3, lambda y: y, exact)


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
        lambda scale: scale[..., :1] + scale[..., 1:2],
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
    """The plain solve: step ends, and the interpolant at `THETAS` of every step."""
    own = isinstance(solver, (AbstractStabilizedSolver, ETDRK4))
    saveat = diffrax.SaveAt(steps=True, dense=True, solver_state=own)
    sol = _diffeqsolve(case, solver, controller, saveat)
    ts = sol.ts
    assert ts is not None and sol.ys is not None
    n = sol.stats["num_accepted_steps"]
    # points inside the accepted steps (the padding beyond n evaluates at t1)
    prev = jnp.concatenate([jnp.zeros((1,), ts.dtype), ts[:-1]])
    idx = jnp.arange(ts.shape[0])
    inner = jnp.stack([jnp.where(idx < n, prev + th * (ts - prev), case.t1) for th in THETAS])
    ends = jnp.where(idx < n, ts, case.t1)
    y_in = jax.vmap(jax.vmap(sol.evaluate))(inner)
    y_end = jax.vmap(sol.evaluate)(ends)  # ≈ sol.ys at the step ends (checked)
    return ends, inner, sol.ys, y_end, y_in, n, sol.stats["num_steps"], sol.result, sol.solver_state


def _uniform(case: Case):
    return jnp.linspace(0.0, case.t1, N_SAVE + 1)[1:]


@eqx.filter_jit
def _solve_to_saves(case: Case, solver, controller):
    """A solve that steps to `_uniform` saves (`pid_controller(step_ts=…)`): the saves, its
    step ends, and its counts."""
    own = isinstance(solver, (AbstractStabilizedSolver, ETDRK4))
    subs = [diffrax.SubSaveAt(ts=_uniform(case)), diffrax.SubSaveAt(steps=True)]
    sol = _diffeqsolve(case, solver, controller, diffrax.SaveAt(subs=subs, solver_state=own))
    assert sol.ts is not None and sol.ys is not None
    n = sol.stats["num_accepted_steps"]
    return sol.ys[0], sol.ts[1], sol.ys[1], n, sol.stats["num_steps"], sol.result, sol.solver_state


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


def _evals(name: str, tried, own) -> int | None:
    """Vector-field evaluations of a solve (see the module's docstring); None: not counted."""
    if own is not None and name == "etdrk4":
        c = etd_eval_counts(own)
        return int(c["vf_evals"] + c["jvp_evals"])
    if own is not None:
        c = rkc_eval_counts(own)
        return int(c["vf_evals"] + c["jvp_evals"])
    if name in EVALS_PER_STEP:
        return EVALS_PER_STEP[name] * int(tried) + 1
    return None


def measure(case: Case, name: str, rtol: float) -> dict:
    atol = rtol * 1e-3
    # ETDRK4 as simulate builds it but without `flow_state_mask` (these states are θ alone,
    # no energy), under its own (PI) controller as in simulate
    solver = ETDRK4() if name == "etdrk4" else make_solver(name, rtol, atol)
    obs = lambda y: np.asarray(case.observable(jnp.asarray(y)))  # noqa: E731

    start = time.perf_counter()
    own_ctrl = solver if name == "etdrk4" else None
    ctrl = pid_controller(jnp.asarray(rtol), jnp.asarray(atol), solver=own_ctrl)
    ends, inner, ys, y_end, y_in, n, tried, result, own = _solve(case, solver, ctrl)
    n = int(n)
    if not bool(result == diffrax.RESULTS.successful):
        return {"failed": str(result), "steps": n}
    ends, ys, y_end = (np.asarray(v)[:n] for v in (ends, ys, y_end))
    inner, y_in = np.asarray(inner)[:, :n], np.asarray(y_in)[:, :n]
    # the interpolant at a step end (the next step's at its start, or this one's at its end)
    assert np.allclose(ys, y_end, rtol=1e-12, atol=1e-12 * np.abs(ys).max()), "dense ≠ step end"
    # the tolerance scale of each component over the run, carried to the observable
    scale = atol + rtol * np.abs(ys).max(axis=0)
    scale = np.asarray(scale if case.obs_scale is None else case.obs_scale(scale))
    ref = _exact(case, np.concatenate([ends, inner.ravel()]))
    e_end = np.abs(obs(ys) - ref[:n]).reshape(n, -1).max(axis=1)
    err_in = np.abs(obs(y_in.reshape(-1, ys.shape[-1])) - ref[n:])
    e_in = err_in.reshape(len(THETAS), n, -1).max(axis=2)  # (θ, step)
    tol_in = err_in / scale
    out = {
        "steps": n,
        "evals": _evals(name, tried, own),
        "end_err": float(e_end.max()),
        "end_tol": float((np.abs(obs(ys) - ref[:n]) / scale).max()),
        "interp_err": float(e_in.max()),
        "interpolant": float(e_in.max() / max(e_end.max(), 1e-300)),
        "interpolant_by_theta": [float(v / max(e_end.max(), 1e-300)) for v in e_in.max(axis=1)],
        "wall_s": time.perf_counter() - start,
    }
    if not steps_to_saves(name):  # flows.simulate interpolates: saves are the interpolant
        return out | {"saves": out["interpolant"], "save_tol": float(tol_in.max())}
    ctrl_s = pid_controller(
        jnp.asarray(rtol), jnp.asarray(atol), step_ts=_uniform(case), solver=own_ctrl
    )
    y_s, ts_e, ys_e, n_s, tried_s, res_s, own_s = _solve_to_saves(case, solver, ctrl_s)
    if not bool(res_s == diffrax.RESULTS.successful):
        return out | {"failed_to_saves": str(res_s)}
    n_s = int(n_s)
    uni = np.asarray(_uniform(case))
    ts_e, ys_e = np.asarray(ts_e)[:n_s], np.asarray(ys_e)[:n_s]
    ref_s = _exact(case, np.concatenate([uni, ts_e]))
    err_s = np.abs(obs(np.asarray(y_s)) - ref_s[: len(uni)])
    e_end_s = np.abs(obs(ys_e) - ref_s[len(uni) :]).max()
    return out | {
        "saves": float(err_s.max() / max(e_end_s, 1e-300)),
        "saves_vs_plain": float(err_s.max() / max(e_end.max(), 1e-300)),
        "save_tol": float((err_s / scale).max()),
        "steps_to_saves": n_s,
        "evals_to_saves": _evals(name, tried_s, own_s),
    }


def _cell(r: dict | None) -> str:
    if r is None:
        return "—"
    if "failed" in r or "failed_to_saves" in r:
        return "fail"
    flag = " **!**" if r["saves"] > TARGET else ""
    return f"{r['saves']:.2g} ({r['save_tol']:.2g}){flag}"


def _cost(r: dict | None) -> str:
    if r is None or "failed" in r or "failed_to_saves" in r:
        return "—"
    ev = lambda v: "" if v is None else f" / {v}"  # noqa: E731
    text = f"{r['steps']}{ev(r['evals'])}"
    if "steps_to_saves" in r:
        text += f" → {r['steps_to_saves']}{ev(r['evals_to_saves'])}"
    return text


def write(results: list[dict], name: str, elapsed: float, command: str) -> None:
    OUT.mkdir(exist_ok=True)
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "diffrax": diffrax.__version__,
        "flows": flows.__version__,
        "machine": platform.machine(),
        "elapsed_s": elapsed,
        "target": TARGET,
        "thetas": THETAS,
        "n_save": N_SAVE,
    }
    (OUT / f"{name}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    rtols = sorted({r["rtol"] for r in results}, reverse=True)
    problems = list(dict.fromkeys(r["problem"] for r in results))
    solvers = list(dict.fromkeys(r["solver"] for r in results))
    by = {(r["solver"], r["problem"], r["rtol"]): r for r in results}
    head = "| solver | " + " | ".join(f"rtol {t:g}" for t in rtols) + " |"
    rule = "|---" * (len(rtols) + 1) + "|"
    lines = [
        "# Dense output against step ends",
        "",
        f"`{command}` — {meta['date']}, {elapsed:.0f} s on {platform.machine()} "
        f"(flows {flows.__version__}, jax {jax.__version__}, diffrax {diffrax.__version__}, "
        f"Python {meta['python']}).",
        "",
        "Cell: `saves` = largest error of the observable at a save between steps / largest "
        "error at the step ends of the same solve, with the save policy of `flows.simulate` "
        f"(target ≤ {TARGET:g}); in brackets the largest error at a save / the tolerance "
        "scale (atol + rtol·max|y| over the run, per component) carried to the observable "
        "(a − b on `offset`: the sum of the two). Solvers that interpolate "
        f"({', '.join(s for s in solvers if not steps_to_saves(s))}): their interpolant at "
        f"{', '.join(f'{t:g}' for t in THETAS)} of every step. Solvers that step to their "
        f"save times ({', '.join(s for s in solvers if steps_to_saves(s))}; "
        f"`flows.STEP_TO_SAVES`): {N_SAVE} equally spaced saves of a solve that steps to "
        "them (saves are step ends, so ≤ 1). atol = rtol·1e-3.",
        "",
    ]
    for prob in problems:
        lines += [f"## {prob}", "", head, rule]
        for s in solvers:
            cells = [_cell(by.get((s, prob, t))) for t in rtols]
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## The interpolant, where the solver steps to its saves instead",
        "",
        "Largest error of the interpolant at the same fractions of every step of the plain "
        "solve / largest step-end error (why these solvers step to their saves); after "
        "`vs plain`: the largest error at the saves of the solve that steps to them / the "
        "largest step-end error of the plain solve (a different step sequence).",
        "",
        "| solver | problem | " + " | ".join(f"rtol {t:g}" for t in rtols) + " |",
        "|---" * (len(rtols) + 2) + "|",
    ]
    for s in solvers:
        if not steps_to_saves(s):
            continue
        for prob in problems:
            cells = []
            for t in rtols:
                r = by.get((s, prob, t))
                if r is None or "saves_vs_plain" not in r:
                    cells.append("—")
                else:
                    cells.append(f"{r['interpolant']:.2g} (vs plain {r['saves_vs_plain']:.2g})")
            lines.append(f"| {s} | {prob} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Step-end error and cost",
        "",
        "Largest step-end error (absolute; in brackets / the tolerance scale), accepted "
        "steps / vector-field evaluations of the plain solve, and → of the solve that steps "
        f"to {N_SAVE} saves (solvers that step to their saves).",
        "",
        "| solver | problem | " + " | ".join(f"rtol {t:g}" for t in rtols) + " |",
        "|---" * (len(rtols) + 2) + "|",
    ]
    for s in solvers:
        for prob in problems:
            cells = []
            for t in rtols:
                r = by.get((s, prob, t))
                if r is None or "failed" in r:
                    cells.append("—")
                else:
                    cells.append(f"{r['end_err']:.1e} ({r['end_tol']:.2g}); {_cost(r)}")
            lines.append(f"| {s} | {prob} | " + " | ".join(cells) + " |")
    (OUT / f"{name}.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--solvers", default=",".join(SOLVER_NAMES))
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--rtols", default=",".join(f"{t:g}" for t in RTOLS))
    ap.add_argument("--out-name", default="dense_output")
    a = ap.parse_args(argv)
    command = "python benchmarks/bench_dense_output.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    start = time.perf_counter()
    results = []
    for pname in a.problems.split(","):
        case = PROBLEMS[pname]()
        for s in a.solvers.split(","):
            for t in (float(v) for v in a.rtols.split(",")):
                r = measure(case, s, t)
                r.update(solver=s, problem=pname, rtol=t)
                results.append(r)
                print(
                    f"{pname:9s} {s:9s} rtol {t:7.0e}: "
                    + (
                        f"saves {r['saves']:7.3g} (tol {r['save_tol']:.2g})  interpolant "
                        f"{r['interpolant']:7.3g}  end {r['end_err']:.2e} (tol "
                        f"{r['end_tol']:.2g})  cost {_cost(r)}"
                        if "saves" in r
                        else f"FAILED {r}"
                    ),
                    flush=True,
                )
    write(results, a.out_name, time.perf_counter() - start, command.strip())


if __name__ == "__main__":
    main()
