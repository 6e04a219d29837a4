"""Self-contained HTML reports: `report.html` of a `flows check` or `flows simulate` run,
and the `index.html` of `flows check all`.

A report is one file that can be mailed to a co-author: figures are embedded as base64
PNG data URIs, curves as inline SVG drawn here (so the page reads with scripts off), and a
small inline script adds zooming to the loss curves. Nothing is fetched from the network:
no external URL, font, stylesheet or script.

Knows nothing of experiments: it renders `Check`s, a results mapping, figures and curves
handed to it (`flows.experiments.base.write_report` gathers them from an output folder).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import html
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._checks import (
    FAILS,
    HOLDS,
    HOLDS_PERSISTENT,
    HOLDS_TRANSIENT,
    NOT_APPLICABLE,
    NOT_OBSERVED,
    UNDECIDED,
    UNDECIDED_SIZE,
    VACUOUS,
    VERDICTS,
    Check,
    Trend,
    format_table,
    json_safe,
    verdict_counts,
)

__all__ = [
    "Curve",
    "PNG_SIGNATURE",
    "experiment_report",
    "git_revision",
    "index_report",
    "simulate_report",
]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Most points of a curve embedded in a report (longer curves are thinned, keeping the
#: first and last point).
MAX_CURVE_POINTS = 1500


@dataclasses.dataclass(frozen=True)
class Curve:
    """A curve for the zoomable chart: `y` against `x` (e.g. the loss against time)."""

    label: str
    x: Sequence[float]
    y: Sequence[float]


# ---------------------------------------------------------------------------------------
# Small helpers


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _num(v: Any) -> str:
    """A number as a short string (4 significant digits), anything else as text."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.4g}"
    return str(v)


