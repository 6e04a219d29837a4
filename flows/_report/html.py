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
import json
import math
import os
import platform
import re
import subprocess
import sys
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


def _page(title: str, body: str, *, script: bool) -> str:
    js = f"<script>{_JS}</script>" if script else ""
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
#: ("x=(−1,−2)"): the browser may break a line after a hyphen, a dash or an '=', so it is
#: kept on one line.
_NUM = r"[-+−]?\d+(?:\.\d+)?(?:[eE][-+−]?\d+)?"
_SIGNED_NUMBER = re.compile(
    rf"{_NUM}–{_NUM}|\b\d+-[^\W\d_]\w*|\b[^\W_]{{1,8}}=[^\s/]{{1,24}}"
    r"|[-+−]?\d+(?:\.\d+)?(?:[eE][-+−]?\d+)|[-−]\d+(?:\.\d+)?"
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


def _claim_html(i: int, c: Check, figures: Mapping[str, str], shown: dict[str, int]) -> str:
    ref = c.reference
    cls = {HOLDS: "holds", FAILS: "fails", FAILS_JOINTLY: "fails"}.get(c.verdict, "na")
    parts = [f'<section class="claim {cls}" id="claim-{i}">']
    parts.append(f"<h3>{i}. {_badge(c.verdict)} {_f(c.claim)}</h3>")
    where = ref.describe() if ref else ""
    parts.append(
        f'<p class="ref">{_e(where) + " · " if where else ""}source: <code>{_e(c.source)}</code>'
        "</p>"
    )
    if ref and ref.statement:
        parts.append(f'<p class="statement">Statement: {_f(ref.statement)}</p>')
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
        _table("".join(f"<tr><td>{_e(k)}</td><td>{_f(v)}</td></tr>" for k, v in rows), "pm")
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


def _blank(v: Any) -> bool:
    return v is None or v == "" or (isinstance(v, float) and not math.isfinite(v))


def _stats_html(results: Mapping) -> str:
    """One compact table of every run's solver statistics and certificate: the columns
    no run recorded, and the runs that recorded nothing, are left out (a sweep's rows
    often carry only a step count and a wall time)."""
    found = _find_stats({k: v for k, v in results.items() if k != "checks"})
    head = [*_STAT_KEYS, *(f"certificate {k}" for k in _CERT_KEYS)]
    table = []
    for path, st in found:
        cert = st.get("certificate")
        cert = cert if isinstance(cert, Mapping) else {}
        cells = [st.get(k) for k in _STAT_KEYS] + [cert.get(k) for k in _CERT_KEYS]
        if not all(_blank(v) for v in cells):
            table.append((path, cells))
    if not table:
        return ""
    keep = [j for j in range(len(head)) if any(not _blank(c[j]) for _, c in table)]
    rows = [
        f"<tr><td>{_e(path)}</td>"
        + "".join('<td class="num">—</td>' if _blank(cells[j]) else _td(cells[j]) for j in keep)
        + "</tr>"
        for path, cells in table
    ]
    return (
        "<h3>Solver statistics and accuracy certificates</h3><p class='hint'>Certificate: "
        "energy-identity residual |L(0) − L(t) − ∫‖∇L‖²| and largest loss rise, both "
        "against the bound. Columns no run recorded are left out.</p>"
        + _table(
            "<tr><th>run</th>"
            + "".join(f"<th>{_e(head[j])}</th>" for j in keep)
            + "</tr>"
            + "".join(rows)
        )
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
        ("command", _breakable(" ".join(command)) if command else "—"),
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
        '<h2 id="summary">Summary</h2><div class="tw"><table><tr><th>#</th>'
        "<th>claim</th><th>where</th><th>predicted</th><th>measured</th><th>verdict</th></tr>",
    ]
    for i, c in enumerate(checks, 1):
        where = c.reference.describe(with_paper=False) if c.reference else ""
        body.append(
            f'<tr><td><a href="#claim-{i}">{i}</a></td><td>{_f(c.claim)}</td>'
            f"<td>{_t(where or c.source)}</td><td>{_f(c.predicted)}</td>"
            f"<td>{_f(c.measured)}</td><td>{_badge(c.verdict)}</td></tr>"
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
    descriptions: Mapping[str, str] | None = None,
    final_time: float | None = None,
    left_out: Mapping[str, str] | None = None,
    stages: Sequence[tuple[str, float, str]] = (),
    wall_s: float | None = None,
    command: Sequence[str] | None = None,
    files: Sequence[str] = (),
    versions: Mapping | None = None,
) -> str:
    """The short `report.html` of `flows simulate <name>`: the loss curve (zoomable), where
    the time went, the final values of the observables with what each one is, solver
    settings and statistics, the accuracy certificate, and the provenance.

    **Arguments:** `finals` (observable → its value at `final_time`: a number or a short
    list), `descriptions` (observable → one line: its formula and meaning; every observable
    in `finals` should have one), `left_out` (observable → why it is not in the summary),
    `stages` ((stage, seconds, what it covers), in order: compile, solve, saving, report…),
    the rest as `experiment_report`.

    **Returns:** the page, one self-contained HTML string.
    """
    descriptions = descriptions or {}
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub"><code>flows simulate {_e(name)}</code> · one run'
        + (f" · {wall_s:.1f} s" if wall_s is not None else "")
        + "</p>",
        '<nav><a href="#curves">Loss curve</a><a href="#stages">Stage times</a>'
        '<a href="#finals">Final values</a><a href="#provenance">Provenance</a></nav>',
    ]
    chart = _zoom_chart("curve-data", curves, "time", "loss")
    if chart:
        body += ['<h2 id="curves">Loss curve</h2>', chart]
    body.append(_stages_html(stages))
    at = f" at t = {final_time:g}" if final_time is not None else ""
    if finals:
        rows = "".join(
            f"<tr><th><code>{_e(k)}</code></th>{_td(v)}"
            f'<td class="desc">{_f(descriptions.get(k, "—"))}</td></tr>'
            for k, v in finals.items()
        )
        body += [
            f'<h2 id="finals">Final values{_e(at)}</h2>',
            _table(f"<tr><th>observable</th><th>value</th><th>what it is</th></tr>{rows}", "obs"),
        ]
    if left_out:
        items = "".join(
            f"<li><code>{_e(k)}</code>"
            + (f" ({_f(descriptions[k])})" if k in descriptions else "")
            + f": {_f(why)}</li>"
            for k, why in left_out.items()
        )
        body.append(f'<p class="hint">Not in the summary:</p><ul class="hint">{items}</ul>')
    results = {"config": config, "stats": stats}
    extra: dict[str, Any] = {}
    if files:
        extra["files"] = ", ".join(files)
    body.append(
        _provenance(results, wall_s=wall_s, command=command, versions=versions, extra=extra)
    )
    return _page(f"flows simulate {name}: {title}", "".join(body), script=bool(chart))


