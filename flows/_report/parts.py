"""The reports' building blocks: the page shell, verdict badges, tables and cells, numbers
and formulas in text, curves (`Curve`) and their zoomable charts, trends."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..claims._checks import (
    FAILS,
    FAILS_JOINTLY,
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
    json_safe,
    verdict_counts,
)
from .assets import _CSS, _JS
from .math import formula_html
from .svg import _e, svg_chart, trend_svg

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Most points of a curve embedded in a report (longer curves are thinned, keeping the
#: first and last point).
MAX_CURVE_POINTS = 1500
#: A loss curve whose save times span more than this ratio (t_max / smallest t > 0) is
#: shown on a log-time axis by default: a linear axis would squeeze its early decades
#: into a few pixels.
LOG_TIME_SPAN = 100.0


@dataclasses.dataclass(frozen=True)
class Curve:
    """A curve for the zoomable chart: `y` against `x` (e.g. the loss against time)."""

    label: str
    x: Sequence[float]
    y: Sequence[float]


# ---------------------------------------------------------------------------------------
# Small helpers


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


def _os_text(text: str) -> str:
    """`text` made writable as UTF-8: a path or command that came from the OS with bytes
    its locale could not decode (`--out $'\\xff'`, a non-ASCII name under `LC_ALL=C`)
    holds lone surrogates (Python's `surrogateescape`); their bytes are decoded as UTF-8
    where they are (`é` again), anything else shown as U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        raw = text.encode("utf-8", "replace")
    return raw.decode("utf-8", "replace")


#: Opens the folded claim card (and any fold around it) a link's #fragment points to.
_OPEN_JS = (
    "(function(){function o(){var e=document.getElementById(location.hash.slice(1));"
    'for(;e;e=e.parentElement){if(e.tagName==="DETAILS")e.open=true;}}'
    'window.addEventListener("hashchange",o);o();})();'
)


def _page(title: str, body: str, *, script: bool) -> str:
    """The page around `body`; `script`: with the charts' zooming script."""
    js = f"<script>{_JS if script else ''}{_OPEN_JS}</script>"
    return _os_text(
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
    FAILS_JOINTLY: "v-fails",
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


class _Html(str):
    """Text that is already HTML (escaped, with markup of its own): not escaped again."""


def _table(inner: str, cls: str = "") -> str:
    """A table in a wrapper that scrolls sideways when the table is wider than the page
    (the cells never break inside a word or a number to fit)."""
    attr = f' class="{cls}"' if cls else ""
    return f'<div class="tw"><table{attr}>{inner}</table></div>'


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _td(v: Any, limit: int = 600) -> str:
    """A cell: numbers (kept on one line) in class "num"; `_Html` as it is; else text."""
    if isinstance(v, _Html):
        return f"<td>{v}</td>"
    cls = ' class="num"' if _is_number(v) else ""
    return f"<td{cls}>{_t(_value_text(v, limit))}</td>"


#: A number with a sign or an exponent ("-0.3", "1.2e-05", "−4"), a range of two numbers
#: ("28–38.2", "1e-3–0.1"), a number joined to a word ("2-D") or a short assignment
#: ("x=(−1,−2)"), an equation range ("(63)–(65)") or a quoted equation number: the browser
#: may break a line after a hyphen, a dash, an '=' or a quote, so it is kept on one line.
_NUM = r"[-+−]?\d+(?:\.\d+)?(?:[eE][-+−]?\d+)?"
_SIGNED_NUMBER = re.compile(
    rf"{_NUM}–{_NUM}|\b\d+-[^\W\d_]\w*|\b[^\W_]{{1,8}}=[^\s/]{{1,24}}"
    r"|[-+−]?\d+(?:\.\d+)?(?:[eE][-+−]?\d+)|[-−]\d+(?:\.\d+)?"
    # equation numbers: a range "(63)–(65)" and a quoted "(47) …" key of a JSON value
    r'|\(\d+\)–\(\d+\)|"\(\d+\)'
)


def _f(text: Any) -> str:
    """A claim's text (its statement, prediction, measurement, reason): `_t` with every
    formula in it rendered as MathML (`formula_html`: `m^{-(2α₁−1)}`, `q_max`). Only
    for prose: configuration values and identifiers (`n_save`) stay text."""
    return formula_html(str(text), _t)


def _t(text: Any) -> str:
    """Text content, escaped, with every signed or exponent number kept on one line (a
    cell may wrap between words, never inside a number)."""
    out, last = [], 0
    text = str(text)
    for m in _SIGNED_NUMBER.finditer(text):
        out.append(_e(text[last : m.start()]))
        out.append(f'<span class="nw">{_e(m.group())}</span>')
        last = m.end()
    out.append(_e(text[last:]))
    return "".join(out)


def _breakable(text: str) -> _Html:
    """`text` escaped, wrapping only at its spaces and after each '/' (long paths wrap
    between their parts, never inside a name: the parts are kept on one line)."""

    def parts(word: str) -> str:
        return "/<wbr>".join(
            f'<span class="nw">{_e(p)}</span>' if p else "" for p in word.split("/")
        )

    words = (parts(w) for w in text.split(" "))
    return _Html(" ".join(words))


def _kv_table(
    rows: Iterable[tuple[str, Any]], head: tuple[str, str] | None = None, limit: int = 600
) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th>{_td(v, limit)}</tr>" for k, v in rows)
    if not body:
        return ""
    th = f"<tr><th>{_e(head[0])}</th><th>{_e(head[1])}</th></tr>" if head else ""
    return _table(th + body)


def _spans_decades(series: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the x values span more than `LOG_TIME_SPAN` (largest / smallest positive)."""
    pos = [v for s in series for v in s["x"] if v > 0]
    return bool(pos) and max(pos) / min(pos) > LOG_TIME_SPAN


def _zoom_chart(ident: str, curves: Sequence[Curve], x_label: str, y_label: str) -> str:
    """A chart of `curves` drawn here (readable without scripts) plus the data for the
    script's zooming. Curves whose times span more than two decades are shown against
    log t, both in the static chart and (by default) in the script's."""
    series = []
    for c in curves:
        x, y = _thin(c.x, c.y)
        if x:
            series.append({"label": c.label, "x": x, "y": y})
    if not series:
        return ""
    y_log = all(v > 0 for s in series for v in s["y"])
    x_log = _spans_decades(series)
    svg = svg_chart(
        series, x_label=x_label, y_label=y_label, x_log=x_log, y_log=y_log, title=y_label
    )
    data = dict(series=series, x_label=x_label, y_label=y_label, x_log=x_log, y_log=y_log)
    return (
        f'<div class="chartbox zoom" data-src="{_e(ident)}"><div class="plot">{svg}</div></div>'
        f'<script type="application/json" id="{_e(ident)}">{_json_script(data)}</script>'
    )


def _trend_html(t: Trend) -> str:
    """A finite-size trend: its chart (see `trend_svg`) and its table of values."""
    svg, axes_note = trend_svg(t)
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
        rows.append("<tr>" + "".join(f'<td class="num">{_e(c)}</td>' for c in cells) + "</tr>")
    table = _table("<tr>" + "".join(f"<th>{_f(h)}</th>" for h in head) + "</tr>" + "".join(rows))
    notes = "".join(f'<p class="hint">{_f(n)}</p>' for n in (axes_note, t.note) if n)
    return (
        f'<div class="trend"><h4>Finite-size trend</h4><div class="chartbox">{svg}</div>'
        f"{table}{notes}</div>"
    )


# ---------------------------------------------------------------------------------------
# Reports
