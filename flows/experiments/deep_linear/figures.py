"""Figures of `flows check deep-linear`: mode strengths and loss, flow against closed form."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows import Trajectory

from ..base import new_figure
from .observables import Theory, mode_strengths

__all__ = ["plot_modes", "plot_loss"]


def plot_modes(
    balanced: Trajectory, random: Trajectory | None, theory: Theory, path: Path, title: str = ""
) -> None:
    """u_α(t)/s_α of the flow from the balanced init (solid) and the closed form (dashed),
    the random init (dotted), and the predicted t½ (vertical lines); right: the flow's
    relative deviation from the closed form per mode."""
    s = theory.s
    t = balanced.times
    u = mode_strengths(balanced)
    u_hat = theory.strengths(t)
    fig, axes = new_figure(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    for a in range(theory.k):
        (line,) = ax.plot(t, u[:, a] / s[a], lw=2, label=f"s = {s[a]:.3g}")
        ax.plot(t, u_hat[:, a] / s[a], "--", color="k", lw=0.9)
        if random is not None:
            ax.plot(random.times, mode_strengths(random)[:, a] / s[a], ":", color=line.get_color())
        th = theory.half_times()[a]
        if np.isfinite(th):
            ax.axvline(th, color=line.get_color(), lw=0.6, alpha=0.6)
    ax.plot([], [], "--", color="k", lw=0.9, label="closed form")
    if random is not None:
        ax.plot([], [], ":", color="0.4", label="random init")
    ax.set(xlabel="t", ylabel="u_α(t) / s_α", title="(a) mode strengths", ylim=(-0.05, 1.1))
    ax.legend(fontsize=8)
    ax = axes[1]
    for a in range(theory.k):
        dev = np.abs(u[:, a] - u_hat[:, a]) / np.abs(u_hat[:, a])
        ax.semilogy(t, np.maximum(dev, 1e-18), label=f"s = {s[a]:.3g}")
    ax.set(xlabel="t", ylabel="|u − û| / û", title="(b) flow vs closed form, relative")
    ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_loss(
    balanced: Trajectory, random: Trajectory | None, theory: Theory, path: Path, title: str = ""
) -> None:
    """Loss of the flow (balanced and random init) against the closed-form L(t), with the
    least-squares floor; right: the relative deviation from the closed form."""
    t = balanced.times
    loss_hat = theory.loss(t)
    floor = float(theory.loss(np.array([1e12]))[0])
    fig, axes = new_figure(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    ax.semilogy(t, balanced.loss, lw=2, label="flow, balanced init")
    ax.semilogy(t, loss_hat, "k--", lw=0.9, label="closed form")
    if random is not None:
        ax.semilogy(random.times, random.loss, ":", lw=1.5, label="flow, random init")
    if floor > 0:
        ax.axhline(floor, color="0.6", lw=0.8, label="least-squares floor")
    for th in theory.half_times():
        if np.isfinite(th):
            ax.axvline(th, color="0.8", lw=0.6)
    ax.set(xlabel="t", ylabel="L = (1/2n) Σ‖y − W₂W₁x‖²", title="(a) loss")
    ax.legend(fontsize=8)
    ax = axes[1]
    dev = np.abs(balanced.loss - loss_hat) / loss_hat
    ax.semilogy(t, np.maximum(dev, 1e-18))
    ax.set(xlabel="t", ylabel="|L − L̂| / L̂", title="(b) flow vs closed form, relative")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
