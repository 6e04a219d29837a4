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

Methods (rows): the toolkit's solvers (every name in `flows._simulate.SOLVERS`, so a new
solver such as 'rkc' is picked up) at several tolerances — on the linear teacher with the
physical, log and loss clocks — plus, when `flows.make_problem` accepts them, the same
solvers with `vector_field="fused"` and with `dtype="float32"`; gradient descent at
η = 1e-2, 1e-3, 1e-4 (the papers' method; η = 1e-3 is the baseline of the ratios);
`scipy.integrate.solve_ivp` (RK45, DOP853, LSODA) driving the same jitted vector field;
torchdiffeq's dopri5 on a PyTorch port of the same objective (`_torch_port.py`; skipped
with a message when torch or torchdiffeq is not installed). Error: max |θ(t) − θ_ref(t)|
over all parameters (and relative to max |θ_ref|) against Dopri8 at rtol 1e-11. Wall
times exclude compilation and warm-up; every method runs in this one process, so the
ratios hold on a noisy machine.

    python benchmarks/bench_work_precision.py                       # both cases, full size
    python benchmarks/bench_work_precision.py --case multistage     # ~80 min, 2 quiet cores
    python benchmarks/bench_work_precision.py --case linear-teacher # ~6 min
    python benchmarks/bench_work_precision.py --quick               # smoke test, tiny sizes
    python benchmarks/bench_work_precision.py --exclude 'η=1e-04'   # drop rows by label
    python benchmarks/bench_work_precision.py --repeat 3            # fastest of 3 per row

Writes `work_precision_<case>.md` (headline ratios and the table), `.png` (error vs wall
time and vs evaluations, log–log) and `.json` (rows, machine, versions, settings) under
`--out` (default benchmarks/results; `--quick` appends `_quick` to the names).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import inspect
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from jax.flatten_util import ravel_pytree

import flows
from flows import _simulate
from flows.experiments import linear_teacher as lt
from flows.experiments.linear_teacher import default_config as lt_default_config
from flows.models import TwoLayer
from flows.models.leaky import LeakyReLUNet

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BASELINE_LR = 1e-3
REF = {"solver": "dopri8", "rtol": 1e-11, "atol": 1e-13}
ATOL_FACTOR = 1e-3  # atol = 1e-3 · rtol for every adaptive method (toolkit, scipy, torch)
# Tolerance grids: per toolkit solver name ("default" for any other, e.g. a new 'rkc').
FULL_GRID = {
    "default": (1e-3, 1e-4, 1e-6, 1e-8),
    "dopri5": (1e-6,),
    "dopri8": (1e-8, 1e-10),
    "kvaerno5": (1e-4, 1e-6, 1e-8),
    "rkc": (1e-3, 1e-4, 3e-5, 1e-5, 1e-6),
}
# fused / float32 variants: Tsit5 at one tolerance, RKC around the baseline's error
FULL_VARIANT_GRID = {"default": (), "tsit5": (1e-4, 1e-6), "rkc": (1e-5, 3e-6, 1e-6)}
# --quick: Kvaerno5 left out (even at m = 200 one solve takes minutes: ~300 steps, half of
# them rejected, a Jacobian per step)
QUICK_GRID = {"default": (1e-6,), "tsit5": (1e-4, 1e-6), "dopri8": (1e-8,), "kvaerno5": ()}
# --quick runs the fused / float32 variants with Tsit5 at rtol 1e-6 only
QUICK_VARIANT_GRID = {"default": (), "tsit5": (1e-6,)}
FLOAT32_MIN_RTOL = _simulate.FLOAT32_MIN_RTOL  # simulate refuses tighter in float32
# rtol 1e-3 too: the explicit peers are stability-limited, so their loosest tolerance is
# where the error comes closest to gradient descent's, the regime RKC2 is for
PEER_GRID = {"full": (1e-3, 1e-4, 1e-6), "quick": (1e-6,)}


# ---------------------------------------------------------------------------------------
# Cases


@dataclasses.dataclass
class Case:
    """One problem: how to build it (per variant), its horizon, clocks and method grids."""

    name: str
    title: str
    config: dict
    build: Callable[..., flows.Problem]  # build(**variant_kwargs) -> Problem
    t1: float
    clocks: tuple[str, ...]  # toolkit clocks (standard vector field)
    variant_clocks: tuple[str, ...]  # clocks for the fused / float32 variants
    gd_lrs: tuple[float, ...]
    grid: dict
    variant_grid: dict  # tolerance grid of the fused / float32 variants
    peer_rtols: tuple[float, ...]
    scipy_methods: tuple[str, ...]
    notes: list[str]


