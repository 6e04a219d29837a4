"""Inline SVG charts for the HTML reports, drawn here so they show with scripts off:
linear or log axes with nice ticks, several curves, a legend."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


_W, _H = 640, 300
_M = {"l": 64, "r": 16, "t": 14, "b": 42}
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


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

    def ticks(self) -> list[tuple[float, str]]:
        if self.log:
            return [(10**k, f"1e{int(k)}") for k in _log_ticks(self.lo, self.hi)]
        return [(v, f"{v:.4g}") for v in _nice_ticks(self.lo, self.hi)]


def svg_chart(
    series: Sequence[Mapping[str, Any]],
    *,
    x_label: str,
    y_label: str,
    x_log: bool = False,
    y_log: bool = False,
    title: str = "",
) -> str:
    """An inline `<svg>` line/marker chart. Each series: `x`, `y`, optional `label`,
    `y_err`, `dashed`, `markers`."""
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
    ]
    for v, text in ax.ticks():
        px = ax.tr(v)
        if px is not None:
            out.append(
                f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{_M["t"]}" y2="{_H - _M["b"]}" '
                f'stroke="#eee"/><text x="{px:.1f}" y="{_H - _M["b"] + 15}" '
                f'text-anchor="middle">{_e(text)}</text>'
            )
    for v, text in ay.ticks():
        py = ay.tr(v)
        if py is not None:
            out.append(
                f'<line x1="{_M["l"]}" x2="{_W - _M["r"]}" y1="{py:.1f}" y2="{py:.1f}" '
                f'stroke="#eee"/><text x="{_M["l"] - 5}" y="{py + 4:.1f}" '
                f'text-anchor="end">{_e(text)}</text>'
            )
    out.append(
        f'<text x="{(_M["l"] + _W - _M["r"]) / 2}" y="{_H - 6}" text-anchor="middle">'
        f"{_e(x_label)}</text>"
        f'<text transform="translate(14 {(_H - _M["b"] + _M["t"]) / 2}) rotate(-90)" '
        f'text-anchor="middle">{_e(y_label)}</text>'
    )
    legend = []
    for i, s in enumerate(series):
        color = s.get("color") or _COLORS[i % len(_COLORS)]
        pts = []
        for x, y in zip(s["x"], s["y"], strict=False):
            px, py = ax.tr(float(x)), ay.tr(float(y))
            if px is not None and py is not None:
                pts.append((px, py))
        dash = ' stroke-dasharray="6 4"' if s.get("dashed") else ""
        if len(pts) > 1:
            d = "M" + " L".join(f"{px:.1f} {py:.1f}" for px, py in pts)
            out.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"{dash}/>')
        if s.get("markers") or len(pts) == 1:
            out += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}"/>' for px, py in pts]
        for x, y, err in zip(s["x"], s["y"], s.get("y_err") or (), strict=False):
            px, p1, p2 = ax.tr(float(x)), ay.tr(float(y) - err), ay.tr(float(y) + err)
            if px is not None and p1 is not None and p2 is not None:
                out.append(
                    f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{p1:.1f}" y2="{p2:.1f}" '
                    f'stroke="{color}"/>'
                )
        if s.get("label"):
            legend.append((s["label"], color, bool(s.get("dashed"))))
    if legend:
        out.append(
            f'<rect x="{_W - _M["r"] - 156}" y="{_M["t"] + 2}" width="152" '
            f'height="{16 * len(legend) + 4}" fill="#fff" fill-opacity="0.85"/>'
        )
    for i, (label, color, dashed) in enumerate(legend):
        y = _M["t"] + 14 + 16 * i
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(
            f'<line x1="{_W - _M["r"] - 150}" x2="{_W - _M["r"] - 126}" y1="{y - 4}" '
            f'y2="{y - 4}" stroke="{color}" stroke-width="2"{dash}/><text '
            f'x="{_W - _M["r"] - 120}" y="{y}">{_e(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)
