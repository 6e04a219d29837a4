"""Figures of `flows check bias-plateau`: §4's four-class run, the interpolation curves
with Theorem 1's interval, the trends over depth, δ and bias, and the final biases
against the learning order."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..base import mpl_rcparams, new_figure
from .checks import checked_interval, theorem1_of
from .config import Config
from .runs import DeepRun, HomogeneousRun

__all__ = ["plot_four_class", "plot_interpolation", "plot_trends", "plot_bias_order"]


def plot_four_class(run: HomogeneousRun, cfg: Config, path: Path) -> None:
    """Biases and W_ii(t) of §4's example (full flow solid, reduced ODE dashed)."""
    o, t = run.traj.observables, run.traj.times
    fig, axes = new_figure(1, 3, figsize=(16, 4.2))
    cols = mpl_rcparams()["axes.prop_cycle"].by_key()["color"]
    for i in range(run.k):
        c = cols[i % len(cols)]
        lab = f"class {i} (W_ii(0) = {run.w0[i]:.3g})"
        axes[0].plot(t, o["b"][:, i], color=c, label=lab)
        axes[0].plot(t, run.b_red[:, i], "--", color=c, lw=1)
        axes[1].plot(t, o["W_diag"][:, i], color=c)
        axes[1].plot(t, run.w_red[:, i], "--", color=c, lw=1)
        for ax in axes[:2]:
            if math.isfinite(run.t_learned[i]):
                ax.axvline(run.t_learned[i], color=c, ls=":", lw=0.8)
    axes[0].set(xlabel="t", ylabel="b_i(t)", title="(a) biases (dashed: reduced ODE)")
    axes[0].legend(fontsize=8)
    axes[1].set(xlabel="t", ylabel="W_ii(t)", yscale="log", title="(b) diagonal weights")
    axes[2].plot(t, o["offdiag_max"] / cfg.delta, label="max_{i≠j}|W_ij| / δ")
    axes[2].plot(t, o["noise_corr_max"], label="max |⟨W_i, ξ_x⟩|")
    axes[2].plot(t, o["train_error"], label="training error")
    axes[2].set(xlabel="t", title="(c) off-diagonal weights, noise correlation, error")
    axes[2].legend(fontsize=8)
    fig.suptitle(
        f"r-homogeneous net, k = {run.k}, r = {cfg.r}, δ = {cfg.delta}, σ = {cfg.sigma} "
        "(dotted: learning times)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_interpolation(runs: list[DeepRun], path: Path) -> None:
    """γ_error and γ_loss of each deep run, with Theorem 1's interval shaded."""
    fig, axes = new_figure(1, 2, figsize=(12, 4.2))
    for run in runs:
        (line,) = axes[0].plot(run.curve.alphas, run.curve.error, "o-", ms=3, label=run.label)
        axes[1].plot(run.curve.alphas, run.curve.loss, "o-", ms=3, color=line.get_color())
        th = theorem1_of(run)
        if th is not None and th.nonempty:
            lo, hi = checked_interval(run, th)
            if lo < hi:
                axes[0].axvspan(lo, hi, color=line.get_color(), alpha=0.15)
    axes[0].set(xlabel="α", ylabel="γ_error(α)", title="error along θ^[α] (shaded: Thm 1)")
    axes[1].set(xlabel="α", ylabel="γ_loss(α) (mean CE)", title="loss along θ^[α]")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_trends(rows: list[dict], cfg: Config, path: Path) -> None:
    """Mean ± sd interpolation error curves at matched loss vs depth (output scale fixed;
    per-layer scale fixed when run), vs δ, and with / without bias: solid the path from
    θ(0) (the paper's), dashed from 0 (depth panels); excluded runs left out."""
    alphas = np.linspace(0.0, 1.0, cfg.n_alpha)
    panels = [("depth", "depth", "r = {}", f"vs depth (output scale δ = {cfg.deep_delta:g})")]
    if any(r["family"] == "depth-layer" for r in rows):
        panels.append(
            (
                "depth-layer",
                "depth",
                "r = {}",
                f"vs depth (per-layer scale {cfg.trend_layer_scale:g})",
            )
        )
    panels += [
        ("delta", "delta", "δ = {:g}", "vs init scale δ"),
        ("bias", "bias", "bias = {}", "with / without output bias"),
    ]
    fig, axes = new_figure(1, len(panels), figsize=(5.3 * len(panels), 4.2))
    for ax, (family, key, fmt, title) in zip(axes, panels, strict=True):
        fam = [r for r in rows if r["family"] == family and not r.get("excluded")]
        for val in sorted({r[key] for r in fam}, key=float):
            sel = [r for r in fam if r[key] == val]
            curves = np.array([r["error_curve"] for r in sel])
            m, sd = curves.mean(0), curves.std(0)
            (line,) = ax.plot(alphas, m, label=f"{fmt.format(val)} (n={len(sel)})")
            ax.fill_between(alphas, m - sd, m + sd, color=line.get_color(), alpha=0.2)
            if family.startswith("depth"):
                z = np.array([r["error_curve_zero"] for r in sel]).mean(0)
                ax.plot(alphas, z, "--", color=line.get_color(), lw=1)
        ax.set(xlabel="α", ylabel="γ_error(α)", title=title)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"deep {cfg.sweep_activation} nets on synthetic data at matched loss (mean CE ≤ "
        f"{cfg.trend_ce:g}, error 0); mean ± sd over seeds; dashed: path from 0"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_bias_order(main: HomogeneousRun, rows: list[dict], path: Path) -> None:
    """Final bias against the learning rank (rank 0 = first learned = largest W_ii(0))."""
    fig, ax = new_figure(figsize=(6, 4.2))
    for r in rows:
        if "rank_by_w0" in r:
            ax.plot(
                r["rank_by_w0"], r["b_T"], "o", alpha=0.6, label=f"k={r['k']}, seed={r['seed']}"
            )
    rank = np.argsort(np.argsort(-main.w0))
    ax.plot(rank, main.traj.observables["b"][-1], "k*", ms=12, label="main run")
    ax.set(
        xlabel="learning rank (by W_ii(0))", ylabel="b_i(T)", title="final bias vs learning order"
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