def multistage_case(quick: bool) -> Case:
    m, t1 = (200, 2.0) if quick else (5000, 20.0)
    config = {
        "model": "TwoLayer",
        "m": m,
        "d": 1,
        "alpha": 1.0,
        "activation": "tanh",
        "target": "f1",
        "data": "paper_data('f1'): 1000 points on [-15, 15]",
        "loss": "squared_error: 1/(2n) sum (f - y)^2",
        "key": 0,
        "t1": t1,
    }
    data = flows.paper_data("f1")

    def build(**kw):
        return flows.make_problem(TwoLayer(m=m, d=1, alpha=1.0), data, key=0, **kw)

    return Case(
        name="multistage",
        title=f"Multi-stage default (m = {m}, α = 1, f₁, paper data, t = {t1:g})",
        config=config,
        build=build,
        t1=t1,
        clocks=("physical",),
        variant_clocks=("physical",),
        gd_lrs=(1e-2, 1e-3) if quick else (1e-2, 1e-3, 1e-4),
        grid=QUICK_GRID if quick else FULL_GRID,
        variant_grid=QUICK_VARIANT_GRID if quick else FULL_VARIANT_GRID,
        peer_rtols=PEER_GRID["quick" if quick else "full"],
        scipy_methods=("RK45", "DOP853", "LSODA"),
        notes=[
            "The explicit solvers are stability-limited on this wide net: the step count "
            "barely changes with rtol, so loosening the tolerance buys little time.",
        ],
    )


def linear_teacher_case(quick: bool) -> Case:
    cfg = lt_default_config()
    t1 = 100.0 if quick else 1e3
    init = cfg.small_init
    config = {
        "model": "LeakyReLUNet",
        "k": cfg.k,
        "d": 2,
        "slope": cfg.slope,
        "v": cfg.v,
        "init_scale": init,
        "data": f"symmetric_gaussians(n={cfg.n}, d=2, mean={cfg.mean}, seed={cfg.seed})",
        "loss": "logistic: (1/n) sum log(1 + exp(-y f))",
        "key": cfg.seed,
        "t1": t1,
        "source": "flows.experiments.linear_teacher.experiment.default_config() (small init)",
    }
    data = lt.symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)

    def build(**kw):
        model = LeakyReLUNet(k=cfg.k, d=2, slope=cfg.slope, v=cfg.v, init_scale=init)
        return flows.make_problem(model, data.train, key=cfg.seed, loss_fn=flows.logistic, **kw)

    grid = (
        {"default": (), "tsit5": (1e-6,)}  # --quick: Tsit5 on the three clocks
        if quick
        else {"default": (1e-4, 1e-6, 1e-8), "dopri8": (1e-6, 1e-8, 1e-10)}
    )
    return Case(
        name="linear-teacher",
        title=f"Late-phase linear teacher (leaky-ReLU ±v, k = {cfg.k}, logistic, t = {t1:g})",
        config=config,
        build=build,
        t1=t1,
        clocks=("physical", "log", "loss"),
        variant_clocks=("log",),
        gd_lrs=(1e-2, 1e-3) if quick else (1e-2, 1e-3, 1e-4),
        grid=grid,
        variant_grid=QUICK_VARIANT_GRID if quick else grid,
        peer_rtols=PEER_GRID["quick" if quick else "full"],
        scipy_methods=("RK45", "DOP853", "LSODA"),
        notes=[
            "The leaky-ReLU net is not smooth: σ′ jumps from α to 1 where a neuron's "
            "pre-activation w·x_i crosses 0, so the vector field is discontinuous across "
            "those hyperplanes. Adaptive solvers lose their order at each crossing (they "
            "reject steps until the step straddling it is small enough); errors near the "
            "reference's own spread (below) are not meaningful.",
            "Clocks: 'physical' steps in t, 'log' in s = ln(1 + t) (`flows.simulate`), "
            "'loss' in s with dt/ds = 1/L (`flows.simulate(clock='loss')`, t carried as a state, "
            "event root-find at t1). The loss clock's wall time is the whole "
            "`simulate` call timed here (its own `stats['wall_s']` leaves out the "
            "first segment), per-call overheads included: jit dispatch and host round "
            "trips, and its callback evaluation counter. scipy and torchdiffeq run the "
            "physical clock.",
        ],
    )


CASES = {"multistage": multistage_case, "linear-teacher": linear_teacher_case}


# ---------------------------------------------------------------------------------------
# Methods: (label, family, settings, run) — run() returns a result dict


