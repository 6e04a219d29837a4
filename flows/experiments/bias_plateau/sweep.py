"""`flows sweep bias-plateau`: the error plateau of deep nets with an output bias over the
grid depth r × init scale δ × seed, through the sweep engine (`flows._sweep`).

Each point is what the trend part of `flows check bias-plateau` runs (`trend_sweep`):
the synthetic §4 data scaled to ‖x‖ ≤ 1 (`synthetic_deep_data`), a `DeepFCN` of depth r
and init scale δ trained by gradient descent or the exact flow (`train_deep`), the linear
interpolation θ^[α] between θ(0) and θ(T) (`interpolate`) and its error plateau
(`plateau`), with Theorem 1's quantities (`theorem1_of`). A point records:

- the interpolation curves `error_curve(interp)`, `loss_curve(interp)` on the α grid
  `interp_alpha(interp)` (`n_alpha` points on [0, 1]);
- the measured plateau (`plateau_start`, `plateau_end`, `plateau_length`,
  `plateau_points`: the longest run of grid α with error ≥ 1 − 1/k − `plateau_tol`);
- training: `loss_initial`, `loss_final` (the integrated objective, Σ over classes of
  the mean cross-entropy), `mean_ce_final`, `train_error_final`;
- the bias gap at T (`bias_gap` = Theorem 1's Δ_min, `bias_gap_max` = Δ_max, `k_star`)
  and Theorem 1's `v_max`, `alpha_1`, `alpha_2` (NaN without an output bias);
- `stopped_at` (the matched-loss stop time with `--stop-ce`, else NaN) and
  `delta_output` (the output scale δ of the init: δ, or δ^r with `--init-scale layer`);
- the solver's or GD's statistics (`t_reached`, `steps`, `accepted_steps`,
  `rejected_steps`, `vf_evals`, `wall_s`, `compile_s`; `energy_residual_max`, the
  flow's accuracy certificate (for GD the defect of the same identity); `max_loss_rise`
  for GD, NaN for the flow).

The settings (method with its rate or tolerances, T, activation, bias, k, width, samples,
n_alpha, plateau_tol) are saved in the manifest; `OUT/plateau.png` shows the plateau
length against δ (per depth) and against depth (per δ), mean ± sd over seeds.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Any

import numpy as np

from flows import AbstractSweepSpec, ConfigError, SweepResult, load_sweep
from flows import sweep as run_sweep
from flows.figures import figure_style, new_figure, save_figure
from flows.models.deep import DEEP_ACTIVATIONS, DeepFCN
from flows.plugin import (
    SOLVE_STATS,
    Axis,
    as_float,
    as_int,
    as_tolerance,
    fmt_number,
    grid_values,
    grouped,
    mean_sd,
    parse_prng_seeds,
    point_values,
    seed_mean_sd,
    sweep_settings,
    to_float,
    to_int,
)

from .checks import theorem1_of
from .config import NAME, Config
from .interpolation import plateau
from .observables import matched_loss
from .runs import synthetic_deep_data, train_deep

__all__ = ["PlateauSweep", "PlateauSweepConfig", "plateau_sweep", "plot_plateau_sweep"]

#: Deepest net a sweep accepts (each layer adds a weight matrix and a compile).
MAX_DEPTH = 64


def parse_depths(value) -> tuple[int, ...]:
    """Depths r ('3,4,5' or a sequence): integers in [1, `MAX_DEPTH`] (Theorem 1 needs
    r ≥ 3; shallower nets are run, and their checks are not applicable)."""
    return grid_values(
        value,
        "--depth",
        "depth",
        functools.partial(to_int, strict=True),
        lambda r: (
            None
            if 1 <= r <= MAX_DEPTH
            else (
                f"r = {r} is outside [1, {MAX_DEPTH}]; the depth is the number of weight matrices "
                "(Theorem 1 needs r ≥ 3)."
            )
        ),
    )


def parse_deltas(value) -> tuple[float, ...]:
    """Init scales δ ('1e-3,1e-2' or a sequence): numbers in (0, 1] (the paper's small
    initialization)."""
    return grid_values(
        value,
        "--delta",
        "delta",
        to_float,
        lambda d: (
            None
            if 0 < d <= 1
            else (
                f"δ = {d} is outside (0, 1]; δ is the output scale of the initialization (the "
                "paper's plateau needs small δ, e.g. 1e-3)."
            )
        ),
    )


AXES = (
    Axis("depth", int, parse_depths, "--depth"),
    Axis("delta", float, parse_deltas, "--delta"),
    Axis("seed", int, parse_prng_seeds, "--seeds"),
)
_CHECK = Config()  # the defaults of `flows check bias-plateau`'s trends


@dataclasses.dataclass(frozen=True)
class PlateauSweepConfig:
    """Settings every point of a bias-plateau sweep shares.

    `method` 'gd' (gradient descent at rate `lr`) or 'flow' (the exact flow at `rtol`,
    `atol`; the settings of the other method must be None), trained to time `t1`;
    `activation` of the hidden layers; `bias`: the output bias exists; `k` classes (≤ d =
    16 input dimensions), `width` hidden units, `n_per_class` samples per class (noise
    σ = 0.1); `n_alpha` interpolation points; `plateau_tol` of the error plateau;
    `stop_ce`: when set, every run stops at matched loss — the first time its mean
    cross-entropy is ≤ `stop_ce` with zero training error (`matched_loss`) — and `t1` is
    the horizon; `init_scale`: how δ is read, 'output' (the output scale: each layer ×
    δ^{1/r}, the paper's FCN convention) or 'layer' (each layer × δ; output scale δ^r).
    """

    method: str = _CHECK.sweep_method
    activation: str = _CHECK.sweep_activation
    bias: bool = True
    lr: float | None = None
    rtol: float | None = None
    atol: float | None = None
    t1: float = _CHECK.sweep_t1
    k: int = _CHECK.k
    width: int = _CHECK.deep_width
    n_per_class: int = _CHECK.deep_n_per_class
    n_alpha: int = _CHECK.n_alpha
    plateau_tol: float = _CHECK.plateau_tol
    stop_ce: float | None = None
    init_scale: str = "output"

    def __post_init__(self):
        if self.method not in ("gd", "flow"):
            raise ConfigError(f"--method must be 'gd' or 'flow'; got {self.method!r}.")
        if self.activation not in DEEP_ACTIVATIONS:
            raise ConfigError(
                f"--activation must be one of {sorted(DEEP_ACTIVATIONS)}; got {self.activation!r}."
            )
        if not isinstance(self.bias, bool):
            raise ConfigError(f"`bias` must be True or False; got {self.bias!r}.")
        own, other = (
            (("lr",), ("rtol", "atol")) if self.method == "gd" else (("rtol", "atol"), ("lr",))
        )
        given = [f"--{n}" for n in other if getattr(self, n) is not None]
        if given:
            raise ConfigError(
                f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to "
                f"--method {self.method}: it takes {', '.join(f'--{n}' for n in own)}."
            )
        set_ = lambda name, v: object.__setattr__(self, name, v)  # noqa: E731
        if self.method == "gd":
            set_(
                "lr", as_float("--lr", _CHECK.gd_lr if self.lr is None else self.lr, positive=True)
            )
        else:
            rtol = _CHECK.deep_rtol if self.rtol is None else self.rtol
            atol = _CHECK.deep_atol if self.atol is None else self.atol
            set_("rtol", as_tolerance("--rtol", rtol, example="1e-6"))
            set_("atol", as_tolerance("--atol", atol, example="1e-9"))
        set_("t1", as_float("--t1", self.t1, positive=True))
        set_("k", as_int("--k", self.k, minimum=2, maximum=_CHECK.d))
        set_("width", as_int("--width", self.width, minimum=1))
        set_("n_per_class", as_int("--n-per-class", self.n_per_class, minimum=1))
        set_("n_alpha", as_int("--n-alpha", self.n_alpha, minimum=2))
        set_("plateau_tol", as_float("--plateau-tol", self.plateau_tol, nonnegative=True))
        if self.stop_ce is not None:
            set_("stop_ce", as_float("--stop-ce", self.stop_ce, positive=True))
        if self.init_scale not in ("output", "layer"):
            raise ConfigError(
                f"--init-scale must be 'output' (δ is the output scale) or 'layer' (δ is "
                f"each layer's scale); got {self.init_scale!r}."
            )

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for key, default in (("stop_ce", None), ("init_scale", "output")):
            if d[key] == default:  # manifests of sweeps run without them stay as they were
                del d[key]
        if self.method == "gd":
            del d["rtol"], d["atol"]
        else:
            del d["lr"]
        return {"experiment": NAME, **d, "d": _CHECK.d, "sigma": _CHECK.deep_sigma}

    def experiment_config(self) -> Config:
        """The `flows check bias-plateau` config whose deep-net settings are these."""
        kw: dict[str, Any] = dict(
            k=self.k,
            deep_width=self.width,
            deep_n_per_class=self.n_per_class,
            n_alpha=self.n_alpha,
            plateau_tol=max(self.plateau_tol, 1e-300),  # Config wants > 0; only its bound
            sweep_method=self.method,
            sweep_activation=self.activation,
            sweep_t1=self.t1,
        )
        if self.method == "gd":
            kw["gd_lr"] = self.lr
        else:
            kw.update(deep_rtol=self.rtol, deep_atol=self.atol)
        return dataclasses.replace(_CHECK, **kw)


SCALARS = (
    "plateau_start",
    "plateau_end",
    "plateau_length",
    "plateau_points",
    "loss_initial",
    "loss_final",
    "mean_ce_final",
    "train_error_final",
    "bias_gap",
    "bias_gap_max",
    "k_star",
    "v_max",
    "alpha_1",
    "alpha_2",
    *SOLVE_STATS,
    "energy_residual_max",
    "max_loss_rise",
    "stopped_at",
    "delta_output",
)
CURVES = ("interp_alpha", "error_curve", "loss_curve")


def run_point(cfg: PlateauSweepConfig, depth: int, delta: float, seed: int) -> dict:
    """The measurements of one grid point (the variables of `PlateauSweep`)."""
    ecfg = cfg.experiment_config()
    data = synthetic_deep_data(ecfg, seed)
    model = DeepFCN(
        d=data.d,
        k=cfg.k,
        depth=depth,
        width=cfg.width,
        activation=cfg.activation,
        bias=cfg.bias,
        delta=delta**depth if cfg.init_scale == "layer" else delta,
    )
    stop = None if cfg.stop_ce is None else matched_loss(cfg.stop_ce)
    run = train_deep(model, data, seed=seed, t1=cfg.t1, method=cfg.method, cfg=ecfg, stop=stop)
    pl = plateau(run.curve, kind="error", tol=cfg.plateau_tol)
    th = theorem1_of(run) if depth >= 2 else None  # Theorem 1 needs r ≥ 2 (`parse_depths`)
    o, st = run.traj.observables, run.traj.stats
    out = {
        "interp_alpha": run.curve.alphas,
        "error_curve": run.curve.error,
        "loss_curve": run.curve.loss,
        "plateau_start": pl.start,
        "plateau_end": pl.end,
        "plateau_length": pl.length,
        "plateau_points": pl.n_points,
        "loss_initial": o["loss"][0],
        "loss_final": o["loss"][-1],
        "mean_ce_final": o["mean_ce"][-1],
        "train_error_final": o["train_error"][-1],
        "bias_gap": th.delta_min if th else math.nan,
        "bias_gap_max": th.delta_max if th else math.nan,
        "k_star": th.k_star if th else math.nan,
        "v_max": th.v_max if th else math.nan,
        "alpha_1": th.alpha_1 if th else math.nan,
        "alpha_2": th.alpha_2 if th else math.nan,
        "energy_residual_max": np.max(o["energy_residual"]),
        "max_loss_rise": st.get("max_loss_rise", math.nan),
        "stopped_at": st.get("stopped_at", math.nan),
        "delta_output": model.delta,
    }
    for k in SOLVE_STATS:  # compile_s is absent where nothing was compiled
        out[k] = st.get(k, math.nan) if k == "compile_s" else st[k]
    return point_values(out, CURVES)


@dataclasses.dataclass(frozen=True)
class PlateauSweep(AbstractSweepSpec):
    """The grid depth × δ × seed of deep nets with an output bias (each point alone)."""

    config: PlateauSweepConfig = PlateauSweepConfig()

    experiment = NAME
    axes = AXES
    figure_name = "plateau.png"
    brief_fields = ("plateau_length", "train_error_final")

    def settings(self) -> dict:
        return self.config.to_dict()

    def dims(self) -> dict[str, int]:
        return {"interp": self.config.n_alpha}

    def variables(self) -> dict[str, tuple[str, ...]]:
        return {**{k: ("interp",) for k in CURVES}, **{k: () for k in SCALARS}}

    def check(self, points: list[tuple]) -> None:
        c = self.config
        for depth in sorted({p[0] for p in points}):  # the models build (cheap, no solve)
            DeepFCN(d=16, k=c.k, depth=depth, width=c.width, activation=c.activation)

    def run_point(self, depth: int, delta: float, seed: int) -> dict:
        return run_point(self.config, depth, delta, seed)

    def point_label(self, rec) -> str:
        return f"depth={rec['depth']} δ={rec['delta']:g} seed={rec['seed']}"

    def describe(self) -> str:
        c = self.config
        how = f"GD lr={c.lr:g}" if c.method == "gd" else f"flow rtol={c.rtol:g}, atol={c.atol:g}"
        stop = "" if c.stop_ce is None else f" (stop at mean CE ≤ {c.stop_ce:g}, error 0)"
        scale = "δ per layer" if c.init_scale == "layer" else "δ output scale"
        return (
            f"{how}, T={c.t1:g}{stop}, {c.activation}, width {c.width}, k={c.k}, "
            f"{'output bias' if c.bias else 'no bias'}, {scale}, {c.n_alpha} α points"
        )

    def point_text(self, rec) -> str:
        return (
            f"plateau {rec['plateau_length']:.3g} (training error at T "
            f"{rec['train_error_final']:.3g}; wall {rec['wall_s']:.3g}s)"
        )

    def plot(self, sweep_nc: Path, png: Path) -> None:
        plot_plateau_sweep(sweep_nc, png)

    def summary_table(self, records: list[dict]) -> list[str]:
        lines = [
            f"{'depth':>6} {'δ':>8} {'plateau':>8} {'± sd':>7} {'error(T)':>9} {'Δ_min':>8}  ok/n"
        ]
        for (depth, delta), rs in grouped(records, "depth", "delta"):
            ok = [r for r in rs if r["status"] == "ok"]
            mean, sd = mean_sd([r["plateau_length"] for r in ok])
            err = mean_sd([r["train_error_final"] for r in ok])[0]
            gap = mean_sd([r["bias_gap"] for r in ok])[0]
            lines.append(
                f"{depth:>6} {delta:>8g} {fmt_number(mean):>8} {fmt_number(sd, 2):>7} "
                f"{fmt_number(err):>9} {fmt_number(gap):>8} {len(ok):>3}/{len(rs)}"
            )
        return lines


def plateau_sweep(
    out,
    *,
    depth,
    delta,
    seeds=0,
    method: str = _CHECK.sweep_method,
    activation: str = _CHECK.sweep_activation,
    bias: bool = True,
    lr: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    t1: float = _CHECK.sweep_t1,
    k: int = _CHECK.k,
    width: int = _CHECK.deep_width,
    n_per_class: int = _CHECK.deep_n_per_class,
    n_alpha: int = _CHECK.n_alpha,
    plateau_tol: float = _CHECK.plateau_tol,
    stop_ce: float | None = None,
    init_scale: str = "output",
    **engine,
) -> SweepResult:
    """Run the grid depth × δ × seeds of deep nets with an output bias, resumably.

    **Arguments:** `out` (the folder: see `flows._sweep`); the grid `depth` ('3,4,5'),
    `delta` ('1e-3,1e-2'), `seeds` ('0-2'); the settings of `PlateauSweepConfig`
    (`lr` for `method='gd'`, default 0.05; `rtol`, `atol` for `method='flow'`, defaults
    1e-6, 1e-9; `stop_ce` for runs stopped at matched loss; `init_scale` 'output' or
    'layer'); `**engine`: `scheduler`, `connect_timeout`, `plot` (`OUT/plateau.png`),
    `progress` of `flows.sweep`.

    **Returns:** a `SweepResult`. Raises `ConfigError` naming the flag on bad input,
    before anything is written.
    """
    cfg = PlateauSweepConfig(
        method=method,
        activation=activation,
        bias=bias,
        lr=lr,
        rtol=rtol,
        atol=atol,
        t1=t1,
        k=k,
        width=width,
        n_per_class=n_per_class,
        n_alpha=n_alpha,
        plateau_tol=plateau_tol,
        stop_ce=stop_ce,
        init_scale=init_scale,
    )
    return run_sweep(
        PlateauSweep(cfg),
        out,
        {"depth": depth, "delta": delta, "seed": seeds},
        **engine,
    )


@figure_style()
def plot_plateau_sweep(sweep_nc_path, out_png) -> None:
    """Plateau length (mean ± sd over seeds, failed points left out) against δ for each
    depth and against depth for each δ; written atomically to `out_png` (PNG only: the
    sweep folder holds only the files the sweep engine declares)."""
    ds = load_sweep(Path(sweep_nc_path))
    mean, sd = seed_mean_sd(ds, "plateau_length")  # (depth, delta)
    depths, deltas = ds["depth"].values.astype(int), ds["delta"].values.astype(float)
    fig, axes = new_figure(1, 2, width="text")
    for i, r in enumerate(depths):
        axes[0].errorbar(deltas, mean[i], yerr=sd[i], marker="o", label=f"$r = {r}$")
    ylabel = r"error-plateau length (in $\alpha$)"
    axes[0].set(xscale="log", xlabel=r"init scale $\delta$", ylabel=ylabel)
    axes[0].set_title(r"(a) plateau vs init scale $\delta$ (mean ± sd over seeds)")
    for j, d in enumerate(deltas):
        axes[1].errorbar(depths, mean[:, j], yerr=sd[:, j], marker="o", label=rf"$\delta = {d:g}$")
    axes[1].set(xlabel=r"depth $r$", ylabel=ylabel, xticks=depths)
    axes[1].set_title("(b) plateau vs depth (mean ± sd over seeds)")
    for ax in axes:
        ax.legend()
    c = sweep_settings(ds)
    how = f"GD η = {c.get('lr')}" if c.get("method") == "gd" else "exact flow"
    fig.suptitle(
        f"Linear-interpolation error plateau: {c.get('activation', '?')} nets, width "
        f"{c.get('width', '?')}, $k$ = {c.get('k', '?')}, {how}, $T$ = {c.get('t1', '?')}"
        + ("" if c.get("bias", True) else ", no output bias")
    )
    save_figure(fig, out_png, vector=False, atomic=True)
