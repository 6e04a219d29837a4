"""The documentation site (`docs/`, `mkdocs.yml`): its examples run, it builds strictly.

- Every ```python block in `docs/**/*.md` preceded by `<!-- runnable -->` is executed, the
  blocks of one page in order in one namespace (a page builds up its state), in a
  temporary working directory. A ```python block must be marked either runnable or
  `<!-- not run: REASON -->`, so an example cannot silently drop out of the tests.
- Every page holds its own text: no page includes text from elsewhere (the former
  `<!-- readme: … -->` markers and `docs/_sections.md`), so each reads as a plain
  Markdown file. Figures (`<!-- figure: … -->`) are shown when present and named when not.
- Formulas are marked: every formula in a page's prose and tables (a TeX-like script,
  `m^{2α₁−1}`, `T_d`, found by the reports' own rules) is written between dollar signs,
  and `docs/_hooks.py` renders `$…$` as MathML (text outside code only; a formula it
  cannot read is a build warning, so the strict build fails on it).
- Every public name (of `flows`, `flows.models`, `flows.plugin`, `flows.figures`,
  `reduced`) has a docstring as the API reference reads it (a `#:` comment for a
  constant, through `docs/_griffe_comments.py`) and, in the built site, an entry of its
  own.
- Every `flows` command has its page under "Command line", generated from the parser by
  `docs/_cli_pages.py` — a table of options with their defaults — and listed in the nav:
  a new command fails here until it is listed.
- Every notebook has its page under "Examples", rendered from the stored, executed notebook
  by `docs/_notebooks.py` (figures extracted; claims tables narrowed to claim · verdict ·
  margin, the full table folded), with a card in the gallery; listed in the nav likewise.
- `mkdocs build --strict` (warnings are errors) builds the site into a temporary folder,
  offline; skipped, with the reason, when the `docs` extra is not installed. The built
  pages load nothing from another host (no web fonts, no CDN), hold their formulas as
  MathML, and no paragraph, list item or table cell of theirs runs over `MAX_WORDS` (150)
  words (but the docstrings listed in `LONG_DOCSTRINGS`, text the docs do not hold).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import subprocess
import sys
import types
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

_BLOCK = re.compile(r"^```python[^\n]*\n(?P<code>.*?)^```", re.S | re.M)
_MARK = re.compile(r"<!--\s*(?P<mark>runnable|not run:[^>]*?)\s*-->\s*$")


def _pages() -> list[Path]:
    """The site's pages (files starting with `_` are the build's own: hooks)."""
    return sorted(p for p in DOCS.rglob("*.md") if not p.name.startswith("_"))


def _blocks(page: Path) -> list[tuple[int, str | None, str]]:
    """(line, mark, code) of every ```python block; mark is the marker on the preceding
    non-blank line ('runnable', 'not run: …') or None."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").splitlines()
        mark = _MARK.search(before[-1]) if before else None
        out.append((line, mark.group("mark") if mark else None, m.group("code")))
    return out


RUNNABLE = {
    page.relative_to(DOCS).as_posix(): [(ln, code) for ln, mark, code in bs if mark == "runnable"]
    for page in _pages()
    if (bs := _blocks(page))
}
RUNNABLE = {k: v for k, v in RUNNABLE.items() if v}


def test_docs_have_runnable_examples():
    # the pages that teach the API each carry at least one executed example
    for page in ("getting-started.md", "own-model.md", "own-claim.md", "solvers.md"):
        assert page in RUNNABLE, f"docs/{page} has no `<!-- runnable -->` python block"
    assert sum(len(v) for v in RUNNABLE.values()) >= 10


def test_every_python_block_is_marked():
    unmarked = [
        f"docs/{page.relative_to(DOCS).as_posix()}:{line}"
        for page in _pages()
        for line, mark, _ in _blocks(page)
        if mark is None
    ]
    assert not unmarked, (
        "```python blocks must be preceded by `<!-- runnable -->` (executed by this test) or "
        f"`<!-- not run: REASON -->`: {unmarked}"
    )


