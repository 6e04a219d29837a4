"""Figures of `flows check multistage`: stages, K(t), descent time."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from flows import Trajectory
from flows.figures import COLORS, figure_style, new_figure, save_figure
from reduced import multistage as ms

from .config import Config
from .data import Units

__all__ = ["plot_stages", "plot_K", "plot_descent_time"]

#: The times of the stages, and their colours in every panel.
_STAGE_COLORS = {"T_p": COLORS["vermillion"], "T_d": COLORS["orange"], "T_sp": COLORS["green"]}
_STAGE_LABELS = {"T_p": r"$T_p$", "T_d": r"$T_d$", "T_sp": r"$T_{sp}$"}
#: The rescaled time τ = ‖E[f x]‖·t, as an axis label.
_TAU = r"rescaled time $\tau = \|\mathbb{E}[f\,x]\|\,t$"


@figure_style()
def plot_stages(traj: Trajectory, units: Units, st: dict, path: Path, title: str = "") -> None:
    """The stage figure: loss with T_p, T_d, T_sp; ‖a‖ and ‖w‖; relative W₂."""
    o = traj.observables
    tau = units.tau(traj.times)
    sel = tau > 0
    fig, axes = new_figure(1, 3, width="text", height=2.5)
    ax = axes[0]
    ax.plot(tau[sel], o["loss"][sel], color=COLORS["black"], lw=1.2)
    for key, col in _STAGE_COLORS.items():
        label = _STAGE_LABELS[key]
        tq = st.get(key, float("nan"))
        if math.isfinite(tq) and tau[sel][0] <= tq <= tau[-1]:
            ax.plot(
                [tq],
                [np.interp(tq, tau, o["loss"])],
                "*",
                ms=9,
                color=col,
                label=label,
                markeredgecolor="k",
                markeredgewidth=0.5,
            )
    for key in ("loss_plateau_end", "loss_descent_end", "loss_next_descent"):
        tq = st.get(key, float("nan"))
        if math.isfinite(tq):
            ax.axvline(tq, color="0.6", ls=":", lw=0.8)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=_TAU,
        ylabel=r"loss $R(\theta(t))$",
        title="(a) loss (dotted: loss-only detector)",
    )
    ax.legend()
    ax = axes[1]
    ax.plot(tau[sel], o["norm_a"][sel], label=r"$\|a\|$")
    ax.plot(tau[sel], o["norm_w"][sel], label=r"$\|w\|$", ls="--")
    ax.set(xscale="log", yscale="log", xlabel=r"$\tau$", ylabel="weight norm")
    ax.set_title("(b) weight norms")
    ax.legend()
    ax = axes[2]
    ax.plot(tau[sel], o["w2_rel"][sel], color=COLORS["black"])
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"$\tau$",
        ylabel=r"$W_2(\rho_{|a|}, \rho_{\|w\|})\,/\,W_2(\rho_{|a|})$",
        title=r"(c) relative $W_2$ distance",
    )
    for a in axes[1:]:
        for key, col in _STAGE_COLORS.items():
            tq = st.get(key, float("nan"))
            if math.isfinite(tq):
                a.axvline(tq, color=col, lw=0.8)
    fig.suptitle(title)
    save_figure(fig, path)


@figure_style()
def plot_K(traj: Trajectory, units: Units, st: dict, path: Path, title: str = "") -> None:
    """K̂(t) of the full flow against the logistic law from T_p and the linearized flow."""
    o = traj.observables
    tau = units.tau(traj.times)
    T_p, T_d = st["T_p"], st["T_d"]
    a0, w0 = traj.param("a", 0), traj.param("w", 0)
    upper = T_d + 3 if math.isfinite(T_d) else tau[-1]
    sel = tau <= min(upper, tau[-1])
    # linearized closed form (eq. 23) from θ(0), with growth rate 1 in τ
    u0 = w0[:, 0] if w0.shape[1] == 1 else w0 @ np.eye(w0.shape[1])[0]
    a_l = 0.5 * np.outer(np.exp(tau[sel]), a0 + u0) + 0.5 * np.outer(np.exp(-tau[sel]), a0 - u0)
    u_l = 0.5 * np.outer(np.exp(tau[sel]), a0 + u0) - 0.5 * np.outer(np.exp(-tau[sel]), a0 - u0)
    k_lin = np.sum(a_l * u_l, axis=1) / units.k_inf
    fig, axes = new_figure(1, 2, width="text")
    ax = axes[0]
    ax.plot(tau[sel], o["K_hat"][sel], color=COLORS["black"], lw=1.6, label=r"full flow $\hat K$")
    ax.plot(tau[sel], np.clip(k_lin, 0, 2), ":", color=COLORS["blue"], label="linearized (eq. 23)")
    if math.isfinite(T_p) and T_p <= tau[-1]:
        k_tp = float(np.interp(T_p, tau, o["K_hat"]))
        ts_ = tau[sel & (tau >= T_p)]
        ax.plot(
            ts_,
            np.asarray(ms.logistic_K(ts_, k_tp, T_p)),
            "--",
            color=_STAGE_COLORS["T_p"],
            label=r"logistic from $T_p$",
        )
        ax.axvline(T_p, color=_STAGE_COLORS["T_p"], lw=0.8)
    if math.isfinite(T_d):
        ax.axvline(T_d, color=_STAGE_COLORS["T_d"], lw=0.8)
    ax.set(xlabel=_TAU, ylabel=r"$\hat K = K s^2/\|b\|$", ylim=(-0.05, 1.3))
    ax.set_title(r"(a) $\hat K(\tau)$ (lines: $T_p$, $T_d$)")
    ax.legend()
    ax = axes[1]
    ax.plot(tau[sel], o["K"][sel] / o["Kp"][sel], color=COLORS["black"])
    ax.axhline(0.5, color="0.5", ls=":")
    ax.set(xlabel=_TAU, ylabel=r"$K/K'$", title=r"(b) $K/K' \to 1/2$")
    fig.suptitle(title)
    save_figure(fig, path)


@figure_style()
def plot_descent_time(rows: list[dict], cfg: Config, path: Path) -> None:
    """T_d against ln m for each α (lines: the theory's slope (2α − 1)/2 through the mean)
    and against α at the largest m (line: slope ln m)."""
    fig, axes = new_figure(1, 2, width="text")
    for alpha in cfg.sweep_alpha:
        pts = [(r["m"], r["T_d"]) for r in rows if r["alpha"] == alpha]
        m_ = np.array([p[0] for p in pts])
        t_ = np.array([p[1] for p in pts])
        (line,) = axes[0].plot(np.log(m_), t_, "o", label=rf"$\alpha = {alpha:g}$")
        lm = np.log(np.array(sorted(set(m_))))
        if np.all(np.isfinite(t_)):
            c = np.mean(t_ - (2 * alpha - 1) / 2 * np.log(m_))
            axes[0].plot(lm, (2 * alpha - 1) / 2 * lm + c, "-", color=line.get_color(), lw=0.8)
    axes[0].set(xlabel=r"$\ln m$ ($m$: width)", ylabel=r"descent time $T_d$ (in $\tau$)")
    axes[0].set_title(r"(a) $T_d$ vs $\ln m$; lines: slope $(2\alpha-1)/2$")
    axes[0].legend()
    m_top = max(cfg.sweep_m)
    pts = [(r["alpha"], r["T_d"]) for r in rows if r["m"] == m_top]
    axes[1].plot([p[0] for p in pts], [p[1] for p in pts], "o")
    a_ = np.array(cfg.sweep_alpha)
    tds = np.array([np.mean([p[1] for p in pts if p[0] == a]) for a in a_])
    if np.all(np.isfinite(tds)):
        c = np.mean(tds - math.log(m_top) * a_)
        axes[1].plot(a_, math.log(m_top) * a_ + c, "-", lw=0.8, label=r"slope $\ln m$")
        axes[1].legend()
    axes[1].set(xlabel=r"init exponent $\alpha$", ylabel=r"descent time $T_d$ (in $\tau$)")
    axes[1].set_title(rf"(b) $T_d$ vs $\alpha$ at $m = {m_top}$")
    fig.suptitle("Descent time on Assumption 1–2 data")
    save_figure(fig, path)
