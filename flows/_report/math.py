"""Formulas in the reports' text rendered as MathML (no script, nothing fetched), and in
their SVG charts' labels as SVG text with real sub- and superscripts.

The claims write their formulas as TeX-like text inside prose: `m^{-(2α₁−1)}`,
`q_max(T_d)`, `(Δ_min/2V_max^r)^(1/(r−1))`, `W_ii^r`, `ρ_|a|`, with Greek letters and
sub/superscript digits already in Unicode. `formula_html` finds each such formula in a
text — a base (one letter, possibly with a hat or prime; a named operator such as `max`;
or a group in parentheses, brackets or bars) followed by `_…` and/or `^…` scripts (braced,
parenthesized, a signed number or a run of letters) — and writes it as inline `<math>`;
everything else, and anything it cannot parse (unbalanced braces, an identifier such as
`tol_factor`), stays text. Chromium, Firefox and Safari lay MathML out natively.

SVG has no MathML inside `<text>`, so `formula_svg` finds the same formulas by the same
rules, parsed by the same parser into the same tree, and sets them as `<tspan>`s: scripts
smaller and moved off the base line with `dy` (which every browser honours, unlike
`baseline-shift`), moved back after them; braces dropped, brackets kept.
"""

from __future__ import annotations

import dataclasses
import html
import unicodedata
from collections.abc import Callable

__all__ = [
    "Run",
    "formula_html",
    "formula_runs",
    "formula_svg",
    "runs_svg",
    "to_mathml",
    "to_svg_runs",
]

#: Multi-letter names set upright as one identifier (a base or a script).
NAMES = frozenset({"max", "min", "ln", "log", "exp", "sup", "inf", "lim", "tr", "det"})
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_BARS = "|‖"
_MARKS = "′″‴'"  # primes attached to a letter
_SUBSUP_DIGITS = "₀₁₂₃₄₅₆₇₈₉⁰¹²³⁴⁵⁶⁷⁸⁹ⁱ"
_MINUS = "-−"


class _NoParse(ValueError):
    """The text is not in the subset `to_mathml` knows."""


def _e(s: str) -> str:
    return html.escape(s, quote=False)


def _is_letter(ch: str) -> bool:
    return ch.isalpha()


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch) in ("Mn", "Me") or ch in _MARKS or ch in _SUBSUP_DIGITS


def _match_right(s: str, i: int) -> int:
    """Index after the bracket closing the one at `i`; _NoParse if unbalanced."""
    depth, opener, closer = 0, s[i], _OPEN[s[i]]
    for j in range(i, len(s)):
        if s[j] == opener:
            depth += 1
        elif s[j] == closer:
            depth -= 1
            if depth == 0:
                return j + 1
    raise _NoParse(s)


def _match_left(s: str, i: int) -> int:
    """Index of the bracket opening the one closing at `i`; -1 if unbalanced."""
    depth, closer, opener = 0, s[i], _CLOSE[s[i]]
    for j in range(i, -1, -1):
        if s[j] == closer:
            depth += 1
        elif s[j] == opener:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _letter_end(s: str, i: int) -> int:
    """End of the identifier starting with the letter at `i` (its marks included)."""
    j = i + 1
    while j < len(s) and _is_mark(s[j]):
        j += 1
    return j


def _number_end(s: str, i: int) -> int:
    j = i
    while j < len(s) and (
        s[j].isdigit() or (s[j] == "." and j + 1 < len(s) and s[j + 1].isdigit())
    ):
        j += 1
    return j


def _script_end(s: str, i: int) -> int:
    """End of the script that starts at `i` (just after `^` or `_`); _NoParse if none."""
    if i >= len(s):
        raise _NoParse(s)
    ch = s[i]
    if ch in _OPEN:
        return _match_right(s, i)
    if ch in _BARS:
        j = s.find(ch, i + 1)
        if j < 0 or j - i > 12:
            raise _NoParse(s)
        return j + 1
    if ch in _MINUS + "+" and i + 1 < len(s) and s[i + 1].isdigit():
        return _number_end(s, i + 1)
    if ch.isdigit():
        return _number_end(s, i)
    if ch.isascii() and ch.isalnum():
        j = i
        while j < len(s) and s[j].isascii() and s[j].isalnum():
            j += 1
        return j
    if _is_letter(ch):
        return _letter_end(s, i)
    if ch == "∞":
        return i + 1
    raise _NoParse(s)