def _stages_html(stages: Sequence[tuple[str, float, str]]) -> str:
    """The stage times as a table with a bar per stage (its share of the total)."""
    shown = [(n, float(s), what) for n, s, what in stages if s is not None and math.isfinite(s)]
    if not shown:
        return ""
    total = sum(s for _, s, _ in shown)
    rows = []
    for n, s, what in shown:
        share = s / total if total > 0 else 0.0
        bar = f'<span class="sbar" style="width:{100 * share:.1f}%"></span>'
        rows.append(
            f'<tr><th>{_e(n)}</th><td class="num">{s:.2f} s</td>'
            f'<td class="num">{100 * share:.0f} %</td><td class="share">{bar}</td>'
            f'<td class="desc">{_e(what)}</td></tr>'
        )
    rows.append(
        f'<tr><th>total</th><td class="num">{total:.2f} s</td><td class="num">100 %</td>'
        "<td></td><td></td></tr>"
    )
    return '<h2 id="stages">Stage times</h2>' + _table(
        "<tr><th>stage</th><th>time</th><th>share</th><th></th><th>what it covers</th></tr>"
        + "".join(rows),
        "stages",
    )


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
        name = f'<span class="nw">{_e(e["name"])}</span>'
        label = f'<a href="{_e(link)}">{name}</a>' if link else name
        wall = _float(e.get("wall_s"))
        counts = "".join(_td(k) for k in (n[HOLDS], n[FAILS], n[NOT_APPLICABLE], other))
        rows.append(
            f"<tr><td>{label}</td><td>{_e(e.get('title', ''))}</td>{counts}"
            f'<td class="num">{_e(f"{wall:.0f} s" if wall is not None else "—")}</td></tr>'
        )
    all_checks = [c for e in entries for c in (e.get("checks") or [])]
    body = [
        "<h1>flows check all</h1>",
        f'<p class="sub">{_e(mode) + " · " if mode else ""}{len(entries)} experiments</p>',
        _counts(all_checks),
        _table(
            "<tr><th>experiment</th><th>paper</th><th>hold</th><th>fail</th>"
            "<th>not applicable</th><th>other verdicts</th><th>wall time</th></tr>" + "".join(rows)
        ),
    ]
    body += [_failing_html(e) for e in entries]
    body.append(_provenance({}, wall_s=wall_s, command=command, versions=versions))
    return _page("flows check all", "".join(body), script=False)


def _failing_html(entry: Mapping[str, Any]) -> str:
    """The failing claims of one experiment, each linked to its card in the experiment's
    report (`report.html#claim-N`: N is the claim's place in the report, from 1)."""
    checks = entry.get("checks") or []
    link = entry.get("report")
    items = []
    for i, c in enumerate(checks, 1):
        if c.verdict != FAILS:
            continue
        label = _e(c.label)
        if link:
            label = f'<a href="{_e(link)}#claim-{i}">{label}</a>'
        items.append(f"<li>{label}: {_f(c.reason or c.measured)}</li>")
    if not items:
        return ""
    return f"<h3>Failing in {_e(entry['name'])}</h3><ul>{''.join(items)}</ul>"


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
