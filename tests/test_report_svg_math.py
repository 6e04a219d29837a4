"""Formulas in the reports' SVG charts (`flows._report.svg.svg_label`, laid out by
`flows._report.math`): axis labels and legend entries get real sub- and superscripts as
`<tspan>`s — smaller, moved off the base line by `dy` and moved back after — parsed by the
same parser as the report's MathML, with the same fallback (what it does not know stays
text). The oracle for the layout is the baseline each character ends up on, summed from
the `dy`s; every chart of a report is well-formed XML; a screen reader reads the plain
label (`aria-label`)."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import pytest
from test_report_math import LITERALS

from flows import Check
from flows._report.math import SCRIPT_SCALE, SUB_SHIFT, SUP_SHIFT, formula_svg
from flows._report.svg import _CHAR_W, svg_chart, svg_label
from flows.claims import Trend
from flows.plugin import Curve, experiment_report

SVG = re.compile(r"<svg\b.*?</svg>", re.S)  # the charts (outside the page's scripts)
EM = re.compile(r"^(-?[0-9.]+(?:e-?[0-9]+)?)em$")


def _text(markup: str) -> ET.Element:
    return ET.fromstring(f"<text>{markup}</text>")  # raises on anything not well-formed


def _layout(el: ET.Element) -> list[tuple[str, float, float]]:
    """(character, baseline shift, font scale) of every character of the `<text>` `el`:
    the shift in ems of the text's font (negative: up), summed from the `dy`s as SVG does
    (a `dy` moves the current position, so it holds for what follows the tspan too); the
    scale from the nested relative `font-size`s."""
    out: list[tuple[str, float, float]] = []
    shift = 0.0

    def walk(node: ET.Element, scale: float) -> None:
        nonlocal shift
        size = node.get("font-size")
        if size is not None:
            assert size.endswith("%"), size
            scale *= float(size[:-1]) / 100
        dy = node.get("dy")
        if dy is not None:
            m = EM.match(dy)
            assert m, dy
            shift += float(m.group(1)) * scale  # ems of this tspan's own font
        out.extend((ch, shift, scale) for ch in node.text or "")
        for child in node:
            walk(child, scale)
            out.extend((ch, shift, scale) for ch in child.tail or "")

    walk(el, 1.0)
    return out


def _levels(markup: str) -> str:
    """The label as base-line text with each script in `^(…)` / `_(…)` by its shift:
    a readable picture of where every character sits."""
    out, prev = [], (0.0, 1.0)
    for ch, shift, scale in _layout(_text(markup)):
        level = (round(shift, 6), round(scale, 6))
        if level != prev:
            if prev != (0.0, 1.0):
                out.append(")")
            if level != (0.0, 1.0):
                out.append("^(" if shift < 0 else "_(")
            prev = level
        out.append(ch)
    if prev != (0.0, 1.0):
        out.append(")")
    return "".join(out)


@pytest.mark.parametrize(
    ("label", "levels"),
    [
        ("loss", "loss"),  # plain: unchanged
        ("T_d", "T_(d)"),  # a subscript
        ("m^{-(2α₁−1)}", "m^(−(2α₁−1))"),  # a superscript: braces dropped, − for -
        ("m^-0.36", "m^(−0.36)"),  # a signed number
        ("W_ii^r", "W_(ii)^(r)"),  # both, one after the other
        ("(Δ_min/2V_max^r)^(1/(r−1))", "(Δ_(min)/2V_(max)^(r))^((1/(r−1)))"),
        ("‖θ‖_∞ at T_d (log)", "‖θ‖_(∞) at T_(d) (log)"),  # back on the base line after
        ("max_{i≠j} |u_i·u_j|", "max_(i≠j) |u_(i)·u_(j)|"),
        ("ρ_|a|", "ρ_(|a|)"),
        ("(ln m)^{3γ}", "(ln m)^(3γ)"),  # spacing kept
        ("singular value s_α", "singular value s_(α)"),
    ],
)
def test_labels_become_tspans(label, levels):
    markup = formula_svg(label)
    assert _levels(markup) == levels, markup


def test_the_exact_markup_of_scripts():
    sub, sup = SUB_SHIFT / SCRIPT_SCALE, SUP_SHIFT / SCRIPT_SCALE
    assert formula_svg("T_d") == f'T<tspan font-size="75%" dy="{sub:.4g}em">d</tspan>'
    assert formula_svg("x^2 y") == (
        f'x<tspan font-size="75%" dy="{sup:.4g}em">2</tspan>'
        f'<tspan dy="{-SUP_SHIFT:.4g}em"> y</tspan>'  # the return to the base line
    )


def test_nested_scripts_shrink_and_rise_again():
    layout = _layout(_text(formula_svg("e^{x^{2}} + 1")))
    (e, x, two, *rest) = layout
    assert (e[1], e[2]) == (0.0, 1.0)
    assert x[1] == pytest.approx(SUP_SHIFT, abs=1e-12) and x[2] == SCRIPT_SCALE
    assert two[1] == pytest.approx(SUP_SHIFT * (1 + SCRIPT_SCALE), abs=1e-12)
    assert two[2] == pytest.approx(SCRIPT_SCALE**2)
    assert "".join(c for c, _, _ in rest) == " + 1"
    assert all(s == pytest.approx(0.0, abs=1e-12) and k == 1.0 for _, s, k in rest)


@pytest.mark.parametrize(
    "label",
    [
        "tol_factor·rtol",  # identifiers: a script on a word is not math
        "bias_order.png",
        "x^{unclosed",  # unbalanced
        "a^",  # nothing after the marker
        "_alone",
        "power-law fit, slope -1.02",
        "1e-3",
    ],
)
def test_what_it_does_not_know_stays_text(label):
    text, width = svg_label(label, 'x="0" y="0"')
    assert text == f'<text x="0" y="0">{label}</text>'  # no aria-label: nothing to explain
    assert width == pytest.approx(len(label) * _CHAR_W)


def test_escapes_and_reads_the_same_to_a_screen_reader():
    label = 'a<b & "T_d"'
    text, _ = svg_label(label, 'x="1" y="2"')
    el = ET.fromstring(text)
    assert el.get("aria-label") == label  # the plain text, for a screen reader
    assert "".join(el.itertext()) == 'a<b & "Td"'  # the characters, in order
    assert _levels(formula_svg(label)) == 'a<b & "T_(d)"'


def test_scripts_are_narrower_in_the_width_estimate():
    _, plain = svg_label("Td", "")
    _, scripted = svg_label("T_d", "")
    assert scripted == pytest.approx((1 + SCRIPT_SCALE) * _CHAR_W) and scripted < plain
    _, nested = svg_label("e^{x^{2}}", "")
    assert nested == pytest.approx((1 + SCRIPT_SCALE + SCRIPT_SCALE**2) * _CHAR_W)


def test_the_legend_is_sized_to_its_scripted_labels():
    def legend_width(label: str) -> float:
        svg = svg_chart([{"label": label, "x": [0, 1], "y": [0, 1]}], x_label="t", y_label="y")
        rects = ET.fromstring(svg).findall("rect")
        return float(rects[-1].get("width", "nan"))  # the legend's box: the last rect

    scripted = legend_width("u_α(t) with s^{2}")
    plain = legend_width("uα(t) with s2")  # same characters, none scripted
    assert scripted == pytest.approx(plain - 2 * (1 - SCRIPT_SCALE) * _CHAR_W)


def test_the_papers_formulas_make_wellformed_labels_that_return_to_the_base_line():
    literals = LITERALS  # the papers' formula literals, as test_report_math reads them
    scripted = 0
    for label in literals:
        text, _ = svg_label(label, 'x="0" y="0"')
        el = ET.fromstring(text)
        layout = _layout(el)
        if el.get("aria-label") is not None:  # XML reads a line break in it as a space
            assert el.get("aria-label") == re.sub(r"[\n\t]", " ", label)
        # every character is kept (a '-' in a formula is set as '−'); what changes is the
        # scripts' markers and braces, which are layout
        chars = "".join(c for c, _, _ in layout)
        assert len(chars) <= len(label) and set(chars) <= set(label) | {"−"}, (label, chars)
        if el.get("aria-label"):
            scripted += 1
            assert any(s != 0 for _, s, _ in layout), label
        # full-size characters on the base line (what follows a script came back down);
        # nothing below half size, no shift beyond a line
        assert all(s == pytest.approx(0.0, abs=1e-12) for _, s, k in layout if k == 1.0), label
        assert all(k >= SCRIPT_SCALE**2 - 1e-12 and abs(s) < 1.2 for _, s, k in layout), label
    assert len(literals) > 40 and scripted > 30, (len(literals), scripted)


def test_every_chart_of_a_report_is_wellformed_xml():
    trends = [
        Trend("singular value s_α", "half-learning time t½", (0.5, 1.0, 2.0), (6.2, 3.4, 1.9),
              predicted=(6.0, 3.5, 1.9), x_log=True),
        Trend("m", "‖∇R‖_∞/(β‖θ‖_∞) − 1 at T_d", (250.0, 1000.0, 4000.0), (0.3, 0.1, 0.02),
              y_err=(0.01, 0.01, 0.005), x_log=True),
        Trend("ln m", "T_d (seed mean)", (5.52, 6.91, 8.29), (4.19, 4.89, 5.59)),
        Trend("width m", "m^{-(2α₁−1)} & <K>", (1.0, 2.0), (1.0, 0.5)),
    ]  # fmt: skip
    checks = [
        Check.compare(f"claim {i}: q_max(T_d) ≤ m^{{-{i}}}", "paper Thm 1", holds=True,
                      predicted="≤ 1", measured="0.5")
        for i in range(len(trends))
    ]  # fmt: skip
    checks = [dataclasses.replace(c, trend=t) for c, t in zip(checks, trends, strict=True)]
    curves = [
        Curve("main run", [0.0, 1.0, 2.0], [1.0, 0.5, 0.2]),
        Curve("θ_0 = 0", [0.0, 2.0], [1.0, 0.4]),
    ]
    page = experiment_report(name="p", title="T", checks=checks, curves=curves)
    svgs = SVG.findall(re.sub(r"<script\b.*?</script>", "", page, flags=re.S))
    assert len(svgs) == len(trends) + 1
    spans = 0
    for svg in svgs:
        root = ET.fromstring(svg)  # raises on anything not well-formed
        for el in root.iter("text"):
            layout = _layout(el)
            if el.find("tspan") is not None:
                spans += 1
                assert el.get("aria-label"), ET.tostring(el, encoding="unicode")
            # what follows a script comes back: full-size characters sit on the base line
            assert all(s == pytest.approx(0.0, abs=1e-12) for _, s, k in layout if k == 1.0)
    assert spans == 5, spans  # s_α, ‖∇R‖_∞…, T_d, m^{…} and the legend's θ_0
    assert 'aria-label="‖∇R‖_∞/(β‖θ‖_∞) − 1 at T_d"' in page
    assert "m^{-(2α₁−1)} &amp; &lt;K&gt;" in page  # escaped, in the label's aria-label
