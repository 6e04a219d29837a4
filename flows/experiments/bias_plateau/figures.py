"""Figures of `flows check bias-plateau`: §4's four-class run, the interpolation curves
with Theorem 1's interval, the trends over depth, δ and bias, and the final biases
against the learning order."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from flows.figures import COLORS, CYCLE, figure_style, new_figure, save_figure

from .checks import checked_interval, theorem1_of
from .config import Config
from .runs import DeepRun, HomogeneousRun

__all__ = ["plot_four_class", "plot_interpolation", "plot_trends", "plot_bias_order"]

_ALPHA = r"interpolation weight $\alpha$"


@figure_style()
def plot_four_class(run: HomogeneousRun, cfg: Config, path: Path) -> None:
    """Biases and W_ii(t) of §4's example (full flow solid, reduced ODE dashed)."""
    o, t = run.traj.observables, run.traj.times
    fig, axes = new_figure(1, 3, width="text", height=2.9)
    cols = CYCLE
    for i in range(run.k):
        c = cols[i % len(cols)]
        lab = rf"class {i}, $W_{{ii}}(0) = {run.w0[i]:.3g}$"
        axes[0].plot(t, o["b"][:, i], color=c, label=lab)
        axes[0].plot(t, run.b_red[:, i], "--", color=c, lw=0.9)
        axes[1].plot(t, o["W_diag"][:, i], color=c)
        axes[1].plot(t, run.w_red[:, i], "--", color=c, lw=0.9)
        for ax in axes[:2]:
            if math.isfinite(run.t_learned[i]):
                ax.axvline(run.t_learned[i], color=c, ls=":", lw=0.8)
    axes[0].set(xlabel=r"time $t$", ylabel=r"bias $b_i(t)$")
    axes[0].set_title("(a) biases (dashed: reduced ODE)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4)
    axes[1].set(xlabel=r"time $t$", ylabel=r"diagonal weight $W_{ii}(t)$", yscale="log")
    axes[1].set_title("(b) diagonal weights")
    axes[2].plot(t, o["offdiag_max"] / cfg.delta, label=r"$\max_{i\neq j}\,|W_{ij}|\,/\,\delta$")
    axes[2].plot(t, o["noise_corr_max"], label=r"$\max_{i,x}\,|\langle W_i, \xi_x\rangle|$")
    axes[2].plot(t, o["train_error"], label="training error")
    axes[2].set(xlabel=r"time $t$", ylabel="value (dimensionless)")
    axes[2].set_title("(c) off-diagonals, noise, error")
    axes[2].legend()
    fig.suptitle(
        rf"$r$-homogeneous net, $k = {run.k}$, $r = {cfg.r}$, $\delta = {cfg.delta}$, "
        rf"$\sigma = {cfg.sigma}$ (dotted: learning times)"
    )
    save_figure(fig, path)


@figure_style()
def plot_interpolation(runs: list[DeepRun], path: Path) -> None:
    """γ_error and γ_loss of each deep run, with Theorem 1's interval shaded."""
    fig, axes = new_figure(1, 2, width="text")
    for run in runs:
        (line,) = axes[0].plot(run.curve.alphas, run.curve.error, "o-", ms=2, label=run.label)
        axes[1].plot(run.curve.alphas, run.curve.loss, "o-", ms=2, color=line.get_color())
        th = theorem1_of(run)
        if th is not None and th.nonempty:
            lo, hi = checked_interval(run, th)
            if lo < hi:
                axes[0].axvspan(lo, hi, color=line.get_color(), alpha=0.15)
    axes[0].set(xlabel=_ALPHA, ylabel=r"training error $\gamma_{\mathrm{error}}(\alpha)$")
    axes[0].set_title(r"(a) error along $\theta^{[\alpha]}$ (shaded: Thm 1)")
    axes[1].set(
        xlabel=_ALPHA, ylabel=r"mean cross-entropy $\gamma_{\mathrm{loss}}(\alpha)$", yscale="log"
    )
    axes[1].set_title(r"(b) loss along $\theta^{[\alpha]}$")
    axes[0].legend()
    save_figure(fig, path)


@figure_style()
def plot_trends(rows: list[dict], cfg: Config, path: Path) -> None:
    """Mean ± sd interpolation error curves at matched loss vs depth (output scale fixed;
    per-layer scale fixed when run), vs δ, and with / without bias: solid the path from
    θ(0) (the paper's), dashed from 0 (depth panels); excluded runs left out."""
    panels = [
        ("depth", "depth", "$r = {}$", rf"vs depth (output scale $\delta = {cfg.deep_delta:g}$)")
    ]
    if any(r["family"] == "depth-layer" for r in rows):
        panels.append(
            (
                "depth-layer",
                "depth",
                "$r = {}$",
                f"vs depth (per-layer scale {cfg.trend_layer_scale:g})",
            )
        )
    panels += [
        ("delta", "delta", r"$\delta = {:g}$", r"vs init scale $\delta$"),
        ("bias", "bias", "bias = {}", "with / without output bias"),
    ]
    nrows, ncols = (2, 2) if len(panels) == 4 else (1, len(panels))
    fig, axes = new_figure(nrows, ncols, width="text", height=2.3 * nrows + 0.5, squeeze=False)
    for i, (ax, (family, key, fmt, title)) in enumerate(zip(axes.flat, panels, strict=True)):
        fam = [r for r in rows if r["family"] == family and not r.get("excluded")]
        for val in sorted({r[key] for r in fam}, key=float):
            sel = [r for r in fam if r[key] == val]
            curves = np.array([r["error_curve"] for r in sel])
            alphas = np.linspace(0.0, 1.0, curves.shape[1])  # the trend runs' own grid
            m, sd = curves.mean(0), curves.std(0)
            (line,) = ax.plot(alphas, m, label=f"{fmt.format(val)} ($n = {len(sel)}$)")
            # an error lies in [0, 1]: the band is clipped to it
            lo, hi = np.clip(m - sd, 0.0, 1.0), np.clip(m + sd, 0.0, 1.0)
            ax.fill_between(alphas, lo, hi, color=line.get_color(), alpha=0.2)
            if family.startswith("depth"):
                z = np.array([r["error_curve_zero"] for r in sel]).mean(0)
                ax.plot(alphas, z, "--", color=line.get_color(), lw=0.9)
        ax.set(xlabel=_ALPHA, ylabel=r"training error $\gamma_{\mathrm{error}}(\alpha)$")
        ax.set_title(f"({'abcd'[i]}) {title}")
        ax.legend()
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(
        f"deep {cfg.sweep_activation} nets on synthetic data at matched loss (mean CE "
        rf"$\leq {cfg.trend_ce:g}$, error 0)"
        "\nmean ± sd over seeds; dashed: path from 0"
    )
    save_figure(fig, path)


@figure_style()
def plot_bias_order(main: HomogeneousRun, rows: list[dict], path: Path) -> None:
    """Final bias against the learning rank (rank 0 = first learned = largest W_ii(0))."""
    fig, ax = new_figure(width="column", height=2.9)
    for r in rows:
        if "rank_by_w0" in r:
            ax.plot(
                r["rank_by_w0"],
                r["b_T"],
                "o",
                alpha=0.7,
                label=f"$k = {r['k']}$, seed {r['seed']}",
            )
    rank = np.argsort(np.argsort(-main.w0))
    ax.plot(
        rank, main.traj.observables["b"][-1], "*", color=COLORS["black"], ms=8, label="main run"
    )
    ax.set(xlabel=r"learning rank (by $W_{ii}(0)$; 0: first)", ylabel=r"final bias $b_i(T)$")
    ax.set_title("final bias vs learning order")
    ax.legend(fontsize=6)
    save_figure(fig, path)
