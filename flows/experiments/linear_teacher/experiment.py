"""Experiment: leaky-ReLU ±v networks learning linear teachers.

Runs, each confronted with a claim of the linear-teacher paper:

- a property test of Theorem 5.1 over random clustered networks, and a ReLU counterexample;
- exact gradient flow (loss clock, to t1 = 10⁸) on 2-D symmetric Gaussian classes from a
  small and a large initialization: clustering r/‖w̄ − ū‖, the linear-region fraction,
  the smoothed margin (Lyu & Li), the PAR share, and the PAR prediction of Theorem 6.2;
- Theorem 6.1 tested directly on every exact-flow run: NAR membership from T_NAR on read
  from the trajectory (β* > kink tolerance at every later save), the conclusion measured
  as the same-type angle falling and the cluster directions against the clustered NAR
  max-margin solution (`reduced.max_margin.solve_nar`);
- high-dimensional symmetric Gaussians (App. I, d = `highdim_d`) beside the 2-D run;
- antipodal Gaussians plus one positive outlier (App. J): a geometry search
  (`outlier_search`: the reduced prediction over outlier radius × angle, then the exact
  flow at the geometry with the largest predicted non-PAR NAR margin); GD at η and η/4
  beside it only if `outlier_gd`;
- SGD with epochs without replacement (Theorem 4.1) for several n and ε (exponents in 1/ε
  and in n, with trends) and over a grid of η × init scale;
- (full mode) digit pairs 0/1 and 3/5 of scikit-learn's digits: r and the fraction of
  train/test points outside the linear region over training (Fig. 2).

The settings live in `config`, the runs in `runs`, one check per claim in `checks`,
`theorem61_checks` and `outlier_checks`, the figures in `figures`; this module holds
`run` and the plug-in.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from flows import GLOBAL_ERROR_FACTOR, Check, Trajectory, plugin
from flows.claims import Reference, with_error_bars
from flows.plugin import (
    AbstractExperiment,
    Flag,
    OutputDir,
    Report,
    Simulated,
    grid_type,
    write_results_json,
)

from . import outlier_search as osearch
from .checks import (
    certificate_checks,
    check_boundary,
    check_clustering,
    check_digits,
    check_par_prediction,
    check_par_share,
    check_sgd,
    check_smoothed_margin,
    check_smoothing,
    check_theorem51,
    check_theorem51_runs,
    smoothing_skipped,
)
from .config import FILES, MAX_INIT, NAME, Config, default_config
from .data import symmetric_gaussians
from .figures import plot_boundaries, plot_clustering, plot_outlier, plot_par, plot_sgd
from .observables import teacher_observables
from .outlier_checks import (
    check_outlier,
    check_outlier_family,
    check_outlier_family_end,
    check_outlier_gd,
    check_outlier_search,
)
from .runs import (
    outlier_data,
    par_prediction,
    run_digits,
    run_flow,
    run_highdim,
    run_outlier,
    run_outlier_gd,
    run_sgd,
    run_sgd_grid,
    smoothing_crosscheck,
)
from .theorem61_checks import check_highdim, check_theorem61, highdim_skipped

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
    obs_kwargs = {"beta": cfg.beta, "kink_cos": cfg.kink_cos}
    obs = teacher_observables(teacher=data.teacher, **obs_kwargs)
    # the two main runs with their companion solves (tolerances 10× tighter): every
    # tolerance row below gets its flip point's numerical error bar
    small = run_flow(cfg, data, cfg.small_init, obs, global_error=True)
    say(f"small-init flow to t = {cfg.t1:g}: {small.stats['steps']} steps (and its companion)")
    large = run_flow(cfg, data, cfg.large_init, obs, global_error=True)
    say(f"large-init flow: {large.stats['steps']} steps (and its companion)")
    checks += certificate_checks(small, "small init", cfg.rtol)
    checks += certificate_checks(large, "large init", cfg.rtol)
    main, sol, agree = _main_run_checks(small, large, data, cfg)
    ge_small, ge_large = small.global_error, large.global_error
    if ge_small and ge_large and ge_small.companion and ge_large.companion:
        twin, _, _ = _main_run_checks(ge_small.companion, ge_large.companion, data, cfg)
        main = with_error_bars(main, twin, f"companion solve at rtol/{ge_small.factor:g}")
    checks += main
    high = None
    if cfg.highdim:
        high, rows = _highdim_checks(cfg, obs_kwargs, small, say)
        checks += rows
    else:
        checks += highdim_skipped(cfg)
    extra["par"] = {
        "prediction": {
            "w": sol.w,
            "u": sol.u,
            "in_par": sol.in_par,
            "kkt_residual": sol.kkt_residual,
        },
        "agreement": agree,
    }

    c, outlier, odata, ocfg, extra["outlier_search"] = _outlier_checks(cfg, obs_kwargs, obs, say)
    checks += c
    if cfg.smoothing_check:
        cc = smoothing_crosscheck(cfg, data)
        checks.append(check_smoothing(cc))
        extra["smoothing_crosscheck"] = cc
        say("smoothing cross-check done")
    else:
        checks.append(smoothing_skipped())

    rows = run_sgd(cfg)
    sgd_grid = run_sgd_grid(cfg)
    checks += check_sgd(rows, cfg, sgd_grid)
    say("SGD done")
    extra["sgd"] = rows
    extra["sgd_grid"] = sgd_grid

    digit_runs = {}
    for pair in cfg.digits:
        name = f"{pair[0]}v{pair[1]}"
        digit_runs[name], row = _digits_check(cfg, pair, name, say)
        checks.append(row)
    runs = {
        "small init": small,
        "large init": large,
        **{f"digits {k}": v for k, v in digit_runs.items()},
    }
    checks.insert(2, check_theorem51_runs({**runs, "outlier (exact flow)": outlier}, cfg.slope))
    checks = EXPERIMENT.annotate(checks, cfg)

    outdir = OutputDir(Path(out) / NAME, FILES, NAME)
    try:
        plot_boundaries(small, data, sol, cfg, outdir.path("boundary.png"), large=large)
        plot_clustering(runs, outdir.path("clustering.png"))
        plot_par(
            {
                "symmetric, small init": small,
                "symmetric, large init": large,
                "outlier (exact flow)": outlier,
            },
            sol,
            small,
            outdir.path("par.png"),
        )
        plot_outlier(outlier, odata, ocfg, outdir.path("outlier.png"))
        plot_sgd(rows, outdir.path("sgd.png"))
        small.save(outdir.path("trajectory.nc"))
        extra["runs"] = _final_values(
            {
                **runs,
                "outlier (exact flow)": outlier,
                **({f"d = {cfg.highdim_d}": high} if high is not None else {}),
            }
        )
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


def _main_run_checks(small: Trajectory, large: Trajectory, data, cfg: Config) -> tuple:
    """The checks read off the small- and large-init runs (with the PAR solution and the
    agreement with it), as one function so that they can be run on the companion solves
    too."""
    checks = []
    for label, tr in (("small init", small), ("large init", large)):
        o = tr.observables
        checks.append(
            check_smoothed_margin(
                tr.times, o["l_sum"], o["smoothed_margin"], cfg.margin_drop_tol, label
            )
        )
    checks += check_clustering(small, large, cfg)
    checks.append(check_boundary(small, large, data, cfg))
    sol, agree = par_prediction(small, data, cfg)
    checks.append(check_par_prediction(small, sol, agree, cfg, symmetric=True))
    checks.append(check_par_share(small))
    for label, tr in (("small init", small), ("large init", large)):
        checks.append(check_theorem61(tr, data, cfg, label))
    return checks, sol, agree


def _highdim_checks(cfg: Config, obs_kwargs: dict, small: Trajectory, say) -> tuple:
    """App. I: the flow on symmetric Gaussians in d = `highdim_d` beside the 2-D small-init
    run, and Theorem 6.1 on it; error bars from the companion solves. (the run, its
    checks)"""
    high, hdata = run_highdim(cfg, obs_kwargs, global_error=True)
    say(f"high-dimensional (d = {cfg.highdim_d}) flow: {high.stats['steps']} steps")
    label = f"d = {cfg.highdim_d}"
    rows = [check_highdim({"d = 2": small, label: high})]
    rows.append(check_theorem61(high, hdata, cfg, label))
    ge_small, ge_h = small.global_error, high.global_error
    if ge_h is not None and ge_h.companion is not None and ge_small is not None:
        tight = ge_small.companion
        twin = [check_highdim({"d = 2": tight or small, label: ge_h.companion})]
        twin.append(check_theorem61(ge_h.companion, hdata, cfg, label))
        rows = with_error_bars(rows, twin, f"companion solves at rtol/{ge_h.factor:g}")
    return high, rows


def _digits_check(cfg: Config, pair, name: str, say) -> tuple[Trajectory, Check]:
    """Fig. 2: one digit pair's flow and its check, with the companion solve's error bar."""
    tr, _ = run_digits(cfg, pair, global_error=True)
    row = check_digits(name, tr, cfg)
    ge_d = tr.global_error
    if ge_d is not None and ge_d.companion is not None:
        twin = check_digits(name, ge_d.companion, cfg)
        [row] = with_error_bars([row], [twin], f"companion solve at rtol/{ge_d.factor:g}")
    say(f"digits {name}: {tr.stats['steps']} steps")
    return tr, row


def _outlier_checks(cfg: Config, obs_kwargs: dict, obs, say):
    """App. J: the outlier geometry search, the exact flow on the chosen geometry (or the
    configured one), and (optionally) GD at η and η/4 there. (checks, the run, its data,
    the config with the geometry used, the search's record)."""
    checks = []
    grid = osearch.predict_grid(cfg)
    chosen = osearch.choose_geometry(grid)
    ocfg = cfg
    flow_summary = None
    if chosen is not None:
        ocfg = dataclasses.replace(cfg, outlier=tuple(chosen["outlier"]))
        # the main runs' observables: with outlier_n + 1 = n this run reuses their compile
        outlier, odata, flow_summary = osearch.flow_at(
            cfg,
            chosen["radius"],
            chosen["angle_deg"],
            obs_kwargs,
            cfg.outlier_t1,
            obs=obs,
            global_error=True,
        )
    else:
        outlier, odata = run_outlier(cfg, obs_kwargs, obs=obs, global_error=True)
    say(
        f"outlier geometry search ({len(grid)} geometries) and exact flow at "
        f"{tuple(round(c, 3) for c in ocfg.outlier)}: "
        f"{outlier.stats['sliding_entries']} sliding entries"
    )
    whole_run = check_outlier(outlier, odata, cfg.kink_cos)
    thm61 = check_theorem61(outlier, odata, cfg, "outlier")
    ge = outlier.global_error
    if ge is not None and ge.companion is not None:  # the same rows on the companion solve
        twin = [check_outlier(ge.companion, odata, cfg.kink_cos)]
        twin.append(check_theorem61(ge.companion, odata, cfg, "outlier"))
        how = f"companion solve at rtol/{ge.factor:g}"
        whole_run, thm61 = with_error_bars([whole_run, thm61], twin, how)
    checks.append(
        check_outlier_search(grid, chosen, flow_summary, cfg, whole_run if chosen else None)
    )
    checks.append(whole_run)
    family_rows = _outlier_family(cfg, grid, chosen, outlier, obs_kwargs, obs)
    checks += family_rows
    say(f"App. J family: {family_rows[0].measured.split(' — ')[0]}")
    checks.append(thm61)
    if cfg.outlier_gd:
        checks.append(
            check_outlier_gd(ocfg, lambda eta: run_outlier_gd(ocfg, obs_kwargs, eta), cfg.kink_cos)
        )
        say("outlier by gradient descent at η and η/4 done")
    return checks, outlier, odata, ocfg, {"grid": grid, "chosen": chosen, "flow": flow_summary}


def _outlier_family(cfg: Config, grid: list[dict], chosen, outlier, obs_kwargs: dict, obs):
    """App. J over its family: the exact flow at every separable geometry of the search
    grid × `cfg.outlier_family_seeds` (the chosen geometry's seed-0 run is the outlier run
    already made); every flow with its companion solve. Two rows, each judged again on the
    companions: the state can be entered, and it is there at the end of training."""
    runs, excluded = [], []
    for row in grid:
        where = f"r = {row['radius']:g}, {row['angle_deg']:g}°"
        for seed in cfg.outlier_family_seeds:
            label = f"{where}, seed {seed}"
            if chosen is row and seed == 0:
                runs.append((label, outlier))
                continue
            if row["std"] != 0.5:  # run_outlier draws the Gaussians at std 0.5
                excluded.append(f"{label} (std {row['std']:g}: not run)")
                continue
            geometry = dataclasses.replace(cfg, outlier=tuple(row["outlier"]))
            if not outlier_data(geometry, seed).separability.separable:  # an LP, no flow
                excluded.append(f"{label} (not linearly separable)")
                continue
            traj, _, _ = osearch.flow_at(
                cfg,
                row["radius"],
                row["angle_deg"],
                obs_kwargs,
                cfg.outlier_t1,
                obs,
                seed,
                global_error=True,
            )
            runs.append((label, traj))
    family = (
        f"{len(runs)} exact flows to t = {cfg.outlier_t1:g} (whole trajectories, "
        f"{cfg.n_save} log-spaced saves each): every geometry of the search grid (radius "
        f"{', '.join(f'{r:g}' for r in cfg.search_radii)} × angle "
        f"{', '.join(f'{a:g}' for a in cfg.search_angles)}°) × seeds "
        f"{list(cfg.outlier_family_seeds)} (data and init), init {cfg.small_init:g}"
    )
    rows = [
        check_outlier_family(runs, excluded, cfg.kink_cos, family),
        check_outlier_family_end(runs, excluded, cfg.kink_cos, family),
    ]
    twins = [
        (label, tr.global_error.companion)
        for label, tr in runs
        if tr.global_error is not None and tr.global_error.companion is not None
    ]
    if runs and len(twins) == len(runs):
        twin = [
            check_outlier_family(twins, excluded, cfg.kink_cos, family),
            check_outlier_family_end(twins, excluded, cfg.kink_cos, family),
        ]
        how = f"every flow's companion solve at rtol/{GLOBAL_ERROR_FACTOR:g}"
        rows = with_error_bars(rows, twin, how)
    return rows


def _final_values(runs: dict) -> dict:
    """Each run's statistics and final observables, for results.json."""
    names = (
        "loss", "r_rel", "frac_outside", "par_share", "margin", "smoothed_margin", "max_disagree"
    )  # fmt: skip
    return {
        k: {"stats": v.stats, "final": {n: float(np.asarray(v.observables[n])[-1]) for n in names}}
        for k, v in runs.items()
    }


# ---------------------------------------------------------------------------------------
# The plug-in: `flows check|simulate linear-teacher`

#: Where each claim stands in the paper (keys: claims or parts of claims; see
#: `flows.claims._checks.annotate`); results and sections come from each check's source.
REFERENCES = {
    "stays in an NAR from T_NAR on": Reference(
        statement="If gradient flow enters a neuron-agreement region (all neurons of a type "
        "agree on every point, with margin β > 0) and stays there, W/‖W‖ converges to a "
        "perfectly clustered network — a KKT point of the max-margin problem in that NAR.",
        figure="clustering.png",
    ),
    "a geometry of the App. J family": Reference(
        statement="Antipodal Gaussians plus one positive outlier: learning can enter an NAR "
        "that is not the PAR (the outlier's position is not stated; searched here).",
        figure="outlier.png",
    ),
    "2-D and high-dimensional": Reference(
        statement="On two separable Gaussians in high dimension the network enters the PAR "
        "(share of neurons in the PAR → 1), as in 2-D.",
        figure="par.png",
    ),
    "decision boundary: linear from small init": Reference(
        statement="With a small initialization the learned boundary is very close to "
        "linear; the network can also represent (and from a large initialization learn) "
        "non-linear separating boundaries.",
        figure="boundary.png",
    ),
    "grow at most like n⁴": Reference(
        statement="SGD reaches loss ε within M(n, ε) = C n⁴/ε² updates: an upper bound, so "
        "the measured growth in n may be slower.",
        figure="sgd.png",
    ),
    "any η and any init": Reference(
        statement="The convergence of Theorem 4.1 holds for any step size η > 0 and any "
        "initialization scale."
    ),
    "sign N_W(x)": Reference(
        statement="For a leaky-ReLU ±v network whose neurons are clustered (radius r around "
        "w̄ and ū), the network's sign equals the sign of the linear predictor (w̄ − ū)·x "
        "wherever |(w̄ − ū)·x| ≥ 2r‖x‖.",
        figure="boundary.png",
    ),
    "fails for ReLU": Reference(
        statement="The leaky slope is needed: for ReLU (α = 0) the statement of Theorem 5.1 "
        "has counterexamples."
    ),
    "holds on the learned networks": Reference(
        statement="Theorem 5.1's conclusion, tested on the networks the flow (and GD) "
        "actually learns.",
        figure="boundary.png",
    ),
    "energy identity": Reference(
        statement="Along an exact gradient flow L(0) − L(t) = ∫₀ᵗ ‖∇L‖² ds: the toolkit's "
        "accuracy certificate of the solve (not a claim of the paper)."
    ),
    "loss non-increasing": Reference(
        statement="Gradient flow never increases the loss (accuracy certificate)."
    ),
    "smoothed margin": Reference(
        statement="Once the loss is small (Σℓ < log 2) the smoothed margin γ̃ of a "
        "homogeneous net is non-decreasing along gradient flow (Lyu & Li).",
        figure="clustering.png",
    ),
    "r/‖w̄ − ū‖ → 0": Reference(
        statement="From a small initialization the neurons cluster: the cluster radius "
        "relative to ‖w̄ − ū‖ tends to 0 and the network becomes linear on the data.",
        figure="clustering.png",
    ),
    "visibly less clustering": Reference(
        statement="The small initialization is needed: from a large one the neurons "
        "cluster visibly less.",
        figure="clustering.png",
    ),
    "PAR max-margin": Reference(
        statement="The learned directions and decision boundary are those of the "
        "max-margin problem restricted to the positive-activation region (PAR).",
        figure="par.png",
    ),
    "every neuron enters the PAR": Reference(
        statement="On symmetric Gaussian classes every neuron ends in the PAR.",
        figure="par.png",
    ),
    "outlier data": Reference(
        statement="With one positive outlier the neurons of each type still agree (a "
        "neuron-agreement region, NAR) but not all of them enter the PAR.",
        figure="outlier.png",
    ),
    "ε → 0 limit of the smoothed flows": Reference(
        statement="Toolkit cross-check (not a claim of the paper): the exact flow through "
        "the kinks (Filippov solution, sliding where both sides push into a kink) is the "
        "limit of the flows of smoothed activations σ_ε as ε → 0."
    ),
    "SGD (epochs without replacement)": Reference(
        statement="SGD with epochs without replacement reaches loss ε on linearly "
        "separable data within the theorem's number of updates.",
        figure="sgd.png",
    ),
    "updates to ε grow": Reference(
        statement="The number of SGD updates needed to reach loss ε grows at most like 1/ε².",
        figure="sgd.png",
    ),
    "digits": Reference(
        statement="On digit pairs of scikit-learn's digits the neurons cluster and few "
        "train/test points remain outside the linear region (the paper's Fig. 2).",
        figure="clustering.png",
    ),
}


class LinearTeacherExperiment(AbstractExperiment):
    """Leaky-ReLU ±v nets on linearly separable data (the linear-teacher paper)."""

    name = NAME
    identities = "reduced.derive.linear_teacher"
    title = "Towards Understanding Learning in Neural Networks with Linear Teachers"
    files = FILES
    references = REFERENCES
    simulate_flags = (
        Flag("k", "neurons per type (default 10)", plugin.count("--k")),
        Flag("init", f"init scale in (0, {MAX_INIT:g}] (default 1e-4)", plugin.positive("--init")),
        Flag(
            "slope", "leaky slope α in [0, 1) (default 0.1)", plugin.real("--slope", lo=0.0, hi=1.0)
        ),
        Flag("seed", "PRNG seed (default 0)", plugin.seed()),
        Flag("t1", "final time (default 1e8; outlier data 1e5)", plugin.positive("--t1")),
        Flag(
            "data",
            "'gaussians' (symmetric Gaussians, default) or 'outlier' (App. J: antipodal "
            "Gaussians plus one outlier)",
            choices=("gaussians", "outlier"),
        ),
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
        Flag("k", "neurons per type (default 10)", plugin.count("--k")),
        Flag("v", "output weight v (default 1)", plugin.positive("--v")),
        Flag("n", "data points, even (default 100)", plugin.count("--n", 4)),
        Flag("mean", "class mean m·e₁ (default 3)", plugin.positive("--mean")),
        Flag("t1", "final time, > 1 (default 1e8)", plugin.real("--t1", lo=1.0)),
        Flag("n_save", "log-spaced save times (default 61)", plugin.count("--n-save", 3)),
        *plugin.tolerance_flags("1e-6", "1e-9"),
        Flag(
            "beta",
            "β of the NAR/PAR tests, ≥ 0 (default 0)",
            plugin.real("--beta", nonnegative=True),
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
        """The exact piecewise-smooth flow (loss clock) on symmetric Gaussians, or on the
        outlier data (`--data outlier`); kink counts are saved with the trajectory."""
        skip = ("init", "data")
        given = {k: v for k, v in options.items() if v is not None and k not in skip}
        init = options.get("init")
        if options.get("data") == "outlier":
            t1 = given.pop("t1", None)
            cfg = dataclasses.replace(Config(), **given)
            obs_kwargs = {"beta": cfg.beta, "kink_cos": cfg.kink_cos}
            traj, _ = run_outlier(cfg, obs_kwargs, init=init, t1=t1)
            return Simulated(traj, cfg.rtol)
        cfg = dataclasses.replace(Config(), **given)
        data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
        obs = teacher_observables(teacher=data.teacher, beta=cfg.beta, kink_cos=cfg.kink_cos)
        init = cfg.small_init if init is None else init
        return Simulated(run_flow(cfg, data, init, obs), cfg.rtol)


EXPERIMENT = LinearTeacherExperiment()
