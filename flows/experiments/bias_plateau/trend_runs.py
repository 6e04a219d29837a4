"""The trend sweep of `flows check bias-plateau`: deep nets over depth, init scale δ and
with or without the output bias (`trend_settings`), each trained to matched loss and
interpolated from θ(0) and from 0 (`trend_point`), over the trend seeds (`trend_sweep`);
`trend_checks` judges the rows."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import Dataset
from flows.models.deep import DeepFCN

from .checks import theorem1_of
from .config import NAME, Config
from .interpolation import interpolate, plateau, zeros_like_params
from .observables import matched_loss
from .runs import synthetic_deep_data, train_deep

__all__ = ["trend_model", "trend_point", "trend_settings", "trend_sweep"]


def trend_model(
    cfg: Config, data: Dataset, depth: int, scale: float, *, per_layer: bool, bias: bool = True
) -> DeepFCN:
    """The trend sweep's net: `scale` is the output scale δ (each layer × δ^{1/r}, the
    paper's FCN convention) or, with `per_layer`, each layer's scale s (output scale s^r)."""
    return DeepFCN(
        d=data.d,
        k=cfg.k,
        depth=depth,
        width=cfg.deep_width,
        activation=cfg.sweep_activation,
        bias=bias,
        delta=scale**depth if per_layer else scale,
    )


def trend_settings(cfg: Config) -> list[tuple[str, int, float, bool, bool]]:
    """(family, depth, scale, per_layer, bias) of every trend setting (see `Config`)."""
    out = [("depth", r_, cfg.deep_delta, False, True) for r_ in cfg.sweep_depths]
    if cfg.trend_layer_scale is not None:
        out += [("depth-layer", r_, cfg.trend_layer_scale, True, True) for r_ in cfg.sweep_depths]
    out += [("delta", cfg.deep_depth, dl, False, True) for dl in cfg.sweep_deltas]
    out += [("bias", cfg.deep_depth, cfg.deep_delta, False, b) for b in (True, False)]
    return out


def trend_point(
    cfg: Config,
    depth: int,
    scale: float,
    seed: int,
    *,
    per_layer: bool = False,
    bias: bool = True,
    learning_rate: float | None = None,
) -> dict:
    """One run of the trend sweep, stopped at matched loss (`matched_loss(cfg.trend_ce)`,
    horizon `cfg.trend_t_max`), with the error and (one-sided) loss plateaus of both
    interpolation paths (from θ(0) and from 0), Theorem 1's quantities, and whether the
    run is excluded (`excluded`: not at the matched loss; `gap_excluded`: no usable bias
    gap, for the error plateau), with the reason."""
    data = synthetic_deep_data(cfg, seed)
    model = trend_model(cfg, data, depth, scale, per_layer=per_layer, bias=bias)
    run = train_deep(
        model,
        data,
        seed=seed,
        t1=cfg.trend_t_max,
        method=cfg.sweep_method,
        cfg=cfg,
        learning_rate=learning_rate,
        stop=matched_loss(cfg.trend_ce),
        n_save=cfg.trend_n_save,
        n_alpha=cfg.trend_n_alpha,
    )
    o, st = run.traj.observables, run.traj.stats
    ce, err = float(o["mean_ce"][-1]), float(o["train_error"][-1])
    reached = bool(ce <= cfg.trend_ce and err == 0.0)
    zero = interpolate(
        dataclasses.replace(model, delta=1.0),  # δ only draws θ(0): one compile for all δ
        data.x,
        data.y,
        zeros_like_params(run.theta_0),
        run.theta_T,
        n_alpha=cfg.trend_n_alpha,
    )
    th = theorem1_of(run)
    excluded = (
        ""
        if reached
        else f"not at the matched loss by T = {cfg.trend_t_max:g} (mean CE {ce:.3g}, "
        f"training error {err:.3g})"
    )
    gap_excluded = ""
    if th is not None and not th.nonempty:
        gap_excluded = (
            f"bias gap too small for Theorem 1: Δ_min = {th.delta_min:.3g} leaves its interval "
            f"empty (δ/Δ_min = {th.alpha_1:.3g} ≥ α₂ = (Δ_min/2V_max^r)^(1/(r−1)) = "
            f"{th.alpha_2:.3g}), so the theorem predicts no plateau"
        )
    nan = math.nan
    return {
        "depth": depth,
        "scale": scale,
        "per_layer": per_layer,
        "delta": model.delta,
        "bias": bias,
        "seed": seed,
        "length": plateau(run.curve, kind="error", tol=cfg.plateau_tol).length,
        "length_zero": plateau(zero, kind="error", tol=cfg.plateau_tol).length,
        "loss_length": plateau(run.curve, kind="loss-floor", tol=cfg.loss_plateau_tol).length,
        "loss_length_zero": plateau(zero, kind="loss-floor", tol=cfg.loss_plateau_tol).length,
        "end": plateau(run.curve, kind="error", tol=cfg.plateau_tol).end,
        "t_stop": float(run.traj.times[-1]),
        "stopped": getattr(st, "stopped_at", None) is not None,
        "mean_ce": ce,
        "final_error": err,
        "reached": reached,
        "excluded": excluded,
        "gap_excluded": gap_excluded,
        "v0_max": max(
            float(np.linalg.norm(np.asarray(run.theta_0[n]), ord=2)) for n in model.layer_names
        ),
        "error_curve": run.curve.error.tolist(),
        "loss_curve": run.curve.loss.tolist(),
        "error_curve_zero": zero.error.tolist(),
        "loss_curve_zero": zero.loss.tolist(),
        "alpha_1": th.alpha_1 if th is not None else nan,
        "alpha_2": th.alpha_2 if th is not None else nan,
        "delta_min": th.delta_min if th is not None else nan,
        "vf_evals": st["vf_evals"],
    }


def trend_sweep(
    cfg: Config, *, progress: bool = False, learning_rate: float | None = None
) -> list[dict]:
    """The trend runs (`trend_settings` × `trend_seeds`, each by `trend_point`; GD at
    `learning_rate`, default `cfg.gd_lr`, when `cfg.sweep_method` is 'gd'). Rows carry
    their `family`; a run two families share is computed once."""
    rows, cache = [], {}
    for family, depth, scale, per_layer, bias in trend_settings(cfg):
        for seed in cfg.trend_seeds:
            delta = scale**depth if per_layer else scale
            key = (depth, delta, bias, seed)
            if key not in cache:
                cache[key] = trend_point(
                    cfg,
                    depth,
                    scale,
                    seed,
                    per_layer=per_layer,
                    bias=bias,
                    learning_rate=learning_rate,
                )
                if progress:
                    c = cache[key]
                    print(
                        f"  [{NAME}] trend depth={depth} δ={delta:.3g} bias={bias} seed={seed}: "
                        f"plateau {c['length']:.3g} (from 0: {c['length_zero']:.3g}), stop at "
                        f"t = {c['t_stop']:.4g}"
                        + (f" — excluded: {c['excluded']}" if c["excluded"] else ""),
                        flush=True,
                    )
            rows.append({"family": family, **cache[key], "scale": scale, "per_layer": per_layer})
    return rows
