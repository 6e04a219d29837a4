"""Figures of `flows check deep-linear`: mode strengths and loss, flow against closed form."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows import Trajectory
from flows.figures import COLORS, VECTOR_SUFFIX, figure_style, new_figure, save_figure

from .observables import Theory, mode_strengths

__all__ = ["plot_modes", "plot_loss"]


def _vector(path: Path) -> bool:
    """Whether the experiment declares the SVG copy of the figure `path` among its outputs
    (`experiment.FILES`: `OutputDir` refuses a file it does not declare)."""
    from .experiment import FILES  # imported here: `experiment` imports this module

    return Path(path).with_suffix(VECTOR_SUFFIX).name in FILES


@figure_style()
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
    fig, axes = new_figure(1, 2, width="text")
    ax = axes[0]
    for a in range(theory.k):
        (line,) = ax.plot(t, u[:, a] / s[a], lw=1.6, label=f"$s_\\alpha = {s[a]:.3g}$")
        ax.plot(t, u_hat[:, a] / s[a], "--", color=COLORS["black"], lw=0.8)
        if random is not None:
            ax.plot(random.times, mode_strengths(random)[:, a] / s[a], ":", color=line.get_color())
        th = theory.half_times()[a]
        if np.isfinite(th):
            ax.axvline(th, color=line.get_color(), lw=0.6, alpha=0.6)
    ax.plot([], [], "--", color=COLORS["black"], lw=0.8, label="closed form")
    if random is not None:
        ax.plot([], [], ":", color="0.4", label="random init")
    ax.set(
        xlabel=r"time $t$", ylabel=r"mode strength $u_\alpha(t)\,/\,s_\alpha$", ylim=(-0.05, 1.1)
    )
    ax.set_title(r"(a) mode strengths (lines: predicted $t_{1/2}$)")
    ax.legend()
    ax = axes[1]
    for a in range(theory.k):
        dev = np.abs(u[:, a] - u_hat[:, a]) / np.abs(u_hat[:, a])
        ax.semilogy(t, np.maximum(dev, 1e-18), lw=0.8, label=f"$s_\\alpha = {s[a]:.3g}$")
    ax.set(
        xlabel=r"time $t$",
        ylabel=r"relative deviation $|u_\alpha - \hat u_\alpha|\,/\,\hat u_\alpha$",
    )
    ax.set_title("(b) flow vs closed form")
    ax.legend()
    fig.suptitle(title)
    save_figure(fig, path, vector=_vector(path))


@figure_style()
def plot_loss(
    balanced: Trajectory, random: Trajectory | None, theory: Theory, path: Path, title: str = ""
) -> None:
    """Loss of the flow (balanced and random init) against the closed-form L(t), with the
    least-squares floor; right: the relative deviation from the closed form."""
    t = balanced.times
    loss_hat = theory.loss(t)
    floor = float(theory.loss(np.array([1e12]))[0])
    fig, axes = new_figure(1, 2, width="text")
    ax = axes[0]
    ax.semilogy(t, balanced.loss, lw=1.6, label="flow, balanced init")
    ax.semilogy(t, loss_hat, "--", color=COLORS["black"], lw=0.8, label="closed form")
    if random is not None:
        ax.semilogy(random.times, random.loss, ":", lw=1.4, label="flow, random init")
    if floor > 0:
        ax.axhline(floor, color=COLORS["grey"], lw=0.8, label="least-squares floor")
    for th in theory.half_times():
        if np.isfinite(th):
            ax.axvline(th, color="0.75", lw=0.6)
    ax.set(
        xlabel=r"time $t$",
        ylabel=r"loss $L = \frac{1}{2n}\sum\|y - W_2 W_1 x\|^2$",
    )
    ax.set_title(r"(a) loss (grey lines: predicted $t_{1/2}$)")
    ax.legend()
    ax = axes[1]
    dev = np.abs(balanced.loss - loss_hat) / loss_hat
    ax.semilogy(t, np.maximum(dev, 1e-18), color=COLORS["black"], lw=0.8)
    ax.set(xlabel=r"time $t$", ylabel=r"relative deviation $|L - \hat L|\,/\,\hat L$")
    ax.set_title("(b) flow vs closed form")
    fig.suptitle(title)
    save_figure(fig, path, vector=_vector(path))
