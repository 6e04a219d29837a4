"""Inline SVG charts for the HTML reports, drawn here so they show with scripts off:
linear or log axes with nice ticks (or a tick at each given x), several curves, error
bars, a legend, and the least-squares power-law fit of a log–log trend.

Axis labels and legend entries set their formulas (`m^{-(2α₁−1)}`, `max_{i≠j}`, `T_d`)
with real sub- and superscripts: `flows._report.math` finds and parses them, as it does for
the report's MathML, and lays them out as `<tspan>`s (`svg_label`); the plain text stays
the element's `aria-label`."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .math import Run, formula_runs, runs_svg

if TYPE_CHECKING:
    from ..claims._checks import Trend


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


_W, _H = 640, 300
_M = {"l": 64, "r": 16, "t": 14, "b": 42}
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
#: Rough width of one character of the charts' 11 px labels, in SVG units (to keep tick
#: labels from overlapping and to size the legend); a script's characters are narrower in
#: proportion to their font size.
_CHAR_W = 6.2


def text_width(runs: Sequence[Run]) -> float:
    """The rough width, in SVG units, of a label set as `runs` (see `_CHAR_W`)."""
    return sum(len(r.text) * r.scale for r in runs) * _CHAR_W


def svg_label(text: str, attrs: str) -> tuple[str, float]:
    """The `<text {attrs}>` element of a label, its formulas with real sub- and
    superscripts (`flows._report.math.formula_runs`), and its rough width in SVG units.

    A label with a formula keeps its plain text as `aria-label`, so a screen reader reads
    `T_d`, not the pieces of the tspans; a label without one is the escaped text as is."""
    runs = formula_runs(text)
    body = runs_svg(runs)
    label = "" if body == _e(text) else f' aria-label="{_e(text)}"'
    return f"<text {attrs}{label}>{body}</text>", text_width(runs)


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    a, b = math.floor(lo), math.ceil(hi)
    step = max(1, (b - a) // 6)
    return [float(k) for k in range(a, b + 1, step) if lo - 1e-9 <= k <= hi + 1e-9]


def tick_label(v: float) -> str:
    """A tick value as a short label: integers in full (250, 4000), others to 3 digits."""
    if math.isfinite(v) and v == round(v) and abs(v) < 1e6:
        return str(int(round(v)))
    return f"{v:.3g}"


def power_fit(x: Sequence[float], y: Sequence[float]) -> tuple[float, float] | None:
    """The least-squares line through (log10 x, log10 y): `(slope, intercept)` of
    `log10 y = slope·log10 x + intercept`, over the points with x, y > 0; None with fewer
    than two distinct x."""
    pts = [
        (math.log10(a), math.log10(b))
        for a, b in zip(x, y, strict=False)
        if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0
    ]
    if len({p[0] for p in pts}) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
    return slope, my - slope * mx


class _Axis:
    def __init__(self, values: Iterable[float], log: bool, lo_px: float, hi_px: float):
        vals = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
        self.log = log and bool(vals)
        t = [math.log10(v) for v in vals] if self.log else list(vals)
        lo, hi = (min(t), max(t)) if t else (0.0, 1.0)
        if hi == lo:
            pad = abs(lo) * 0.05 or 0.5
            lo, hi = lo - pad, hi + pad
        else:
            pad = (hi - lo) * 0.03
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi, self.lo_px, self.hi_px = lo, hi, lo_px, hi_px

    def tr(self, v: float) -> float | None:
        if not math.isfinite(v) or (self.log and v <= 0):
            return None
        t = math.log10(v) if self.log else v
        return self.lo_px + (t - self.lo) / (self.hi - self.lo) * (self.hi_px - self.lo_px)

    def edge(self) -> float:
        """The pixel of the axis's low end (where a log axis clips values ≤ 0)."""
        return self.lo_px

    def ticks(self) -> list[tuple[float, str]]:
        if self.log:
            if self.hi - self.lo > 2.5:
                return [(10**k, f"1e{int(k)}") for k in _log_ticks(self.lo, self.hi)]
            # a decade or two: 1, 2, 5 × 10^k; less: plain values on the log scale
            inside = [
                m * 10.0**k
                for k in range(math.floor(self.lo), math.ceil(self.hi) + 1)
                for m in (1, 2, 5)
                if self.lo <= math.log10(m) + k <= self.hi
            ]
            if len(inside) < 3:
                inside = [v for v in _nice_ticks(10**self.lo, 10**self.hi) if v > 0]
            return [(v, f"{v:.4g}") for v in inside]
        return [(v, f"{v:.4g}") for v in _nice_ticks(self.lo, self.hi)]


