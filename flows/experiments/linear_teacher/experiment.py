"""Experiment: leaky-ReLU ±v networks learning linear teachers.

Runs, each confronted with a claim of the linear-teacher paper:

- a property test of Theorem 5.1 over random clustered networks, and a ReLU counterexample;
- exact gradient flow (loss clock, to t1 = 10⁸) on 2-D symmetric Gaussian classes from a
  small and a large initialization: clustering r/‖w̄ − ū‖, the linear-region fraction,
  the smoothed margin (Lyu & Li), the PAR share, and the PAR prediction of Theorem 6.2;
- antipodal Gaussians plus one positive outlier (App. J), trained with gradient descent
  (the exact flow slides along a leaky-ReLU kink there and is too stiff for explicit
  solvers): all neurons of one type agree (an NAR) but the PAR share stays < 1;
- SGD with epochs without replacement (Theorem 4.1) for several n and ε;
- (full mode) digit pairs 0/1 and 3/5 of scikit-learn's digits: r and the fraction of
  train/test points outside the linear region over training (Fig. 2).

The settings live in `config`, the runs in `runs`, one check per claim in `checks`, the
figures in `figures`; this module holds `run` and the plug-in.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from ... import _flags as fl
from ..._flags import Flag
from ..._sweep import grid_type
from ..base import AbstractExperiment, OutputDir, Report, Simulated, write_results_json
from .checks import (
    certificate_checks,
    check_clustering,
    check_digits,
    check_outlier,
    check_par_prediction,
    check_par_share,
    check_sgd,
    check_smoothed_margin,
    check_theorem51,
    check_theorem51_runs,
)
from .config import FILES, MAX_INIT, NAME, Config, default_config
from .data import symmetric_gaussians
from .figures import plot_boundaries, plot_clustering, plot_outlier, plot_par, plot_sgd
from .observables import teacher_observables
from .runs import par_prediction, run_digits, run_flow, run_outlier, run_sgd

# ---------------------------------------------------------------------------------------
# Entry point of `flows check linear-teacher`


def run(cfg: Config, out: Path, *, progress: bool = True) -> Report:
    """All runs and checks; figures, `trajectory.nc` (small-init run) and `results.json`,
    written atomically into `out/linear-teacher/`."""
    start = time.perf_counter()

    def say(msg):
        if progress:
            print(f"[{NAME}] {msg} ({time.perf_counter() - start:.0f}s)", flush=True)

    checks, extra = [], {}
    c, prop = check_theorem51(cfg)
    checks += c
    extra["property_test"] = prop
    say("Theorem 5.1 property test done")

    data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
    obs_kwargs = {"beta": cfg.beta}
    obs = teacher_observables(teacher=data.teacher, **obs_kwargs)
    small = run_flow(cfg, data, cfg.small_init, obs)
    say(f"small-init flow to t = {cfg.t1:g}: {small.stats['steps']} steps")
    large = run_flow(cfg, data, cfg.large_init, obs)
    say(f"large-init flow: {large.stats['steps']} steps")
    checks += certificate_checks(small, "small init", cfg.rtol)
    checks += certificate_checks(large, "large init", cfg.rtol)
    for label, tr in (("small init", small), ("large init", large)):
        o = tr.observables
        checks.append(
            check_smoothed_margin(
                tr.times, o["l_sum"], o["smoothed_margin"], cfg.margin_drop_tol, label
            )
        )
    checks += check_clustering(small, large, cfg)
    sol, agree = par_prediction(small, data, cfg)
    checks.append(check_par_prediction(small, sol, agree, cfg, symmetric=True))
    checks.append(check_par_share(small))
    extra["par"] = {
        "prediction": {
            "w": sol.w,
            "u": sol.u,
            "in_par": sol.in_par,
            "kkt_residual": sol.kkt_residual,
        },
        "agreement": agree,
    }

    outlier, odata = run_outlier(cfg, obs_kwargs)
    say("outlier run (gradient descent) done")
    checks.append(check_outlier(outlier, odata))

    rows = run_sgd(cfg)
    checks += check_sgd(rows, cfg)
    say("SGD done")
    extra["sgd"] = rows

    digit_runs = {}
    for pair in cfg.digits:
        tr, _ = run_digits(cfg, pair)
        name = f"{pair[0]}v{pair[1]}"
        digit_runs[name] = tr
        checks.append(check_digits(name, tr, cfg))
        say(f"digits {name}: {tr.stats['steps']} steps")
    runs = {
        "small init": small,
        "large init": large,
        **{f"digits {k}": v for k, v in digit_runs.items()},
    }
    checks.insert(2, check_theorem51_runs({**runs, "outlier (GD)": outlier}, cfg.slope))

    outdir = OutputDir(Path(out) / NAME, FILES, NAME)
    try:
        plot_boundaries(small, data, sol, cfg, outdir.path("boundary.png"))
        plot_clustering(runs, outdir.path("clustering.png"))
        plot_par(
            {
                "symmetric, small init": small,
                "symmetric, large init": large,
                "outlier (GD)": outlier,
            },
            sol,
            small,
            outdir.path("par.png"),
        )
        plot_outlier(outlier, odata, cfg, outdir.path("outlier.png"))
        plot_sgd(rows, outdir.path("sgd.png"))
        small.save(outdir.path("trajectory.nc"))
        extra["runs"] = {
            k: {
                "stats": v.stats,
                "final": {
                    name: float(np.asarray(v.observables[name])[-1])
                    for name in (
                        "loss",
                        "r_rel",
                        "frac_outside",
                        "par_share",
                        "margin",
                        "smoothed_margin",
                        "max_disagree",
                    )
                },
            }
            for k, v in {**runs, "outlier (GD)": outlier}.items()
        }
        extra["separability"] = {
            "symmetric": data.separability.to_dict(),
            "outlier": odata.separability.to_dict(),
        }
        extra["wall_s"] = time.perf_counter() - start
        write_results_json(
            outdir.path("results.json"), NAME, dataclasses.asdict(cfg), checks, extra
        )
        files = outdir.commit()
    except BaseException:
        outdir.abort()
        raise
    say("done")
    return Report(NAME, checks, files, {"par": agree, "sgd": rows})


# ---------------------------------------------------------------------------------------
# The plug-in: `flows check|simulate linear-teacher`


class LinearTeacherExperiment(AbstractExperiment):
    """Leaky-ReLU ±v nets on linearly separable data (the linear-teacher paper)."""

    name = NAME
    title = "Towards Understanding Learning in Neural Networks with Linear Teachers"
    files = FILES
    simulate_flags = (
        Flag("k", "neurons per type (default 10)", fl.count("--k")),
        Flag("init", f"init scale in (0, {MAX_INIT:g}] (default 1e-4)", fl.positive("--init")),
        Flag("slope", "leaky slope α in [0, 1) (default 0.1)", fl.real("--slope", lo=0.0, hi=1.0)),
        Flag("seed", "PRNG seed (default 0)", fl.seed()),
        Flag("t1", "final time (default 1e8)", fl.positive("--t1")),
    )
    sweep_flags = (
        Flag(
            "init",
            f"init scales in (0, {MAX_INIT:g}], comma-separated (e.g. 1e-4,1)",
            grid_type(
                "--init",
                f"{__package__}.sweep:parse_inits",
                ("as_float", {"positive": True, "hi": MAX_INIT}),
            ),
            required=True,
        ),
        Flag(
            "slope",
            "leaky slopes α in [0, 1) (e.g. 0.1,0.5)",
            grid_type("--slope", f"{__package__}.sweep:parse_slopes", ("as_float", {"lo": 0.0})),
            required=True,
        ),
        Flag(
            "seeds",
            "seeds (data and θ(0)): a range 0-2 or a list 0,1,2 (default 0)",
            grid_type("--seeds", f"{__package__}.sweep:parse_prng_seeds"),
            default="0",
        ),
        Flag("k", "neurons per type (default 10)", fl.count("--k")),
        Flag("v", "output weight v (default 1)", fl.positive("--v")),
        Flag("n", "data points, even (default 100)", fl.count("--n", 4)),
        Flag("mean", "class mean m·e₁ (default 3)", fl.positive("--mean")),
        Flag("t1", "final time, > 1 (default 1e8)", fl.real("--t1", lo=1.0)),
        Flag("n_save", "log-spaced save times (default 61)", fl.count("--n-save", 3)),
        Flag("rtol", "relative tolerance (default 1e-6)", fl.tolerance("--rtol", "1e-6")),
        Flag("atol", "absolute tolerance (default 1e-9)", fl.tolerance("--atol", "1e-9")),
        Flag(
            "beta", "β of the NAR/PAR tests, ≥ 0 (default 0)", fl.real("--beta", nonnegative=True)
        ),
    )

    def default_config(self, quick: bool = False) -> Config:
        return default_config(quick)

    def run(self, cfg: Config, out: Path, *, progress: bool = True) -> Report:
        return run(cfg, out, progress=progress)

    def sweep(self, out: Path, options: dict, **engine):
        """The grid init × slope × seeds (`flows.experiments.linear_teacher.sweep`)."""
        from .sweep import teacher_sweep

        return teacher_sweep(out, **{k: v for k, v in options.items() if v is not None}, **engine)

    def simulate(self, options: dict, *, progress: bool = False) -> Simulated:
        """The exact flow on symmetric Gaussians with the loss clock."""
        given = {k: v for k, v in options.items() if v is not None and k != "init"}
        cfg = dataclasses.replace(Config(), **given)
        data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
        obs = teacher_observables(teacher=data.teacher, beta=cfg.beta)
        init = cfg.small_init if options.get("init") is None else options["init"]
        return Simulated(run_flow(cfg, data, init, obs), cfg.rtol)


EXPERIMENT = LinearTeacherExperiment()