#: Pages whose examples run real solves for 20 s or more (measured on 2 loaded cores): run by
#: `pytest -m e2e` (and `.ci/run`), not by the default command.
LONG_PAGES = {
    "solvers.md",
    "own-model.md",
    "own-claim.md",
    "getting-started.md",
    "papers/deep-linear.md",
}


@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.e2e) if p in LONG_PAGES else p for p in sorted(RUNNABLE)],
)
def test_runnable_examples(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples may write files (trajectory.nc, …)
    # a real module, so classes defined in an example (dataclasses, equinox modules) can
    # find their module
    module = types.ModuleType(f"docs_example_{Path(page).stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for line, code in RUNNABLE[page]:
        # the file name and line make a traceback point at the page's block
        exec(compile(code, f"docs/{page}, block at line {line}", "exec"), module.__dict__)  # noqa: S102


def _docs_module(file: str, needs: str = "mkdocs"):
    """A module of `docs/` (a hook, the griffe extension), loaded from its file."""
    pytest.importorskip(needs, reason="the `docs` extra is not installed")
    name = f"flows_docs_{Path(file).stem.lstrip('_')}"
    spec = importlib.util.spec_from_file_location(name, DOCS / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hooks():
    return _docs_module("_hooks.py")


def test_pages_hold_their_own_text():
    # the text of every page is in its file: nothing spliced in at build time
    assert not (DOCS / "_sections.md").exists(), "docs/_sections.md is back: move its text"
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        assert "<!-- readme:" not in text, f"docs/{page.relative_to(DOCS)} splices text in"
    assert not hasattr(_hooks(), "readme_section")


def _math_module():
    """The reports' formula renderer (in its package, or its module before the move)."""
    try:
        return importlib.import_module("flows._report.math")
    except ImportError:
        return importlib.import_module("flows._report_math")


# what is not prose: fenced blocks are dropped first; then code spans, formulas already
# marked, link targets and references, HTML comments and tags, URLs
_NOT_PROSE = re.compile(
    r"(`+).*?\1|\$[^$\n]+\$|\]\([^)]*\)|\]\[[^\]]*\]|<!--.*?-->|<[^>]+>|https?://\S+"
)
_FENCED = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def test_formulas_are_marked():
    # a formula in a page's prose or tables is written $…$ (so it is rendered as MathML):
    # the reports' own rules find none left unmarked outside code
    formulas = _math_module()._formulas
    unmarked = []
    for page in _pages():
        text = _FENCED.sub("", page.read_text(encoding="utf-8"))
        for line in text.splitlines():
            if line.startswith(":::"):  # an API reference entry (mkdocstrings)
                continue
            prose = _NOT_PROSE.sub(" ", line)
            unmarked += [
                f"docs/{page.relative_to(DOCS)}: {prose[a:b]!r} in {line.strip()[:60]!r}"
                for a, b in formulas(prose)
            ]
    assert not unmarked, "write these formulas as $…$:\n" + "\n".join(unmarked)


def test_math_extension(caplog):
    hooks = _hooks()
    import markdown

    md = markdown.Markdown(extensions=[hooks.Math(), "tables", "fenced_code"])
    html = md.convert(
        "A rate $m^{2α₁−1}$ and `$x_1$` in code; costs $5 and $6.\n\n"
        "| a | b |\n|---|---|\n| $\\|a\\|_∞$ | c |\n\n```\n$T_d$\n```\n"
    )
    assert html.count("<math") == 2 and "<msup><mi>m</mi>" in html
    assert "<code>$x_1$</code>" in html and "$5 and $6" in html
    assert "<msub><mrow><mo>|</mo>" in html or "<mo>|</mo>" in html  # the escaped bar
    assert "<code>$T_d$\n</code>" in html  # a code block keeps its dollars
    md.reset()
    with caplog.at_level("WARNING"):
        kept = md.convert("bad $x^$ here")
    assert "<math" not in kept and "cannot be rendered" in caplog.text


def test_formulas_found_in_text_the_docs_do_not_hold():
    # docstrings and notebooks keep the reports' plain notation: found and rendered there
    render = _hooks().render_formulas
    out = render("<p>rate m^{-2α} and tol^{p/(p+1)}; <code>q_max^2</code> tol_factor</p>")
    assert out.count("<math") == 2 and "^{" not in out.replace("<code>q_max^2</code>", "")
    assert "<code>q_max^2</code>" in out and "tol_factor" in out


def test_list_spacing_preprocessor():
    hooks = _hooks()
    import markdown

    md = markdown.Markdown(extensions=[hooks.ListSpacing(), "fenced_code"])
    html = md.convert("**Arguments:**\n- `a`: one\n  continued\n- `b`: two\n")
    assert html.count("<li>") == 2 and "continued" in html
    md.reset()
    fenced = md.convert("```\ntext\n- not a list\n```\n")
    assert "<li>" not in fenced


def test_tokens_kept_whole():
    # numbers, ranges, flags and names with a break opportunity inside are kept on one line
    # (tests/test_browser.py measures the built pages); compound words, long tokens, paths
    # and identifiers may wrap; code blocks, tags and attributes are left alone
    keep = _hooks().keep_tokens_whole
    html = (
        "<p>rtol 1e-6, 35–66 steps, Runge–Kutta–Chebyshev, (<code>--quick</code>); "
        'non-increasing /tmp/a-b x_y-1 AT&amp;T <a href="a-1">x-1</a> (60), h·ρ</p>'
        "<pre><code>1e-6</code></pre><!-- a-1 -->"
    )
    assert keep(html) == (
        '<p>rtol <span class="nw">1e-6,</span> <span class="nw">35–66</span> steps, '
        '<span class="nw">Runge–Kutta–Chebyshev,</span> (<code><span class="nw">--quick</span>'
        "</code>); non-increasing /tmp/a-b x_y-1 AT&amp;T "
        '<a href="a-1"><span class="nw">x-1</span></a> (60), h·ρ</p><pre><code>1e-6</code></pre>'
        "<!-- a-1 -->"
    )
    assert keep("<p>" + "1-" * 30 + "</p>") == "<p>" + "1-" * 30 + "</p>"  # too long


def test_figure_markers(tmp_path, monkeypatch):
    hooks = _hooks()
    page = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="papers/x.md"))
    text = "<!-- figure: results/demo/a.png | A -->\n<!-- figure: results/demo/b.png | B -->"
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "a.png").write_bytes(b"\x89PNG")
    monkeypatch.setenv("FLOWS_DOCS_RESULTS", str(tmp_path))
    out = hooks.on_page_markdown(text, page, None, None)
    assert "![A](../results/demo/a.png)" in out  # present: the image, relative to the page
    assert "`results/demo/b.png` is not in this checkout" in out  # missing: said so


