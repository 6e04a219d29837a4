"""Figures of the linear-teacher experiment: decision boundaries, clustering, the PAR,
the outlier run and SGD."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows import Trajectory

from ..base import new_figure
from .config import Config
from .runs import network_np


def _boundary(ax, fn, lim, title):
    g = np.linspace(-lim, lim, 301)
    xx, yy = np.meshgrid(g, g)
    z = np.asarray(fn(np.stack([xx.ravel(), yy.ravel()], 1))).reshape(xx.shape)
    ax.contourf(
        xx, yy, np.sign(z), levels=[-1.5, -0.5, 0.5, 1.5], colors=["#c6dbef", "#f0f0f0", "#fdd0a2"]
    )
    ax.contour(xx, yy, z, levels=[0], colors="k", linewidths=1)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", title=title)


def plot_boundaries(
    small: Trajectory, data, sol, cfg: Config, path: Path, large: Trajectory | None = None
) -> None:
    """(a) learned boundary (small init), neurons and PAR prediction; (b) learned boundary
    from the large init (Fig. 1: not linear), if given; then leaky vs ReLU clustered."""
    ncol = 4 if large is not None else 3
    fig, axes = new_figure(1, ncol, figsize=(5 * ncol, 5))
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
    ax.scatter(*x[y > 0].T, s=8, c="tab:orange")
    ax.scatter(*x[y < 0].T, s=8, c="tab:blue")
    sc = 0.8 * lim
    for wi in w:
        ax.arrow(0, 0, *(sc * wi / np.linalg.norm(wi)), color="k", width=0.02)
    for ui in u:
        ax.arrow(0, 0, *(sc * ui / np.linalg.norm(ui)), color="gold", width=0.02)
    nrm = np.array([-sol.boundary[1], sol.boundary[0]])
    ax.plot(*np.outer([-lim, lim], nrm).T, "r--", label="PAR boundary")
    ax.plot(*np.stack([[0, 0], sc * sol.w_hat]).T, "m:", lw=2, label="PAR ŵ, û")
    ax.plot(*np.stack([[0, 0], sc * sol.u_hat]).T, "m:", lw=2)
    ax.legend(loc="lower right", fontsize=8)
    if large is not None:
        wl, ul = large.param("w"), large.param("u")
        ax = axes[1]
        _boundary(
            ax,
            lambda p: network_np(wl, ul, p, cfg.v, cfg.slope),
            lim,
            f"(b) learned from large init ({cfg.large_init:g})",
        )
        ax.scatter(*x[y > 0].T, s=8, c="tab:orange")
        ax.scatter(*x[y < 0].T, s=8, c="tab:blue")
        sep = wl.mean(0) - ul.mean(0)
        nrm = np.array([-sep[1], sep[0]]) / np.linalg.norm(sep)
        ax.plot(*np.outer([-lim, lim], nrm).T, "r--", lw=0.8, label="(w̄ − ū)·x = 0")
        ax.legend(loc="lower right", fontsize=8)
    wc, uc = np.array([[1.0, 0.6]]), np.array([[-0.4, 1.0]])
    for ax, a, t in (
        (axes[ncol - 2], 0.3, "leaky ReLU α = 0.3, k = 1"),
        (axes[ncol - 1], 0.0, "ReLU, k = 1 (grey: N = 0)"),
    ):
        _boundary(ax, lambda p, a=a: network_np(wc, uc, p, 1.0, a), 3.0, t)
        ax.plot(
            *np.outer([-3, 3], [1.0 + 0.4, 0.6 - 1.0][::-1] * np.array([-1, 1])).T, "r--", lw=0.8
        )
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_clustering(trajs: dict[str, Trajectory], path: Path) -> None:
    fig, axes = new_figure(1, 4, figsize=(18, 4))
    for label, tr in trajs.items():
        o, t = tr.observables, tr.times
        sel = t > 0
        axes[0].plot(t[sel], o["r_rel"][sel], label=label)
        axes[1].plot(t[sel], o["frac_outside"][sel], label=f"{label} train")
        if "frac_outside_test" in o:
            axes[1].plot(t[sel], o["frac_outside_test"][sel], ls="--", label=f"{label} test")
        axes[2].plot(
            t[sel], np.degrees(np.maximum(o["max_angle_w"], o["max_angle_u"]))[sel], label=label
        )
        axes[3].plot(t[sel], o["smoothed_margin"][sel], label=f"{label} γ̃")
        axes[3].plot(t[sel], o["margin"][sel], ls=":", label=f"{label} γ")
    axes[0].set(xscale="log", yscale="log", xlabel="t", title="r / ‖w̄ − ū‖")
    axes[1].set(xscale="log", xlabel="t", title="share of points outside the linear region")
    axes[2].set(xscale="log", yscale="log", xlabel="t", title="largest angle within a type (°)")
    axes[3].set(xscale="log", xlabel="t", title="smoothed γ̃ and normalized γ margins")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_par(trajs: dict[str, Trajectory], sol, small: Trajectory, path: Path) -> None:
    fig, axes = new_figure(1, 2, figsize=(11, 4.5))
    ax = axes[0]
    for label, tr in trajs.items():
        sel = tr.times > 0
        ax.plot(tr.times[sel], tr.observables["par_share"][sel], label=label)
    ax.set(xscale="log", xlabel="t", ylim=(-0.05, 1.05), title="share of neurons in the PAR")
    ax.legend(fontsize=8)
    ax = axes[1]
    w, u = small.param("w"), small.param("u")
    for vec, c in ((w, "k"), (u, "gold")):
        for vi in vec:
            d = vi / np.linalg.norm(vi)
            ax.plot([0, d[0]], [0, d[1]], color=c, lw=1)
    ax.plot([0, sol.w_hat[0]], [0, sol.w_hat[1]], "r--", lw=2, label="PAR ŵ")
    ax.plot([0, sol.u_hat[0]], [0, sol.u_hat[1]], "b--", lw=2, label="PAR û")
    ax.set(
        aspect="equal",
        xlim=(-1.1, 1.1),
        ylim=(-1.1, 1.1),
        title="learned neuron directions (black w, gold u) vs PAR",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_outlier(traj: Trajectory, data, cfg: Config, path: Path) -> None:
    fig, axes = new_figure(1, 3, figsize=(15, 4.5))
    w, u = traj.param("w"), traj.param("u")
    x, y = data.train.x, data.train.y
    lim = float(np.max(np.abs(x))) * 1.1
    _boundary(
        axes[0], lambda p: network_np(w, u, p, cfg.v, cfg.slope), lim, "(a) boundary and neurons"
    )
    axes[0].scatter(*x[y > 0].T, s=8, c="tab:orange")
    axes[0].scatter(*x[y < 0].T, s=8, c="tab:blue")
    axes[0].scatter(*x[-1], s=80, marker="*", c="red", label="outlier (+)")
    for vec, c in ((w, "k"), (u, "gold")):
        for vi in vec:
            d = 0.8 * lim * vi / np.linalg.norm(vi)
            axes[0].plot([0, d[0]], [0, d[1]], color=c, lw=1)
    axes[0].legend(fontsize=8)
    o, t = traj.observables, traj.times
    sel = t > 0
    axes[1].plot(t[sel], o["max_disagree"][sel])
    axes[1].set(xscale="log", xlabel="t", title="(b) max #points two same-type neurons disagree")
    axes[2].plot(t[sel], o["par_share_w"][sel], label="w neurons")
    axes[2].plot(t[sel], o["par_share_u"][sel], label="u neurons")
    axes[2].set(xscale="log", xlabel="t", ylim=(-0.05, 1.05), title="(c) share in the PAR")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_sgd(rows: list[dict], path: Path) -> None:
    fig, ax = new_figure(figsize=(5.5, 4))
    for n in sorted({r["n"] for r in rows}):
        rr = [r for r in rows if r["n"] == n and r["updates"]]
        ax.plot([1 / r["epsilon"] for r in rr], [r["updates"] for r in rr], "o-", label=f"n={n}")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="1/ε",
        ylabel="updates to loss ε",
        title="SGD (Theorem 4.1)",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