def _value_text(v: Any, limit: int = 600) -> str:
    if isinstance(v, (list, tuple)):
        text = (
            "["
            + ", ".join(
                _num(x)
                if not isinstance(x, (dict, list))
                else json.dumps(json_safe(x), ensure_ascii=False)
                for x in v
            )
            + "]"
        )
    elif isinstance(v, Mapping):
        text = json.dumps(json_safe(v), ensure_ascii=False)
    else:
        text = _num(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_script(data: Any) -> str:
    """JSON for a `<script type="application/json">` block ('</' cannot end it early)."""
    text = json.dumps(json_safe(data), ensure_ascii=False, allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def png_data_uri(data: bytes) -> str | None:
    """`data:image/png;base64,…` for PNG bytes, or None when `data` is not a PNG."""
    if not data.startswith(PNG_SIGNATURE):
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _thin(x: Sequence[float], y: Sequence[float]) -> tuple[list[float], list[float]]:
    pairs = [
        (float(a), float(b))
        for a, b in zip(x, y, strict=False)
        if math.isfinite(float(a)) and math.isfinite(float(b))
    ]
    if len(pairs) > MAX_CURVE_POINTS:
        step = len(pairs) / (MAX_CURVE_POINTS - 1)
        idx = sorted({int(i * step) for i in range(MAX_CURVE_POINTS - 1)} | {len(pairs) - 1})
        pairs = [pairs[i] for i in idx]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def git_revision(path: str | os.PathLike | None = None) -> str | None:
    """The git commit of the source tree holding `path` (default: this package), with
    '+dirty' when tracked files differ from it; None when it is not a git checkout or git
    is missing."""
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return rev + ("+dirty" if dirty else "") if rev else None


# ---------------------------------------------------------------------------------------
# Inline SVG charts (drawn here, so they show with scripts off)

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


# ---------------------------------------------------------------------------------------
# Page frame

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}
main{max-width:1000px;margin:0 auto;padding:1em 1.2em 3em}
h1{font-size:1.5em;margin:.4em 0 .2em}h2{font-size:1.2em;margin-top:1.6em;
border-bottom:1px solid #ddd}h3{font-size:1.05em;margin:.2em 0}
.sub{color:#555;margin:0 0 1em}
table{border-collapse:collapse;margin:.4em 0;font-size:.92em}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
th{background:#f0f0f0}
.verdict{display:inline-block;padding:1px 8px;border-radius:9px;font-weight:600;
font-size:.85em;white-space:nowrap}
.v-holds{background:#d9f2dd;color:#14532d}.v-fails{background:#fbd5d5;color:#7f1d1d}
.v-na{background:#e5e7eb;color:#374151}.v-vacuous{background:#ede9fe;color:#4c1d95}
.v-undecided{background:#fef3c7;color:#78350f}
.claim{background:#fff;border:1px solid #ddd;border-left:5px solid #9ca3af;border-radius:4px;
padding:.6em .9em;margin:1em 0}
.claim.holds{border-left-color:#16a34a}.claim.fails{border-left-color:#dc2626}
.ref{color:#444;font-size:.9em;margin:.1em 0 .4em}
.statement{font-style:italic;margin:.3em 0}
.pm td:first-child{font-weight:600;white-space:nowrap}
img.fig{max-width:100%;height:auto;border:1px solid #eee;background:#fff}
svg.chart{max-width:100%;height:auto;font-size:11px;background:#fff}
.chartbox{margin:.5em 0}
.hint{color:#666;font-size:.85em}
pre{background:#f4f4f4;padding:.6em;overflow-x:auto;font-size:.8em}
details{margin:.4em 0}summary{cursor:pointer;color:#333}
.counts span{margin-right:1em}
nav a{margin-right:.8em}
@media print{details{display:block}}
"""

# Zooming for the charts of class "zoom": drag across the plot to zoom into a time range,
# double-click (or "reset") to return; "log t" / "log y" switch the axes. The static SVG
# drawn by Python stays in place until the script replaces it, so nothing depends on it.
_JS = r"""
(function(){
"use strict";
var W=640,H=300,M={l:64,r:16,t:14,b:42},C=["#1f77b4","#d62728","#2ca02c","#9467bd",
"#ff7f0e","#8c564b"];
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return {"&":"&amp;",
"<":"&lt;",">":"&gt;",'"':"&quot;"}[c];});}
function tf(v,lg){return lg?(v>0?Math.log10(v):NaN):v;}
function ticks(lo,hi,lg){var t=[];if(lg){var a=Math.floor(lo),b=Math.ceil(hi),
s=Math.max(1,Math.floor((b-a)/6));for(var k=a;k<=b;k+=s){if(k>=lo-1e-9&&k<=hi+1e-9)
t.push([k,"1e"+k]);}return t;}var raw=(hi-lo)/5,mag=Math.pow(10,Math.floor(Math.log10(raw))),
st=[1,2,2.5,5,10].map(function(s){return s*mag;}).filter(function(s){return s>=raw;})[0],
f=Math.ceil(lo/st)*st;for(var v=f;v<=hi+1e-9*st;v+=st){t.push([v,+v.toPrecision(4)+""]);}
return t;}
function draw(box){var d=box._d,st=box._s,xl=st.xlog,yl=st.ylog,xs=[],ys=[];
d.series.forEach(function(s){s.x.forEach(function(x,i){var X=tf(x,xl),Y=tf(s.y[i],yl);
if(isFinite(X)&&X>=st.lo&&X<=st.hi&&isFinite(Y)){xs.push(X);ys.push(Y);}});});
if(!xs.length){return;}var x0=st.lo,x1=st.hi,y0=Math.min.apply(null,ys),
y1=Math.max.apply(null,ys);if(y1===y0){y0-=0.5;y1+=0.5;}var p=(y1-y0)*0.03;y0-=p;y1+=p;
function px(X){return M.l+(X-x0)/(x1-x0)*(W-M.l-M.r);}
function py(Y){return H-M.b-(Y-y0)/(y1-y0)*(H-M.t-M.b);}
var o=['<svg class="chart" viewBox="0 0 '+W+' '+H+'" width="'+W+'" height="'+H+'">',
'<rect x="'+M.l+'" y="'+M.t+'" width="'+(W-M.l-M.r)+'" height="'+(H-M.t-M.b)+
'" fill="#fff" stroke="#bbb"/>'];
ticks(x0,x1,xl).forEach(function(t){var X=px(t[0]);o.push('<line x1="'+X+'" x2="'+X+
'" y1="'+M.t+'" y2="'+(H-M.b)+'" stroke="#eee"/><text x="'+X+'" y="'+(H-M.b+15)+
'" text-anchor="middle">'+t[1]+'</text>');});
ticks(y0,y1,yl).forEach(function(t){var Y=py(t[0]);o.push('<line x1="'+M.l+'" x2="'+
(W-M.r)+'" y1="'+Y+'" y2="'+Y+'" stroke="#eee"/><text x="'+(M.l-5)+'" y="'+(Y+4)+
'" text-anchor="end">'+t[1]+'</text>');});
o.push('<text x="'+(M.l+W-M.r)/2+'" y="'+(H-6)+'" text-anchor="middle">'+
esc(d.x_label+(xl?" (log)":""))+'</text><text transform="translate(14 '+(H-M.b+M.t)/2+
') rotate(-90)" text-anchor="middle">'+esc(d.y_label+(yl?" (log)":""))+'</text>');
o.push('<rect x="'+(W-M.r-156)+'" y="'+(M.t+2)+'" width="152" height="'+
(16*d.series.length+4)+'" fill="#fff" fill-opacity="0.85"/>');
d.series.forEach(function(s,k){var pts=[];s.x.forEach(function(x,i){var X=tf(x,xl),
Y=tf(s.y[i],yl);if(isFinite(X)&&isFinite(Y)&&X>=x0&&X<=x1){pts.push(px(X).toFixed(1)+" "+
py(Y).toFixed(1));}});if(pts.length>1){o.push('<path d="M'+pts.join(" L")+
'" fill="none" stroke="'+C[k%C.length]+'" stroke-width="1.6"/>');}
var ly=M.t+14+16*k;o.push('<line x1="'+(W-M.r-150)+'" x2="'+(W-M.r-126)+'" y1="'+(ly-4)+
'" y2="'+(ly-4)+'" stroke="'+C[k%C.length]+'" stroke-width="2"/><text x="'+(W-M.r-120)+
'" y="'+ly+'">'+esc(s.label)+'</text>');});
o.push('<rect class="sel" x="0" y="'+M.t+'" width="0" height="'+(H-M.t-M.b)+
'" fill="#3b82f6" fill-opacity="0.15"/></svg>');
box.querySelector(".plot").innerHTML=o.join("");
var svg=box.querySelector("svg"),sel=svg.querySelector(".sel"),start=null;
function dx(ev){var r=svg.getBoundingClientRect();return (ev.clientX-r.left)*W/r.width;}
function inv(X){return x0+(X-M.l)/(W-M.l-M.r)*(x1-x0);}
svg.addEventListener("mousedown",function(ev){start=dx(ev);ev.preventDefault();});
svg.addEventListener("mousemove",function(ev){if(start===null){return;}var a=Math.min(start,
dx(ev)),b=Math.max(start,dx(ev));sel.setAttribute("x",a);sel.setAttribute("width",b-a);});
svg.addEventListener("mouseup",function(ev){if(start===null){return;}var a=Math.min(start,
dx(ev)),b=Math.max(start,dx(ev));start=null;if(b-a>4){st.lo=inv(a);st.hi=inv(b);}draw(box);});
svg.addEventListener("dblclick",function(){reset(box);});}
function full(box){var lo=Infinity,hi=-Infinity;box._d.series.forEach(function(s){
s.x.forEach(function(x){var X=tf(x,box._s.xlog);if(isFinite(X)){lo=Math.min(lo,X);
hi=Math.max(hi,X);}});});if(hi===lo){hi=lo+1;}box._s.lo=lo;box._s.hi=hi;}
function reset(box){full(box);draw(box);}
document.querySelectorAll(".zoom").forEach(function(box){
var src=document.getElementById(box.getAttribute("data-src"));if(!src){return;}
box._d=JSON.parse(src.textContent);box._s={xlog:false,ylog:!!box._d.y_log};
var bar=document.createElement("div");bar.className="hint";
bar.innerHTML='Drag across the plot to zoom in time; double-click to reset. '+
'<label><input type="checkbox" class="xl"> log t</label> '+
'<label><input type="checkbox" class="yl"'+(box._s.ylog?" checked":"")+'> log y</label> '+
'<button type="button" class="rs">reset</button>';box.insertBefore(bar,box.firstChild);
bar.querySelector(".xl").addEventListener("change",function(e){box._s.xlog=e.target.checked;
reset(box);});bar.querySelector(".yl").addEventListener("change",function(e){
box._s.ylog=e.target.checked;draw(box);});bar.querySelector(".rs").addEventListener("click",
function(){reset(box);});reset(box);});
})();
"""


def _page(title: str, body: str, *, script: bool) -> str:
    js = f"<script>{_JS}</script>" if script else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="flows">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>{body}</main>{js}</body></html>\n"
    )


_VERDICT_CLASS = {
    HOLDS: "v-holds",
    HOLDS_PERSISTENT: "v-holds",
    HOLDS_TRANSIENT: "v-holds",
    FAILS: "v-fails",
    NOT_OBSERVED: "v-fails",
    VACUOUS: "v-vacuous",
    UNDECIDED: "v-undecided",
    UNDECIDED_SIZE: "v-undecided",
}


def _badge(verdict: str) -> str:
    return f'<span class="verdict {_VERDICT_CLASS.get(verdict, "v-na")}">{_e(verdict)}</span>'


def _counts(checks: Sequence[Check]) -> str:
    """Every verdict kind with its count (the three usual ones even when 0)."""
    n = verdict_counts(checks)
    shown = [v for v in VERDICTS if n[v] or v in (HOLDS, FAILS, NOT_APPLICABLE)]
    return (
        '<p class="counts">' + "".join(f"<span>{_badge(v)} {n[v]}</span>" for v in shown) + "</p>"
    )


def _kv_table(
    rows: Iterable[tuple[str, Any]], head: tuple[str, str] | None = None, limit: int = 600
) -> str:
    body = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(_value_text(v, limit))}</td></tr>" for k, v in rows
    )
    if not body:
        return ""
    th = f"<tr><th>{_e(head[0])}</th><th>{_e(head[1])}</th></tr>" if head else ""
    return f"<table>{th}{body}</table>"


def _zoom_chart(ident: str, curves: Sequence[Curve], x_label: str, y_label: str) -> str:
    """A chart of `curves` drawn here (readable without scripts) plus the data for the
    script's zooming."""
    series = []
    for c in curves:
        x, y = _thin(c.x, c.y)
        if x:
            series.append({"label": c.label, "x": x, "y": y})
    if not series:
        return ""
    y_log = all(v > 0 for s in series for v in s["y"])
    svg = svg_chart(series, x_label=x_label, y_label=y_label, y_log=y_log, title=y_label)
    data = {"series": series, "x_label": x_label, "y_label": y_label, "y_log": y_log}
    return (
        f'<div class="chartbox zoom" data-src="{_e(ident)}"><div class="plot">{svg}</div></div>'
        f'<script type="application/json" id="{_e(ident)}">{_json_script(data)}</script>'
    )


def _trend_html(t: Trend) -> str:
    series: list[dict[str, Any]] = [
        {
            "label": "measured",
            "x": list(t.x),
            "y": list(t.y),
            "y_err": list(t.y_err) if t.y_err else None,
            "markers": True,
        }
    ]
    if t.predicted is not None:
        series.append(
            {"label": "predicted", "x": list(t.x), "y": list(t.predicted), "dashed": True}
        )
    svg = svg_chart(series, x_label=t.x_label, y_label=t.y_label, title=t.y_label, x_log=t.x_log)
    head = (
        [t.x_label, t.y_label]
        + (["± sd"] if t.y_err else [])
        + (["predicted"] if t.predicted is not None else [])
    )
    rows = []
    for i, x in enumerate(t.x):
        cells = [_num(x), _num(t.y[i])]
        if t.y_err:
            cells.append(_num(t.y_err[i]))
        if t.predicted is not None:
            cells.append(_num(t.predicted[i]))
        rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    table = (
        "<table><tr>"
        + "".join(f"<th>{_e(h)}</th>" for h in head)
        + "</tr>"
        + "".join(rows)
        + "</table>"
    )
    note = f'<p class="hint">{_e(t.note)}</p>' if t.note else ""
    return (
        f'<div class="trend"><h4>Finite-size trend</h4><div class="chartbox">{svg}</div>'
        f"{table}{note}</div>"
    )


# ---------------------------------------------------------------------------------------
# Reports


def _claim_html(i: int, c: Check, figures: Mapping[str, str], shown: dict[str, int]) -> str:
    ref = c.reference
    cls = {HOLDS: "holds", FAILS: "fails"}.get(c.verdict, "na")
    parts = [f'<section class="claim {cls}" id="claim-{i}">']
    parts.append(f"<h3>{i}. {_badge(c.verdict)} {_e(c.claim)}</h3>")
    where = ref.describe() if ref else ""
    parts.append(
        f'<p class="ref">{_e(where) + " · " if where else ""}source: <code>{_e(c.source)}</code>'
        "</p>"
    )
    if ref and ref.statement:
        parts.append(f'<p class="statement">Statement: {_e(ref.statement)}</p>')
    rows = [("predicted", c.predicted), ("measured", c.measured)]
    rows.append(("verdict", c.verdict + (f" — {c.reason}" if c.reason else "")))
    if c.kind:
        rows.append(("kind", c.kind))
    if c.margin is not None:
        err = "not estimated" if c.error is None or c.error != c.error else f"±{c.error:.2g}"
        rows.append(("margin", f"{c.margin:.3g} (numerical error {err})"))
    if c.critical:
        rows.append(("critical constants", "; ".join(c.critical)))
    for h in c.hypotheses:
        status = "met" if h["holds"] else "NOT met"
        rows.append(
            ("hypothesis", f"{h['name']}: {status}" + (f" ({h['detail']})" if h["detail"] else ""))
        )
    if c.assumptions:
        rows.insert(0, ("assumptions", c.assumptions))
    parts.append(
        '<table class="pm">'
        + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows)
        + "</table>"
    )
    if c.trend is not None:
        parts.append(_trend_html(c.trend))
    if c.values:
        parts.append(
            "<details><summary>Recorded values</summary>"
            + _kv_table(c.values.items(), ("name", "value"))
            + "</details>"
        )
    fig = ref.figure if ref else ""
    if fig and fig in figures:
        if fig in shown:
            parts.append(
                f'<p class="hint">Figure: <a href="#fig-{_e(_slug(fig))}">{_e(fig)}</a> '
                f"(shown with claim {shown[fig]}).</p>"
            )
        else:
            shown[fig] = i
            parts.append(_figure_html(fig, figures[fig]))
    parts.append("</section>")
    return "".join(parts)


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name)


def _figure_html(name: str, uri: str) -> str:
    return (
        f'<figure id="fig-{_e(_slug(name))}"><img class="fig" src="{uri}" alt="{_e(name)}">'
        f"<figcaption>{_e(name)}</figcaption></figure>"
    )


def _find_stats(obj: Any, path: str = "") -> list[tuple[str, Mapping]]:
    """Every solver-statistics mapping (one with `steps` or `vf_evals`) inside `obj`, with
    the path that leads to it."""
    found: list[tuple[str, Mapping]] = []
    if isinstance(obj, Mapping):
        if "vf_evals" in obj or ("steps" in obj and "result" in obj):
            return [(path or "run", obj)]
        for k, v in obj.items():
            found += _find_stats(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list) and len(obj) <= 50:
        for i, v in enumerate(obj):
            label = v.get("label") if isinstance(v, Mapping) else None
            found += _find_stats(v, f"{path}[{label or i}]")
    return found


_STAT_KEYS = (
    "result",
    "t_reached",
    "steps",
    "accepted_steps",
    "rejected_steps",
    "vf_evals",
    "compile_s",
    "wall_s",
)
_CERT_KEYS = ("max_residual", "max_rise", "bound", "ok")


def _stats_html(results: Mapping) -> str:
    found = _find_stats({k: v for k, v in results.items() if k != "checks"})
    if not found:
        return ""
    head = ["run", *_STAT_KEYS, *(f"certificate {k}" for k in _CERT_KEYS)]
    rows = []
    for path, st in found:
        cert = st.get("certificate") or {}
        cells = [path, *(st.get(k, "") for k in _STAT_KEYS)]
        cells += [cert.get(k, "") if isinstance(cert, Mapping) else "" for k in _CERT_KEYS]
        rows.append("<tr>" + "".join(f"<td>{_e(_num(v))}</td>" for v in cells) + "</tr>")
    return (
        "<h3>Solver statistics and accuracy certificates</h3><p class='hint'>Certificate: "
        "energy-identity residual |L(0) − L(t) − ∫‖∇L‖²| and largest loss rise, both "
        "against the bound.</p><div style='overflow-x:auto'><table><tr>"
        + "".join(f"<th>{_e(h)}</th>" for h in head)
        + "</tr>"
        + "".join(rows)
        + "</table></div>"
    )


def _solver_settings(results: Mapping) -> dict:
    if isinstance(results.get("solver"), Mapping):
        return dict(results["solver"])
    cfg = results.get("config") or {}
    keys = ("solver", "rtol", "atol", "clock", "max_steps", "dt0", "method", "lr")
    return {k: cfg[k] for k in keys if isinstance(cfg, Mapping) and k in cfg}


def _provenance(
    results: Mapping,
    *,
    wall_s: float | None,
    command: Sequence[str] | None,
    versions: Mapping | None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    rev = git_revision()
    rows: list[tuple[str, Any]] = [
        ("written", datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")),
        ("command", " ".join(command) if command else "—"),
        ("wall time", f"{wall_s:.1f} s" if wall_s is not None else "—"),
        ("git revision", rev or "not a git checkout"),
        ("python", f"{platform.python_version()} ({sys.platform})"),
        ("machine", f"{platform.machine()}, {os.cpu_count()} CPUs"),
    ]
    rows += list((extra or {}).items())
    parts = ["<h2 id='provenance'>Provenance</h2>", _kv_table(rows)]
    settings = _solver_settings(results)
    if settings:
        parts += ["<h3>Solver settings</h3>", _kv_table(settings.items())]
    parts.append(_stats_html(results))
    cfg = results.get("config")
    if isinstance(cfg, Mapping) and cfg:
        parts += [
            "<h3>Configuration</h3>",
            _kv_table(cfg.items(), ("setting", "value"), limit=20_000),
        ]
    vers = versions or results.get("versions") or {}
    if vers:
        parts += ["<h3>Library versions</h3>", _kv_table(vers.items(), ("package", "version"))]
    return "".join(parts)


def experiment_report(
    *,
    name: str,
    title: str,
    checks: Sequence[Check],
    results: Mapping | None = None,
    figures: Mapping[str, bytes] | None = None,
    curves: Sequence[Curve] = (),
    curve_label: tuple[str, str] = ("time", "loss"),
    mode: str = "",
    wall_s: float | None = None,
    command: Sequence[str] | None = None,
    files: Sequence[str] = (),
    versions: Mapping | None = None,
) -> str:
    """The `report.html` of `flows check <name>`.

    **Arguments:** `name` (the experiment), `title` (its paper), `checks` (with their
    `reference` and `trend` where known), `results` (the mapping of `results.json`:
    config, solver settings and statistics, versions), `figures` (file name → PNG bytes;
    anything not a PNG is left out), `curves` (loss curves for the zoomable chart), `mode`
    ('quick'/'default'), `wall_s`, `command` (argv), `files` (the folder's outputs).

    **Returns:** the page, one self-contained HTML string.
    """
    results = results or {}
    uris = {}
    for fname, data in (figures or {}).items():
        uri = png_data_uri(data)
        if uri:
            uris[fname] = uri
    wall = wall_s if wall_s is not None else _float(results.get("wall_s"))
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub"><code>flows check {_e(name)}</code>'
        + (f" ({_e(mode)})" if mode else "")
        + (f" · {wall:.0f} s" if wall is not None else "")
        + "</p>",
        _counts(checks),
        '<nav><a href="#claims">Claims</a><a href="#curves">Loss curves</a>'
        '<a href="#figures">Figures</a><a href="#provenance">Provenance</a></nav>',
        '<h2 id="summary">Summary</h2><div style="overflow-x:auto"><table><tr><th>#</th>'
        "<th>claim</th><th>where</th><th>predicted</th><th>measured</th><th>verdict</th></tr>",
    ]
    for i, c in enumerate(checks, 1):
        where = c.reference.describe(with_paper=False) if c.reference else ""
        body.append(
            f'<tr><td><a href="#claim-{i}">{i}</a></td><td>{_e(c.claim)}</td>'
            f"<td>{_e(where or c.source)}</td><td>{_e(c.predicted)}</td>"
            f"<td>{_e(c.measured)}</td><td>{_badge(c.verdict)}</td></tr>"
        )
    body.append("</table></div>")
    body.append('<h2 id="claims">Claims</h2>')
    shown: dict[str, int] = {}
    body += [_claim_html(i, c, uris, shown) for i, c in enumerate(checks, 1)]
    chart = _zoom_chart("curve-data", curves, *curve_label)
    if chart:
        body += ['<h2 id="curves">Loss curves</h2>', chart]
    rest = [f for f in uris if f not in shown]
    if uris:
        body.append('<h2 id="figures">Figures</h2>')
        body += [_figure_html(f, uris[f]) for f in rest]
        body += [
            f'<p class="hint"><a href="#fig-{_e(_slug(f))}">{_e(f)}</a> is shown with claim '
            f"{shown[f]}.</p>"
            for f in uris
            if f in shown
        ]
    body.append(
        "<details><summary>The table as printed on the terminal</summary><pre>"
        + _e(format_table(checks, None, layout="wide"))
        + "</pre></details>"
    )
    extra = {"mode": mode} if mode else {}
    if files:
        extra["files"] = ", ".join(files)
    body.append(_provenance(results, wall_s=wall, command=command, versions=versions, extra=extra))
    return _page(f"flows check {name}: {title}", "".join(body), script=bool(chart))


def simulate_report(
    *,
    name: str,
    title: str,
    config: Mapping,
    stats: Mapping,
    curves: Sequence[Curve],
    finals: Mapping[str, Any],
    wall_s: float | None = None,
    command: Sequence[str] | None = None,
    files: Sequence[str] = (),
    versions: Mapping | None = None,
) -> str:
    """The short `report.html` of `flows simulate <name>`: the loss curve (zoomable), the
    final values of the scalar observables, solver settings and statistics, the accuracy
    certificate, and the provenance."""
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub"><code>flows simulate {_e(name)}</code> · one run</p>',
    ]
    chart = _zoom_chart("curve-data", curves, "time", "loss")
    if chart:
        body += ['<h2 id="curves">Loss curve</h2>', chart]
    if finals:
        body += ["<h2>Final values</h2>", _kv_table(finals.items(), ("observable", "value"))]
    results = {"config": config, "stats": stats}
    extra: dict[str, Any] = {}
    if files:
        extra["files"] = ", ".join(files)
    body.append(
        _provenance(results, wall_s=wall_s, command=command, versions=versions, extra=extra)
    )
    return _page(f"flows simulate {name}: {title}", "".join(body), script=bool(chart))


def index_report(
    entries: Sequence[Mapping[str, Any]],
    *,
    mode: str = "",
    command: Sequence[str] | None = None,
    wall_s: float | None = None,
    versions: Mapping | None = None,
) -> str:
    """The `index.html` of `flows check all`: one row per experiment (`name`, `title`,
    `checks`, `report` — the relative link to its report.html, `wall_s`)."""
    rows = []
    for e in entries:
        checks = e.get("checks") or []
        n = verdict_counts(checks)
        other = sum(n.values()) - n[HOLDS] - n[FAILS] - n[NOT_APPLICABLE]
        link = e.get("report")
        label = f'<a href="{_e(link)}">{_e(e["name"])}</a>' if link else _e(e["name"])
        wall = _float(e.get("wall_s"))
        rows.append(
            f"<tr><td>{label}</td><td>{_e(e.get('title', ''))}</td><td>{n[HOLDS]}</td>"
            f"<td>{n[FAILS]}</td><td>{n[NOT_APPLICABLE]}</td><td>{other}</td>"
            f"<td>{_e(f'{wall:.0f} s' if wall is not None else '—')}</td></tr>"
        )
    all_checks = [c for e in entries for c in (e.get("checks") or [])]
    body = [
        "<h1>flows check all</h1>",
        f'<p class="sub">{_e(mode) + " · " if mode else ""}{len(entries)} experiments</p>',
        _counts(all_checks),
        "<table><tr><th>experiment</th><th>paper</th><th>hold</th><th>fail</th>"
        "<th>not applicable</th><th>other verdicts</th><th>wall time</th></tr>",
        *rows,
        "</table>",
    ]
    for e in entries:
        failing = [c for c in e.get("checks") or [] if c.verdict == FAILS]
        if failing:
            body.append(f"<h3>Failing in {_e(e['name'])}</h3><ul>")
            body += [f"<li>{_e(c.label)}: {_e(c.reason or c.measured)}</li>" for c in failing]
            body.append("</ul>")
    body.append(_provenance({}, wall_s=wall_s, command=command, versions=versions))
    return _page("flows check all", "".join(body), script=False)


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
