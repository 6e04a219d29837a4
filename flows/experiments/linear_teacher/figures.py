"""Figures of the linear-teacher experiment: decision boundaries, clustering, the PAR,
the outlier run and SGD."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows import Trajectory
from flows.figures import COLORS, figure_style, new_figure, save_figure

from .config import Config
from .runs import network_np

#: Colours: the two classes (points), the two neuron types, and the PAR prediction.
_POS, _NEG = COLORS["orange"], COLORS["blue"]
_W, _U = COLORS["black"], COLORS["green"]
_PAR, _PAR_DIR = COLORS["vermillion"], COLORS["purple"]
_T = r"time $t$"


def _boundary(ax, fn, lim, title):
    g = np.linspace(-lim, lim, 301)
    xx, yy = np.meshgrid(g, g)
    z = np.asarray(fn(np.stack([xx.ravel(), yy.ravel()], 1))).reshape(xx.shape)
    ax.contourf(
        xx, yy, np.sign(z), levels=[-1.5, -0.5, 0.5, 1.5], colors=["#cfe3f1", "#f4f4f4", "#f8e2b3"]
    )
    ax.contour(xx, yy, z, levels=[0], colors="k", linewidths=0.8)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", xlabel="$x_1$", ylabel="$x_2$")
    ax.set_title(title)
    ax.grid(False)


@figure_style()
def plot_boundaries(
    small: Trajectory, data, sol, cfg: Config, path: Path, large: Trajectory | None = None
) -> None:
    """(a) learned boundary (small init), neurons and PAR prediction; (b) learned boundary
    from the large init (Fig. 1: not linear), if given; then leaky vs ReLU clustered."""
    ncol = 4 if large is not None else 3
    if ncol == 4:
        fig, grid = new_figure(2, 2, width="text", height=6.6)
        axes = grid.ravel()
    else:
        fig, axes = new_figure(1, 3, width="text", height=2.8)
    w, u = small.param("w"), small.param("u")
    x, y = data.train.x, data.train.y
    lim = float(np.max(np.abs(x))) * 1.1
    ax = axes[0]
    _boundary(
        ax,
        lambda p: network_np(w, u, p, cfg.v, cfg.slope),
        lim,
        "(a) learned (small init) and PAR prediction",
    )
    ax.scatter(*x[y > 0].T, s=4, color=_POS, label="$y = +1$")
    ax.scatter(*x[y < 0].T, s=4, color=_NEG, label="$y = -1$")
    sc = 0.8 * lim
    for wi in w:
        ax.arrow(0, 0, *(sc * wi / np.linalg.norm(wi)), color=_W, width=0.01 * lim)
    for ui in u:
        ax.arrow(0, 0, *(sc * ui / np.linalg.norm(ui)), color=_U, width=0.01 * lim)
    nrm = np.array([-sol.boundary[1], sol.boundary[0]])
    ax.plot(*np.outer([-lim, lim], nrm).T, "--", color=_PAR, label="PAR boundary")
    ax.plot(*np.stack([[0, 0], sc * sol.w_hat]).T, ":", color=_PAR_DIR, lw=1.6)
    ax.plot(*np.stack([[0, 0], sc * sol.u_hat]).T, ":", color=_PAR_DIR, lw=1.6)
    ax.plot([], [], ":", color=_PAR_DIR, lw=1.6, label=r"PAR $\hat w$, $\hat u$")
    ax.plot([], [], color=_W, label="$w$ neurons")
    ax.plot([], [], color=_U, label="$u$ neurons")
    ax.legend(loc="lower right", fontsize=5.5)
    if large is not None:
        wl, ul = large.param("w"), large.param("u")
        ax = axes[1]
        _boundary(
            ax,
            lambda p: network_np(wl, ul, p, cfg.v, cfg.slope),
            lim,
            f"(b) learned from large init (sd {cfg.large_init:g})",
        )
        ax.scatter(*x[y > 0].T, s=4, color=_POS)
        ax.scatter(*x[y < 0].T, s=4, color=_NEG)
        sep = wl.mean(0) - ul.mean(0)
        nrm = np.array([-sep[1], sep[0]]) / np.linalg.norm(sep)
        ax.plot(
            *np.outer([-lim, lim], nrm).T,
            "--",
            color=_PAR,
            lw=0.8,
            label=r"$(\bar w - \bar u)\cdot x = 0$",
        )
        ax.legend(loc="lower right", fontsize=5.5)
    wc, uc = np.array([[1.0, 0.6]]), np.array([[-0.4, 1.0]])
    for ax, a, t in (
        (axes[ncol - 2], 0.3, f"({'abcd'[ncol - 2]}) " + r"leaky ReLU $\alpha = 0.3$, $k = 1$"),
        (axes[ncol - 1], 0.0, f"({'abcd'[ncol - 1]}) " + r"ReLU, $k = 1$ (grey: $N = 0$)"),
    ):
        _boundary(ax, lambda p, a=a: network_np(wc, uc, p, 1.0, a), 3.0, t)
        ax.plot(
            *np.outer([-3, 3], [1.0 + 0.4, 0.6 - 1.0][::-1] * np.array([-1, 1])).T,
            "--",
            color=_PAR,
            lw=0.8,
        )
    save_figure(fig, path)


@figure_style()
def plot_clustering(trajs: dict[str, Trajectory], path: Path) -> None:
    """Per run (label → trajectory): r/‖w̄ − ū‖, the share of points outside the linear
    region, the largest angle within a neuron type, and the margins, against t."""
    fig, grid = new_figure(2, 2, width="text", height=4.8)
    axes = grid.ravel()
    for label, tr in trajs.items():
        o, t = tr.observables, tr.times
        sel = t > 0
        (line,) = axes[0].plot(t[sel], o["r_rel"][sel], label=label)
        c = line.get_color()  # one colour per run in every panel
        axes[1].plot(t[sel], o["frac_outside"][sel], color=c, label=f"{label} train")
        if "frac_outside_test" in o:
            axes[1].plot(t[sel], o["frac_outside_test"][sel], "--", color=c, label=f"{label} test")
        angle = np.degrees(np.maximum(o["max_angle_w"], o["max_angle_u"]))
        axes[2].plot(t[sel], angle[sel], color=c, label=label)
        axes[3].plot(t[sel], o["smoothed_margin"][sel], color=c, label=rf"{label} $\tilde\gamma$")
        axes[3].plot(t[sel], o["margin"][sel], ":", color=c, label=rf"{label} $\gamma$")
    axes[0].set(xscale="log", yscale="log", xlabel=_T, ylabel=r"$r\,/\,\|\bar w - \bar u\|$")
    axes[0].set_title("(a) distance from the linear predictor")
    axes[1].set(xscale="log", xlabel=_T, ylabel="share of points")
    axes[1].set_title("(b) points outside the linear region")
    axes[2].set(xscale="log", yscale="log", xlabel=_T, ylabel="angle (degrees)")
    axes[2].set_title("(c) largest angle within a neuron type")
    axes[3].set(xscale="log", xlabel=_T, ylabel=r"margin $\tilde\gamma$, $\gamma$")
    axes[3].set_title(r"(d) smoothed $\tilde\gamma$ and normalized $\gamma$ margins")
    for ax in axes:
        ax.legend()
    save_figure(fig, path)


@figure_style()
def plot_par(trajs: dict[str, Trajectory], sol, small: Trajectory, path: Path) -> None:
    """The share of neurons in the PAR against t, and the learned neuron directions of
    the small-init run against the PAR prediction."""
    fig, axes = new_figure(1, 2, width="text", height=3.0)
    ax = axes[0]
    for label, tr in trajs.items():
        sel = tr.times > 0
        ax.plot(tr.times[sel], tr.observables["par_share"][sel], label=label)
    ax.set(xscale="log", xlabel=_T, ylabel="share of neurons", ylim=(-0.05, 1.05))
    ax.set_title("(a) neurons in the PAR")
    ax.legend()
    ax = axes[1]
    w, u = small.param("w"), small.param("u")
    for vec, c in ((w, _W), (u, _U)):
        for vi in vec:
            d = vi / np.linalg.norm(vi)
            ax.plot([0, d[0]], [0, d[1]], color=c, lw=0.8)
    ax.plot([0, sol.w_hat[0]], [0, sol.w_hat[1]], "--", color=_PAR, lw=1.6, label=r"PAR $\hat w$")
    ax.plot(
        [0, sol.u_hat[0]], [0, sol.u_hat[1]], "--", color=_PAR_DIR, lw=1.6, label=r"PAR $\hat u$"
    )
    ax.plot([], [], color=_W, label="learned $w_i$")
    ax.plot([], [], color=_U, label="learned $u_i$")
    ax.set(
        aspect="equal",
        xlim=(-1.1, 1.1),
        ylim=(-1.1, 1.1),
        xlabel="direction, 1st coordinate",
        ylabel="direction, 2nd coordinate",
    )
    ax.set_title("(b) learned neuron directions vs PAR")
    ax.legend()
    save_figure(fig, path)


@figure_style()
def plot_outlier(traj: Trajectory, data, cfg: Config, path: Path) -> None:
    """The run with an outlier: its boundary and neurons, the largest disagreement of
    two same-type neurons, and the share of neurons in the PAR, against t."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = new_figure(1, 3, width="text", height=2.6)
    w, u = traj.param("w"), traj.param("u")
    x, y = data.train.x, data.train.y
    lim = float(np.max(np.abs(x))) * 1.1
    _boundary(
        axes[0], lambda p: network_np(w, u, p, cfg.v, cfg.slope), lim, "(a) boundary and neurons"
    )
    axes[0].scatter(*x[y > 0].T, s=4, color=_POS)
    axes[0].scatter(*x[y < 0].T, s=4, color=_NEG)
    axes[0].scatter(
        *x[-1], s=50, marker="*", color=_PAR, edgecolors="k", lw=0.4, label="outlier ($+$)"
    )
    for vec, c in ((w, _W), (u, _U)):
        for vi in vec:
            d = 0.8 * lim * vi / np.linalg.norm(vi)
            axes[0].plot([0, d[0]], [0, d[1]], color=c, lw=0.8)
    axes[0].legend(fontsize=6)
    o, t = traj.observables, traj.times
    sel = t > 0
    axes[1].plot(t[sel], o["max_disagree"][sel], color=COLORS["black"])
    axes[1].set(xscale="log", xlabel=_T, ylabel="number of points")
    axes[1].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[1].set_title("(b) most points two same-type\nneurons disagree on")
    axes[2].plot(t[sel], o["par_share_w"][sel], label="$w$ neurons")
    axes[2].plot(t[sel], o["par_share_u"][sel], label="$u$ neurons")
    axes[2].set(xscale="log", xlabel=_T, ylabel="share of neurons", ylim=(-0.05, 1.05))
    axes[2].set_title("(c) neurons in the PAR")
    axes[2].legend()
    save_figure(fig, path)


@figure_style()
def plot_sgd(rows: list[dict], path: Path) -> None:
    """SGD updates to reach loss ε against 1/ε, per sample size n (Theorem 4.1)."""
    fig, ax = new_figure(width="column")
    for n in sorted({r["n"] for r in rows}):
        rr = [r for r in rows if r["n"] == n and r["updates"]]
        ax.plot(
            [1 / r["epsilon"] for r in rr], [r["updates"] for r in rr], "o-", label=f"$n = {n}$"
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"$1/\varepsilon$ (target loss $\varepsilon$)",
        ylabel=r"SGD updates to reach loss $\varepsilon$",
        title="SGD (Theorem 4.1)",
    )
    ax.legend()
    save_figure(fig, path)