def _scripts_end(s: str, i: int) -> int:
    """End of the scripts (`_…`, `^…`, at most one of each) starting at `i`."""
    seen = set()
    while i < len(s) and s[i] in "^_" and s[i] not in seen:
        seen.add(s[i])
        i = _script_end(s, i + 1)
    return i


# ---------------------------------------------------------------------------------------
# Parsing one formula: a small tree that each output (MathML, SVG text) renders


@dataclasses.dataclass(frozen=True)
class _Tok:
    """A leaf: an identifier (`mi`), a number (`mn`), an operator (`mo`) or white space
    (`sp`: dropped by MathML, which spaces by itself; kept by SVG text)."""

    kind: str
    text: str


@dataclasses.dataclass(frozen=True)
class _Group:
    """A braced group (`open` and `close` empty: braces are not shown) or a fenced one
    (parentheses, brackets: shown)."""

    items: tuple[_Node, ...]
    open: str = ""
    close: str = ""


@dataclasses.dataclass(frozen=True)
class _Scripted:
    """A base with a subscript and/or a superscript."""

    base: _Node
    sub: _Node | None
    sup: _Node | None


_Node = _Tok | _Group | _Scripted


def _parse_row(s: str) -> list[_Node]:
    """The items of the formula text `s`."""
    items: list[_Node] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch.isspace():
            j = i
            while j < len(s) and s[j].isspace():
                j += 1
            items.append(_Tok("sp", " "))
            i = j
        elif ch in "^_":
            while items and isinstance(items[-1], _Tok) and items[-1].kind == "sp":
                items.pop()  # `a ^2`: the script is on `a`
            if not items:
                raise _NoParse(s)
            i = _attach(s, i, items)
        elif ch.isdigit():
            j = _number_end(s, i)
            items.append(_Tok("mn", s[i:j]))
            i = j
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < len(s) and s[j].isascii() and s[j].isalpha():
                j += 1
            if s[i:j] not in NAMES:
                j = _letter_end(s, i)
            items.append(_Tok("mi", s[i:j]))
            i = j
        elif _is_letter(ch):
            j = _letter_end(s, i)
            items.append(_Tok("mi", s[i:j]))
            i = j
        elif ch in _OPEN:
            j = _match_right(s, i)
            inner = tuple(_parse_row(s[i + 1 : j - 1]))
            items.append(_Group(inner) if ch == "{" else _Group(inner, ch, s[j - 1]))
            i = j
        elif ch in _CLOSE:
            raise _NoParse(s)
        else:
            items.append(_Tok("mo", ch))
            i += 1
    return items


def _script(s: str) -> _Node:
    """The tree of a script's text (as `_script_end` delimits it)."""
    if s[0] == "{":
        return _Group(tuple(_parse_row(s[1:-1])))
    if s[0] in _MINUS + "+":
        return _Group((_Tok("mo", s[0]), _Tok("mn", s[1:])))
    if s[0].isdigit():
        return _Tok("mn", s)
    if s[0].isascii() and s[0].isalnum():
        return _Tok("mi", s)  # `max`, `ii`, `eff`: one upright name (one letter: italic)
    return _Group(tuple(_parse_row(s)))


def _attach(s: str, i: int, items: list[_Node]) -> int:
    """Apply the scripts starting at `s[i]` to the last item; returns the index after them."""
    base = items.pop()
    scripts: dict[str, _Node] = {}
    while i < len(s) and s[i] in "^_" and s[i] not in scripts:
        end = _script_end(s, i + 1)
        scripts[s[i]] = _script(s[i + 1 : end])
        i = end
    items.append(_Scripted(base, scripts.get("_"), scripts.get("^")))
    return i


def _parse(formula: str) -> list[_Node]:
    """The items of one formula; `_NoParse` when there is nothing but white space."""
    items = _parse_row(formula)
    if not [n for n in items if not (isinstance(n, _Tok) and n.kind == "sp")]:
        raise _NoParse(formula)
    return items


# ---------------------------------------------------------------------------------------
# The tree as MathML


