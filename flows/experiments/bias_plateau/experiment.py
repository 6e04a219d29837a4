"""Experiment: bias, depth and the linear-interpolation plateau.

Paper: *Plateau in Monotonic Linear Interpolation — A "Biased" View of Loss Landscape for
Deep Networks* (§3 Theorem 1, §4 Proposition 1).

Three parts, each confronted with the paper's claims as `Check`s:

1. **Four-class r-homogeneous example (§4, Proposition 1).** f_i(x) = ⟨W_i, x⟩^r + b_i on
   x = e_c + ξ, gradient flow of (k/N)·Σ CE integrated exactly (`flows.simulate`), and the
   reduced tensor-power ODE of (W_ii, b_i) (`reduced.bias_plateau`) from the same W_ii(0):
   learning order = order of W_ii(0), the last-learned class ends with the top bias,
   learned classes sit below it, off-diagonal weights stay O(δ); repeated over seeds and k.
2. **Deep nets and Theorem 1.** f(x) = V_r σ(⋯σ(V_1 x)) + b on the synthetic data (scaled
   to ‖x‖ ≤ 1) and on scikit-learn's digits; linear interpolation θ^[α] between θ(0) and
   θ(T); the predicted error-plateau interval [δ/Δ_min, (Δ_min/(2V_max^r))^{1/(r−1)}] and
   loss bound log k − 2e(αV_max)^r against the measured curves (`reduced.interpolation`).
3. **Trends (3 seeds, mean ± sd).** The error plateau lengthens with depth, shortens as δ
   grows, and (nearly) disappears without the output bias.

The main deep net uses σ = identity (smooth exact flow); the ReLU net is trained by the
paper's method, gradient descent at η and η/4, and by the exact piecewise-smooth flow
(`flows.simulate_nonsmooth`: switches located, sliding resolved), and GD is checked
against it. The trend sweeps (dozens of runs to matched loss) stay on GD at η and η/4.

Layout: `config` (settings, name, files), `runs` (the §4 example's runs and the deep nets'
training), `theorem1_runs` (part 2's runs with their checks), `trend_runs` (part 3's
sweep), `checks` and `trend_checks` (one per claim), `figures`; here `run` (the whole
experiment) and the plug-in.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from flows import Check, ConfigError, plugin
from flows.claims import Reference, Trend, with_error_bars
from flows.models.deep import DEEP_ACTIVATIONS
from flows.plugin import (
    ETA_FACTOR,
    AbstractExperiment,
    Flag,
    OutputDir,
    Report,
    Simulated,
    as_int,
    grid_type,
    merge_eta,
    write_results_json,
)

from .checks import check_homogeneous_sweep, homogeneous_checks, theorem1_of
from .config import FILES, NAME, Config, default_config
from .figures import plot_bias_order, plot_four_class, plot_interpolation, plot_trends
from .runs import homogeneous_sweep, run_deep_relu_flow, run_homogeneous
from .sweep import MAX_DEPTH
from .theorem1_runs import deep_runs
from .trend_checks import trend_checks
from .trend_eta import eta_error_bars
from .trend_runs import trend_sweep

__all__ = ["run", "BiasPlateauExperiment", "EXPERIMENT"]

# ---------------------------------------------------------------------------------------
# Entry point of `flows check bias-plateau`


def run(cfg: Config, out: Path, *, progress: bool = True) -> Report:
    """Every part of the experiment, its checks, figures and results.

    Writes into `out/bias-plateau/` atomically: `four_class.png`, `interpolation.png`,
    `trends.png`, `bias_order.png`, `trajectory.nc` (the four-class run: `W(time, class,
    dim)`, `b(time, class)`, observables), `trajectory_deep.nc` (the synthetic deep run) and
    `results.json` (config, versions, checks, sweeps, curves, solver statistics).
    """
    start = time.perf_counter()
    if progress:
        print(f"[{NAME}] r-homogeneous example: k={cfg.k}, r={cfg.r}, δ={cfg.delta}", flush=True)
    main = run_homogeneous(cfg, global_error=True)
    checks = homogeneous_checks(main, cfg)
    ge = main.traj.global_error
    if main.companion is not None and ge is not None:  # error bars on the tolerance rows
        twin = homogeneous_checks(main.companion, cfg)
        checks = with_error_bars(checks, twin, f"companion solve at rtol/{ge.factor:g}")
    rows = homogeneous_sweep(cfg, progress=progress)
    checks.append(check_homogeneous_sweep(rows, cfg))
    if progress:
        print(f"[{NAME}] deep nets and Theorem 1", flush=True)
    deep, deep_checks = deep_runs(cfg, progress)
    checks += deep_checks
    if progress:
        print(f"[{NAME}] trends over depth, δ and bias", flush=True)
    trend_rows = trend_sweep(cfg, progress=progress)
    t_checks = trend_checks(trend_rows, cfg)
    fine_rows: list[dict] = []
    if cfg.sweep_method == "gd":  # the trends by GD: rerun at η/4, verdicts must agree
        fine_rows = trend_sweep(cfg, progress=progress, learning_rate=cfg.gd_lr / ETA_FACTOR)
        fine_checks = trend_checks(fine_rows, cfg)
        merged = merge_trend_eta(t_checks, fine_checks, cfg.gd_lr)
        # and halfway (η/2): each row's number extrapolated to η → 0, its error bar
        etas = [cfg.gd_lr, cfg.gd_lr / ETA_FACTOR**0.5, cfg.gd_lr / ETA_FACTOR]
        mid_rows = trend_sweep(cfg, progress=progress, learning_rate=etas[1])
        runs = [t_checks, trend_checks(mid_rows, cfg), fine_checks]
        t_checks = eta_error_bars(merged, runs, etas, cfg.trend_tol)
    checks = EXPERIMENT.annotate(checks + t_checks, cfg)
    outdir = OutputDir(Path(out) / NAME, FILES, NAME)
    try:
        plot_four_class(main, cfg, outdir.path("four_class.png"))
        plot_interpolation(deep, outdir.path("interpolation.png"))
        plot_trends(trend_rows, cfg, outdir.path("trends.png"))
        plot_bias_order(main, rows, outdir.path("bias_order.png"))
        main.traj.save(outdir.path("trajectory.nc"))
        deep[0].traj.save(outdir.path("trajectory_deep.nc"))
        write_results_json(
            outdir.path("results.json"),
            NAME,
            dataclasses.asdict(cfg),
            checks,
            {
                "homogeneous": {
                    "w0": main.w0,
                    "t_learned": main.t_learned,
                    "t_cross": main.t_cross,
                    "t_cross_reduced": main.t_cross_red,
                    "b_T": main.traj.observables["b"][-1],
                    "b_reduced_T": main.b_red[-1],
                    "stats": main.traj.stats,
                },
                "homogeneous_sweep": rows,
                "deep": [
                    {
                        "label": r.label,
                        "method": r.method,
                        "model": r.model.describe(),
                        "curve": r.curve.to_dict(),
                        "theorem1": (t.to_dict() if (t := theorem1_of(r)) else None),
                        "stats": r.traj.stats,
                    }
                    for r in deep
                ],
                "trends": trend_rows,
                "trends_eta_fine": fine_rows,
                "wall_s": time.perf_counter() - start,
            },
        )
        files = outdir.commit()
    except BaseException:
        outdir.abort()
        raise
    return Report(
        NAME,
        checks,
        files,
        {"t_learned": main.t_learned.tolist(), "wall_s": time.perf_counter() - start},
    )


# ---------------------------------------------------------------------------------------
# The plug-in: `flows check|simulate bias-plateau`

#: Where each claim stands in the paper (keys: claims or parts of claims; see
#: `flows._checks.annotate`); sections as the module docstring gives them.
REFERENCES = {
    "energy identity": Reference(
        statement="Along an exact gradient flow L(0) − L(t) = ∫₀ᵗ ‖∇L‖² ds: the toolkit's "
        "accuracy certificate of the solve (not a claim of the paper)."
    ),
    "full flow tracks the reduced": Reference(
        section="§4",
        statement="On the four-class r-homogeneous example the diagonal weights and biases "
        "follow the reduced tensor-power ODE of (W_ii, b_i).",
        figure="four_class.png",
    ),
    "classes learned one by one": Reference(
        section="§4",
        statement="Classes are learned one at a time, in the order of their initial "
        "diagonal weights W_ii(0).",
        figure="four_class.png",
    ),
    "last-learned class": Reference(
        section="§4",
        statement="The class learned last ends with the largest bias.",
        figure="bias_order.png",
    ),
    "learned classes sit": Reference(
        section="§4",
        statement="Classes already learned keep their bias at least a constant C₂ below "
        "the top bias.",
        figure="bias_order.png",
    ),
    "off-diagonal weights": Reference(
        section="§4",
        statement="The off-diagonal weights stay of the order of the initialization scale δ.",
        figure="four_class.png",
    ),
    "hold over seeds and k": Reference(
        section="§4",
        statement="The learning order, the top bias and the small off-diagonal weights are "
        "not artefacts of one seed or one number of classes.",
        figure="bias_order.png",
    ),
    "training reaches zero error": Reference(
        statement="Set-up: the trained net classifies its training set, so that the linear "
        "interpolation from θ(0) to θ(T) ends at zero error."
    ),
    "every sample predicted as k*": Reference(
        section="§3",
        statement="On the interpolation path θ^[α] every sample is predicted as the class "
        "k* of the largest bias for α in [δ/Δ_min, (Δ_min/2V_max^r)^(1/(r−1))]: an error "
        "plateau.",
        figure="interpolation.png",
    ),
    "average loss ≥ log k": Reference(
        section="§3",
        statement="For small α the average loss along the interpolation path stays above "
        "log k − 2e(αV_max)^r: a loss plateau.",
        figure="interpolation.png",
    ),
    "measured error plateau ⊇ predicted": Reference(
        section="§3",
        statement="The measured error plateau contains the interval Theorem 1 predicts.",
        figure="interpolation.png",
    ),
    "reproduces the exact flow": Reference(
        statement="Gradient descent at this learning rate is a faithful stand-in for the "
        "exact flow as far as the error plateau goes (toolkit check).",
        figure="trends.png",
    ),
    "loss plateau lengthens with depth": Reference(
        section="§3",
        statement="The loss plateau of the interpolation (γ_loss ≥ log k − 2eε for "
        "α ≤ ε^(1/r)/V_max) lengthens with the depth r: the weights' signal stays near 0 "
        "for a larger range of α.",
        figure="trends.png",
    ),
    "loss plateau shortens as the init scale": Reference(
        section="§3",
        statement="Both plateaus of Theorem 1 lengthen as the initialization scale δ shrinks.",
        figure="trends.png",
    ),
    "lengthens with depth": Reference(
        section="§5",
        statement="The error plateau of the interpolation lengthens with the depth r.",
        figure="trends.png",
    ),
    "shortens as the init scale": Reference(
        section="§5",
        statement="The error plateau shortens as the initialization scale δ grows.",
        figure="trends.png",
    ),
    "disappears without output bias": Reference(
        section="§5",
        statement="Without the output bias the plateau (nearly) disappears.",
        figure="trends.png",
    ),
}


def merge_trend_eta(coarse: list[Check], fine: list[Check], eta: float) -> list[Check]:
    """`merge_eta` of the trend checks at η and η/4, each keeping its finite-size `Trend`
    (the one measured at η/4; the values at η are in `measured` and `values`)."""
    trends = {c.claim: c.trend for c in fine if c.trend is not None}
    return [
        dataclasses.replace(c, trend=c.trend or trends.get(c.claim))
        for c in merge_eta(coarse, fine, eta)
    ]


def plateau_trend(check: Check) -> Trend | None:
    """The finite-size trend of a trend check: the mean ± sd plateau length against depth,
    δ or the bias, attached where the check is built (`trend_checks.check_trend`), None for the
    other checks."""
    return check.trend


class BiasPlateauExperiment(AbstractExperiment):
    """§4's r-homogeneous net and deep nets with an output bias (the bias-plateau paper)."""

    name = NAME
    identities = "reduced.derive.bias_plateau"
    title = (
        'Plateau in Monotonic Linear Interpolation — A "Biased" View of Loss Landscape for '
        "Deep Networks"
    )
    files = FILES
    references = REFERENCES
    simulate_flags = (
        Flag("k", "classes (default 4)", plugin.count("--k", 2)),
        Flag("r", "homogeneity degree r (default 4)", plugin.count("--r")),
        Flag(
            "delta", "init scale δ in (0, 1) (default 0.1)", plugin.real("--delta", positive=True)
        ),
        Flag("seed", "PRNG seed (default 0)", plugin.seed()),
        Flag(
            "net",
            "'homogeneous' (the r-homogeneous example, default) or 'deep-relu' (a deep ReLU "
            "net with output bias by the exact piecewise-smooth flow)",
            choices=("homogeneous", "deep-relu"),
        ),
        Flag(
            "depth",
            f"deep-relu: weight matrices r, 2 to {MAX_DEPTH} (default 4)",
            plugin.typed(
                "--depth",
                as_int,
                minimum=2,
                maximum=MAX_DEPTH,
                hint="Depth 1 is a linear model, with no hidden ReLU layer for --net "
                "deep-relu to integrate; every layer adds a weight matrix and compile time.",
            ),
        ),
        Flag("width", "deep-relu: hidden width (default 16)", plugin.count("--width")),
        Flag("t1", "deep-relu: final time (default 10)", plugin.positive("--t1")),
        Flag(
            "data",
            "deep-relu: 'synthetic' (§4 data, default) or 'digits'",
            choices=("synthetic", "digits"),
        ),
    )
    sweep_flags = (
        Flag(
            "depth",
            "depths r (weight matrices), comma-separated (e.g. 3,4,5)",
            grid_type("--depth", f"{__package__}.sweep:parse_depths", ("as_int", {"minimum": 1})),
            required=True,
        ),
        Flag(
            "delta",
            "init scales δ in (0, 1] (e.g. 1e-3,1e-2)",
            grid_type(
                "--delta",
                f"{__package__}.sweep:parse_deltas",
                ("as_float", {"positive": True, "hi": 1.0}),
            ),
            required=True,
        ),
        Flag(
            "seeds",
            "seeds: a range 0-2 or a list 0,1,2 (default 0)",
            grid_type("--seeds", f"{__package__}.sweep:parse_prng_seeds"),
            default="0",
        ),
        Flag(
            "method",
            "gd: gradient descent (default) or flow: the exact flow",
            choices=("gd", "flow"),
            default=Config.sweep_method,
        ),
        Flag(
            "activation",
            "hidden activation (default relu)",
            choices=tuple(sorted(DEEP_ACTIVATIONS)),
        ),
        Flag(
            "no_bias",
            "nets without the output bias (the plateau should vanish)",
            action="store_true",
        ),
        Flag(
            "lr",
            "learning rate (default 0.05)",
            plugin.positive("--lr"),
            methods=("gd",),
        ),
        *plugin.tolerance_flags("1e-6", "1e-9", methods=("flow",)),
        Flag(
            "init_scale",
            "how --delta is read: 'output' (default; the output scale, each layer × δ^(1/r), "
            "the paper's FCN convention) or 'layer' (each layer × δ; output scale δ^r)",
            choices=("output", "layer"),
        ),
        Flag(
            "stop_ce",
            "stop each run at matched loss: the first time its mean cross-entropy is ≤ CE "
            "with zero training error (--t1 is then the horizon; default: no stop)",
            plugin.positive("--stop-ce"),
        ),
        Flag("t1", "training time T (default 300)", plugin.positive("--t1")),
        Flag("k", "classes, at most 16 (default 4)", plugin.count("--k", 2)),
        Flag("width", "hidden width (default 16)", plugin.count("--width")),
        Flag("n_per_class", "samples per class (default 10)", plugin.count("--n-per-class")),
        Flag(
            "n_alpha", "interpolation points α on [0, 1] (default 50)", plugin.count("--n-alpha", 2)
        ),
        Flag(
            "plateau_tol",
            "error plateau: error ≥ 1 − 1/k − tol (default 0.02)",
            plugin.real("--plateau-tol", nonnegative=True),
        ),
    )

    def default_config(self, quick: bool = False) -> Config:
        return default_config(quick)

    def trend(self, check: Check, cfg) -> Trend | None:
        return plateau_trend(check)

    def run(self, cfg: Config, out: Path, *, progress: bool = True) -> Report:
        return run(cfg, out, progress=progress)

    def sweep(self, out: Path, options: dict, **engine):
        """The grid depth × δ × seeds (`flows.experiments.bias_plateau.sweep`)."""
        from .sweep import plateau_sweep

        given = {k: v for k, v in options.items() if v is not None and k != "no_bias"}
        return plateau_sweep(out, bias=not options.get("no_bias"), **given, **engine)

    def simulate(self, options: dict, *, progress: bool = False) -> Simulated:
        """The r-homogeneous example's exact flow (t1 from the reduced model's blow-up
        times), or with `--net deep-relu` a deep ReLU net by the exact piecewise-smooth
        flow."""
        given = {k: v for k, v in options.items() if v is not None}
        deep_only = ("depth", "width", "t1", "data")
        if given.pop("net", "homogeneous") == "deep-relu":
            wrong = sorted(set(given) & {"k", "r"})
            if wrong:
                raise ConfigError(
                    f"--{wrong[0]} applies to the r-homogeneous net, not to --net deep-relu "
                    "(its flags: --depth, --width, --delta, --seed, --t1, --data)."
                )
            deep = {k: given.pop(k) for k in deep_only if k in given}
            if "delta" in given:
                given["deep_delta"] = given.pop("delta")
            cfg = dataclasses.replace(Config(), **given)
            traj = run_deep_relu_flow(
                cfg,
                depth=deep.get("depth", 4),
                width=deep.get("width", 16),
                t1=deep.get("t1", 10.0),
                data_name=deep.get("data", "synthetic"),
            )
            return Simulated(traj, cfg.deep_rtol)
        wrong = sorted(set(given) & set(deep_only))
        if wrong:
            raise ConfigError(
                f"--{wrong[0]} applies to --net deep-relu only; the r-homogeneous example takes "
                "--k, --r, --delta, --seed."
            )
        cfg = dataclasses.replace(Config(), **given)
        return Simulated(run_homogeneous(cfg).traj, cfg.rtol)


EXPERIMENT = BiasPlateauExperiment()
