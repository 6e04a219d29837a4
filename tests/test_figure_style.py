"""The toolkit's figure style: every paper figure is built in one style (colour-blind-safe
cycle, paper-column widths, constrained layout, mathtext labels), every axis is labelled,
each figure is written as PNG and, next to it, as SVG, and the user's matplotlib settings
are left as they were. Fast: figures from small synthetic inputs, no flow solves."""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest
from matplotlib.colors import to_hex

from flows._sweep import engine as _sweep
from flows.experiments import base
from flows.experiments.bias_plateau import config as bp_config
from flows.experiments.bias_plateau import figures as bp_figures
from flows.experiments.deep_linear import figures as dl_figures
from flows.experiments.linear_teacher import figures as lt_figures
from flows.experiments.multistage import config as ms_config
from flows.experiments.multistage import figures as ms_figures
from flows.experiments.multistage import sweep as msweep

GREEK = re.compile("[\u0370-\u03ff\u2016\u2080-\u209f]")  # Greek, ‖, subscript digits


def _rc() -> dict:
    return {k: str(v) for k, v in matplotlib.rcParams.items()}


def _outside_math(text: str) -> str:
    return re.sub(r"\$[^$]*\$", "", text)


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions save, captured as they go through `save_figure`."""
    seen = []
    real = base.save_figure

    def capture(fig, path, **kw):
        seen.append(fig)
        return real(fig, path, **kw)

    for mod in (ms_figures, bp_figures, dl_figures, lt_figures, msweep):
        monkeypatch.setattr(mod, "save_figure", capture)
    return seen


def assert_publishable(fig) -> None:
    """Every visible axes has both axis labels; labels, titles and legend entries carry
    symbols only as mathtext (no bare TeX, no Unicode Greek outside $…$); the colour cycle
    is the style's."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes
    for ax in axes:
        assert ax.get_xlabel().strip() and ax.get_ylabel().strip(), ax.get_title()
        texts = [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
        legend = ax.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
        for text in texts:
            bare = _outside_math(text)
            assert text.count("$") % 2 == 0, text
            assert not re.search(r"[_^\\]", bare), f"TeX outside mathtext: {text!r}"
            assert not GREEK.search(bare), f"a symbol outside mathtext: {text!r}"
        assert ax.get_facecolor() is not None
    assert fig.get_layout_engine() is not None  # constrained layout
    width = fig.get_size_inches()[0]
    assert width in (base.COLUMN_WIDTH, base.TEXT_WIDTH)


def assert_pair(png: Path, *, svg: bool = True) -> None:
    """The PNG is a real image; its SVG twin (same name) holds a drawing."""
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    twin = png.with_suffix(".svg")
    assert twin.exists() == svg
    if svg:
        text = twin.read_text()
        assert "<svg" in text and "<path" in text
    assert not [p.name for p in png.parent.iterdir() if p.name.startswith(".")]


def test_style_leaves_the_users_settings_alone(tmp_path):
    before = _rc()
    with matplotlib.rc_context({"font.size": 17.0, "axes.grid": False}):
        user = _rc()
        fig, ax = base.new_figure()
        lines = [ax.plot([1, 2, 3], [3, i, 2])[0] for i in range(len(base.CYCLE))]
        written = base.save_figure(fig, tmp_path / "a.png")
        assert _rc() == user  # nothing leaked into the user's settings
    assert _rc() == before
    assert [p.name for p in written] == ["a.png", "a.svg"]
    assert_pair(tmp_path / "a.png")
    # the style while built: its colour cycle, its grid, its width
    colours = tuple(to_hex(line.get_color()) for line in lines)
    assert colours == tuple(c.lower() for c in base.CYCLE)
    assert ax.xaxis.get_gridlines()[0].get_visible()  # drawn with the style's grid
    assert tuple(fig.get_size_inches()) == pytest.approx(base.figure_size(1, 1))
    assert base.figure_size(1, 1)[0] == base.COLUMN_WIDTH
    assert base.figure_size(1, 3)[0] == base.TEXT_WIDTH
    assert base.figure_size(1, 1, width=5.0, height=2.0) == (5.0, 2.0)


def test_save_figure_is_reproducible_and_atomic(tmp_path):
    fig, ax = base.new_figure()
    ax.semilogy([0, 1, 2], [1, 1e-3, 1e-6])
    ax.set(xlabel=r"$t$", ylabel=r"$L(\theta(t))$")
    base.save_figure(fig, tmp_path / "b.png", atomic=True)
    first = (tmp_path / "b.svg").read_bytes()
    base.save_figure(fig, tmp_path / "b.png", atomic=True)
    assert (tmp_path / "b.svg").read_bytes() == first  # no date, fixed ids
    assert_pair(tmp_path / "b.png")
    base.save_figure(fig, tmp_path / "c.png", vector=False)
    assert_pair(tmp_path / "c.png", svg=False)


def test_multistage_descent_time_figure(tmp_path, figures):
    cfg = ms_config.Config(sweep_m=(100, 400, 1600), sweep_alpha=(0.75, 1.0))
    rows = [
        {"m": m, "alpha": a, "T_d": (2 * a - 1) / 2 * math.log(m) + 1.0 + 0.01 * s}
        for m in cfg.sweep_m
        for a in cfg.sweep_alpha
        for s in (0, 1)
    ]
    ms_figures.plot_descent_time(rows, cfg, tmp_path / "descent_time.png")
    assert_pair(tmp_path / "descent_time.png")
    (fig,) = figures
    assert_publishable(fig)


def test_bias_plateau_trend_and_order_figures(tmp_path, figures):
    cfg = bp_config.Config(n_alpha=11)
    rng = np.random.default_rng(0)
    alphas = np.linspace(0, 1, cfg.n_alpha)
    curve = np.clip(0.75 - alphas, 0, None)
    rows = []
    for family, key, values in (
        ("depth", "depth", (2, 3)),
        ("depth-layer", "depth", (2, 3)),
        ("delta", "delta", (1e-3, 1e-2)),
        ("bias", "bias", (True, False)),
    ):
        for v in values:
            for seed in (0, 1):
                row = {"family": family, key: v, "seed": seed}
                row["error_curve"] = curve + 0.01 * rng.standard_normal(curve.shape)
                row["error_curve_zero"] = curve
                rows.append(row)
    bp_figures.plot_trends(rows, cfg, tmp_path / "trends.png")
    assert_pair(tmp_path / "trends.png")
    main = SimpleNamespace(
        w0=np.array([0.3, 0.2, 0.1]),
        traj=SimpleNamespace(observables={"b": np.array([[0, 0, 0], [1.0, 0.5, -0.2]])}),
    )
    order = [{"k": 3, "seed": 1, "rank_by_w0": [0, 1, 2], "b_T": [0.9, 0.4, -0.1]}]
    bp_figures.plot_bias_order(main, order, tmp_path / "bias_order.png")
    assert_pair(tmp_path / "bias_order.png")
    assert len(figures) == 2
    for fig in figures:
        assert_publishable(fig)


def test_linear_teacher_sgd_figure(tmp_path, figures):
    rows = [
        {"n": n, "epsilon": e, "updates": int(n / e)} for n in (10, 20) for e in (1e-1, 1e-2, 1e-3)
    ]
    lt_figures.plot_sgd(rows, tmp_path / "sgd.png")
    assert_pair(tmp_path / "sgd.png")
    (fig,) = figures
    assert_publishable(fig)
    assert fig.axes[0].get_xscale() == fig.axes[0].get_yscale() == "log"


def test_deep_linear_loss_figure_writes_only_declared_files(tmp_path, figures):
    t = np.linspace(0.0, 10.0, 51)
    theory = SimpleNamespace(
        loss=lambda times: 0.01 + np.exp(-np.asarray(times, float)),
        half_times=lambda: np.array([1.0, 3.0]),
    )
    run = SimpleNamespace(times=t, loss=theory.loss(t) * (1 + 1e-8))
    dl_figures.plot_loss(run, None, theory, tmp_path / "loss.png")  # type: ignore[arg-type]
    from flows.experiments.deep_linear import FILES

    assert "loss.svg" in FILES and "modes.svg" in FILES
    assert_pair(tmp_path / "loss.png")
    (fig,) = figures
    assert_publishable(fig)
    assert all(ax.get_yscale() == "log" for ax in fig.axes)


def test_descent_sweep_figure_is_png_only(tmp_path, figures):
    """A sweep folder holds only the files the sweep engine declares: no SVG twin."""
    cfg = msweep.SweepConfig(n_save=3)
    recs = []
    for m in (100, 1000):
        for a in (0.75, 1.0):
            for s in (0, 1):
                rec = msweep._blank_record(cfg, m, a, s)
                rec.update(status="ok", T_d=(2 * a - 1) / 2 * math.log(m) + 1.0 + 0.01 * s)
                recs.append(rec)
    path = _sweep._write_netcdf_atomic(msweep.combined_dataset(recs, cfg), tmp_path / "s.nc")
    out = tmp_path / "fig" / "descent_time.png"
    msweep.plot_descent_sweep(path, out)
    assert_pair(out, svg=False)
    (fig,) = figures
    assert_publishable(fig)


def test_log_axes_label_minor_ticks_only_at_2_and_5(tmp_path):
    """A log axis spanning 1.6 decades (the weight norms of multistage's stages.png (b))
    is labelled at 2 and 5 times each power of ten, not at 2, 3, 4 and 6; beyond two
    decades minor ticks carry no label; a formatter set by hand is kept."""
    from matplotlib.ticker import NullFormatter

    from flows.figures import new_figure, save_figure

    fig, (a, b, c) = new_figure(1, 3)
    for ax, top in ((a, 0.6), (b, 50.0), (c, 0.6)):
        ax.plot([1.0, 2.0], [0.015, top])
        ax.set_yscale("log")
    c.yaxis.set_minor_formatter(NullFormatter())
    save_figure(fig, tmp_path / "f.png", vector=False)

    def minor(ax):
        return [t.get_text() for t in ax.yaxis.get_minorticklabels() if t.get_text()]

    labels = minor(a)
    assert labels and all(t.startswith(("$\\mathdefault{2", "$\\mathdefault{5")) for t in labels)
    assert len(labels) <= 4
    assert minor(b) == [] and isinstance(c.yaxis.get_minor_formatter(), NullFormatter)


def test_trend_bands_stay_inside_the_error_range(monkeypatch, tmp_path):
    """bias-plateau's trends.png: a training error lies in [0, 1], so its mean ± sd band is
    clipped there (errors 0, 0, 0.9 over three seeds: mean 0.3, sd 0.42, a band that went
    down to −0.12)."""
    import numpy as np

    from flows.experiments.bias_plateau import figures as bpf
    from flows.experiments.bias_plateau.config import Config

    cfg = Config()
    rows = [
        {"family": fam, "depth": 2, "delta": 1e-3, "bias": True,
         "error_curve": np.full(cfg.n_alpha, err), "error_curve_zero": np.zeros(cfg.n_alpha)}
        for fam in ("depth", "delta", "bias") for err in (0.0, 0.0, 0.9)
    ]  # fmt: skip
    saved = []
    monkeypatch.setattr(bpf, "save_figure", lambda fig, path: saved.append(fig))
    bpf.plot_trends(rows, cfg, tmp_path / "trends.png")
    (fig,) = saved
    bands = [c for ax in fig.axes for c in ax.collections]
    assert bands
    for band in bands:
        y = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
        assert y.min() >= 0.0 and y.max() <= 1.0
