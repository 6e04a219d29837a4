"""The toolkit's figure style, for publishing: every paper figure is built with it, and
so can yours (a notebook's, a plug-in's).

- Sized for a paper: one column (`COLUMN_WIDTH`) for one panel, the text width
  (`TEXT_WIDTH`) for more (`figure_size`).
- Colour-blind safe: the Okabe–Ito palette (`COLORS`), in the order lines take (`CYCLE`).
- Small, consistent type with mathtext for symbols: write labels as `r"$u_\\alpha(t)$"`,
  not `"u_α(t)"`; light grid, no top/right spines, constrained layout (`STYLE`).
- Written as PNG and, next to it, SVG that is the same bytes for the same figure
  (`save_figure`).
- Scoped: the style applies inside `figure_style()` only; the user's matplotlib settings
  (a notebook's, say) are never changed. Figures are built without pyplot (`new_figure`),
  so library code neither leaks figures nor switches a notebook's backend.

Importing this module does not import matplotlib (it is loaded when a figure is made), so
`flows.figures` costs nothing to a program that draws no figure.

```python
from flows.figures import figure_style, new_figure, save_figure

with figure_style():
    fig, ax = new_figure()
    ax.semilogy(t, loss, label="flow")
    ax.set(xlabel=r"$t$", ylabel=r"$L(\\theta(t))$")
    ax.legend()
    save_figure(fig, "loss.png")  # loss.png and loss.svg
```
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
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

#: Width in inches of a one-panel figure: one column of a two-column paper.
COLUMN_WIDTH = 3.4
#: Width in inches of a figure with several panels side by side: the full text width of a
#: two-column paper.
TEXT_WIDTH = 7.0

#: The Okabe–Ito palette (colour-blind safe), by name (`"blue"`, `"orange"`, `"green"`,
#: `"vermillion"`, `"purple"`, `"sky"`, `"yellow"`, `"black"`, `"grey"`), as hex colours.
COLORS = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "sky": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
    "grey": "#8C8C8C",
}
#: The colours lines take, in order, under `figure_style`: blue, orange, green,
#: vermillion, purple, sky (from `COLORS`).
CYCLE = tuple(COLORS[c] for c in ("blue", "orange", "green", "vermillion", "purple", "sky"))

#: The toolkit's figure style, as matplotlib rcParams (type sizes for a paper column,
#: mathtext, light grid, thin lines, SVG text as paths with a fixed hash salt): applied
#: only while a figure is built and saved (`figure_style`), never to the user's global
#: settings.
STYLE: dict[str, Any] = {
    "font.size": 8.0,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8.0,
    "xtick.labelsize": 7.0,
    "ytick.labelsize": 7.0,
    "legend.fontsize": 6.5,
    "legend.title_fontsize": 7.0,
    "figure.titlesize": 9.0,
    "mathtext.fontset": "dejavusans",
    "axes.formatter.use_mathtext": True,
    "axes.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.which": "major",
    "grid.color": "0.88",
    "grid.linewidth": 0.5,
    "grid.linestyle": "-",
    "axes.axisbelow": True,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.minor.width": 0.4,
    "ytick.minor.width": 0.4,
    "xtick.major.size": 3.0,
    "ytick.major.size": 3.0,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "errorbar.capsize": 2.0,
    "legend.frameon": True,
    "legend.framealpha": 0.85,
    "legend.edgecolor": "0.85",
    "legend.fancybox": False,
    "legend.borderpad": 0.3,
    "legend.handlelength": 1.8,
    "legend.labelspacing": 0.3,
    "figure.dpi": 100.0,
    "figure.constrained_layout.h_pad": 0.03,
    "figure.constrained_layout.w_pad": 0.03,
    "savefig.dpi": 200.0,
    "savefig.facecolor": "white",
    "svg.fonttype": "path",  # the SVG looks the same without the fonts installed
    "svg.hashsalt": "flows",  # ...and is byte-for-byte reproducible
}

#: The suffix of the vector copy `save_figure` writes next to every PNG.
VECTOR_SUFFIX = ".svg"


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """The toolkit's figure style while the block runs: `STYLE`, with `CYCLE` as the colour
    cycle; the caller's rcParams are restored after it, so the user's (e.g. a notebook's)
    settings are never changed.

    Build, label and save a figure inside it: titles, legends and tick labels read the
    style when they are created. Also a decorator (`@figure_style()`) for a function that
    builds and saves a figure.
    """
    import matplotlib
    from cycler import cycler

    rc: dict[Any, Any] = {**STYLE, "axes.prop_cycle": cycler(color=list(CYCLE))}
    with matplotlib.rc_context(rc):
        yield


def figure_size(
    nrows: int = 1, ncols: int = 1, width: float | str | None = None, height: float | None = None
) -> tuple[float, float]:
    """The size in inches of a figure holding an `nrows` × `ncols` grid of panels.

    **Arguments:**

    - `nrows`, `ncols`: the grid.
    - `width`: `"column"` (`COLUMN_WIDTH`), `"text"` (`TEXT_WIDTH`) or inches; by default
      a column for one panel across, the text width for more.
    - `height`: inches; by default each row gets a 4:3-ish panel (2–2.6 in) plus room
      for the axis labels.

    **Returns:** `(width, height)` in inches, for `figsize`.

    **Raises:** `ValueError` for a `width` string other than `"column"` or `"text"`.
    """
    if width is None:
        width = "column" if ncols == 1 else "text"
    if isinstance(width, str):
        if width not in ("column", "text"):
            raise ValueError(f"width must be 'column', 'text' or inches, not {width!r}")
        width = COLUMN_WIDTH if width == "column" else TEXT_WIDTH
    w = float(width)
    if height is None:
        height = nrows * min(2.6, max(2.0, 0.72 * w / ncols)) + 0.3
    return w, float(height)


@overload
def new_figure(
    nrows: Literal[1] = 1, ncols: Literal[1] = 1, **kwargs: Any
) -> tuple[Figure, Axes]: ...
@overload
def new_figure(nrows: int, ncols: int, **kwargs: Any) -> tuple[Figure, np.ndarray]: ...
def new_figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A figure and its axes in the toolkit's style, without pyplot: no global backend
    switch and no figure manager, so plotting code neither leaks figures nor breaks a
    notebook's inline backend (in a notebook, show the PNG `save_figure` wrote, or
    `display(fig)` with the inline backend on).

    **Arguments:**

    - `nrows`, `ncols`: the grid of axes.
    - `figsize`: `(width, height)` in inches; by default
      `figure_size(nrows, ncols, width, height)` — a paper column for one panel, the text
      width for more — with the keywords `width` and `height` passed on.
    - `layout`: matplotlib's layout engine; default `"constrained"`.
    - any other keyword: passed to `Figure.subplots` (`sharex`, `sharey`, `squeeze`, …).

    **Returns:** `(fig, axes)`: one `Axes` for a 1 × 1 grid, else an array of them (as
    `Figure.subplots` returns with the default `squeeze=True`).

    The style (`figure_style`) is applied while the figure is built and left off
    afterwards: build the rest of the figure and save it (`save_figure`) inside
    `figure_style()` too, for titles, legends and tick labels to follow it.
    """
    from matplotlib.figure import Figure

    figsize = kwargs.pop("figsize", None)
    width, height = kwargs.pop("width", None), kwargs.pop("height", None)
    layout = kwargs.pop("layout", "constrained")
    if figsize is None:
        figsize = figure_size(nrows, ncols, width, height)
    with figure_style():
        fig = Figure(figsize=figsize, layout=layout)
        return fig, fig.subplots(nrows, ncols, **kwargs)


def _minor_log_formatter():
    """matplotlib's log-axis formatter, labelling minor ticks only at 2 and 5 times a
    power of ten, and only where the axis spans at most two decades (its default labels
    2, 3, 4 and 6 on an axis spanning one to two decades, which crowds a small panel)."""
    import math

    from matplotlib.ticker import LogFormatterSciNotation

    class MinorAt2And5(LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            if not x > 0:
                return ""
            mantissa = x / 10 ** math.floor(math.log10(x) + 1e-9)
            if min(abs(mantissa - 2), abs(mantissa - 5)) > 1e-6:
                return ""
            return super().__call__(x, pos)

    # (2, 2): beyond two decades no minor labels at all; within, every minor tick is a
    # candidate and the mantissa test above keeps 2 and 5
    return MinorAt2And5(labelOnlyBase=False, minor_thresholds=(2, 2))


def _thin_log_labels(fig: Figure) -> None:
    """Give every log axis of `fig` whose minor labels are matplotlib's default the sparse
    minor labels of `_minor_log_formatter` (a formatter set by hand is kept)."""
    from matplotlib.ticker import LogFormatterSciNotation

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            fmt = axis.get_minor_formatter()
            if axis.get_scale() == "log" and type(fmt) is LogFormatterSciNotation:
                axis.set_minor_formatter(_minor_log_formatter())


def save_figure(
    fig: Figure, path: str | Path, *, vector: bool = True, atomic: bool = False
) -> list[Path]:
    """Save `fig` as the PNG `path` and, next to it, as SVG, in the toolkit's style (log
    axes' minor tick labels thinned to 2 and 5 times a power of ten, none beyond two decades).

    **Arguments:**

    - `fig`: the figure (e.g. from `new_figure`).
    - `path`: the PNG to write (a `.png` name; the SVG takes the same name).
    - `vector`: also write the SVG twin (same name, `VECTOR_SUFFIX`). It carries no date
      and fixed ids, so the same figure gives the same bytes.
    - `atomic`: write each file through `flows.write_atomic` (for a file written in place,
      which a reader may be looking at; files written into an output folder are moved into
      place by the folder's commit instead).

    **Returns:** the paths written, the PNG first.

    **Raises:** `ValueError` when `path` ends in `VECTOR_SUFFIX` (it names the PNG).
    """
    from ._io import write_atomic

    path = Path(path)
    if path.suffix.lower() == VECTOR_SUFFIX:
        raise ValueError(
            f"save_figure writes a PNG and its SVG twin; name the PNG ({path.stem}.png), "
            f"not {path.name}"
        )
    _thin_log_labels(fig)
    targets: list[tuple[Path, str, dict | None]] = [(path, "png", None)]
    if vector:
        targets.append((path.with_suffix(VECTOR_SUFFIX), "svg", {"Date": None}))
    with figure_style():
        for target, fmt, meta in reversed(targets):  # the PNG last: it names the pair

            def write(to, fmt=fmt, meta=meta):
                fig.savefig(to, format=fmt, metadata=meta)

            if atomic:
                write_atomic(target, write)
            else:
                write(target)
    return [t for t, _, _ in targets]