#: The modules whose public names must each be documented and rendered in the API reference.
DOCUMENTED_MODULES = ("flows", "flows.models", "flows.plugin", "flows.figures", "reduced")


def _public_names(module_name: str) -> list[str]:
    """A module's public names: its `__all__`, else what its `__init__.py` re-exports
    explicitly (`from ._x import name as name`)."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    return [
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    ]


@pytest.mark.parametrize("module_name", DOCUMENTED_MODULES)
def test_public_names_have_docstrings(module_name):
    griffe = pytest.importorskip("griffe", reason="the `docs` extra is not installed")
    comments = _docs_module("_griffe_comments.py", needs="griffe")
    package = griffe.load(
        module_name.split(".")[0],
        search_paths=[ROOT],
        extensions=griffe.load_extensions(comments.CommentDocstrings),
        resolve_aliases=True,
        resolve_external=False,
    )
    module = package[module_name.split(".", 1)[1]] if "." in module_name else package
    names = _public_names(module_name)
    assert names, module_name
    undocumented = []
    for name in names:
        obj = module[name]
        obj = obj.final_target if obj.is_alias else obj
        if not (obj.docstring and obj.docstring.value.strip()):
            undocumented.append(name)
    assert not undocumented, (
        f"public names of {module_name} without documentation (a docstring; for a constant "
        f"a `#:` comment block directly above it): {undocumented}"
    )


def test_comment_docstrings():
    comments = _docs_module("_griffe_comments.py", needs="griffe")
    lines = ["# not documentation", "#: The first", "#:", "#:  indented", "X = 1", "Y = 2"]
    assert comments.comment_docstring(lines, 5) == "The first\n\n indented"
    assert comments.comment_docstring(lines, 6) is None  # the block belongs to X
    assert comments.comment_docstring(["# plain comment", "Z = 3"], 2) is None


def _nav_section(title: str) -> set[str]:
    """The pages the nav lists under the section `title` (mkdocs.yml)."""
    from mkdocs.utils.yaml import yaml_load

    nav = yaml_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    section = next(e[title] for e in nav if isinstance(e, dict) and title in e)
    return {next(iter(e.values())) if isinstance(e, dict) else e for e in section}


def _cli_nav() -> set[str]:
    """The pages the nav lists under "Command line" (mkdocs.yml)."""
    return _nav_section("Command line")


def _unlisted(pages: dict[str, str]) -> list[str]:
    return sorted(set(pages) - _cli_nav())


def test_every_command_has_a_page():
    cli = _docs_module("_cli_pages.py")
    parser = cli.build_parser()
    commands = cli.subcommands(parser)
    assert {"check", "simulate", "sweep", "derive"} <= set(commands)
    pages = cli.pages(parser)
    for name in commands:
        page = pages.get(f"cli/{name}.md", "")
        assert f"**Usage:** `flows {name}" in page, f"`flows {name}` has no generated page"
    # a table of options with their defaults, not raw help text
    check = pages["cli/check.md"]
    assert "| Option | Default | Meaning |" in check and "usage:" not in check
    assert "| `--out OUT` | results | output folder" in check
    assert "| `--quick` | off |" in check
    # each experiment's own flags, under `flows simulate <experiment>`, with the defaults
    # their help states
    simulate = pages["cli/simulate.md"]
    assert "## flows simulate multistage\n" in simulate
    section = simulate.split("## flows simulate multistage\n", 1)[1].split("\n## ", 1)[0]
    assert "**Usage:** `flows simulate multistage [options] --out OUT`" in section
    assert "| `--m M` | 1000 | width (default 1000) |" in section
    assert "| `--save-params NAME` | ends |" in section  # "all, ends (default), none"
    assert "| `--out OUT` | required |" in section
    unlisted = _unlisted(pages)
    assert not unlisted, f'list these pages in mkdocs.yml\'s nav under "Command line": {unlisted}'
    assert _cli_nav() <= set(pages), "the nav lists a command page that is not generated"


def test_cli_defaults():
    cli = _docs_module("_cli_pages.py")
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--a", type=int, default=3, help="three")
    parser.add_argument("--b", help="stated (default 1e-6; more)")
    parser.add_argument("--c", choices=["x", "y"], help="'x' (plain, default) or 'y'")
    parser.add_argument("--d", action="store_true", help="a switch")
    parser.add_argument("--e", required=True, help="needed: <DIR> | $HOME")
    got = {a.dest: cli.default(parser, a) for a in parser._actions if a.dest != "help"}
    assert got == {"a": "3", "b": "1e-6", "c": "x", "d": "off", "e": "required"}
    table = cli.options_table(parser)
    assert "| `--c NAME` | x | 'x' (plain, default) or 'y' — one of `x`, `y` |" in table
    assert "needed: &lt;DIR&gt; \\| &#36;HOME" in table  # escaped for a table cell
    assert cli.synopsis(parser) == "p [options] --e E"


def test_a_new_command_gets_a_page():
    # what the test above catches: a command added to the parser gets its page generated,
    # and until the nav lists it, it is named
    cli = _docs_module("_cli_pages.py")
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    new = sub.add_parser("plot", help="draw a saved run")
    new.add_argument("--out", help="output folder")
    pages = cli.pages(parser)
    assert "**Usage:** `flows plot [options]`" in pages["cli/plot.md"]
    assert "| `--out OUT` | — | output folder |" in pages["cli/plot.md"]
    assert "Draw a saved run." in pages["cli/plot.md"]
    assert "[`flows plot`](plot.md)" in pages["cli/index.md"]
    assert _unlisted(pages) == ["cli/plot.md"]


def test_every_notebook_has_a_page():
    nbs = _docs_module("_notebooks.py")
    md, files = nbs.pages()
    stems = [p.stem for p in nbs.notebooks()]
    assert len(stems) >= 4
    gallery = md["examples/index.md"]
    for stem in stems:
        name = stem.replace("_", "-")
        page = md[f"examples/{name}.md"]
        assert page.count("```python") >= 2 and f"({name}/figure-1.png)" in page, stem
        assert f"examples/{name}.ipynb" in files and f"examples/{name}/figure-1.png" in files
        assert f"]({name}.md)" in gallery, f"no gallery card for {stem}"
        assert files[f"examples/{name}/figure-1.png"].startswith(b"\x89PNG")
    assert gallery.count("-   [![") == len(stems)
    unlisted = sorted(set(md) - _nav_section("Examples"))
    assert not unlisted, f'list these pages in mkdocs.yml\'s nav under "Examples": {unlisted}'
    assert _nav_section("Examples") <= set(md), "the nav lists an example that is not generated"


def test_notebook_rendering(tmp_path):
    """A small notebook: title, note, code, its text and figure outputs, the docs-path link."""
    import base64
    import json

    nbs = _docs_module("_notebooks.py")
    png = b"\x89PNG\r\n\x1a\n-not-really"
    nb = {
        "metadata": {"flows": {"gallery": {"description": "One sentence."}, "size": "full"}},
        "cells": [
            {"cell_type": "markdown", "source": ["# A title\n", "\n", "See `docs/solvers.md`."]},
            {
                "cell_type": "code",
                "source": "print('```')",
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": "\x1b[1m```\x1b[0m\n"},
                    {
                        "output_type": "display_data",
                        "data": {"image/png": base64.b64encode(png).decode(), "text/plain": "F"},
                    },
                ],
            },
        ],
    }
    path = tmp_path / "my_example.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    r = nbs.render(path)
    assert r.name == "my-example" and r.title == "A title"
    assert r.markdown.index("# A title") < r.markdown.index('!!! note "From')
    assert "[`docs/solvers.md`](../solvers.md)" in r.markdown
    assert "````python\nprint('```')\n````" in r.markdown  # a fence longer than the code's
    assert "````text\n```\n````" in r.markdown  # ANSI colour codes dropped
    assert "![Figure 1 of A title](my-example/figure-1.png)" in r.markdown
    assert r.files["examples/my-example/figure-1.png"] == png
    del nb["metadata"]["flows"]["gallery"]
    path.write_text(json.dumps(nb), encoding="utf-8")
    with pytest.raises(Exception, match="gallery.description"):
        nbs.render(path)


_CLAIMS = """\
claim             | predicted      | measured            | verdict
------------------------------------------------------------------
[paper Thm 1] w̄ · | ≤ 2            | 1.5                 | holds
x ≥ 0 in order    |                |                     |
    ↳ critical: holds for C ≥ 0.75; margin 0.5, 95 % confidence interval ±0.1
