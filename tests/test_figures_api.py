"""The public figure style, `flows.figures`: the one home of the toolkit's matplotlib style
(the papers reach it through `flows.experiments.base`, which re-exports the same
objects), importable without matplotlib, scoped to `figure_style()`, and documented.
What the papers' figures look like is `tests/test_figure_style.py`; here, the API."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import matplotlib
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

import flows.figures as ff
from flows.experiments import base


def test_every_public_name_is_the_papers_object():
    """`flows.experiments.base` re-exports the style; nothing is defined twice."""
    assert sorted(ff.__all__) == [
        "COLORS",
        "COLUMN_WIDTH",
        "CYCLE",
        "STYLE",
        "TEXT_WIDTH",
        "VECTOR_SUFFIX",
        "figure_size",
        "figure_style",
        "new_figure",
        "save_figure",
    ]
    for name in ff.__all__:
        assert getattr(base, name) is getattr(ff, name), name
    for name in ("figure_size", "figure_style", "new_figure", "save_figure"):
        doc = getattr(ff, name).__doc__ or ""
        assert "**" in doc or name == "figure_style", name  # Arguments / Returns sections


def test_importing_it_loads_no_matplotlib():
    code = textwrap.dedent(
        """
        import sys
        import flows, flows.figures
        from flows.figures import CYCLE, figure_size
        assert figure_size(1, 2)[0] == flows.figures.TEXT_WIDTH
        print("matplotlib" in sys.modules)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False"]


def test_palette_is_okabe_ito_and_the_cycle_its_first_six():
    assert ff.CYCLE == tuple(ff.COLORS[c] for c in ("blue", "orange", "green", "vermillion",
                                                      "purple", "sky"))  # fmt: skip
    assert len(set(ff.CYCLE)) == 6 and ff.COLORS["vermillion"] == "#D55E00"


def test_figure_style_is_scoped_and_a_decorator():
    before = dict(matplotlib.rcParams)

    @ff.figure_style()
    def inside() -> tuple[float, list[str], str]:
        colours = [to_hex(c["color"]) for c in matplotlib.rcParams["axes.prop_cycle"]]
        return matplotlib.rcParams["font.size"], colours, matplotlib.rcParams["mathtext.fontset"]

    size, colours, fontset = inside()
    assert size == ff.STYLE["font.size"] and fontset == "dejavusans"
    assert colours == [c.lower() for c in ff.CYCLE]
    assert dict(matplotlib.rcParams) == before
    with pytest.raises(RuntimeError, match="inside"):
        with ff.figure_style():
            raise RuntimeError("inside")
    assert dict(matplotlib.rcParams) == before  # restored on an error too


@pytest.mark.parametrize(
    ("args", "size"),
    [
        ((1, 1), (ff.COLUMN_WIDTH, None)),
        ((2, 1), (ff.COLUMN_WIDTH, None)),
        ((1, 2), (ff.TEXT_WIDTH, None)),
        ((1, 1, "text"), (ff.TEXT_WIDTH, None)),
        ((1, 3, 5.0, 2.5), (5.0, 2.5)),
    ],
)
def test_figure_size(args, size):
    width, height = ff.figure_size(*args)
    assert width == size[0]
    if size[1] is not None:
        assert height == size[1]
    else:  # each row a 2–2.6 in panel, plus room for the labels
        assert 2.0 * args[0] + 0.3 <= height <= 2.6 * args[0] + 0.3


def test_figure_size_names_what_it_takes():
    with pytest.raises(ValueError, match="'column', 'text' or inches, not 'wide'"):
        ff.figure_size(width="wide")


def test_new_figure_grids_and_keywords():
    fig, ax = ff.new_figure()
    assert isinstance(fig, Figure) and isinstance(ax, Axes)
    assert tuple(fig.get_size_inches()) == pytest.approx(ff.figure_size())
    assert fig.get_layout_engine() is not None
    fig, axes = ff.new_figure(1, 2, sharey=True)
    assert isinstance(axes, np.ndarray) and axes.shape == (2,)
    assert fig.get_size_inches()[0] == ff.TEXT_WIDTH
    fig, _ = ff.new_figure(1, 2, width="column", height=2.0)
    assert tuple(fig.get_size_inches()) == (ff.COLUMN_WIDTH, 2.0)
    fig, _ = ff.new_figure(figsize=(4.0, 3.0), layout=None)
    assert tuple(fig.get_size_inches()) == (4.0, 3.0) and fig.get_layout_engine() is None


def test_save_figure_writes_the_png_and_its_twin(tmp_path):
    with ff.figure_style():
        fig, ax = ff.new_figure()
        ax.plot([0, 1], [1, 0], label=r"$u_\alpha$")
        ax.set(xlabel=r"$t$", ylabel=r"$L$")
        ax.legend()
        written = ff.save_figure(fig, tmp_path / "f.png")
    assert written == [tmp_path / "f.png", tmp_path / f"f{ff.VECTOR_SUFFIX}"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in written[1].read_text()
    assert ff.save_figure(fig, tmp_path / "g.png", vector=False) == [tmp_path / "g.png"]
    with pytest.raises(ValueError, match=r"name the PNG \(h.png\), not h.svg"):
        ff.save_figure(fig, tmp_path / "h.svg")
    assert not (tmp_path / "h.svg").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg", "g.png"]