def _x_marks(ax: _Axis, x_ticks: Sequence[float] | None) -> list[str]:
    """Vertical grid lines and labels: at `x_ticks` (each labelled unless it would
    overlap the label before it) or at nice values."""
    if x_ticks is None:
        marks = ax.ticks()
    else:
        marks = [(float(v), tick_label(float(v))) for v in sorted(set(x_ticks))]
    out, right = [], -math.inf
    for v, text in marks:
        px = ax.tr(v)
        if px is None:
            continue
        out.append(
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{_M["t"]}" y2="{_H - _M["b"]}" stroke="#eee"/>'
        )
        label, width = svg_label(text, f'x="{px:.1f}" y="{_H - _M["b"] + 15}" text-anchor="middle"')
        if px - width / 2 >= right + 4:
            out.append(label)
            right = px + width / 2
    return out


def _y_marks(ay: _Axis) -> list[str]:
    out = []
    for v, text in ay.ticks():
        py = ay.tr(v)
        if py is not None:
            label, _ = svg_label(text, f'x="{_M["l"] - 5}" y="{py + 4:.1f}" text-anchor="end"')
            out.append(
                f'<line x1="{_M["l"]}" x2="{_W - _M["r"]}" y1="{py:.1f}" y2="{py:.1f}" '
                f'stroke="#eee"/>{label}'
            )
    return out


def _dash(s: Mapping[str, Any]) -> str:
    if s.get("dotted"):
        return ' stroke-dasharray="2 3"'
    return ' stroke-dasharray="6 4"' if s.get("dashed") else ""


def _series_marks(s: Mapping[str, Any], color: str, ax: _Axis, ay: _Axis) -> tuple[list, int]:
    """The path, markers and error bars of one series, and how many points were drawn."""
    out: list[str] = []
    pts = []
    for x, y in zip(s["x"], s["y"], strict=False):
        px, py = ax.tr(float(x)), ay.tr(float(y))
        if px is not None and py is not None:
            pts.append((px, py))
    if len(pts) > 1:
        d = "M" + " L".join(f"{px:.1f} {py:.1f}" for px, py in pts)
        out.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"{_dash(s)}/>')
    if s.get("markers") or len(pts) == 1:
        out += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}"/>' for px, py in pts]
    for x, y, err in zip(s["x"], s["y"], s.get("y_err") or (), strict=False):
        px, py = ax.tr(float(x)), ay.tr(float(y))
        if px is None or py is None or not math.isfinite(err) or err <= 0:
            continue
        lo = ay.tr(float(y) - err)
        p1 = ay.edge() if lo is None else lo  # on a log axis, y − err ≤ 0 runs off the axis
        p2 = ay.tr(float(y) + err)
        if p2 is not None:
            out.append(
                f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{p1:.1f}" y2="{p2:.1f}" stroke="{color}"/>'
            )
    return out, len(pts)