[paper Thm 2] a   | ≥ 1            | 0.2                 | FAILS
bound             |                |                     |
------------------------------------------------------------------
1 hold, 1 fail
"""


def test_claims_table():
    """A printed claims table (a combining mark takes no column) → claim · verdict · margin,
    the full table folded; anything else is left as a text block."""
    nbs = _docs_module("_notebooks.py")
    rows, summary = nbs.claims_table(_CLAIMS)
    assert [(r.claim, r.verdict, r.margin) for r in rows] == [
        ("[paper Thm 1] w̄ · x ≥ 0 in order", "holds", "0.5 ± 0.1"),
        ("[paper Thm 2] a bound", "FAILS", "—"),
    ]
    assert rows[0].predicted == "≤ 2" and rows[0].reason.startswith("critical: holds")
    assert summary == "1 hold, 1 fail"
    table, counts, folded = nbs._claims(_CLAIMS)
    assert table.splitlines()[0] == "| Claim | Verdict | Margin |"
    assert "| \\[paper Thm 2\\] a bound | fails | — |" in table
    assert counts == "1 hold, 1 fail"
    assert folded.startswith("<details>") and "↳ critical" in folded
    assert nbs.claims_table("claim | predicted\nnot a claims table\n") is None
    broken = _CLAIMS.replace("| 1.5   ", "  1.5   ")  # a row whose columns do not line up
    assert nbs.claims_table(broken) is None


def _built_site_or_skip(tmp_path_factory) -> Path:
    for module in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None or (
            "." in module and importlib.util.find_spec(module) is None
        ):
            pytest.skip(f"`{module}` is not installed (pip install '.[docs]' to build the site)")
    site = tmp_path_factory.mktemp("docs") / "site"
    proc = subprocess.run(
        # not -q: mkdocs counts warnings for --strict only at the levels it logs, so a quiet
        # build passes with a broken cross-reference (measured: `-q` exits 0 where the
        # plain build aborts on "Could not find cross-reference target").
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The documentation site, built once per module with warnings as errors."""
    return _built_site_or_skip(tmp_path_factory)