@dataclasses.dataclass
class Method:
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
    if ok and solver == "rkc" and clock != "loss":
        # RKC2's own count misses rejected steps: count exactly with the host callback in a
        # second, identical solve (the wall time above is from the run without the callback)
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


def run_scipy(problem, t1, method, rtol, jac) -> dict:
    y0, vf = jax_flat_field(problem)
    count = [0]

    def fun(t, y):
        count[0] += 1
        return np.asarray(vf(jnp.asarray(y)))

    kw = {}
    if jac:
        hess = jax.jit(jax.jacfwd(vf))

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
TORCH_THREADS: int | None = None


def cores() -> int:
    """The core count JAX's CPU backend uses (all cores available to this process)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


def torch_threads() -> int:
    return TORCH_THREADS or cores()


def run_torch(problem, t1, rtol) -> dict:
    import torch

    sys.path.insert(0, str(HERE))
    from _torch_port import odeint_dopri5, port_problem

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
        for solver in _simulate.SOLVERS:
            fam = f"flows {solver}{suffix}"
            if solver in _simulate._IMPLICIT and base.n_params > _simulate.MAX_IMPLICIT_PARAMS:
                methods.append(
                    Method(
                        f"flows {solver}{suffix}",
                        fam,
                        {"solver": solver, "variant": variant},
                        skip=f"{base.n_params} parameters exceed the implicit "
                        f"solvers' limit MAX_IMPLICIT_PARAMS = {_simulate.MAX_IMPLICIT_PARAMS} "
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
        if method == "LSODA":
            if base.n_params <= _simulate.MAX_IMPLICIT_PARAMS:
                jac = True
            else:
                n = base.n_params
                skip = (
                    f"LSODA's stiff mode needs a dense {n}×{n} Jacobian "
                    f"({8 * n * n / 1e6:.0f} MB, an O(n³) LU per factorization), by "
                    f"jax.jacfwd or by {n} finite-difference evaluations each time; skipped "
                    f"above {_simulate.MAX_IMPLICIT_PARAMS} parameters, the toolkit's own "
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
                if method == "LSODA":
                    settings["jac"] = "jax.jacfwd (dense, jitted)"
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


# ---------------------------------------------------------------------------------------
# Reference, running, ratios


def reference(case: Case, problem) -> dict:
    """Dopri8 at rtol 1e-11 on each of the case's clocks; the cheapest successful one is the
    reference, the spread between clocks estimates its own error."""
    runs = {}
    for clock in case.clocks:
        res = run_simulate(problem, case.t1, REF["solver"], REF["rtol"], clock, REF["atol"])
        runs[clock] = res
        print(
            f"  reference {REF['solver']} rtol={REF['rtol']:g} ({clock} clock): "
            f"{res['status']} {res['vf_evals']} evals {res['wall_s']:.2f} s",
            flush=True,
        )
    ok = {c: r for c, r in runs.items() if r["status"] == "ok"}
    if not ok:
        raise RuntimeError(f"the reference failed on every clock: {runs}")
    best = min(ok, key=lambda c: ok[c]["vf_evals"])
    spread = {
        f"{best} vs {c}": float(np.max(np.abs(ok[c]["theta"] - ok[best]["theta"])))
        for c in ok
        if c != best
    }
    return {
        "clock": best,
        "theta": ok[best]["theta"],
        "wall_s": ok[best]["wall_s"],
        "vf_evals": ok[best]["vf_evals"],
        "loss_t1": ok[best]["extra"]["loss_t1"],
        "spread": spread,
        "runs": {c: {k: v for k, v in r.items() if k != "theta"} for c, r in runs.items()},
    }


def execute(methods: list[Method], ref_theta: np.ndarray, repeat: int) -> list[dict]:
    rows = []
    skipped_groups: dict[str, str] = {}
    scale = float(np.max(np.abs(ref_theta)))
    for m in methods:
        row = {"label": m.label, "family": m.family, "settings": m.settings}
        if m.skip or (m.group and m.group in skipped_groups):
            if m.group in skipped_groups:
                continue
            row.update(status="skipped", reason=m.skip)
            rows.append(row)
            print(f"  {m.label:44s} skipped: {m.skip}", flush=True)
            continue
        start = time.perf_counter()
        try:
            results = [m.run() for _ in range(repeat)]
        except flows.ConfigError as e:
            reason = str(e)
            if m.group:
                skipped_groups[m.group] = reason
            row.update(status="skipped", reason=reason)
            rows.append(row)
            print(f"  {m.label:44s} skipped: {reason}", flush=True)
            continue
        except Exception as e:  # noqa: BLE001 — a failing method is a row, not a crash
            traceback.print_exc()
            row.update(status="failed", reason=f"{type(e).__name__}: {e}")
            rows.append(row)
            print(f"  {m.label:44s} failed: {e}", flush=True)
            continue
        res = min(results, key=lambda r: r["wall_s"])
        theta = res.pop("theta")
        row.update(res)
        row["wall_s_all"] = [r["wall_s"] for r in results]
        row["total_s"] = time.perf_counter() - start  # compile, warm-up and all repeats
        if theta is not None:
            diff = np.abs(np.asarray(theta, dtype=np.float64) - ref_theta)
            row["err_max"] = float(np.max(diff))
            row["err_rel"] = float(np.max(diff) / scale)
        rows.append(row)
        err = row.get("err_max", float("nan"))
        print(
            f"  {m.label:44s} {row['status']:6s} {row['vf_evals']:9d} evals "
            f"{row['wall_s']:9.3f} s  max|θ−θ_ref| = {err:.2e}  (total {row['total_s']:.1f} s)",
            flush=True,
        )
    return rows


def ok_rows(rows):
    return [r for r in rows if r.get("status") == "ok" and math.isfinite(r.get("err_max", np.nan))]


def find(rows, **match):
    for r in ok_rows(rows):
        if all(r["settings"].get(k) == v for k, v in match.items()):
            return r
    return None


def is_toolkit(r, variant: str | None = None) -> bool:
    if not r["family"].startswith("flows"):
        return False
    return variant is None or r["settings"].get("variant") == variant


def exact_count(r) -> bool:
    how = (r.get("extra") or {}).get("vf_evals_counted_by", "")
    return r["vf_evals"] > 0 and ("accepted steps only" not in how or not r.get("rejected_steps"))


def headline(rows: list[dict]) -> dict:
    """The four target ratios, computed from the rows (see `format_headline`)."""
    out: dict = {}
    good = ok_rows(rows)
    gd = {
        r["settings"].get("variant"): r
        for r in good
        if r["settings"].get("learning_rate") == BASELINE_LR
    }
    base = gd.get("autodiff")
    if base is None:
        return {"baseline": None}
    out["baseline"] = base["label"]
    at_most = [r for r in good if is_toolkit(r) and r["err_max"] <= base["err_max"]]
    if at_most:
        fastest = min(at_most, key=lambda r: r["wall_s"])
        out["wall_vs_gd"] = {
            "ratio": base["wall_s"] / fastest["wall_s"],
            "row": fastest["label"],
            "row_wall_s": fastest["wall_s"],
            "row_err": fastest["err_max"],
            "base_wall_s": base["wall_s"],
            "base_err": base["err_max"],
        }
        # like for like: GD on the fastest row's own field (fused / float32)
        variant = fastest["settings"].get("variant")
        twin = gd.get(variant)
        if variant != "autodiff" and twin is not None:
            out["wall_vs_gd"]["same_field"] = {
                "variant": variant,
                "gd_wall_s": twin["wall_s"],
                "gd_err": twin["err_max"],
                "ratio": twin["wall_s"] / fastest["wall_s"],
            }
    # evaluations: the standard field, and exact counts only (RKC's own count leaves out
    # the evaluations of rejected steps)
    same = [r for r in at_most if is_toolkit(r, "autodiff") and exact_count(r)]
    if same:
        fewest = min(same, key=lambda r: (r["vf_evals"], r["wall_s"]))
        out["evals_vs_gd"] = {
            "ratio": base["vf_evals"] / fewest["vf_evals"],
            "row": fewest["label"],
            "row_evals": fewest["vf_evals"],
            "row_err": fewest["err_max"],
            "base_evals": base["vf_evals"],
            "base_err": base["err_max"],
        }
    for key, fam, same_tableau, variant in (
        ("vs_scipy_rk45", "scipy RK45", "dopri5", "autodiff"),
        ("vs_scipy_rk45_fused", "scipy RK45 [fused]", "dopri5", "fused"),
        ("vs_torchdiffeq", "torchdiffeq dopri5", "dopri5", None),
    ):
        peers = [r for r in good if r["family"] == fam]
        if not peers:
            continue
        # the peer row at the rtol of a toolkit Tsit5 row on the same field (1e-6 first)
        mine_variant = variant or "autodiff"
        matched = [
            r
            for r in peers
            if find(rows, solver="tsit5", rtol=r["settings"]["rtol"], variant=mine_variant)
        ]
        peer = next((r for r in matched if r["settings"]["rtol"] == 1e-6), None)
        peer = peer or (matched[0] if matched else peers[0])
        rtol = peer["settings"]["rtol"]
        entry = {"peer": peer["label"], "peer_wall_s": peer["wall_s"], "peer_err": peer["err_max"]}
        for name, solver in (("default", "tsit5"), ("same_tableau", same_tableau)):
            mine = find(rows, solver=solver, rtol=rtol, clock="physical", variant=mine_variant)
            if mine:
                entry[name] = {
                    "row": mine["label"],
                    "ratio": peer["wall_s"] / mine["wall_s"],
                    "row_wall_s": mine["wall_s"],
                    "row_err": mine["err_max"],
                }

        def best_at(err, variant=variant):
            cands = [r for r in good if is_toolkit(r, variant) and r["err_max"] <= err]
            return min(cands, key=lambda r: r["wall_s"]) if cands else None

        best = best_at(peer["err_max"])
        if best:
            entry["equal_error"] = {
                "row": best["label"],
                "ratio": peer["wall_s"] / best["wall_s"],
                "row_wall_s": best["wall_s"],
                "row_err": best["err_max"],
            }
        # the same at every tolerance of the peer: fastest toolkit row (same field) whose
        # error is at most that peer row's
        entry["each_rtol"] = []
        for r in sorted(peers, key=lambda r: -r["settings"]["rtol"]):
            b = best_at(r["err_max"])
            entry["each_rtol"].append(
                {
                    "peer_rtol": r["settings"]["rtol"],
                    "peer_wall_s": r["wall_s"],
                    "peer_err": r["err_max"],
                    **(
                        {
                            "row": b["label"],
                            "row_wall_s": b["wall_s"],
                            "row_err": b["err_max"],
                            "ratio": r["wall_s"] / b["wall_s"],
                        }
                        if b
                        else {}
                    ),
                }
            )
        out[key] = entry
    return out


def _x(v: float) -> str:
    return f"{v:.3g}×"


def _faster(v: float) -> str:
    """A wall-time ratio peer/mine as words: '3.3× faster' or '2.2× slower'."""
    return f"{v:.3g}× faster" if v >= 1 else f"{1 / v:.3g}× slower"


def format_headline(h: dict) -> list[str]:
    if not h.get("baseline"):
        return ["- No gradient-descent baseline (η = 1e-3) ran: ratios not available."]
    lines = []
    w = h.get("wall_vs_gd")
    lines.append(
        f"1. **Exact flow vs GD η = 1e-3, wall time at equal or smaller error: "
        f"{_x(w['ratio'])} less** — {w['row']}: {w['row_wall_s']:.3g} s, error "
        f"{w['row_err']:.2e}; GD: {w['base_wall_s']:.3g} s, error {w['base_err']:.2e}. "
        "(Fastest toolkit row, any variant, whose error ≤ GD's.)"
        + (
            f" Like for like, GD η = 1e-3 on the same {w['same_field']['variant']} field: "
            f"{w['same_field']['gd_wall_s']:.3g} s (error {w['same_field']['gd_err']:.2e}), "
            f"so **{_x(w['same_field']['ratio'])} less** on one field."
            if w.get("same_field")
            else ""
        )
        if w
        else "1. Exact flow vs GD η = 1e-3: no toolkit row reached GD's error."
    )
    e = h.get("evals_vs_gd")
    lines.append(
        f"2. **Vector-field evaluations at equal or smaller error, same vector field: "
        f"{_x(e['ratio'])} fewer** — {e['row']}: {e['row_evals']} evaluations, error "
        f"{e['row_err']:.2e}; GD: {e['base_evals']} (one per step), error "
        f"{e['base_err']:.2e}. (Toolkit rows with the standard float64 autodiff field "
        "and an exact evaluation count.)"
        if e
        else "2. Evaluations: no standard-field toolkit row reached GD's error."
    )
    for i, (key, name, same) in enumerate(
        (
            ("vs_scipy_rk45", "scipy RK45 (same jitted autodiff field)", "Dopri5"),
            ("vs_scipy_rk45_fused", "scipy RK45 on the fused field (same field)", "Dopri5"),
            ("vs_torchdiffeq", "torchdiffeq dopri5 (PyTorch port)", "Dopri5"),
        ),
        start=3,
    ):
        p = h.get(key)
        if not p:
            lines.append(f"{i}. vs {name}: not run (see the table).")
            continue
        parts = [f"{i}. **vs {name}**, {p['peer']} ({p['peer_wall_s']:.3g} s, error "]
        parts.append(f"{p['peer_err']:.2e}):")
        for sub, what in (
            ("default", "Tsit5 (default)"),
            ("same_tableau", same + " (same tableau)"),
        ):
            s = p.get(sub)
            if s:
                parts.append(
                    f" {what} at the same rtol **{_faster(s['ratio'])}** ({s['row_wall_s']:.3g}"
                    f" s, error {s['row_err']:.2e});"
                )
        s = p.get("equal_error")
        if s:
            parts.append(
                f" at equal or smaller error **{_faster(s['ratio'])}** ({s['row']}: "
                f"{s['row_wall_s']:.3g} s, error {s['row_err']:.2e})."
            )
        else:
            parts.append(" at equal or smaller error: no toolkit row on this field reached it.")
        each = [
            f"rtol {e['peer_rtol']:g} ({e['peer_wall_s']:.3g} s, error {e['peer_err']:.2e}): "
            + (
                f"**{_faster(e['ratio'])}** ({e['row']}: {e['row_wall_s']:.3g} s, error "
                f"{e['row_err']:.2e})"
                if "ratio" in e
                else "no toolkit row as accurate"
            )
            for e in p.get("each_rtol", [])
        ]
        if len(each) > 1:
            parts.append(
                " At each of its tolerances, the fastest toolkit row on the same field with "
                "error ≤ the peer's: " + "; ".join(each) + "."
            )
        lines.append("".join(parts))
    return lines


# ---------------------------------------------------------------------------------------
# Provenance and outputs


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for pkg in (
        "flows-theory",
        "jax",
        "jaxlib",
        "diffrax",
        "equinox",
        "optimistix",
        "numpy",
        "scipy",
        "matplotlib",
        "torch",
        "torchdiffeq",
    ):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        root = HERE.parent
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        out["git_commit"] = commit + (" (uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        out["git_commit"] = "unknown"
    return out


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or "?",
        "cpu_count": os.cpu_count(),
        "cores_available": cores(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "torch_threads": torch_threads() if torch_status()[0] else None,
        "loadavg_start": None,
    }


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _fmt(v, spec):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return format(v, spec)


def settings_text(s: dict) -> str:
    keys = ("rtol", "atol", "clock", "variant", "learning_rate", "steps", "jac")
    return ", ".join(
        f"{k}={s[k]:g}" if isinstance(s[k], float) else f"{k}={s[k]}" for k in keys if k in s
    )


def contention_warning(rows: list[dict]) -> list[str]:
    """A warning when torch with several threads was much slower per call than with one."""
    worst = 0.0
    for r in ok_rows(rows):
        per = (r.get("extra") or {}).get("torch_ms_per_eval") or {}
        if len(per) == 2:
            n = max(per, key=int)
            worst = max(worst, per[n] / per["1"])
    if worst < 2:
        return []
    return [
        "",
        f"⚠ torch thread contention: with several threads one torch evaluation took up to "
        f"{worst:.0f}× as long as with one thread (see the torch rows' notes; OpenMP barrier "
        "waits when the machine's other cores are busy). Rerun on a quiet machine or with "
        "`--torch-threads 1` before quoting ratio 4.",
    ]


def _loadavg(v) -> str:
    return "?" if not v else " / ".join(f"{x:.2f}" for x in v)


def markdown(case: Case, ref: dict, rows: list[dict], head: dict, info: dict) -> str:
    base = next((r for r in ok_rows(rows) if r["label"] == head.get("baseline")), None)
    lines = [
        f"# Work-precision: {case.title}",
        "",
        "Produced by `python benchmarks/bench_work_precision.py --case "
        f"{case.name}{' --quick' if info['quick'] else ''}`; every row measured in one "
        "process. Wall times exclude compilation and warm-up.",
        "",
        "## Headline (computed from the rows below)",
        "",
        *format_headline(head),
        *contention_warning(rows),
        "",
        "## Setup",
        "",
        f"- Problem: {json.dumps(case.config, ensure_ascii=False)}; {info['n_params']} parameters.",
        f"- Reference: {REF['solver']} rtol {REF['rtol']:g}, atol {REF['atol']:g}"
        f", {ref['clock']} clock ({ref['vf_evals']} evaluations, {ref['wall_s']:.3g} s)"
        + (
            "; spread between the reference's clocks (its own error): "
            + ", ".join(f"{k}: {v:.1e}" for k, v in ref["spread"].items())
            if ref["spread"]
            else ""
        )
        + (f"; L(t1) = {ref['loss_t1']:.3g}" if ref.get("loss_t1") is not None else "")
        + ".",
        "- Error: max |θ(t1) − θ_ref(t1)| over all parameters; relative: divided by "
        f"max |θ_ref(t1)| = {info['theta_scale']:.3g}.",
        f"- Adaptive methods use atol = {ATOL_FACTOR:g}·rtol. Same nominal tolerances do not "
        "mean the same error (diffrax, scipy and torchdiffeq have different step-size "
        "controllers; the toolkit also integrates the energy E alongside θ), hence the "
        "equal-error comparisons.",
        f"- Machine: {info['machine']['platform']}, {info['machine']['cores_available']} "
        f"core(s), JAX {info['machine']['jax_backend']}; torch threads = "
        f"{info['torch_threads']} (default: the core count JAX's CPU backend uses; "
        "`--torch-threads`; the torch rows' notes give ms per evaluation with that many "
        "threads and with 1, which exposes thread contention on a busy machine). Load "
        f"average at start {_loadavg(info['machine']['loadavg_start'])}, at end "
        f"{_loadavg(info['machine']['loadavg_end'])}; one run per row"
        + (f" (fastest of {info['repeat']})" if info["repeat"] > 1 else "")
        + ". Versions: "
        + ", ".join(f"{k} {v}" for k, v in info["versions"].items())
        + ".",
        "- Evaluations: toolkit explicit solvers from the step count (`EVALS_PER_STEP`), "
        "others by a host-callback counter (it costs wall time: loss clock, implicit and "
        "solvers without a fixed stage count); GD: one per step; scipy: `sol.nfev` (LSODA "
        "also evaluates the Jacobian `njev` times by jax.jacfwd, listed in the notes "
        "column); torchdiffeq: a counter in the function.",
        *[f"- {n}" for n in case.notes],
        "",
        "## Rows",
        "",
        "| method | settings | vf evals | wall (s) | compile (s) | max abs θ − θ_ref | "
        "relative | wall / GD | evals / GD | error / GD | notes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r["status"] != "ok":
            lines.append(
                f"| {r['label']} | {settings_text(r['settings'])} | — | — | — | — | — | — | — "
                f"| — | {r['status']}: {r.get('reason', '')} |"
            )
            continue
        err = r.get("err_max")
        notes = []
        ex = r.get("extra") or {}
        if ex.get("njev"):
            notes.append(f"njev={ex['njev']}, nlu={ex['nlu']}")
        if ex.get("jvp_evals"):
            notes.append(f"of which {ex['jvp_evals']} Hessian-vector products")
        if ex.get("torch_ms_per_eval"):
            notes.append(
                "ms/eval by threads: "
                + ", ".join(f"{k}: {v:.3g}" for k, v in ex["torch_ms_per_eval"].items())
            )
        if ex.get("vf_evals_counted_by") not in (None, "step count"):
            notes.append(f"evals counted by {ex['vf_evals_counted_by']}")
        if r.get("rejected_steps"):
            notes.append(f"{r['steps']} steps, {r['rejected_steps']} rejected")
        ratios = ["—"] * 3
        if base is not None:
            ratios = [
                _fmt(r["wall_s"] / base["wall_s"], ".3g"),
                _fmt(r["vf_evals"] / base["vf_evals"], ".3g"),
                _fmt(err / base["err_max"] if base["err_max"] else None, ".2e"),
            ]
        lines.append(
            f"| {r['label']} | {settings_text(r['settings'])} | {r['vf_evals']} | "
            f"{r['wall_s']:.3g} | {r['compile_s']:.2g} | {_fmt(err, '.2e')} | "
            f"{_fmt(r.get('err_rel'), '.2e')} | {' | '.join(ratios)} | {'; '.join(notes)} |"
        )
    return "\n".join(lines) + "\n"


MARKERS = "osD^v<>pP*Xh"


def plot(case: Case, rows: list[dict], path: Path) -> None:
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 5.5), layout="constrained")
    axes = fig.subplots(1, 2)
    fams: dict[str, list[dict]] = {}
    for r in ok_rows(rows):
        fams.setdefault(r["family"], []).append(r)
    colors = colormaps["tab20"].colors
    for i, (fam, rs) in enumerate(fams.items()):
        err = [max(r["err_max"], 1e-17) for r in rs]
        style = dict(
            marker=MARKERS[i % len(MARKERS)],
            color=colors[(2 * i + i // 10) % 20],  # dark shades first, then light ones
            label=fam,
            linestyle=":" if not fam.startswith("flows") else "-",
            alpha=0.9,
        )
        if fam.startswith("gradient descent"):
            style.update(color="k", linestyle="--", markersize=8)
        order = np.argsort([r["wall_s"] for r in rs])
        axes[0].plot(np.array([r["wall_s"] for r in rs])[order], np.array(err)[order], **style)
        order = np.argsort([r["vf_evals"] for r in rs])
        axes[1].plot(np.array([r["vf_evals"] for r in rs])[order], np.array(err)[order], **style)
        if fam.startswith("gradient descent"):
            for r, e in zip(rs, err, strict=True):
                lr = f"η={r['settings']['learning_rate']:.0e}" + fam[len("gradient descent") :]
                for ax, xv in ((axes[0], r["wall_s"]), (axes[1], r["vf_evals"])):
                    ax.annotate(lr, (xv, e), textcoords="offset points", xytext=(6, 4), fontsize=7)
    for ax, xl in zip(
        axes, ("wall time (s, excl. compilation)", "vector-field evaluations"), strict=True
    ):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xl)
        ax.set_ylabel("max |θ(t1) − θ_ref(t1)|")
        ax.grid(True, which="both", alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right center", fontsize=7)
    fig.suptitle(f"Work-precision: {case.title}")
    fig.savefig(path, format="png", dpi=120)


# ---------------------------------------------------------------------------------------


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


def run_case(case: Case, args) -> dict:
    print(f"\n== {case.title}", flush=True)
    load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    problems, skips = build_problems(case)
    base = problems["autodiff"]
    ref = reference(case, base)
    methods = build_methods(case, problems, skips)
    if args.only:
        methods = [m for m in methods if re.search(args.only, m.label)]
    if args.exclude:
        methods = [m for m in methods if not re.search(args.exclude, m.label)]
    rows = execute(methods, ref["theta"], args.repeat)
    head = headline(rows)
    info = {
        "quick": args.quick,
        "repeat": args.repeat,
        "torch_threads": torch_threads(),
        "n_params": base.n_params,
        "theta_scale": float(np.max(np.abs(ref["theta"]))),
        "machine": machine(),
        "versions": versions(),
    }
    info["machine"]["loadavg_start"] = load_start
    info["machine"]["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    text = markdown(case, ref, rows, head, info)
    stem = f"work_precision_{case.name}" + ("_quick" if args.quick else "")
    out = Path(args.out)
    payload = {
        "benchmark": "work_precision",
        "case": case.name,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "config": {
            "problem": case.config,
            "problem_describe": base.describe(),
            "t1": case.t1,
            "quick": args.quick,
            "repeat": args.repeat,
            "only": args.only,
            "exclude": args.exclude,
            "torch_threads": torch_threads(),
            "reference": {**REF, "clock": ref["clock"]},
            "atol_factor": ATOL_FACTOR,
            "tolerance_grid": case.grid,
            "peer_rtols": case.peer_rtols,
            "gd_learning_rates": case.gd_lrs,
            "baseline_learning_rate": BASELINE_LR,
            "clocks": case.clocks,
            "variant_clocks": case.variant_clocks,
            "toolkit_solvers": list(_simulate.SOLVERS),
            "make_problem_options": make_problem_options(),
            "variant_skips": skips,
        },
        "versions": info["versions"],
        "machine": info["machine"],
        "reference": {k: v for k, v in ref.items() if k != "theta"},
        "headline": head,
        "rows": rows,
    }
    write_atomic(out / f"{stem}.md", lambda p: p.write_text(text))
    write_atomic(
        out / f"{stem}.json",
        lambda p: p.write_text(json.dumps(payload, indent=2, default=_json_default)),
    )
    write_atomic(out / f"{stem}.png", lambda p: plot(case, rows, p))
    print("\n" + text, flush=True)
    return {
        "case": case.name,
        "rows": rows,
        "headline": head,
        "files": [out / f"{stem}.{ext}" for ext in ("md", "json", "png")],
    }


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=[*CASES, "all"], default="all")
    p.add_argument("--quick", action="store_true", help="tiny sizes, few methods (smoke test)")
    p.add_argument("--out", default=str(RESULTS), help="output folder")
    p.add_argument("--repeat", type=int, default=1, help="runs per method; the fastest counts")
    p.add_argument("--only", default=None, help="regex: run only rows whose label matches")
    p.add_argument("--exclude", default=None, help="regex: drop rows whose label matches")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: the cores JAX uses)",
    )
    args = p.parse_args(argv)
    global TORCH_THREADS
    TORCH_THREADS = args.torch_threads
    if args.repeat < 1:
        p.error("--repeat must be ≥ 1")
    names = list(CASES) if args.case == "all" else [args.case]
    return [run_case(CASES[n](args.quick), args) for n in names]


if __name__ == "__main__":
    main()
