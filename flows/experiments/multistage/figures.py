"""Figures of `flows check multistage`: stages, K(t), descent time."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from flows import Trajectory
from reduced import multistage as ms

from ..base import new_figure
from .config import Config
from .data import Units

__all__ = ["plot_stages", "plot_K", "plot_descent_time"]


def plot_stages(traj: Trajectory, units: Units, st: dict, path: Path, title: str = "") -> None:
    """The stage figure: loss with T_p, T_d, T_sp; ‖a‖ and ‖w‖; relative W₂."""
    o = traj.observables
    tau = units.tau(traj.times)
    sel = tau > 0
    fig, axes = new_figure(1, 3, figsize=(15, 4))
    ax = axes[0]
    ax.plot(tau[sel], o["loss"][sel], color="k", lw=1.5)
    for key, col, label in (
        ("T_p", "red", "T_p"),
        ("T_d", "gold", "T_d"),
        ("T_sp", "green", "T_sp"),
    ):
        tq = st.get(key, float("nan"))
        if math.isfinite(tq) and tau[sel][0] <= tq <= tau[-1]:
            ax.plot(
                [tq],
                [np.interp(tq, tau, o["loss"])],
                "*",
                ms=14,
                color=col,
                label=label,
                markeredgecolor="k",
            )
    for key in ("loss_plateau_end", "loss_descent_end", "loss_next_descent"):
        tq = st.get(key, float("nan"))
        if math.isfinite(tq):
            ax.axvline(tq, color="0.6", ls=":", lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="τ = ‖E[f x]‖·t",
        ylabel="loss R",
        title="(a) loss (dotted: loss-only detector)",
    )
    ax.legend()
    ax = axes[1]
    ax.plot(tau[sel], o["norm_a"][sel], label="‖a‖")
    ax.plot(tau[sel], o["norm_w"][sel], label="‖w‖", ls="--")
    ax.set(xscale="log", yscale="log", xlabel="τ", title="(b) weight norms")
    ax.legend()
    ax = axes[2]
    ax.plot(tau[sel], o["w2_rel"][sel])
    ax.set(xscale="log", yscale="log", xlabel="τ", title="(c) W₂(ρ_|a|, ρ_‖w‖) / W₂(ρ_|a|)")
    for a in axes[1:]:
        for key, col in (("T_p", "red"), ("T_d", "gold"), ("T_sp", "green")):
            tq = st.get(key, float("nan"))
            if math.isfinite(tq):
                a.axvline(tq, color=col, lw=1)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


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
    fig, axes = new_figure(1, 2, figsize=(11, 4))
    ax = axes[0]
    ax.plot(tau[sel], o["K_hat"][sel], "k", lw=2, label="full flow K̂")
    ax.plot(tau[sel], np.clip(k_lin, 0, 2), "b:", label="linearized (eq. 23)")
    if math.isfinite(T_p) and T_p <= tau[-1]:
        k_tp = float(np.interp(T_p, tau, o["K_hat"]))
        ts_ = tau[sel & (tau >= T_p)]
        ax.plot(ts_, np.asarray(ms.logistic_K(ts_, k_tp, T_p)), "r--", label="logistic from T_p")
        ax.axvline(T_p, color="red", lw=0.8)
    if math.isfinite(T_d):
        ax.axvline(T_d, color="gold", lw=0.8)
    ax.set(xlabel="τ", ylabel="K̂ = K·s²/‖b‖", ylim=(-0.05, 1.3), title="(a) K(t)")
    ax.legend()
    ax = axes[1]
    ax.plot(tau[sel], o["K"][sel] / o["Kp"][sel], "k")
    ax.axhline(0.5, color="0.5", ls=":")
    ax.set(xlabel="τ", ylabel="K/K′", title="(b) K/K′ → 1/2")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_descent_time(rows: list[dict], cfg: Config, path: Path) -> None:
    fig, axes = new_figure(1, 2, figsize=(11, 4))
    for alpha in cfg.sweep_alpha:
        pts = [(r["m"], r["T_d"]) for r in rows if r["alpha"] == alpha]
        m_ = np.array([p[0] for p in pts])
        t_ = np.array([p[1] for p in pts])
        (line,) = axes[0].plot(np.log(m_), t_, "o", label=f"α = {alpha}")
        lm = np.log(np.array(sorted(set(m_))))
        if np.all(np.isfinite(t_)):
            c = np.mean(t_ - (2 * alpha - 1) / 2 * np.log(m_))
            axes[0].plot(lm, (2 * alpha - 1) / 2 * lm + c, "-", color=line.get_color(), lw=0.8)
    axes[0].set(xlabel="ln m", ylabel="T_d (τ)", title="T_d vs ln m; lines: slope (2α−1)/2")
    axes[0].legend()
    m_top = max(cfg.sweep_m)
    pts = [(r["alpha"], r["T_d"]) for r in rows if r["m"] == m_top]
    axes[1].plot([p[0] for p in pts], [p[1] for p in pts], "o")
    a_ = np.array(cfg.sweep_alpha)
    tds = np.array([np.mean([p[1] for p in pts if p[0] == a]) for a in a_])
    if np.all(np.isfinite(tds)):
        c = np.mean(tds - math.log(m_top) * a_)
        axes[1].plot(a_, math.log(m_top) * a_ + c, "-", lw=0.8, label="slope ln m")
        axes[1].legend()
    axes[1].set(xlabel="α", ylabel="T_d (τ)", title=f"T_d vs α at m = {m_top}")
    fig.suptitle("Descent time on Assumption 1–2 data")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