def _mo(op: str) -> str:
    return f"<mo>{_e('−' if op == '-' else op)}</mo>"


def _row(items: list[str]) -> str:
    return items[0] if len(items) == 1 else "<mrow>" + "".join(items) + "</mrow>"


def _mathml_items(items: tuple[_Node, ...] | list[_Node]) -> list[str]:
    return [_mathml(n) for n in items if not (isinstance(n, _Tok) and n.kind == "sp")]


def _mathml(node: _Node) -> str:
    if isinstance(node, _Tok):
        return (
            _mo(node.text) if node.kind == "mo" else f"<{node.kind}>{_e(node.text)}</{node.kind}>"
        )
    if isinstance(node, _Group):
        inner = _mathml_items(node.items)
        if not node.open:
            return _row(inner) if inner else "<mrow></mrow>"
        return "<mrow>" + _mo(node.open) + "".join(inner) + _mo(node.close) + "</mrow>"
    base = _mathml(node.base)
    if node.sub is not None and node.sup is not None:
        return f"<msubsup>{base}{_mathml(node.sub)}{_mathml(node.sup)}</msubsup>"
    if node.sub is not None:
        return f"<msub>{base}{_mathml(node.sub)}</msub>"
    assert node.sup is not None
    return f"<msup>{base}{_mathml(node.sup)}</msup>"


def to_mathml(formula: str) -> str:
    """`formula` (TeX-like text: `m^{-(2α₁−1)}`, `W_ii^r`) as one inline `<math>` element.

    **Raises:** `ValueError` for text outside the subset (unbalanced brackets, a script with
    nothing to attach to or nothing after its `^`/`_`)."""
    items = _mathml_items(_parse(formula))
    return f'<math display="inline"><mrow>{"".join(items)}</mrow></math>'


# ---------------------------------------------------------------------------------------
# The tree as SVG text: runs of characters, each at a baseline shift and a font scale

#: Font scale of a script relative to its base, and the baseline shifts of a superscript
#: (up) and a subscript (down), in ems of the base's font (SVG's y grows downward): half
#: and three tenths of the script's own em, numbers that `dy` writes exactly.
SCRIPT_SCALE = 0.75
SUP_SHIFT = -0.375
SUB_SHIFT = 0.225


@dataclasses.dataclass(frozen=True)
class Run:
    """Characters set at one baseline `shift` and font `scale`, both relative to the
    text's own font: shift in its ems (negative: up), scale a fraction of its size."""

    text: str
    shift: float = 0.0
    scale: float = 1.0


def _runs(node: _Node, shift: float, scale: float) -> list[Run]:
    if isinstance(node, _Tok):
        return [Run("−" if node.kind == "mo" and node.text == "-" else node.text, shift, scale)]
    if isinstance(node, _Group):
        out = [Run(node.open, shift, scale)] if node.open else []
        for item in node.items:
            out += _runs(item, shift, scale)
        return out + ([Run(node.close, shift, scale)] if node.close else [])
    out = _runs(node.base, shift, scale)
    small = scale * SCRIPT_SCALE
    if node.sub is not None:
        out += _runs(node.sub, shift + SUB_SHIFT * scale, small)
    if node.sup is not None:  # after the subscript: SVG text has no stacking
        out += _runs(node.sup, shift + SUP_SHIFT * scale, small)
    return out


def _merge(runs: list[Run]) -> list[Run]:
    """Adjacent runs at the same level joined; white space (which a browser may collapse,
    and so cannot carry a shift) joins the run before it."""
    out: list[Run] = []
    for r in runs:
        if not r.text:
            continue
        if out and (not r.text.strip() or (r.shift, r.scale) == (out[-1].shift, out[-1].scale)):
            out[-1] = dataclasses.replace(out[-1], text=out[-1].text + r.text)
        else:
            out.append(r)
    return out


def _num(v: float) -> str:
    return f"{v:.6g}"