#: Words a paragraph, list item or table cell of a built page may hold.
MAX_WORDS = 150
#: Paragraphs over `MAX_WORDS` that the docs do not hold: docstrings rendered in the API
#: reference (`flows/_solvers/`: RKC2, the solver argument of `simulate`;
#: `reduced/derive/`), by page and first words. To be split where they are written; a
#: new long paragraph anywhere fails.
LONG_DOCSTRINGS = {
    ("api/simulate/index.html", "Predictive switch"),
    ("api/simulate/index.html", "Stale ρ."),
    ("api/simulate/index.html", "solver: a name in SOLVERS"),
    ("api/derive/index.html", "KKT inside an NAR"),
}


class _Blocks(HTMLParser):
    """Each paragraph, list item, table cell, term, caption and summary of a page: its own
    words (not those of a block nested in it; not code blocks, scripts or formulas)."""

    BLOCK = frozenset({"p", "li", "td", "th", "dd", "dt", "summary", "figcaption"})
    CONTAINER = frozenset({"ul", "ol", "table", "div", "details", "blockquote"})
    SKIP = frozenset({"pre", "script", "style", "svg", "math", "textarea"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, list[str]]] = []
        self.skip = 0
        self.blocks: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        if tag in self.BLOCK or tag in self.CONTAINER:
            self.open.append((tag, []))

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
        if tag in self.BLOCK or tag in self.CONTAINER:
            for i in range(len(self.open) - 1, -1, -1):
                if self.open[i][0] == tag:
                    if tag in self.BLOCK:
                        self.blocks.append(" ".join("".join(self.open[i][1]).split()))
                    del self.open[i:]
                    break

    def handle_data(self, data):
        if not self.skip and self.open and self.open[-1][0] in self.BLOCK:
            self.open[-1][1].append(data)


