"""The benchmark's rows (`Method`) and their runners: the toolkit's solvers (every name in
`flows.SOLVERS`, per vector-field variant and clock), gradient descent, scipy's `solve_ivp`
on the same jitted field, and torchdiffeq's dopri5 on a PyTorch port (`torch_port`).

Every runner returns a result dict: `theta` (final θ, flat, in `ravel_pytree`'s order, or
None), `vf_evals`, `wall_s` (compilation and warm-up excluded), `compile_s`, `status`
('ok' or 'failed'), `reason`, and optional `steps`, `rejected_steps`, `extra`.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from jax.flatten_util import ravel_pytree

import flows

from .cases import ATOL_FACTOR, BASELINE_LR, FLOAT32_MIN_RTOL, Case

__all__ = [
    "Method",
    "build_methods",
    "build_problems",
    "cores",
    "flat",
    "jax_flat_field",
    "make_problem_options",
    "run_gd",
    "run_scipy",
    "run_simulate",
    "run_torch",
    "set_torch_threads",
    "torch_status",
    "torch_threads",
]


@dataclasses.dataclass
class Method:
    """One row: its label, plot family, settings, and how to run it (or why it is not run)."""

    label: str
    family: str
    settings: dict
    run: Callable[[], dict] | None = None
    skip: str | None = None  # reason, when the method is not run
    group: str = ""  # a ConfigError skips the rest of the group (same solver/clock/variant)


def flat(theta: dict) -> np.ndarray:
    """θ as one float64 vector in ravel_pytree's order (sorted dict keys)."""
    return np.concatenate([np.asarray(theta[k], dtype=np.float64).ravel() for k in sorted(theta)])


def traj_final(traj) -> np.ndarray:
    return flat({k: traj.param(k) for k in traj.params})


def make_problem_options() -> dict[str, bool]:
    params = inspect.signature(flows.make_problem).parameters
    return {"fused": "vector_field" in params, "float32": "dtype" in params}


def run_simulate(problem, t1, solver, rtol, clock, atol=None) -> dict:
    atol = ATOL_FACTOR * rtol if atol is None else atol
    kw = dict(solver=solver, rtol=rtol, atol=atol, n_save=2, save_params="ends", throw=False)
    if clock != "loss":  # the loss clock is timed around the whole call (below)
        kw["clock"] = clock
        # compile (t1 is traced: the same solve) and warm up on a short span
        warm = flows.simulate(problem, t1=t1 * 1e-3, **kw)
        traj = flows.simulate(problem, t1=t1, **kw)
        wall, compile_s = traj.stats["wall_s"], warm.stats["compile_s"]
    else:  # the loss clock
        kw.pop("n_save")
        kw["ts"] = np.array([0.0, t1])
        start = time.perf_counter()
        flows.simulate(problem, t1=t1, clock=clock, **kw)  # compile + warm up
        cold = time.perf_counter() - start
        # timed here: the loss clock's own wall_s leaves out the first segment's time
        start = time.perf_counter()
        traj = flows.simulate(problem, t1=t1, clock=clock, **kw)
        wall = time.perf_counter() - start
        compile_s = max(cold - wall, 0.0)
    st = dict(traj.stats)
    ok = st["result"] == "successful"
    if ok and solver in ("rkc", "eserk4", "rock4", "etdrk4") and clock != "loss":
        # the stabilized solvers' and ETDRK4's own counts miss rejected steps: count
        # exactly with the host callback in a second, identical solve (the wall time above
        # is from the run without the callback)
        counted = flows.simulate(problem, t1=t1, count_evals=True, **kw)
        st["vf_evals"] = counted.stats["vf_evals"]
        st["vf_evals_counted_by"] = "callback (separate run; includes rejected steps)"
    return {
        "theta": traj_final(traj) if ok else None,
        "vf_evals": st["vf_evals"],
        "steps": st["steps"],
        "rejected_steps": st["rejected_steps"],
        "wall_s": wall,
        "compile_s": compile_s,
        "status": "ok" if ok else "failed",
        "reason": "" if ok else f"{st['result']} (t reached {st['t_reached']:.4g})",
        "extra": {
            "loss_t1": float(traj.observables["loss"][-1]) if ok else None,
            **{
                k: st[k] for k in ("vf_evals_counted_by", "jvp_evals", "spectral_radius") if k in st
            },
        },
    }