def runs_svg(runs: list[Run]) -> str:
    """The content of an SVG `<text>` setting `runs`: text at the text's own level as is,
    the rest in `<tspan>`s with a relative `font-size` and a `dy` from the previous run's
    baseline (`dy` moves the baseline of what follows too, so a return to the base line is
    a `dy` back). Escaped; well-formed XML."""
    out, at = [], 0.0
    for r in runs:
        attrs = ""
        if r.scale != 1.0:
            attrs += f' font-size="{_num(100 * r.scale)}%"'
        if r.shift != at:
            # `em` of the tspan's own font: the shift, in the text's ems, over the scale;
            # `at` follows what was written, so the way back to the base line is exact
            dy = _num((r.shift - at) / r.scale)
            attrs += f' dy="{dy}em"'
            at += float(dy) * r.scale
        text = html.escape(r.text, quote=True)
        out.append(f"<tspan{attrs}>{text}</tspan>" if attrs else text)
    return "".join(out)


def to_svg_runs(formula: str) -> list[Run]:
    """`formula` (TeX-like text, as `to_mathml` takes it) as runs of SVG text: scripts
    smaller (`SCRIPT_SCALE`) and shifted (`SUP_SHIFT`, `SUB_SHIFT`), braces dropped,
    white space kept (a label's spacing is its text's).

    **Raises:** `ValueError` for text outside the subset, as `to_mathml`."""
    out: list[Run] = []
    for item in _parse(formula):
        out += _runs(item, 0.0, 1.0)
    return _merge(out)


# ---------------------------------------------------------------------------------------
# Formulas inside prose


def _base_start(s: str, i: int) -> int:
    """Where the base of the script marker at `i` starts, or -1 when it has none the
    subset knows (an identifier such as `tol_factor`: a script on a word is not math)."""
    j = i - 1
    if j < 0:
        return -1
    if s[j] in _CLOSE:
        return _match_left(s, j)
    if s[j] in _BARS:
        k = s.rfind(s[j], 0, j)
        return k if k >= 0 and j - k <= 12 else -1
    while j >= 0 and _is_mark(s[j]):
        j -= 1
    if j < 0 or not _is_letter(s[j]):
        return -1
    if s[j].isascii():
        k = j
        while k > 0 and s[k - 1].isascii() and s[k - 1].isalpha():
            k -= 1
        if k < j:  # a run of letters: a named operator (`max_i`) or else a word
            return k if s[k : j + 1] in NAMES and not _word_char(s, k - 1) else -1
    return -1 if _word_char(s, j - 1) else j


def _word_char(s: str, k: int) -> bool:
    """Whether `s[k]` continues a word or an identifier (a letter or an underscore)."""
    return k >= 0 and (s[k] == "_" or s[k].isalpha())


def _formulas(text: str) -> list[tuple[int, int]]:
    """(start, end) of every formula in `text` that parses, in order, not overlapping."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(text):
        if text[i] not in "^_":
            i += 1
            continue
        start = _base_start(text, i)
        try:
            if start < 0:
                raise _NoParse(text)
            end = _scripts_end(text, i)
            _parse(text[start:end])
            while out and out[-1][0] >= start:  # a group base holds formulas found before
                out.pop()
            out.append((start, end))
            i = end
        except _NoParse:
            i += 1
    return out


def _split(text: str) -> list[tuple[str, bool]]:
    """`text` cut into (piece, whether it is a formula), in order; the pieces join to `text`."""
    parts, last = [], 0
    for start, end in _formulas(text):
        parts += [(text[last:start], False), (text[start:end], True)]
        last = end
    parts.append((text[last:], False))
    return parts


def formula_html(text: str, plain: Callable[[str], str] = _e) -> str:
    """`text` as HTML with every formula it contains as MathML (`to_mathml`); the rest goes
    through `plain` (default: escaped). A formula that does not parse stays text."""
    return "".join(to_mathml(p) if is_math else plain(p) for p, is_math in _split(text))


def formula_runs(text: str) -> list[Run]:
    """`text` as runs of SVG text with every formula it contains set by `to_svg_runs`; the
    rest, and a formula that does not parse (`formula_html`'s rules), at the base line."""
    out: list[Run] = []
    for piece, is_math in _split(text):
        out += to_svg_runs(piece) if is_math else [Run(piece)]
    return _merge(out)


def formula_svg(text: str) -> str:
    """`text` as the content of an SVG `<text>` element: its formulas with real sub- and
    superscripts (`formula_runs`, `runs_svg`), the rest escaped."""
    return runs_svg(formula_runs(text))