def long_blocks(html: str, limit: int = MAX_WORDS) -> list[str]:
    """The blocks of `html` (see `_Blocks`) with more than `limit` words."""
    parser = _Blocks()
    parser.feed(html)
    return [b for b in parser.blocks if len(b.split()) > limit]


def test_long_blocks():
    long = " ".join(["word"] * 151)
    html = (
        f"<p>{long}</p><ul><li>short<ul><li>{long}</li></ul></li></ul>"
        f"<p>fine <code>x</code> words</p><pre>{long}</pre><li>{' '.join(['w'] * 150)}</li>"
    )
    assert long_blocks(html) == [long, long]


def test_no_long_paragraphs(site):
    # pages people read: a paragraph or list item over MAX_WORDS words is a wall of text
    found = []
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site).as_posix()
        for block in long_blocks(page.read_text(encoding="utf-8")):
            if not any(rel == p and block.startswith(s) for p, s in LONG_DOCSTRINGS):
                found.append(f"{rel}: {len(block.split())} words: {block[:80]!r}")
    assert not found, f"split these into short paragraphs or lists (≤ {MAX_WORDS} words):\n" + (
        "\n".join(found)
    )


def test_formulas_rendered_in_the_site(site):
    # formulas are MathML in the built pages, and no TeX-like `^{` is left outside code
    code = re.compile(r"<(pre|code|math|script)\b.*?</\1>", re.S)
    for rel in ("index.html", "papers/multistage/index.html", "limits/index.html"):
        assert "<math" in (site / rel).read_text(encoding="utf-8"), rel
    raw = [
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if "^{" in re.sub(r"<[^>]+>", "", code.sub("", p.read_text(encoding="utf-8")))
    ]
    assert not raw, f"TeX-like notation left as text in {raw}"