def run_gd(problem, t1, lr) -> dict:
    traj = flows.gradient_descent(problem, learning_rate=lr, t1=t1, n_save=2)
    st = dict(traj.stats)
    ok = st["result"] == "successful"
    return {
        "theta": traj_final(traj) if ok else None,
        "vf_evals": st["vf_evals"],
        "steps": st["steps"],
        "wall_s": st["wall_s"],
        "compile_s": st["compile_s"],
        "status": "ok" if ok else "failed",
        "reason": "" if ok else st["result"],
    }


def jax_flat_field(problem):
    """The jitted flat vector field y ↦ −∇L, shared by scipy rows (one call per evaluation,
    as a scipy user would write it).

    Measured at m = 5000 (n = 1000): a call of the autodiff field costs ≈ 31 ms against
    ≈ 8 ms per evaluation inside the toolkit's jitted solve — each call allocates the n×m
    temporaries afresh (page faults), a loop inside one program reuses them. The fused field
    holds only cache-sized blocks: ≈ 7 ms per call. Hence the scipy rows on both fields."""
    flat0, unravel = ravel_pytree(problem.theta0)

    @eqx.filter_jit
    def vf_p(y, prob):
        return -ravel_pytree(prob.grad(unravel(y)))[0]

    return np.asarray(flat0), lambda y: vf_p(y, problem)


#: scipy's methods with Newton iterations on a dense Jacobian (`chunked_jacobian`): LSODA
#: (when it switches to BDF) and BDF.
STIFF_SCIPY = ("LSODA", "BDF")
#: Tangents pushed through the field at once by `chunked_jacobian`.
JACOBIAN_CHUNK = 64


