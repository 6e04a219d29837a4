"""Formulas in the reports rendered as MathML (`flows._report.math`): every formula the four
papers' claims write (collected from their source: the string literals of
`flows/experiments/`) becomes well-formed MathML, and what the converter does not know
stays text."""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flows._report.html import experiment_report
from flows._report.math import formula_html, to_mathml
from flows.claims import Check, Reference, annotate

EXPERIMENTS_DIR = Path(__file__).resolve().parents[1] / "flows" / "experiments"
MATH = re.compile(r"<math\b.*?</math>", re.S)


def _literals() -> list[str]:
    """Every string literal (and f-string part) of the papers' code holding a script
    marker: the claims, predictions, statements and reasons the reports show."""
    found = set()
    for path in sorted(EXPERIMENTS_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.search(r"[^\s_]\^|[^\W_]_[^\W_]|_\{", node.value):
                    found.add(node.value)
    return sorted(found)


LITERALS = _literals()


def _parse(math: str) -> ET.Element:
    return ET.fromstring(math)  # raises on anything not well-formed


def test_the_papers_formulas_become_wellformed_mathml():
    rendered = 0
    for text in LITERALS:
        page = formula_html(text)
        for math in MATH.findall(page):
            root = _parse(math)
            assert root.tag == "math", math
            for el in root.iter():
                n = len(list(el))
                if el.tag in ("msub", "msup"):
                    assert n == 2, (text, math)
                elif el.tag == "msubsup":
                    assert n == 3, (text, math)
            rendered += 1
        # the text outside the formulas is kept, in order
        outside = MATH.sub("", page)
        assert "<" not in outside.replace("&lt;", ""), (text, page)
    assert len(LITERALS) > 40 and rendered > 60, (len(LITERALS), rendered)


@pytest.mark.parametrize(
    ("text", "elements"),
    [
        ("m^{-(2α₁−1)}", ["msup", "mi:m", "mo:−", "mn:2", "mi:α₁", "mn:1"]),
        ("q_max(T_d)", ["msub", "mi:q", "mi:max", "mi:T", "mi:d"]),
        ("(Δ_min/2V_max^r)^(1/(r−1))", ["msup", "msub", "msubsup", "mi:V", "mi:r"]),
        ("W_ii^r", ["msubsup", "mi:W", "mi:ii", "mi:r"]),
        ("ρ_|a|", ["msub", "mi:ρ", "mo:|", "mi:a"]),
        ("m^-0.36", ["msup", "mo:−", "mn:0.36"]),
        ("(ln m)^{3γ}", ["msup", "mi:ln", "mi:m", "mn:3", "mi:γ"]),
        ("max_{k,i≥2}", ["msub", "mi:max", "mi:k", "mo:≥", "mn:2"]),
        ("f^[α]", ["msup", "mi:f", "mo:[", "mi:α", "mo:]"]),
    ],
)
def test_known_formulas(text, elements):
    root = _parse(to_mathml(text))
    seen = [el.tag for el in root.iter()] + [f"{el.tag}:{el.text}" for el in root.iter()]
    for e in elements:
        assert e in seen, (e, seen)


@pytest.mark.parametrize(
    "text",
    [
        "tol_factor·rtol",  # identifiers: a script on a word is not math
        "bias_order.png",
        "plateau_GD",
        "x^{unclosed",  # unbalanced
        "a^",  # nothing after the marker
        "_alone",
    ],
)
def test_what_it_does_not_know_stays_text(text):
    assert formula_html(text) == text.replace("&", "&amp;").replace("<", "&lt;")


def test_prose_keeps_its_words_and_escapes():
    text = "plateau: |R(T_p) − R(0)| / T_p ≲ 1/(m^{2α₁−1} ln m) <b>&"
    page = formula_html(text)
    assert page.count("<math") == 3
    assert page.startswith("plateau: |R(<math") and page.endswith(" ln m) &lt;b&gt;&amp;")
    with pytest.raises(ValueError):
        to_mathml("x^{")


def test_check_reports_render_the_claims_formulas():
    c = Check(
        "plateau: |R(T_p) − R(0)| / T_p ≲ 1/(m^{2α₁−1} ln m)", "paper Thm 1 (27)",
        "≤ m^{-(2α₁−1)}", "0.3 m^-0.5", "holds",
    )  # fmt: skip
    (c,) = annotate([c], {"plateau": Reference(statement="K is Θ(m^{-(2α₁−1)})")}, paper="P")
    page = experiment_report(name="x", title="T", checks=[c], results={"config": {"n_save": 3}})
    for math in MATH.findall(page):
        _parse(math)
    # the claim's four formulas in its card's line, the prediction's and the statement's
    assert page.count("<math") >= 4 + 1 + 1
    assert "m^{" not in page.split("<pre>")[0]  # rendered above the terminal's table
    assert "m^{-(2α₁−1)}" in page.split("<pre>")[1]  # the terminal's table stays text
    assert "n_save" in page  # configuration keys are not formulas