def test_mkdocs_build_strict(site):
    for page in ("index.html", "getting-started/index.html", "papers/multistage/index.html"):
        assert (site / page).is_file(), page
    # the API reference is rendered from the docstrings, not left empty
    api = (site / "api" / "simulate" / "index.html").read_text(encoding="utf-8")
    assert "Integrate the exact gradient flow" in api
    # findings are on the paper's page, the limitations and open findings on their own
    multistage = (site / "papers" / "multistage" / "index.html").read_text(encoding="utf-8")
    assert "lower bound (60)" in multistage
    limits = (site / "limits" / "index.html").read_text(encoding="utf-8")
    assert 'id="open-findings"' in limits and 'id="solvers"' in limits
    assert (site / "architecture" / "index.html").is_file()
    # every public name has its own entry in the API reference, with its text (a constant's
    # `#:` comment included)
    ids: set[str] = set()
    for page in (site / "api").rglob("index.html"):
        ids.update(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8")))
    missing = [
        f"{m}.{name}"
        for m in DOCUMENTED_MODULES
        for name in _public_names(m)
        if not isinstance(getattr(importlib.import_module(m), name), types.ModuleType)
        and f"{m}.{name}" not in ids
    ]
    assert not missing, f"public names without an entry in docs/api/*.md (`::: NAME`): {missing}"
    assert "Cap on h·ρ for the first step" in api  # flows.FIRST_STEP_STABILITY's `#:` comment
    # one page per command, generated from the parser: its options in a table
    for name in ("check", "simulate", "sweep", "derive"):
        page = (site / "cli" / name / "index.html").read_text(encoding="utf-8")
        assert f"<code>flows {name}" in page and "<th>Default</th>" in page, name
    # the examples: the gallery's cards and each notebook's page with its figures
    gallery = (site / "examples" / "index.html").read_text(encoding="utf-8")
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        name = nb.stem.replace("_", "-")
        assert f'href="{name}/"' in gallery, name
        assert (site / "examples" / name / "figure-1.png").is_file(), name
        assert "figure-1.png" in (site / "examples" / name / "index.html").read_text("utf-8")
    # the examples' claims tables: claim · verdict · margin, the full table folded
    example = (site / "examples" / "deep-linear" / "index.html").read_text(encoding="utf-8")
    assert "<th>Verdict</th>" in example and "<details>" in example
    # search is built (its index holds the generated pages too)
    assert "flows sweep multistage" in (site / "search" / "search_index.json").read_text("utf-8")
    # offline: no page loads a script, stylesheet, font or image from another host
    remote = re.compile(
        r"<(?:script|link|img|iframe|source)\b[^>]*?\b(?:src|href)=[\"']?(?:https?:)?//[^>]*>",
        re.I,
    )
    loads = {
        p.relative_to(site).as_posix(): m.group(0)
        for p in site.rglob("*.html")
        if (m := remote.search(p.read_text(encoding="utf-8")))
    }
    assert not loads, f"pages load from another host: {loads}"
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8")
        assert not re.search(r"@import|url\(\s*[\"']?(?:https?:)?//", text), css
