"""The layering as contracts, read from the sources' import statements (relative imports
resolved):

- the engine (`flows` outside `flows.experiments`) never imports a paper — only the
  command line, which is generated from the paper registry;
- `reduced` (pure theory) never imports `flows`;
- the papers reach into the engine's private modules only through the modules listed in
  `PAPERS_PRIVATE` — a ratchet: a new private import fails here, and so does a listed
  module no paper needs any more (shrink the list). Issue 30's public claim kit is what
  empties it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The engine's private modules the papers import today (2026-12-03).
PAPERS_PRIVATE = frozenset(
    {
        "flows._baselines",
        "flows._batch",
        "flows._checks",
        "flows._clocks",
        "flows._data",
        "flows._errors",
        "flows._eta",
        "flows._flags",
        "flows._io",
        "flows._losses",
        "flows._nonsmooth",
        "flows._problem",
        "flows._report",
        "flows._resources",
        "flows._simulate",
        "flows._solvers",
        "flows._stages",
        "flows._sweep",
        "flows._trajectory",
        "flows._validate",
    }
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Absolute names of every module `path` imports (`from x import y` gives x and x.y,
    since y may be a module)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_the_import_reader_resolves_relative_imports(tmp_path):
    pkg = tmp_path / "flows" / "experiments" / "paper"
    pkg.mkdir(parents=True)
    (pkg / "checks.py").write_text(
        "from ..._checks import Check\nfrom . import runs\nfrom .. import base\nimport numpy\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        got = imports(pkg / "checks.py")
    finally:
        ROOT = saved
    assert {"flows._checks", "flows.experiments.paper.runs", "flows.experiments.base"} <= got
    assert "numpy" in got
    assert "flows.experiments" in imports(ROOT / "flows/_cli.py")


#: The engine: `flows` without its papers and without the command line (generated from
#: the paper registry, so it is the one engine module that imports it).
ENGINE = [
    p
    for p in _sources("flows")
    if not _module_name(p).startswith("flows.experiments") and _module_name(p) != "flows._cli"
]


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_engine_imports_no_paper(path):
    name = _module_name(path)
    bad = sorted(m for m in imports(path) if m.startswith("flows.experiments"))
    assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize("path", _sources("reduced"), ids=lambda p: str(p.relative_to(ROOT)))
def test_reduced_never_imports_flows(path):
    bad = sorted(m for m in imports(path) if m == "flows" or m.startswith("flows."))
    assert not bad, f"{_module_name(path)} imports {bad}"


def _private_used_by_papers() -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for path in sorted((ROOT / "flows/experiments").rglob("*.py")):
        for m in imports(path):
            parts = m.split(".")
            if len(parts) >= 2 and parts[0] == "flows" and parts[1].startswith("_"):
                used.setdefault(".".join(parts[:2]), []).append(_module_name(path))
    return used


def test_papers_use_no_new_private_engine_module():
    used = _private_used_by_papers()
    new = {m: sorted(set(v)) for m, v in used.items() if m not in PAPERS_PRIVATE}
    assert not new, f"papers import private engine modules not in PAPERS_PRIVATE: {new}"


def test_the_private_list_shrinks_when_a_paper_stops_needing_a_module():
    unused = sorted(PAPERS_PRIVATE - set(_private_used_by_papers()))
    assert not unused, f"no paper imports {unused} any more: remove it from PAPERS_PRIVATE"
