"""Formulas in the reports' text rendered as MathML (no script, nothing fetched).

The claims write their formulas as TeX-like text inside prose: `m^{-(2α₁−1)}`,
`q_max(T_d)`, `(Δ_min/2V_max^r)^(1/(r−1))`, `W_ii^r`, `ρ_|a|`, with Greek letters and
sub/superscript digits already in Unicode. `formula_html` finds each such formula in a
text — a base (one letter, possibly with a hat or prime; a named operator such as `max`;
or a group in parentheses, brackets or bars) followed by `_…` and/or `^…` scripts (braced,
parenthesized, a signed number or a run of letters) — and writes it as inline `<math>`;
everything else, and anything it cannot parse (unbalanced braces, an identifier such as
`tol_factor`), stays text. Chromium, Firefox and Safari lay MathML out natively.
"""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Callable

__all__ = ["formula_html", "to_mathml"]

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
# Parsing one formula into MathML


def _mi(name: str) -> str:
    return f"<mi>{_e(name)}</mi>"


def _mo(op: str) -> str:
    return f"<mo>{_e('−' if op == '-' else op)}</mo>"


def _row(items: list[str]) -> str:
    return items[0] if len(items) == 1 else "<mrow>" + "".join(items) + "</mrow>"


def _parse_row(s: str) -> list[str]:
    """The items (MathML elements) of the formula text `s`."""
    items: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch.isspace():
            i += 1
        elif ch in "^_":
            if not items:
                raise _NoParse(s)
            i = _attach(s, i, items)
        elif ch.isdigit():
            j = _number_end(s, i)
            items.append(f"<mn>{_e(s[i:j])}</mn>")
            i = j
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < len(s) and s[j].isascii() and s[j].isalpha():
                j += 1
            if s[i:j] in NAMES:
                items.append(_mi(s[i:j]))
                i = j
            else:
                j = _letter_end(s, i)
                items.append(_mi(s[i:j]))
                i = j
        elif _is_letter(ch):
            j = _letter_end(s, i)
            items.append(_mi(s[i:j]))
            i = j
        elif ch in _OPEN:
            j = _match_right(s, i)
            inner = _parse_row(s[i + 1 : j - 1])
            if ch == "{":
                items.append(_row(inner) if inner else "<mrow></mrow>")
            else:
                items.append("<mrow>" + _mo(ch) + "".join(inner) + _mo(s[j - 1]) + "</mrow>")
            i = j
        elif ch in _CLOSE:
            raise _NoParse(s)
        else:
            items.append(_mo(ch))
            i += 1
    return items


def _script(s: str) -> str:
    """The MathML of a script's text (as `_script_end` delimits it)."""
    if s[0] == "{":
        return _row(_parse_row(s[1:-1]) or ["<mrow></mrow>"])
    if s[0] in _MINUS + "+":
        return f"<mrow>{_mo(s[0])}<mn>{_e(s[1:])}</mn></mrow>"
    if s[0].isdigit():
        return f"<mn>{_e(s)}</mn>"
    if s[0].isascii() and s[0].isalnum():
        return _mi(s)  # `max`, `ii`, `eff`: one upright name (one letter: italic)
    return _row(_parse_row(s))


def _attach(s: str, i: int, items: list[str]) -> int:
    """Apply the scripts starting at `s[i]` to the last item; returns the index after them."""
    base = items.pop()
    scripts: dict[str, str] = {}
    while i < len(s) and s[i] in "^_" and s[i] not in scripts:
        end = _script_end(s, i + 1)
        scripts[s[i]] = _script(s[i + 1 : end])
        i = end
    if "_" in scripts and "^" in scripts:
        items.append(f"<msubsup>{base}{scripts['_']}{scripts['^']}</msubsup>")
    elif "_" in scripts:
        items.append(f"<msub>{base}{scripts['_']}</msub>")
    else:
        items.append(f"<msup>{base}{scripts['^']}</msup>")
    return i


def to_mathml(formula: str) -> str:
    """`formula` (TeX-like text: `m^{-(2α₁−1)}`, `W_ii^r`) as one inline `<math>` element.

    **Raises:** `ValueError` for text outside the subset (unbalanced brackets, a script with
    nothing to attach to or nothing after its `^`/`_`)."""
    items = _parse_row(formula)
    if not items:
        raise _NoParse(formula)
    return f'<math display="inline"><mrow>{"".join(items)}</mrow></math>'


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


def formula_html(text: str, plain: Callable[[str], str] = _e) -> str:
    """`text` as HTML with every formula it contains as MathML (`to_mathml`); the rest goes
    through `plain` (default: escaped). A formula that does not parse stays text."""
    out: list[tuple[int, int, str]] = []  # (start, end, MathML) of the formulas found
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
            while out and out[-1][0] >= start:  # a group base holds formulas found before
                out.pop()
            out.append((start, end, to_mathml(text[start:end])))
            i = end
        except _NoParse:
            i += 1
    parts, last = [], 0
    for start, end, math in out:
        parts += [plain(text[last:start]), math]
        last = end
    parts.append(plain(text[last:]))
    return "".join(parts)
