"""The documentation site (`docs/`, `mkdocs.yml`): its examples run, it builds strictly.

- Every ```python block in `docs/**/*.md` preceded by `<!-- runnable -->` is executed, the
  blocks of one page in order in one namespace (a page builds up its state), in a
  temporary working directory. A ```python block must be marked either runnable or
  `<!-- not run: REASON -->`, so an example cannot silently drop out of the tests.
- The README sections the pages include (`<!-- readme: … -->`, see `docs/_hooks.py`)
  exist, so a renamed README heading fails here with its name, not only in the build;
  figures (`<!-- figure: … -->`) are shown when present and named when not.
- `mkdocs build --strict` (warnings are errors) builds the site into a temporary folder,
  offline; skipped, with the reason, when the `docs` extra is not installed.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

_BLOCK = re.compile(r"^```python[^\n]*\n(?P<code>.*?)^```", re.S | re.M)
_MARK = re.compile(r"<!--\s*(?P<mark>runnable|not run:[^>]*?)\s*-->\s*$")


def _pages() -> list[Path]:
    """The site's pages (`_sections.md`, the long-form text they include, is not one)."""
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


def _hooks():
    pytest.importorskip("mkdocs", reason="the `docs` extra is not installed")
    spec = importlib.util.spec_from_file_location("flows_docs_hooks", DOCS / "_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_sections_exist():
    hooks = _hooks()
    found = 0
    for page in _pages():
        for m in hooks._README.finditer(page.read_text(encoding="utf-8")):
            text = hooks.readme_section(m.group("heading").strip(), m.group("prefix") or None)
            assert text.strip(), f"docs/{page.name}: README section {m.group(0)} is empty"
            assert "](" not in re.sub(r"\]\((https?://|#)[^)]*\)", "", text), (
                "a relative README link was left in the included text"
            )
            found += 1
    assert found >= 8
    with pytest.raises(ValueError, match="no section 'No such heading'"):
        hooks.readme_section("No such heading")


def test_list_spacing_preprocessor():
    hooks = _hooks()
    import markdown

    md = markdown.Markdown(extensions=[hooks.ListSpacing(), "fenced_code"])
    html = md.convert("**Arguments:**\n- `a`: one\n  continued\n- `b`: two\n")
    assert html.count("<li>") == 2 and "continued" in html
    md.reset()
    fenced = md.convert("```\ntext\n- not a list\n```\n")
    assert "<li>" not in fenced


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


def test_mkdocs_build_strict(tmp_path):
    for module in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None or (
            "." in module and importlib.util.find_spec(module) is None
        ):
            pytest.skip(f"`{module}` is not installed (pip install '.[docs]' to build the site)")
    site = tmp_path / "site"
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
    for page in ("index.html", "getting-started/index.html", "papers/multistage/index.html"):
        assert (site / page).is_file(), page
    # the API reference is rendered from the docstrings, not left empty
    api = (site / "api" / "simulate" / "index.html").read_text(encoding="utf-8")
    assert "Integrate the exact gradient flow" in api
    # findings come from the long-form text (docs/_sections.md)
    multistage = (site / "papers" / "multistage" / "index.html").read_text(encoding="utf-8")
    assert "lower bound (60)" in multistage
