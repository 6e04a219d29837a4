"""`flows sweep linear-teacher`: the leaky-ReLU ±v net on 2-D symmetric Gaussians over the
grid init scale × leaky slope α × seed, through the sweep engine (`flows._sweep.engine`).

Each point is what `flows simulate linear-teacher` runs: `symmetric_gaussians` (seed =
the point's seed), the exact flow of the logistic loss with the loss clock to `t1`
(`run_flow`, θ(0) from the same seed) and the observables of the linear-teacher paper
(`teacher_observables`). A point records:

- curves on the `n_save` log-spaced save times: `t`, `loss`, `r_rel` (r/‖w̄ − ū‖),
  `frac_outside` (share of points outside Theorem 5.1's linear region), `par_share`,
  `margin`;
- at t1: `loss_initial`, `loss_final` and `<name>_final` of the clustering measures
  (`r`, `r_rel`, `max_angle_w`, `max_angle_u`, `frac_outside`, `max_disagree`), the
  PAR/NAR measures (`par_share`, `par_share_w`, `par_share_u`, `in_par`, `in_nar`), the
  margins (`margin`, `smoothed_margin`), `sign_agreement`, `accuracy`, `teacher_cos`,
  `norm_W`, `l_sum`, and `thm51_violations_total` (over all saves: Theorem 5.1 says 0
  for α > 0);
- the solver's statistics (`t_reached`, `steps`, `accepted_steps`, `rejected_steps`,
  `vf_evals`, `wall_s`, `compile_s`, `segments`) and the accuracy certificate
  `energy_residual_max`.

The settings (k, v, n, mean, t1, n_save, rtol, atol, β) are saved in the manifest;
`OUT/clustering.png` shows r/‖w̄ − ū‖, the PAR share and the margin at t1 against the
init scale, one line per slope (mean ± sd over seeds).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from flows import AbstractSweepSpec, ConfigError, SweepResult, load_sweep
from flows import sweep as run_sweep
from flows.figures import figure_style, new_figure, save_figure
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
)

from .config import MAX_INIT, NAME, Config
from .data import symmetric_gaussians
from .observables import teacher_observables
from .runs import run_flow

__all__ = ["TeacherSweep", "TeacherSweepConfig", "teacher_sweep", "plot_teacher_sweep"]


def parse_inits(value) -> tuple[float, ...]:
    """Init scales ('1e-4,1' or a sequence): numbers in (0, `MAX_INIT`]."""
    return grid_values(
        value,
        "--init",
        "init",
        to_float,
        lambda s: (
            None
            if 0 < s <= MAX_INIT
            else (
                f"{s} is outside (0, {MAX_INIT:g}]; the paper's regimes are small init (1e-4) and "
                "large init (1.0)."
            )
        ),
    )


def parse_slopes(value) -> tuple[float, ...]:
    """Leaky slopes α ('0.1,0.5' or a sequence): numbers in [0, 1) (0 is ReLU)."""
    return grid_values(
        value,
        "--slope",
        "slope",
        to_float,
        lambda a: (
            None
            if 0 <= a < 1
            else (
                f"α = {a} is outside [0, 1); the leaky-ReLU slope α is 0 (ReLU) or a number "
                "below 1."
            )
        ),
    )


AXES = (
    Axis("init", float, parse_inits, "--init"),
    Axis("slope", float, parse_slopes, "--slope"),
    Axis("seed", int, parse_prng_seeds, "--seeds"),
)
_CHECK = Config()  # the defaults of `flows simulate linear-teacher`


@dataclasses.dataclass(frozen=True)
class TeacherSweepConfig:
    """Settings every point of a linear-teacher sweep shares: `k` neurons per type, output
    weight `v`, `n` points (even) of Gaussians with mean `mean`·e₁, the loss clock to `t1`
    with `n_save` log-spaced saves at `rtol`/`atol`, and β of the NAR/PAR tests."""

    k: int = _CHECK.k
    v: float = _CHECK.v
    n: int = _CHECK.n
    mean: float = _CHECK.mean
    t1: float = _CHECK.t1
    n_save: int = _CHECK.n_save
    rtol: float = _CHECK.rtol
    atol: float = _CHECK.atol
    beta: float = _CHECK.beta

    def __post_init__(self):
        set_ = lambda name, v: object.__setattr__(self, name, v)  # noqa: E731
        set_("k", as_int("--k", self.k, minimum=1))
        set_("v", as_float("--v", self.v, positive=True))
        set_("n", as_int("--n", self.n, minimum=4))
        if self.n % 2:
            raise ConfigError(f"`--n` must be even (points come in ±pairs); got {self.n}.")
        set_("mean", as_float("--mean", self.mean, positive=True))
        set_("t1", as_float("--t1", self.t1, lo=1.0))
        if not self.t1 > 1:
            raise ConfigError(f"`--t1` must be > 1; got {self.t1!r}.")
        set_("n_save", as_int("--n-save", self.n_save, minimum=3))
        set_("rtol", as_tolerance("--rtol", self.rtol, example="1e-6"))
        set_("atol", as_tolerance("--atol", self.atol, example="1e-9"))
        set_("beta", as_float("--beta", self.beta, nonnegative=True))

    def to_dict(self) -> dict:
        return {"experiment": NAME, **dataclasses.asdict(self), "clock": "loss"}

    def experiment_config(self, slope: float, seed: int) -> Config:
        """The `flows check linear-teacher` config of one point."""
        return dataclasses.replace(
            _CHECK,
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
            slope=float(slope),
            seed=int(seed),
        )


CURVES = ("t", "loss", "r_rel", "frac_outside", "par_share", "margin")
FINALS = (
    "r",
    "r_rel",
    "max_angle_w",
    "max_angle_u",
    "frac_outside",
    "max_disagree",
    "par_share",
    "par_share_w",
    "par_share_u",
    "in_par",
    "in_nar",
    "margin",
    "smoothed_margin",
    "sign_agreement",
    "accuracy",
    "teacher_cos",
    "norm_W",
    "l_sum",
)
STATS = (*SOLVE_STATS, "segments")
SCALARS = (
    "loss_initial",
    "loss_final",
    *(f"{k}_final" for k in FINALS),
    "thm51_violations_total",
    *STATS,
    "energy_residual_max",
)


def run_point(cfg: TeacherSweepConfig, init: float, slope: float, seed: int) -> dict:
    """The measurements of one grid point (the variables of `TeacherSweep`)."""
    ecfg = cfg.experiment_config(slope, seed)
    data = symmetric_gaussians(ecfg.n, 2, mean=ecfg.mean, seed=ecfg.seed)
    obs = teacher_observables(teacher=data.teacher, beta=ecfg.beta)
    traj = run_flow(ecfg, data, init, obs)
    o, st = traj.observables, traj.stats
    out = {"t": traj.times, **{k: o[k] for k in CURVES if k != "t"}}
    out.update(loss_initial=o["loss"][0], loss_final=o["loss"][-1])
    out.update({f"{k}_final": np.asarray(o[k])[-1] for k in FINALS})
    out["thm51_violations_total"] = np.sum(o["thm51_violations"])
    out.update({k: st.get(k, math.nan) for k in STATS})
    out["energy_residual_max"] = np.max(o["energy_residual"])
    return point_values(out, CURVES)


@dataclasses.dataclass(frozen=True)
class TeacherSweep(AbstractSweepSpec):
    """The grid init × slope × seed of the linear-teacher flow (each point alone)."""

    config: TeacherSweepConfig = TeacherSweepConfig()

    experiment = NAME
    axes = AXES
    figure_name = "clustering.png"
    brief_fields = ("r_rel_final", "par_share_final", "margin_final")

    def settings(self) -> dict:
        return self.config.to_dict()

    def dims(self) -> dict[str, int]:
        return {"save": self.config.n_save}

    def variables(self) -> dict[str, tuple[str, ...]]:
        return {**{k: ("save",) for k in CURVES}, **{k: () for k in SCALARS}}

    def run_point(self, init: float, slope: float, seed: int) -> dict:
        return run_point(self.config, init, slope, seed)

    def point_label(self, rec) -> str:
        return f"init={rec['init']:g} α={rec['slope']:g} seed={rec['seed']}"

    def describe(self) -> str:
        c = self.config
        return (
            f"loss clock to t1={c.t1:g}, rtol={c.rtol:g}, atol={c.atol:g}, k={c.k}, v={c.v:g}, "
            f"n={c.n}, mean={c.mean:g}"
        )

    def point_text(self, rec) -> str:
        return (
            f"r/‖w̄−ū‖={rec['r_rel_final']:.3g}, PAR share {rec['par_share_final']:.3g}, "
            f"margin {rec['margin_final']:.3g} (wall {rec['wall_s']:.3g}s)"
        )

    def plot(self, sweep_nc: Path, png: Path) -> None:
        plot_teacher_sweep(sweep_nc, png)

    def summary_table(self, records: list[dict]) -> list[str]:
        lines = [
            f"{'init':>8} {'α':>6} {'r/‖w̄−ū‖':>10} {'PAR share':>9} {'margin':>9} "
            f"{'loss(t1)':>9}  ok/n"
        ]
        for (init, slope), rs in grouped(records, "init", "slope"):
            ok = [r for r in rs if r["status"] == "ok"]
            cols = [
                fmt_number(mean_sd([r[k] for r in ok])[0])
                for k in ("r_rel_final", "par_share_final", "margin_final", "loss_final")
            ]
            lines.append(
                f"{init:>8g} {slope:>6g} {cols[0]:>10} {cols[1]:>9} {cols[2]:>9} {cols[3]:>9} "
                f"{len(ok):>3}/{len(rs)}"
            )
        return lines


def teacher_sweep(
    out,
    *,
    init,
    slope,
    seeds=0,
    k: int = _CHECK.k,
    v: float = _CHECK.v,
    n: int = _CHECK.n,
    mean: float = _CHECK.mean,
    t1: float = _CHECK.t1,
    n_save: int = _CHECK.n_save,
    rtol: float = _CHECK.rtol,
    atol: float = _CHECK.atol,
    beta: float = _CHECK.beta,
    **engine,
) -> SweepResult:
    """Run the grid init × slope × seeds of the linear-teacher flow, resumably.

    **Arguments:** `out` (the folder: see `flows._sweep.engine`); the grid `init` ('1e-4,1'),
    `slope` ('0.1,0.5'), `seeds` ('0-2'); the settings of `TeacherSweepConfig`;
    `**engine`: `scheduler`, `connect_timeout`, `plot` (`OUT/clustering.png`), `progress`
    of `flows.sweep`.

    **Returns:** a `SweepResult`. Raises `ConfigError` naming the flag on bad input,
    before anything is written.
    """
    cfg = TeacherSweepConfig(
        k=k, v=v, n=n, mean=mean, t1=t1, n_save=n_save, rtol=rtol, atol=atol, beta=beta
    )
    return run_sweep(
        TeacherSweep(cfg),
        out,
        {"init": init, "slope": slope, "seed": seeds},
        **engine,
    )


@figure_style()
def plot_teacher_sweep(sweep_nc_path, out_png) -> None:
    """r/‖w̄ − ū‖, the PAR share and the normalized margin at t1 against the init scale,
    one line per slope (mean ± sd over seeds, failed points left out); written
    atomically to `out_png`."""
    ds = load_sweep(Path(sweep_nc_path))
    inits, slopes = ds["init"].values.astype(float), ds["slope"].values.astype(float)
    fig, axes = new_figure(1, 3, width="text", height=2.8)
    panels = (
        ("r_rel_final", r"$r/\|\bar w - \bar u\|$ at $t_1$", "log"),
        ("par_share_final", r"PAR share at $t_1$", "linear"),
        ("margin_final", r"normalized margin $\gamma$ at $t_1$", "linear"),
    )
    for ax, (name, label, yscale) in zip(axes, panels, strict=True):
        mean, sd = seed_mean_sd(ds, name)  # (init, slope)
        for j, a in enumerate(slopes):
            ax.errorbar(inits, mean[:, j], yerr=sd[:, j], marker="o", label=f"$\\alpha = {a:g}$")
        ax.set(xscale="log", yscale=yscale, xlabel="init scale", ylabel=label)
        ax.legend()
    c = sweep_settings(ds)
    fig.suptitle(
        f"Leaky-ReLU ±v nets on symmetric Gaussians: k = {c.get('k', '?')}, n = "
        f"{c.get('n', '?')}, t1 = {c.get('t1', '?')} (mean ± sd over seeds)"
    )
    save_figure(fig, out_png, vector=False, atomic=True)