def _legend(entries: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[str]:
    if not entries:
        return []
    width = 40 + max(text_width(formula_runs(label)) for label, _, _ in entries)
    left = _W - _M["r"] - 4 - width
    out = [
        f'<rect x="{left:.1f}" y="{_M["t"] + 2}" width="{width:.1f}" '
        f'height="{16 * len(entries) + 4}" fill="#fff" fill-opacity="0.85"/>'
    ]
    for i, (label, color, s) in enumerate(entries):
        y = _M["t"] + 14 + 16 * i
        text, _ = svg_label(label, f'x="{left + 36:.1f}" y="{y}"')
        out.append(
            f'<line x1="{left + 6:.1f}" x2="{left + 30:.1f}" y1="{y - 4}" y2="{y - 4}" '
            f'stroke="{color}" stroke-width="2"{_dash(s)}/>{text}'
        )
    return out


def svg_chart(
    series: Sequence[Mapping[str, Any]],
    *,
    x_label: str,
    y_label: str,
    x_log: bool = False,
    y_log: bool = False,
    title: str = "",
    x_ticks: Sequence[float] | None = None,
) -> str:
    """An inline `<svg>` line/marker chart.

    **Arguments:** `series`, each a mapping with `x`, `y` and optionally `label`, `y_err`
    (error bars), `dashed`, `dotted`, `markers`, `color`; the axis labels; `x_log`/`y_log`
    (log axes, where the values are positive: " (log)" is added to the axis label);
    `x_ticks` (a grid line and label at each of these x instead of nice values).

    **Returns:** the `<svg>` element as a string. A series with nothing to draw on these
    axes is left out of the legend.
    """
    xs = [v for s in series for v in s["x"]]
    ys = [v for s in series for v in s["y"]]
    for s in series:
        if s.get("y_err"):
            ys += [y + e for y, e in zip(s["y"], s["y_err"], strict=False)]
            ys += [y - e for y, e in zip(s["y"], s["y_err"], strict=False)]
    ax = _Axis(xs, x_log, _M["l"], _W - _M["r"])
    ay = _Axis(ys, y_log, _H - _M["b"], _M["t"])
    out = [
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
        f'aria-label="{_e(title or y_label)}">',
        f'<rect x="{_M["l"]}" y="{_M["t"]}" width="{_W - _M["l"] - _M["r"]}" '
        f'height="{_H - _M["t"] - _M["b"]}" fill="#fff" stroke="#bbb"/>',
        *_x_marks(ax, x_ticks),
        *_y_marks(ay),
        svg_label(
            x_label + (" (log)" if ax.log else ""),
            f'x="{(_M["l"] + _W - _M["r"]) / 2}" y="{_H - 6}" text-anchor="middle"',
        )[0],
        svg_label(
            y_label + (" (log)" if ay.log else ""),
            f'transform="translate(14 {(_H - _M["b"] + _M["t"]) / 2}) rotate(-90)" '
            'text-anchor="middle"',
        )[0],
    ]
    legend = []
    for i, s in enumerate(series):
        color = s.get("color") or _COLORS[i % len(_COLORS)]
        marks, drawn = _series_marks(s, color, ax, ay)
        out += marks
        if s.get("label") and drawn:
            legend.append((str(s["label"]), color, s))
    out += _legend(legend)
    out.append("</svg>")
    return "".join(out)


def _trend_series(t: Trend, loglog: bool) -> tuple[list[dict[str, Any]], str]:
    """The measured and predicted series of a trend and, on log–log axes, the
    least-squares power-law fit through the measured points (with its slope in the
    legend); plus a note on what the axes leave out."""
    series: list[dict[str, Any]] = [
        {
            "label": "measured",
            "x": list(t.x),
            "y": list(t.y),
            "y_err": list(t.y_err) if t.y_err else None,
            "markers": True,
        }
    ]
    note = ""
    if t.predicted is not None:
        series.append(
            {"label": "predicted", "x": list(t.x), "y": list(t.predicted), "dashed": True}
        )
        if loglog and any(not v > 0 for v in t.predicted):
            note = "Predicted values ≤ 0 lie off the log axis; they are in the table."
    fit = power_fit(t.x, t.y) if loglog else None
    if fit is not None:
        slope, icpt = fit
        ends = [min(t.x), max(t.x)]
        series.append(
            {
                "label": f"power-law fit, slope {slope:.3g}",
                "x": ends,
                "y": [10 ** (icpt + slope * math.log10(v)) for v in ends],
                "dotted": True,
                "color": "#555",
            }
        )
        note = (
            f"Log–log axes; the dotted line is the least-squares fit of log y on log x: "
            f"{t.y_label} ∝ {t.x_label}^{slope:.3g}. " + note
        ).strip()
    return series, note


def trend_svg(t: Trend) -> tuple[str, str]:
    """The chart of a finite-size `Trend`: a labelled tick at each x; log–log axes with
    the least-squares power-law fit when `t.x_log` is set and every y is positive (a
    quantity spanning decades), else y linear; error bars and the predicted series.

    **Returns:** the `<svg>` and a note for under it ("" when there is nothing to say).
    """
    loglog = t.x_log and bool(t.y) and all(math.isfinite(v) and v > 0 for v in t.y)
    series, note = _trend_series(t, loglog)
    svg = svg_chart(
        series,
        x_label=t.x_label,
        y_label=t.y_label,
        title=t.y_label,
        x_log=t.x_log,
        y_log=loglog,
        x_ticks=t.x,
    )
    return svg, note
