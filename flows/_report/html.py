"""Self-contained HTML reports: `report.html` of a `flows check` or `flows simulate` run,
and the `index.html` of `flows check all`.

A report is one file that can be mailed to a co-author: figures are embedded as base64
PNG data URIs, curves as inline SVG drawn here (so the page reads with scripts off), and a
small inline script adds zooming to the loss curves. Nothing is fetched from the network:
no external URL, font, stylesheet or script.

Knows nothing of experiments: it renders `Check`s, a results mapping, figures and curves
handed to it (`flows.plugin.write_report` gathers them from an output folder).
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..claims._checks import (
    FAILING,
    FAILS,
    FAILS_JOINTLY,
    HOLDS,
    HOLDS_PERSISTENT,
    HOLDS_TRANSIENT,
    NOT_APPLICABLE,
    NOT_OBSERVED,
    OUTSIDE_HYPOTHESIS,
    UNDECIDED,
    UNDECIDED_SIZE,
    VACUOUS,
    VERDICTS,
    Check,
    format_table,
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

from .._io import usable_cores
from .parts import (
    PNG_SIGNATURE,
    Curve,
    _badge,
    _breakable,
    _counts,
    _f,
    _kv_table,
    _page,
    _t,
    _table,
    _td,
    _trend_html,
    _zoom_chart,
    git_revision,
    png_data_uri,
)
from .svg import _e

#: The order of the groups of a report's claims: what fails first, what holds last.
GROUP_ORDER = (
    FAILS,
    FAILS_JOINTLY,
    NOT_OBSERVED,
    UNDECIDED,
    UNDECIDED_SIZE,
    OUTSIDE_HYPOTHESIS,
    VACUOUS,
    NOT_APPLICABLE,
    HOLDS_TRANSIENT,
    HOLDS_PERSISTENT,
    HOLDS,
)


def split_reason(reason: str) -> list[str]:
    """A verdict's reason cut into its parts at top-level '; ' (not inside brackets): the
    first is the verdict's one sentence, the others its detail."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(reason):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == ";" and depth == 0 and reason[k + 1 : k + 2] == " ":
            parts.append(reason[start:k].strip())
            start = k + 2
    parts.append(reason[start:].strip())
    return [p for p in parts if p]


def _claim_html(i: int, c: Check, figures: Mapping[str, str], shown: dict[str, int]) -> str:
    """Claim `i` as a card folded to one line (number, verdict, claim, where), opened by a
    click or by a link to `#claim-i`: the paper's reference and statement, predicted and
    measured, the verdict's first reason with the rest folded, its numbers and figure."""
    ref = c.reference
    cls = {HOLDS: "holds", FAILS: "fails", FAILS_JOINTLY: "fails"}.get(c.verdict, "na")
    where = ref.describe() if ref else ""
    short_where = ref.describe(with_paper=False) if ref else c.source
    parts = [
        f'<details class="claim {cls}" id="claim-{i}"><summary><span class="num">{i}.</span> '
        f"{_badge(c.verdict)} {_f(c.claim)}"
        + (f' <span class="hint">· {_t(short_where)}</span>' if short_where else "")
        + "</summary>"
    ]
    parts.append(
        f'<p class="ref">{_e(where) + " · " if where else ""}source: <code>{_e(c.source)}</code>'
        "</p>"
    )
    if ref and ref.statement:
        parts.append(f'<p class="statement">Statement: {_f(ref.statement)}</p>')
    reasons = split_reason(c.reason or "")
    rows = [("predicted", c.predicted), ("measured", c.measured)]
    rows.append(("verdict", c.verdict + (f" — {reasons[0]}" if reasons else "")))
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
    if len(reasons) > 1:
        parts.append(
            "<details><summary>Why, in full</summary><ul>"
            + "".join(f"<li>{_f(r)}</li>" for r in reasons[1:])
            + "</ul></details>"
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
    parts.append("</details>")
    return "".join(parts)


def _claims_html(checks: Sequence[Check], figures: Mapping[str, str], shown: dict) -> str:
    """The claims grouped by verdict (failing first), each folded to its one line; a
    claim keeps its number (its place in `checks`, from 1: `#claim-N`)."""
    numbered = list(enumerate(checks, 1))
    order = [v for v in GROUP_ORDER if v in VERDICTS] + [
        v for v in VERDICTS if v not in GROUP_ORDER
    ]
    out = []
    for v in order + sorted({c.verdict for c in checks} - set(order)):
        group = [(i, c) for i, c in numbered if c.verdict == v]
        if not group:
            continue
        out.append(f"<h3>{_badge(v)} {len(group)}</h3>")
        out += [_claim_html(i, c, figures, shown) for i, c in group]
    return "".join(out)


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name)


def _figure_html(name: str, uri: str) -> str:
    """A figure that a click shows at full size (a checkbox's state, no script; a second
    click or Escape's focus change returns it)."""
    return (
        f'<figure id="fig-{_e(_slug(name))}"><label class="zoom" title="click to enlarge">'
        f'<input type="checkbox" aria-label="enlarge {_e(name)}">'
        f'<img class="fig" src="{uri}" alt="{_e(name)}"></label>'
        f'<figcaption>{_e(name)} <span class="hint">(click to enlarge)</span></figcaption>'
        "</figure>"
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


def _machine_text(results: Mapping) -> str:
    """The machine the numbers came from: results.json's `machine` (`flows.machine`) where
    it has one, else this one; with the cores XLA ran on (they decide the last digits)."""
    m = results.get("machine")
    if isinstance(m, Mapping):
        text = f"{m.get('processor', '?')}, {m.get('cpu_cores', '?')} cores usable"
        return text + (f", JAX on {m['jax_backend']}" if "jax_backend" in m else "")
    return f"{platform.machine()}, {usable_cores()} of {os.cpu_count()} CPUs usable"


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
        ("machine", _machine_text(results)),
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
        '<h2 id="claims">Claims</h2><p class="hint">Each claim is one line: click it for '
        "the paper's statement, the numbers and why the verdict is what it is.</p>",
    ]
    shown: dict[str, int] = {}
    body.append(_claims_html(checks, uris, shown))
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
    all_checks = [c for e in entries for c in (e.get("checks") or [])]
    total = verdict_counts(all_checks)
    kinds = [v for v in VERDICTS if total[v] or v in (HOLDS, FAILS, NOT_APPLICABLE)]
    rows = []
    for e in entries:
        n = verdict_counts(e.get("checks") or [])
        link = e.get("report")
        name = f'<span class="nw">{_e(e["name"])}</span>'
        label = f'<a href="{_e(link)}">{name}</a>' if link else name
        wall = _float(e.get("wall_s"))
        counts = "".join(_td(n[k]) for k in kinds)
        rows.append(
            f"<tr><td>{label}</td><td>{_e(e.get('title', ''))}</td>{counts}"
            f'<td class="num">{_e(f"{wall:.0f} s" if wall is not None else "—")}</td></tr>'
        )
    heads = "".join(f"<th>{_badge(k)}</th>" for k in kinds)
    body = [
        "<h1>flows check all</h1>",
        f'<p class="sub">{_e(mode) + " · " if mode else ""}{len(entries)} experiments</p>',
        _counts(all_checks),
        _table(
            f"<tr><th>experiment</th><th>paper</th>{heads}<th>wall time</th></tr>" + "".join(rows)
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
        if c.verdict not in FAILING:
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
