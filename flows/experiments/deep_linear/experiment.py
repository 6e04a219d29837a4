"""Experiment: exact learning dynamics of a two-layer linear network (Saxe, McClelland &
Ganguli, *Exact solutions to the nonlinear dynamics of learning in deep linear neural
networks*, ICLR 2014).

Whitened inputs and a linear teacher with chosen singular values (`data.teacher_data`); two
exact gradient flows of L = (1/2n) Σ‖y − W₂W₁x‖² (`flows.squared_error`): one
from the balanced init aligned with the SVD of Σ_yx, where the closed forms of
`reduced.deep_linear` are exact, and one from a small random init, where they are the
prediction. Claims (`checks`): (a) flow = closed form, (b) mode learning times, (c)
balancedness conserved, (d) modes learned in order of decreasing singular value, (e) the
same transitions from a random init.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from flows import (
    SOLVERS,
    Check,
    ConfigError,
    Dataset,
    Trajectory,
    make_problem,
    plugin,
    simulate,
    squared_error,
)
from flows.claims import Reference, Trend, with_error_bars
from flows.plugin import (
    REPORT_NAME,
    AbstractExperiment,
    Flag,
    OutputDir,
    Report,
    Simulated,
    check_memory,
    write_results_json,
)

from .checks import (
    check_balancedness,
    check_certificate,
    check_closed_form,
    check_half_times,
    check_mode_order,
    check_random_init,
)
from .config import Config, default_config, geometric_spectrum
from .data import teacher_data
from .figures import plot_loss, plot_modes
from .model import TwoLayerLinear
from .observables import Theory, crossing_times, deep_linear_observables, effective_strength

__all__ = [
    "NAME",
    "FILES",
    "DeepLinearExperiment",
    "EXPERIMENT",
    "make_data",
    "run_flow",
    "check_runs",
    "run",
]

NAME = "deep-linear"
#: The files `flows check deep-linear` writes into `out/NAME/` (nothing else there is
#: touched): `run` writes all but the report, which the command line adds after it.
FILES = (
    "modes.png",
    "modes.svg",
    "loss.png",
    "loss.svg",
    "trajectory.nc",
    "results.json",
    REPORT_NAME,
)
INITS = ("balanced", "random")


def make_data(cfg: Config) -> Dataset:
    return teacher_data(cfg.d_in, cfg.d_out, cfg.n, cfg.singular_values, cfg.noise, cfg.seed)


def _memory(cfg: Config, save_params: str) -> None:
    """Refuse sizes that cannot fit before anything is allocated (the balanced init forms
    an h × h hidden basis; θ is stored at every save time with save_params='all')."""
    n_theta = cfg.h * (cfg.d_in + cfg.d_out)
    saves = cfg.n_save if save_params == "all" else 2
    need = 8 * (cfg.h * cfg.h + cfg.n * (cfg.d_in + cfg.d_out + cfg.h) + n_theta * (saves + 8))
    check_memory(
        need,
        f"--h {cfg.h}, --d-in {cfg.d_in}, --d-out {cfg.d_out}, --n {cfg.n}",
        "Reduce the sizes (or --n-save with --save-params all).",
    )


def run_flow(
    cfg: Config,
    data: Dataset,
    init: str,
    *,
    theta0: dict | None = None,
    save_params: str = "all",
    max_steps: int = 200_000,
    progress: bool = False,
    global_error: bool = False,
) -> Trajectory:
    """The exact gradient flow of the averaged loss from the `init` ('balanced': aligned
    with the SVD of Σ_yx, every mode at strength u0; 'random': i.i.d. N(0, 2u0/h) weights
    drawn from `cfg.seed`), or from `theta0` when given; `global_error`: with its companion
    solve at tolerances 10× tighter (`flows.simulate`)."""
    _memory(cfg, save_params)
    model = TwoLayerLinear(d_in=cfg.d_in, h=cfg.h, d_out=cfg.d_out, init_std=cfg.init_std)
    if theta0 is None and init == "balanced":
        theta0 = Theory.of(data, cfg.h, cfg.u0).balanced_init()
    problem = make_problem(model, data, key=cfg.seed, theta0=theta0, loss_fn=squared_error)
    traj = simulate(
        problem,
        t1=cfg.t1,
        n_save=cfg.n_save,
        solver=cfg.solver,
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=deep_linear_observables,
        save_params=save_params,
        max_steps=max_steps,
        progress=progress,
        global_error=global_error,
    )
    traj.config["experiment"] = {"name": NAME, "init": init, **dataclasses.asdict(cfg)}
    return traj


def check_runs(
    cfg: Config, theory: Theory, balanced: Trajectory, random: Trajectory
) -> tuple[list[Check], dict]:
    """Every claim, confronted with the two runs; also the table of learning times."""
    s = theory.s
    t_bal = crossing_times(balanced.times, balanced.observables["mode_strength"], s / 2)
    t_rand = crossing_times(random.times, random.observables["mode_strength"], s / 2)
    u_eff = effective_strength(theory, {k: v[0] for k, v in random.params.items()})
    checks = [
        check_certificate(balanced, cfg.rtol, "balanced init"),
        check_certificate(random, cfg.rtol, "random init"),
        check_closed_form(balanced, theory, cfg.rtol, cfg.tol_factor),
        check_half_times(balanced, theory, cfg.rtol, cfg.tol_factor),
        check_balancedness({"balanced": balanced, "random": random}, cfg.rtol, cfg.tol_factor),
        check_mode_order(s, t_bal, theory.u0),
        check_random_init(random, theory, cfg.u0, cfg.random_factor, cfg.small_init, u_eff),
    ]
    table = {
        "singular_values": s.tolist(),
        "t_half_predicted": theory.half_times().tolist(),
        "t_half_balanced": t_bal.tolist(),
        "t_half_random": t_rand.tolist(),
        "u_eff_random": u_eff.tolist(),
        "t_half_predicted_from_u_eff": theory.half_times(u_eff).tolist(),
        "loss_floor": float(theory.loss(np.array([1e12]))[0]),
    }
    return checks, table


def run(cfg: Config, out: Path, *, progress: bool = True) -> Report:
    """Both runs, every check, the figures and the results.

    Writes into `out/deep-linear/` atomically: `modes.png`, `loss.png`, `trajectory.nc`
    (the balanced run, θ at every save time) and `results.json` (config, versions, checks,
    learning times, solver statistics).
    """
    start = time.perf_counter()
    if progress:
        print(
            f"[{NAME}] d_in={cfg.d_in}, h={cfg.h}, d_out={cfg.d_out}, n={cfg.n}, "
            f"s={list(cfg.singular_values)}, u0={cfg.u0}, t1={cfg.t1}, rtol={cfg.rtol}",
            flush=True,
        )
    data = make_data(cfg)
    theory = Theory.of(data, cfg.h, cfg.u0)
    # both runs with their companion solves (tolerances 10× tighter): the tolerance rows
    # get their flip points' numerical error bars
    balanced = run_flow(cfg, data, "balanced", global_error=True)
    random = run_flow(cfg, data, "random", global_error=True)
    checks, table = check_runs(cfg, theory, balanced, random)
    ge_b, ge_r = balanced.global_error, random.global_error
    if ge_b and ge_r and ge_b.companion and ge_r.companion:
        twin, _ = check_runs(cfg, theory, ge_b.companion, ge_r.companion)
        checks = with_error_bars(checks, twin, f"companion solve at rtol/{ge_b.factor:g}")
    checks = EXPERIMENT.annotate(checks, cfg)
    outdir = OutputDir(Path(out) / NAME, FILES, NAME)
    try:
        title = (
            f"d_in = {cfg.d_in}, h = {cfg.h}, d_out = {cfg.d_out}, u₀ = {cfg.u0:g}, "
            f"noise = {cfg.noise:g}"
        )
        plot_modes(balanced, random, theory, outdir.path("modes.png"), title)
        plot_loss(balanced, random, theory, outdir.path("loss.png"), title)
        balanced.save(outdir.path("trajectory.nc"))
        write_results_json(
            outdir.path("results.json"),
            NAME,
            dataclasses.asdict(cfg),
            checks,
            {
                "learning_times": table,
                "stats": {"balanced": dict(balanced.stats), "random": dict(random.stats)},
                "solver": {"name": cfg.solver, "rtol": cfg.rtol, "atol": cfg.atol},
                "loss": squared_error.description,
                "wall_s": time.perf_counter() - start,
            },
        )
        files = outdir.commit()
    except BaseException:
        outdir.abort()
        raise
    return Report(NAME, checks, files, {"learning_times": table})


# ---------------------------------------------------------------------------------------
# The plug-in: `flows check|simulate deep-linear`

#: Where each claim stands in the paper (keys: claims or parts of claims; see
#: `flows.claims._checks.annotate`).
REFERENCES = {
    "energy identity": Reference(
        statement="Along an exact gradient flow L(0) − L(t) = ∫₀ᵗ ‖∇L‖² ds and the loss never "
        "increases: the toolkit's accuracy certificate (not a claim of the paper).",
        figure="loss.png",
    ),
    "closed form": Reference(
        statement="From a balanced initialization aligned with the SVD of Σ_yx each mode "
        "strength follows the exact sigmoidal solution, and so do W₁, W₂, their product "
        "and the loss.",
        figure="modes.png",
    ),
    "mode α reaches": Reference(
        statement="Mode α (singular value s_α) is learned at the time "
        "t½ = (1/2s_α) ln((s_α − u₀)/u₀): stronger modes are learned earlier.",
        figure="modes.png",
    ),
    "conserved along the flow": Reference(
        statement="W₁W₁ᵀ − W₂ᵀW₂ is conserved by the gradient flow of a two-layer linear "
        "network, from any initialization."
    ),
    "stage-like learning": Reference(
        statement="Learning is stage-like: the modes are learned one after another, in "
        "order of decreasing singular value.",
        figure="modes.png",
    ),
    "small random init": Reference(
        statement="From small random initial conditions the same sigmoidal transitions "
        "occur, at times close to those of the exact solution.",
        figure="modes.png",
    ),
}


def learning_time_trend(check: Check, cfg: Config) -> Trend | None:
    """Measured against predicted half-learning times t½ per mode (x: singular value)."""
    pred, meas = check.values.get("predicted"), check.values.get("measured")
    s = [float(v) for v in cfg.singular_values]
    if not (isinstance(pred, list) and isinstance(meas, list) and len(pred) == len(s)):
        return None
    if len(meas) != len(s) or not all(isinstance(v, float) for v in pred + meas):
        return None
    return Trend(
        x_label="singular value s_α",
        y_label="half-learning time t½",
        x=tuple(s),
        y=tuple(meas),
        predicted=tuple(pred),
        note="one point per mode of the teacher",
    )


#: `flows simulate deep-linear` defaults (flags left out take these).
SIMULATE_DEFAULTS = {
    "d_in": 6, "h": 6, "d_out": 4, "n": 200, "s_max": 3.0, "s_min": 0.5, "noise": 0.1,
    "u0": 1e-3, "init": "balanced", "t1": 14.0, "seed": 0, "solver": "tsit5",
    "rtol": 1e-8, "atol": 1e-12, "n_save": 401, "max_steps": 200_000, "save_params": "all",
    "progress": False,
}  # fmt: skip


class DeepLinearExperiment(AbstractExperiment):
    """Two-layer linear networks on whitened data: exact flow vs the closed-form modes."""

    name = NAME
    identities = "reduced.derive.deep_linear"
    title = "Exact solutions to the nonlinear dynamics of learning in deep linear neural networks"
    files = FILES
    references = REFERENCES
    simulate_flags = (
        Flag("d_in", "input dimension (default 6)", plugin.count("--d-in")),
        Flag("h", "hidden width (default 6)", plugin.count("--h")),
        Flag("d_out", "output dimension (default 4)", plugin.count("--d-out")),
        Flag("n", "number of samples, > d_in (default 200)", plugin.count("--n", 2)),
        Flag(
            "s_max",
            "largest teacher singular value (default 3); the min(d_in, d_out) values are "
            "geometric from --s-max down to --s-min",
            plugin.positive("--s-max"),
        ),
        Flag("s_min", "smallest teacher singular value (default 0.5)", plugin.positive("--s-min")),
        Flag(
            "noise", "output noise std, ≥ 0 (default 0.1)", plugin.real("--noise", nonnegative=True)
        ),
        Flag("u0", "initial mode strength (default 1e-3)", plugin.positive("--u0")),
        Flag(
            "init",
            "balanced (aligned, default) or random (i.i.d. N(0, 2·u0/h))",
            choices=INITS,
        ),
        Flag("t1", "final time (default 14)", plugin.positive("--t1")),
        Flag("seed", "seed of data and random init (default 0)", plugin.seed()),
        Flag("solver", "ODE solver (default tsit5)", choices=("auto", *sorted(SOLVERS))),
        *plugin.tolerance_flags("1e-8", "1e-12"),
        Flag("n_save", "save times (default 401)", plugin.count("--n-save", 2)),
        Flag("max_steps", "solver step budget (default 200000)", plugin.count("--max-steps")),
        Flag(
            "save_params", "θ saved at: all (default), ends, none", choices=("all", "ends", "none")
        ),
        Flag("progress", "print a progress meter", action="store_true"),
    )

    def default_config(self, quick: bool = False) -> Config:
        return default_config(quick)

    def trend(self, check: Check, cfg) -> Trend | None:
        return learning_time_trend(check, cfg) if isinstance(cfg, Config) else None

    def run(self, cfg: Config, out: Path, *, progress: bool = True) -> Report:
        return run(cfg, out, progress=progress)

    def simulate(self, options: dict, *, progress: bool = False) -> Simulated:
        o = SIMULATE_DEFAULTS | {k: v for k, v in options.items() if v is not None}
        r = min(o["d_in"], o["d_out"])
        if r > 1 and not o["s_min"] < o["s_max"]:
            raise ConfigError(
                f"--s-min ({o['s_min']:g}) must be < --s-max ({o['s_max']:g}): the "
                f"min(d_in, d_out) = {r} teacher singular values must be distinct."
            )
        cfg = Config(
            d_in=o["d_in"], h=o["h"], d_out=o["d_out"], n=o["n"],
            singular_values=geometric_spectrum(o["s_max"], o["s_min"], r), noise=o["noise"],
            u0=o["u0"], t1=o["t1"], n_save=o["n_save"], solver=o["solver"], rtol=o["rtol"],
            atol=o["atol"], seed=o["seed"],
        )  # fmt: skip
        traj = run_flow(
            cfg,
            make_data(cfg),
            o["init"],
            save_params=o["save_params"],
            max_steps=o["max_steps"],
            progress=o["progress"] or progress,
        )
        traj.config["experiment"] |= {"flags": o}
        return Simulated(traj, cfg.rtol)


EXPERIMENT = DeepLinearExperiment()