def chunked_jacobian(vf, y, chunk: int = JACOBIAN_CHUNK):
    """The dense Jacobian of `vf` at `y` (flat), `chunk` columns (forward-mode tangents) at
    a time: `jax.jacfwd` pushes all n tangents at once through the field's intermediates —
    on the multi-stage net at m = 1000 (n = 2000 parameters, 1000 points) n × n × m doubles,
    32 GB, where the 2000 × 2000 matrix is 32 MB."""
    n = y.shape[0]
    n_pad = -(-n // chunk) * chunk
    eye = jnp.eye(n_pad, n, dtype=y.dtype).reshape(n_pad // chunk, chunk, n)

    def block(tangents):
        return jax.vmap(lambda v: jax.jvp(vf, (y,), (v,))[1])(tangents)

    cols = jax.lax.map(block, eye).reshape(n_pad, n)[:n]  # row j: ∂vf/∂y_j
    return cols.T


def run_scipy(problem, t1, method, rtol, jac) -> dict:
    y0, vf = jax_flat_field(problem)
    count = [0]

    def fun(t, y):
        count[0] += 1
        return np.asarray(vf(jnp.asarray(y)))

    kw = {}
    if jac:
        hess = jax.jit(lambda y: chunked_jacobian(vf, y))

        def jac_fn(t, y):
            return np.asarray(hess(jnp.asarray(y)))

        jac_fn(0.0, y0)  # compile
        kw["jac"] = jac_fn
    start = time.perf_counter()
    fun(0.0, y0)  # compile
    compile_s = time.perf_counter() - start
    count[0] = 0
    start = time.perf_counter()
    sol = scipy.integrate.solve_ivp(
        fun, (0.0, t1), y0, method=method, rtol=rtol, atol=ATOL_FACTOR * rtol, t_eval=[t1], **kw
    )
    wall = time.perf_counter() - start
    extra = {"nfev_counted": count[0], "njev": int(sol.njev), "nlu": int(sol.nlu)}
    return {
        "theta": sol.y[:, -1].copy() if sol.success else None,
        "vf_evals": int(sol.nfev),
        "wall_s": wall,
        "compile_s": compile_s,
        "status": "ok" if sol.success else "failed",
        "reason": "" if sol.success else str(sol.message),
        "extra": extra,
    }


def torch_status() -> tuple[bool, str]:
    try:
        import torch  # noqa: F401
        import torchdiffeq  # noqa: F401
    except ImportError as e:
        return False, f"{e.name} is not installed (pip install '.[bench]')"
    return True, ""


#: torch intra-op threads; None: the core count JAX's CPU backend uses (`--torch-threads`)
_TORCH_THREADS: int | None = None


def set_torch_threads(n: int | None) -> None:
    """Set torch's intra-op threads for the torch rows (None: `cores()`)."""
    global _TORCH_THREADS
    _TORCH_THREADS = n


def cores() -> int:
    """The core count JAX's CPU backend uses (all cores available to this process)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


def torch_threads() -> int:
    return _TORCH_THREADS or cores()


def run_torch(problem, t1, rtol) -> dict:
    import torch

    from .torch_port import odeint_dopri5, port_problem

    threads = torch_threads()
    obj = port_problem(problem)
    start = time.perf_counter()
    obj.vector_field(0.0, obj.theta0)
    compile_s = time.perf_counter() - start
    # warm up, and measure the per-evaluation cost with `threads` and with 1 thread: with
    # OpenMP, 2 threads on a machine whose other core is busy can be ~100× slower per call
    per_eval = {}
    for n in sorted({1, threads}, reverse=True):
        torch.set_num_threads(n)
        for _ in range(5):
            obj.vector_field(0.0, obj.theta0)
        start = time.perf_counter()
        for _ in range(20):
            obj.vector_field(0.0, obj.theta0)
        per_eval[n] = (time.perf_counter() - start) / 20
    torch.set_num_threads(threads)
    out = odeint_dopri5(obj, t1, rtol, ATOL_FACTOR * rtol)
    return {
        "theta": out["theta"],
        "vf_evals": out["vf_evals"],
        "wall_s": out["wall_s"],
        "compile_s": compile_s,
        "status": "ok",
        "reason": "",
        "extra": {
            "torch_threads": torch.get_num_threads(),
            "torch_ms_per_eval": {str(n): 1e3 * v for n, v in per_eval.items()},
        },
    }


def solver_grid(grid: dict, solver: str) -> tuple[float, ...]:
    return grid.get(solver, grid["default"])


def build_methods(case: Case, problems: dict, variant_skips: dict) -> list[Method]:
    """Every method of the case, as data. `problems`: variant → Problem."""
    methods: list[Method] = []
    base = problems["autodiff"]
    t1 = case.t1
    # the toolkit: every solver in SOLVERS, per variant and clock
    for variant in ("autodiff", "fused", "float32"):
        suffix = "" if variant == "autodiff" else f" [{variant}]"
        if variant not in problems:
            methods.append(
                Method(
                    f"flows *{suffix}",
                    f"flows{suffix}",
                    {"variant": variant},
                    skip=variant_skips[variant],
                )
            )
            continue
        problem = problems[variant]
        clocks = case.clocks if variant == "autodiff" else case.variant_clocks
        for solver in flows.SOLVERS:
            fam = f"flows {solver}{suffix}"
            if solver in flows.IMPLICIT_SOLVERS and base.n_params > flows.MAX_IMPLICIT_PARAMS:
                methods.append(
                    Method(
                        f"flows {solver}{suffix}",
                        fam,
                        {"solver": solver, "variant": variant},
                        skip=f"{base.n_params} parameters exceed the implicit "
                        f"solvers' limit MAX_IMPLICIT_PARAMS = {flows.MAX_IMPLICIT_PARAMS} "
                        f"(dense {base.n_params}² Hessian)",
                    )
                )
                continue
            grid = solver_grid(case.grid if variant == "autodiff" else case.variant_grid, solver)
            if variant == "float32":
                grid = tuple(r for r in grid if r >= FLOAT32_MIN_RTOL)
            if not grid:
                methods.append(
                    Method(
                        f"flows {solver}{suffix}",
                        fam,
                        {"solver": solver, "variant": variant},
                        skip="not in this run's tolerance grid",
                    )
                )
                continue
            for clock in clocks:
                cl = "" if len(case.clocks) == 1 else f" {clock} clock"
                for rtol in grid:
                    methods.append(
                        Method(
                            f"flows {solver}{cl} rtol={rtol:.0e}{suffix}",
                            fam + cl,
                            {
                                "solver": solver,
                                "rtol": rtol,
                                "atol": ATOL_FACTOR * rtol,
                                "clock": clock,
                                "variant": variant,
                                "save_params": "ends",
                            },
                            run=lambda p=problem, s=solver, r=rtol, c=clock: run_simulate(
                                p, t1, s, r, c
                            ),
                            group=f"{variant}/{solver}/{clock}",
                        )
                    )
    # gradient descent: every η on the standard float64 autodiff field (the baseline is
    # η = 1e-3 there), and η = 1e-3 on the faster fields too, so that wall-time ratios can be
    # read like for like
    for lr in case.gd_lrs:
        methods.append(
            Method(
                f"gradient descent η={lr:.0e}" + (" (baseline)" if lr == BASELINE_LR else ""),
                "gradient descent",
                {"learning_rate": lr, "steps": int(round(t1 / lr)), "variant": "autodiff"},
                run=lambda lr=lr: run_gd(base, t1, lr),
            )
        )
    for variant in ("fused", "float32"):
        if variant in problems and BASELINE_LR in case.gd_lrs:
            methods.append(
                Method(
                    f"gradient descent η={BASELINE_LR:.0e} [{variant}]",
                    f"gradient descent [{variant}]",
                    {
                        "learning_rate": BASELINE_LR,
                        "steps": int(round(t1 / BASELINE_LR)),
                        "variant": variant,
                    },
                    run=lambda p=problems[variant]: run_gd(p, t1, BASELINE_LR),
                )
            )
    # scipy on the same jitted vector field
    for method in case.scipy_methods:
        jac = False
        skip = None
        if method in STIFF_SCIPY:
            if base.n_params <= flows.MAX_IMPLICIT_PARAMS:
                jac = True
            else:
                n = base.n_params
                skip = (
                    f"{method}'s stiff mode needs a dense {n}×{n} Jacobian "
                    f"({8 * n * n / 1e6:.0f} MB, an O(n³) LU per factorization), by "
                    f"jax.jacfwd or by {n} finite-difference evaluations each time; skipped "
                    f"above {flows.MAX_IMPLICIT_PARAMS} parameters, the toolkit's own "
                    "limit for its implicit solver"
                )
        if skip:
            methods.append(Method(f"scipy {method}", f"scipy {method}", {}, skip=skip))
            continue
        for variant in ("autodiff", "fused") if method == "RK45" else ("autodiff",):
            if variant not in problems:
                continue
            suffix = "" if variant == "autodiff" else f" [{variant}]"
            for rtol in case.peer_rtols:
                settings = {
                    "method": method,
                    "rtol": rtol,
                    "atol": ATOL_FACTOR * rtol,
                    "variant": variant,
                }
                if method in STIFF_SCIPY:
                    settings["jac"] = f"dense, jax.jvp in chunks of {JACOBIAN_CHUNK} (jitted)"
                methods.append(
                    Method(
                        f"scipy {method} rtol={rtol:.0e}{suffix}",
                        f"scipy {method}{suffix}",
                        settings,
                        run=lambda m=method, r=rtol, j=jac, p=problems[variant]: run_scipy(
                            p, t1, m, r, j
                        ),
                    )
                )
    # torchdiffeq on a PyTorch port
    have_torch, why = torch_status()
    if not have_torch:
        methods.append(Method("torchdiffeq dopri5", "torchdiffeq dopri5", {}, skip=why))
    else:
        for rtol in case.peer_rtols:
            methods.append(
                Method(
                    f"torchdiffeq dopri5 rtol={rtol:.0e}",
                    "torchdiffeq dopri5",
                    {"method": "dopri5", "rtol": rtol, "atol": ATOL_FACTOR * rtol},
                    run=lambda r=rtol: run_torch(base, t1, r),
                )
            )
    return methods


def build_problems(case: Case) -> tuple[dict, dict]:
    """variant → Problem ('autodiff' always; 'fused', 'float32' when make_problem accepts
    them), and variant → reason for those that are missing."""
    opts = make_problem_options()
    problems = {"autodiff": case.build()}
    skips = {}
    for variant, kw in (("fused", {"vector_field": "fused"}), ("float32", {"dtype": "float32"})):
        if not opts[variant]:
            key = next(iter(kw))
            skips[variant] = f"flows.make_problem has no `{key}` argument"
            continue
        try:
            problems[variant] = case.build(**kw)
        except (flows.ConfigError, TypeError, ValueError) as e:
            skips[variant] = f"make_problem({kw}) raised {type(e).__name__}: {e}"
    return problems, skips
