"""`flows sweep multistage`: the descent-time grid m × α × seed through the sweep engine.

The settings and the grid are in `sweep_config`; the batched point computation, the spec,
the entry point and the figure are here (together they define one file format, which
folders written before the engine's sweep existed must still match).

Runs of equal shape (one width m) are integrated together by `simulate_batch` (vmap).
Each point records (see `flows._sweep.engine` for the folder, resume and integrity rules):

- `OUT/points/m<m>_alpha<α>_seed<seed>.nc`: the curves `tau(save)`, `t(save)`,
  `loss(save)`, `K_hat(save)` on `n_save` save times equally spaced on [0, τ₁] with
  τ₁ = T_d,leading(m, α) + margin, and every scalar of `SCALARS` (T_p, T_d, T_sp, the
  loss-only detector's stage ends, the horizon, solver statistics, the accuracy
  certificate).
- `OUT/sweep.nc`: the combined Dataset on coordinates `m`, `alpha`, `seed` (and `save`),
  so `tau(m, alpha, seed, save)` is stored beside `loss` and `K_hat`.
- `OUT/descent_time.png`: T_d against α (per m) and against ln m (per α) with fitted
  slopes beside the theory (`plot_descent_sweep`).

The settings saved in the manifest (`SweepConfig.to_dict`): target, data, n, solver (and
the algorithm behind its name), rtol, atol, error norm, β, n_save, margin, max_steps,
vector field and dtype.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:  # only annotations: the simulate command does not import xarray
    import xarray as xr

from flows import (
    AbstractSweepSpec,
    ConfigError,
    SweepResult,
    assumption_data,
    load_sweep,
    make_problem,
    moments,
    paper_data,
)
from flows import sweep as run_sweep
from flows.figures import figure_style, new_figure, save_figure
from flows.models import TwoLayer
from flows.plugin import (
    combine_records,
    error_text,
    fmt_number,
    grouped,
    mean_sd,
    sweep_settings,
)
from reduced import multistage as ms

from .config import NAME
from .data import Units
from .runs import stage_times
from .sweep_config import (
    ATOL_INIT_FRACTION,
    AXES,
    MIN_INIT_STD,
    SweepConfig,
    _is_int,
    batch_key,
    check_grid,
    parse_alphas,
    parse_grid,
    parse_widths,
    point_id,
    upgrade_config,
)

__all__ = [
    "SCALARS",
    "CURVES",
    "SweepConfig",
    "upgrade_config",
    "MIN_INIT_STD",
    "ATOL_INIT_FRACTION",
    "AXES",
    "parse_widths",
    "parse_alphas",
    "point_id",
    "batch_key",
    "MultistageSweep",
    "DescentSweepResult",
    "descent_sweep",
    "parse_grid",
    "run_points",
    "plot_descent_sweep",
]

SCALARS = (
    "T_p",
    "T_d",
    "T_sp",
    "loss_plateau_end",
    "loss_descent_end",
    "loss_next_descent",
    "tau1",
    "t1",
    "t_reached",
    "vf_evals",
    "steps",
    "accepted_steps",
    "rejected_steps",
    "wall_s",
    "batch_wall_s",
    "batch_size",
    "compile_s",
    "energy_residual_max",
    "loss_initial",
    "loss_final",
)
CURVES = ("tau", "t", "loss", "K_hat")


# ---------------------------------------------------------------------------------------
# Computing grid points (runs on the client in-process, or on Dask workers)


@functools.lru_cache(maxsize=8)
def _data_and_units(target: str, data: str, n: int):
    ds = paper_data(target, n=n) if data == "paper" else assumption_data(target, n=n)
    return ds, Units.of(moments(ds))


def horizon(cfg: SweepConfig, m: int, alpha: float) -> tuple[float, float]:
    """(τ₁, t₁): the horizon T_d,leading(m, α) + margin in τ, and in physical time."""
    _, units = _data_and_units(cfg.target, cfg.data, cfg.n)
    tau1 = ms.descent_time_leading(m, alpha) + cfg.margin
    return tau1, float(units.t(tau1))


def descent_observables(problem, theta, t):
    """What a descent-time point needs at each save time: K̂ = K·s²/‖b‖ (T_d) — the loss
    and the energy are always recorded. `flows.multistage_observables` would add a
    gradient, a sort and the linearized closed form per save time, which on the sweep's
    401 saves cost more than the solve itself."""
    x, y = problem.x, problem.y
    n, d = x.shape
    b = x.T @ y / n
    s2 = jnp.trace(x.T @ x / n) / d
    b_norm = jnp.linalg.norm(b)
    K = jnp.sum(theta["a"] * (theta["w"] @ (b / b_norm)))
    return {"K_hat": K * s2 / b_norm}


def _make_point_problem(cfg: SweepConfig, m: int, alpha: float, seed: int):
    data, _ = _data_and_units(cfg.target, cfg.data, cfg.n)
    model = TwoLayer(m=int(m), d=data.d, alpha=float(alpha))
    return make_problem(model, data, key=int(seed), vector_field=cfg.vector_field, dtype=cfg.dtype)


def _blank_record(cfg: SweepConfig, m: int, alpha: float, seed: int) -> dict:
    rec = {"id": point_id(m, alpha, seed), "m": int(m), "alpha": float(alpha), "seed": int(seed)}
    rec.update({k: float("nan") for k in SCALARS})
    rec.update({k: np.full(cfg.n_save, np.nan) for k in CURVES})
    rec.update(status="failed", error="", note="")
    try:
        rec["tau1"], rec["t1"] = horizon(cfg, m, alpha)
    except Exception:  # noqa: BLE001 - the record says what failed later
        pass
    return rec


def _fill_from_trajectory(rec: dict, traj, cfg: SweepConfig, units) -> None:
    st = traj.stats
    o = traj.observables

    def finite(a):
        a = np.asarray(a, dtype=np.float64)
        return np.where(np.isfinite(a), a, np.nan)

    rec["t"] = finite(traj.times)
    rec["tau"] = finite(units.tau(traj.times))
    rec["loss"] = finite(o["loss"])
    rec["K_hat"] = finite(o["K_hat"])
    for k in ("t_reached", "steps", "accepted_steps", "rejected_steps", "vf_evals"):
        rec[k] = float(st[k])
    for k in ("wall_s", "batch_wall_s", "batch_size", "compile_s"):
        rec[k] = float(st.get(k, float("nan")))
    res = finite(o["energy_residual"])
    rec["energy_residual_max"] = float(np.nanmax(res)) if np.isfinite(res).any() else float("nan")
    rec["loss_initial"] = float(rec["loss"][0])
    rec["loss_final"] = float(rec["loss"][-1])
    if st["result"] != "successful":
        return
    times = stage_times(traj, units, rec["m"], rec["alpha"], cfg.beta)
    for k in ("T_p", "T_d", "T_sp", "loss_plateau_end", "loss_descent_end", "loss_next_descent"):
        rec[k] = float(times[k])


def run_points(config: dict, specs: Sequence[tuple[int, float, int]], pad_to: int = 0) -> list:
    """Compute grid points `specs` = [(m, α, seed), …] of one width as one vmapped batch.

    Plain data in, plain data out (runs on Dask workers): `config` is
    `SweepConfig.to_dict()`; returns one record (dict of floats, strings and NumPy curves)
    per spec, in order. `pad_to` pads the batch with copies of its last member (results
    discarded) so that batches of one width share one compiled solve. A point that cannot
    be built, whose solve fails, or whose analysis raises is recorded as failed with its
    error; the others are unaffected.
    """
    from flows import simulate_batch

    cfg = SweepConfig.from_dict(config)
    _, units = _data_and_units(cfg.target, cfg.data, cfg.n)
    records = [_blank_record(cfg, *spec) for spec in specs]
    built = []  # (index, problem, t1)
    for i, (m, alpha, seed) in enumerate(specs):
        try:
            _, t1 = horizon(cfg, m, alpha)
            built.append((i, _make_point_problem(cfg, m, alpha, seed), t1))
        except Exception as exc:  # noqa: BLE001 - recorded for this point only
            records[i]["error"] = error_text(exc)
    if not built:
        return records
    run = built + [built[-1]] * max(0, pad_to - len(built))
    kwargs: dict[str, Any] = dict(
        n_save=cfg.n_save,
        solver=cfg.solver,
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=descent_observables,
        max_steps=cfg.max_steps,
        error_norm=cfg.error_norm,
    )
    try:
        outs = simulate_batch([p for _, p, _ in run], t1s=[t for _, _, t in run], **kwargs)
    except Exception:  # noqa: BLE001 - isolate the culprit: run the members one by one
        outs = []
        for _, p, t1 in built:
            try:
                outs.extend(simulate_batch([p], t1s=[t1], **kwargs))
            except Exception as exc:  # noqa: BLE001
                outs.append(exc)
    for (i, _, _), out in zip(built, outs, strict=False):
        rec = records[i]
        try:
            traj = getattr(out, "trajectory", out)
            if traj is not None and not isinstance(traj, BaseException):
                _fill_from_trajectory(rec, traj, cfg, units)
            if isinstance(out, BaseException):
                rec["error"] = error_text(out)
                continue
            rec["status"] = "ok"
            if not math.isfinite(rec["T_d"]):
                rec["note"] = (
                    f"T_d not reached within the horizon τ₁ = {rec['tau1']:.4g} "
                    f"(K̂ stayed below 1 − β = {1 - cfg.beta:g}); increase the margin"
                )
        except Exception as exc:  # noqa: BLE001
            rec["status"] = "failed"
            rec["error"] = error_text(exc)
    return records


# ---------------------------------------------------------------------------------------
# The spec


_DESCRIPTIONS = {
    "T_p": "predicted plateau end (Table 1), in τ",
    "T_d": "measured descent time: first τ ≥ T_p with 1 − K̂ ≤ β (NaN: not reached)",
    "T_sp": "secondary-plateau end T_d + ln m/(40β) (eq. 63), in τ",
    "loss_plateau_end": "loss-only detector: end of the initial plateau, in τ",
    "loss_descent_end": "loss-only detector: end of the descent, in τ",
    "loss_next_descent": "loss-only detector: start of the next descent, in τ",
    "tau1": "horizon in τ: T_d,leading(m, α) + margin",
    "t1": "horizon in physical time",
    "wall_s": "batch wall time / batch size (s)",
    "energy_residual_max": "max |L(0) − L(t) − ∫‖∇L‖²| (accuracy certificate)",
    "tau": "save times of this point in τ = ‖E[f x]‖·t",
    "t": "save times of this point in physical time",
    "loss": "loss R at the save times",
    "K_hat": "K̂ = K·s²/‖b‖ at the save times",
}


@dataclasses.dataclass(frozen=True)
class MultistageSweep(AbstractSweepSpec):
    """The descent-time grid m × α × seed of the multi-stage paper (`config`: the shared
    settings; `batch_size`: the most runs of one width per vmapped solve)."""

    config: SweepConfig = SweepConfig()
    batch_size: int = 8
    _settings: dict = dataclasses.field(init=False, repr=False, compare=False)

    experiment = NAME
    axes = AXES
    figure_name = "descent_time.png"
    brief_fields = ("T_d", "tau1")

    def __post_init__(self):
        if not (_is_int(self.batch_size) and self.batch_size >= 1):
            raise ConfigError(f"`batch_size` must be an integer ≥ 1; got {self.batch_size!r}.")
        # computed here, on the client: a Dask worker checks it against its own solvers
        object.__setattr__(self, "_settings", self.config.to_dict())

    def settings(self) -> dict:
        return dict(self._settings)

    def upgrade_settings(self, saved: dict) -> dict:
        return upgrade_config(saved)

    def dims(self) -> dict[str, int]:
        return {"save": self.config.n_save}

    def variables(self) -> dict[str, tuple[str, ...]]:
        return {**{k: ("save",) for k in CURVES}, **{k: () for k in SCALARS}}

    def batch_key(self, point: tuple) -> int:
        return batch_key(point)

    def point_id(self, point: tuple) -> str:
        return point_id(*point)

    def point_label(self, rec) -> str:
        return f"m={rec['m']} α={rec['alpha']:g} seed={rec['seed']}"

    def blank_record(self, point: tuple) -> dict:
        return _blank_record(self.config, *point)

    def run_batch(self, points: list[tuple], pad_to: int = 0) -> list[dict]:
        return run_points(self._settings, points, pad_to)

    def check(self, points: list[tuple]) -> None:
        check_grid(self.config, points, self.batch_size)
        _check_points_buildable(self.config, points)

    def describe(self) -> str:
        c = self.config
        norm = "" if c.error_norm == "rms" else f", error norm {c.error_norm}"
        return (
            f"{c.solver}, rtol={c.rtol:g}, atol={c.atol:g}{norm}, {c.target}, {c.data} data, "
            f"n={c.n}"
        )

    def point_text(self, rec) -> str:
        if math.isfinite(rec["T_d"]):
            return f"T_d={rec['T_d']:.4g} (wall {rec['wall_s']:.3g}s)"
        return f"T_d not reached by τ₁={rec['tau1']:.4g} (wall {rec['wall_s']:.3g}s)"

    def combine(self, records: Iterable[dict]) -> xr.Dataset:
        ds = combine_records(self, records)
        for k, text in _DESCRIPTIONS.items():
            ds[k].attrs["description"] = text
        c = self.config
        ds.attrs.update(
            solver=c.solver,
            rtol=c.rtol,
            atol=c.atol,
            error_norm=c.error_norm,
            target=c.target,
            data=c.data,
            n=c.n,
            beta=c.beta,
            layout="curves on each point's own save times: tau(m, alpha, seed, save)",
        )
        return ds

    def plot(self, sweep_nc: Path, png: Path) -> dict:
        return plot_descent_sweep(sweep_nc, png)

    def summary_table(self, records: list[dict]) -> list[str]:
        lines = [f"{'m':>8} {'α':>6} {'T_p':>8} {'T_d mean':>9} {'± sd':>7}  reached/n"]
        for (m_, a_), rs in grouped(records, "m", "alpha"):
            vals = np.array([r["T_d"] for r in rs if r["status"] == "ok"], dtype=float)
            mean, sd = mean_sd(vals)
            t_p = next((r["T_p"] for r in rs if math.isfinite(r["T_p"])), float("nan"))
            lines.append(
                f"{m_:>8} {a_:>6g} {fmt_number(t_p, 4):>8} {fmt_number(mean, 4):>9} "
                f"{fmt_number(sd, 2):>7} {np.isfinite(vals).sum():>6}/{len(rs)}"
            )
        return lines

    def summary_notes(self, records: list[dict], plotted) -> list[str]:
        lines = []
        not_reached = _not_reached(records)
        if not_reached:
            lines.append(
                f"T_d not reached within the horizon ({len(not_reached)}; NaN, not a failure):"
            )
            lines += [
                f"  m={r['m']} α={r['alpha']:g} seed={r['seed']} (τ₁ = {r['tau1']:.4g})"
                for r in not_reached
            ]
        if plotted:
            for a_, s in plotted["T_d_vs_ln_m"].items():
                lines.append(
                    f"slope of T_d vs ln m at α = {a_:g}: {_slope_text(s['fit'])} "
                    f"(theory (2α−1)/2 = {s['theory']:.4g})"
                )
            for m_, s in plotted["T_d_vs_alpha"].items():
                lines.append(
                    f"slope of T_d vs α at m = {m_}: {_slope_text(s['fit'])} "
                    f"(theory ln m = {s['theory']:.4g})"
                )
        return lines


def _not_reached(records) -> list:
    return [r for r in records if r["status"] == "ok" and not math.isfinite(r["T_d"])]


def _check_points_buildable(cfg: SweepConfig, grid) -> None:
    """`ConfigError` now, before the folder is touched, for settings that every point would
    fail on: the narrowest point's problem is built (data, model, dtype) and its solver
    settings go through the check `simulate` makes (e.g. an rtol that float32 cannot
    meet). A manifest written for such a sweep would lock the folder against the corrected
    command."""
    from flows.plugin import resolve_solver_name

    m, alpha, seed = min(grid, key=lambda p: p[0])
    problem = _make_point_problem(cfg, m, alpha, seed)
    resolve_solver_name(cfg.solver, cfg.rtol, problem.n_params, problem.dtype)


def combined_dataset(records: Iterable[dict], cfg: SweepConfig) -> xr.Dataset:
    """The labelled results of `records` on coordinates (m, alpha, seed[, save])."""
    return MultistageSweep(cfg).combine(records)


# ---------------------------------------------------------------------------------------
# Entry point


@dataclasses.dataclass
class DescentSweepResult(SweepResult):
    """`SweepResult` plus the points whose T_d was not reached within the horizon and the
    fitted slopes of the figure (None without it)."""

    not_reached: list[dict] = dataclasses.field(default_factory=list)
    slopes: dict | None = None


def descent_sweep(
    out,
    *,
    m,
    alpha,
    seeds,
    experiment: str = NAME,
    target: str = "f1",
    data: str = "paper",
    n: int = 1000,
    solver: str = "tsit5",
    rtol: float = 1e-6,
    atol: float = 1e-9,
    beta: float = 0.1,
    n_save: int = 401,
    margin: float = 8.0,
    max_steps: int = 200_000,
    vector_field: str = "auto",
    dtype: str = "float64",
    error_norm: str = "rms",
    batch_size: int = 8,
    **engine,
) -> DescentSweepResult:
    """Run the descent-time grid m × α × seeds of the multi-stage experiment, resumably.

    **Arguments:**
    - `out`: output folder (see `flows._sweep.engine` and this module's docstring for its
      layout). A folder holding a sweep with the same settings is resumed or extended:
      completed points are skipped, failed ones retried. Different settings are refused
      (`ConfigError`).
    - `m`, `alpha`, `seeds`: the grid, as sequences or strings ('1000,5000', '0.75,1',
      seeds '0-2' or '0,1,2'). Widths ≥ 2, α > 1/2, seeds ≥ 0, no duplicates.
    - `target`, `data`, `n`, `solver`, `rtol`, `atol`, `beta`, `n_save`, `margin`,
      `max_steps`, `vector_field` ('auto', 'autodiff' or 'fused'), `dtype` ('float64' or
      'float32'), `error_norm` ('rms' or 'max'): see `SweepConfig`.
    - `batch_size`: the most runs per vmapped batch (runs of one width are batched).
    - `**engine`: `scheduler`, `connect_timeout`, `plot` (`OUT/descent_time.png`),
      `progress` of `flows.sweep`.

    **Returns:** a `DescentSweepResult` (`.ok` is False when a point of this grid failed;
    failed points are recorded with their error, the others complete). Raises
    `ConfigError` on bad input before anything is written.
    """
    cfg = SweepConfig(
        experiment=experiment,
        target=target,
        data=data,
        n=n,
        solver=solver,
        rtol=rtol,
        atol=atol,
        beta=beta,
        n_save=n_save,
        margin=margin,
        max_steps=max_steps,
        vector_field=vector_field,
        dtype=dtype,
        error_norm=error_norm,
    )
    spec = MultistageSweep(cfg, batch_size)
    res = run_sweep(
        spec,
        out,
        {"m": m, "alpha": alpha, "seed": seeds},
        **engine,
    )
    fields = {f.name: getattr(res, f.name) for f in dataclasses.fields(SweepResult)}
    return DescentSweepResult(**fields, not_reached=_not_reached(res.points), slopes=res.plotted)


# ---------------------------------------------------------------------------------------
# Figure


def _slope_text(fit: float) -> str:
    return f"{fit:.4g}" if math.isfinite(fit) else "n/a (needs two values)"


def _fit(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2 or np.ptp(x[ok]) == 0:
        return float("nan")
    return float(np.polyfit(x[ok], y[ok], 1)[0])


@figure_style()
def plot_descent_sweep(sweep_nc_path, out_png) -> dict:
    """The descent-time figure of a sweep: T_d (mean ± sd over seeds, failed points and
    T_d not reached left out) against α for each m, and against ln m for each α, with
    least-squares slopes of the means in the legends beside the theory (ln m and
    (2α − 1)/2). Written atomically to `out_png` (PNG only: the sweep folder holds only
    the files the sweep engine declares).

    **Returns:** {"T_d_vs_alpha": {m: {"fit", "theory"}}, "T_d_vs_ln_m": {α: {"fit",
    "theory"}}}; a fit is NaN with fewer than two finite means.
    """
    ds = load_sweep(Path(sweep_nc_path))
    ok = ds["status"] == "ok"
    td = ds["T_d"].where(ok)
    mean = td.mean("seed", skipna=True).values  # (m, alpha)
    count = np.isfinite(td.values).sum(axis=2)
    sd = np.where(count > 1, td.std("seed", ddof=1, skipna=True).values, 0.0)
    ms_ = ds["m"].values.astype(int)
    alphas = ds["alpha"].values.astype(float)
    fig, axes = new_figure(1, 2, width="text", height=3.4)
    slopes: dict = {"T_d_vs_alpha": {}, "T_d_vs_ln_m": {}}
    ax = axes[0]
    for i, m_ in enumerate(ms_):
        fit, theory = _fit(alphas, mean[i]), math.log(int(m_))
        slopes["T_d_vs_alpha"][int(m_)] = {"fit": fit, "theory": theory}
        ax.errorbar(
            alphas,
            mean[i],
            yerr=sd[i],
            marker="o",
            label=f"$m = {m_}$: slope {_slope_text(fit)} (theory $\\ln m = {theory:.3g}$)",
        )
    ax.set(xlabel=r"init exponent $\alpha$", ylabel=r"descent time $T_d$ (in $\tau$)")
    ax.set_title(r"(a) $T_d$ vs $\alpha$ (mean ± sd over seeds)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=6)
    ax = axes[1]
    lnm = np.log(ms_.astype(float))
    for j, a_ in enumerate(alphas):
        fit, theory = _fit(lnm, mean[:, j]), (2 * float(a_) - 1) / 2
        slopes["T_d_vs_ln_m"][float(a_)] = {"fit": fit, "theory": theory}
        ax.errorbar(
            lnm,
            mean[:, j],
            yerr=sd[:, j],
            marker="o",
            label=(
                f"$\\alpha = {a_:g}$: slope {_slope_text(fit)} "
                f"(theory $(2\\alpha-1)/2 = {theory:.3g}$)"
            ),
        )
    ax.set(xlabel=r"$\ln m$ ($m$: width)", ylabel=r"descent time $T_d$ (in $\tau$)")
    ax.set_title(r"(b) $T_d$ vs $\ln m$ (mean ± sd over seeds)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=6)
    cfg = sweep_settings(ds)
    fig.suptitle(
        f"Descent time: {cfg.get('target', '?')}, {cfg.get('data', '?')} data, "
        f"$n$ = {cfg.get('n', '?')}, $\\beta$ = {cfg.get('beta', '?')}"
    )
    save_figure(fig, out_png, vector=False, atomic=True)
    return slopes
