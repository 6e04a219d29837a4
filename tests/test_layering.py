"""The layering as contracts, read from the sources' import statements (relative imports
resolved):

- the engine (`flows` outside `flows.experiments`) never imports a paper — only the
  command line, which is generated from the paper registry;
- `reduced` (pure theory) never imports `flows`;
- the papers (`flows.experiments`) import only public names: `flows`, `flows.claims`,
  `flows.plugin`, `flows.models`, `flows.figures` and their own package — no `flows._x`
  module and no `_private` name of the engine, so a paper outside the repository can be
  written with what the shipped papers use;
- tests and benchmarks reach into the engine's private modules only where listed in
  `INTERNALS` (one place; unit tests of solver internals, the command line's `main`, …) —
  a ratchet both ways: a new private import fails here, and so does a listed module a file
  no longer imports (shrink the list).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The engine's private modules each test or benchmark file imports (2026-12-04). Most
#: are unit tests of internals (solver tableaux, the Filippov kink tables, the output
#: folder's ownership rules) or drive the command line in-process (`flows._cli.main`).
INTERNALS: dict[str, frozenset[str]] = {
    k: frozenset(v)
    for k, v in {
        "tests/guards/guard_nonsmooth.py": {"flows._nonsmooth"},
        "tests/conftest.py": {"flows._compile"},
        "tests/test_api_misuse.py": {
            "flows._arguments",
            "flows._baselines",
            "flows._cli",
            "flows._problem",
            "flows._trajectory",
            "flows._validate",
        },
        "tests/test_claims.py": {"flows._checks"},
        "tests/test_cli.py": {"flows._cli"},
        "tests/test_cli_bad_input.py": {
            "flows._cli",
            "flows._flags",
            "flows._grid",
            "flows._sweep",
        },
        "tests/test_cli_environment.py": {"flows._cli_output"},
        "tests/test_cli_check_progress.py": {"flows._cli", "flows._cli_check"},
        "tests/test_report_math.py": {"flows._report", "flows._report_math"},
        "tests/test_report_svg_math.py": {"flows._report_math", "flows._report_svg"},
        "tests/test_readme_blocks.py": {"flows._cli"},
        "tests/test_report_simulate.py": {"flows._cli", "flows._report"},
        "tests/test_cli_start.py": {"flows._cli"},
        "tests/test_compile_cache.py": {
            "flows._arguments",
            "flows._cli",
            "flows._compile",
            "flows._flow",
            "flows._io",
            "flows._solvers",
        },
        "tests/test_deep_linear.py": {"flows._cli"},
        "tests/test_error_norm_cli.py": {"flows._cli"},
        "tests/test_figure_style.py": {"flows._sweep"},
        "tests/test_map_limit.py": {"flows._compile", "flows._nonsmooth", "flows._solvers"},
        "tests/test_nonsmooth.py": {"flows._kinks", "flows._nonsmooth"},
        "tests/test_nonsmooth_compile.py": {"flows._nonsmooth"},
        "tests/test_nonsmooth_units.py": {"flows._nonsmooth"},
        "tests/test_output_safety.py": {"flows._cli", "flows._io"},
        "tests/test_reliability.py": {"flows._cli", "flows._io"},
        "tests/test_browser.py": {"flows._report"},
        "tests/test_progress.py": {"flows._progress"},
        "tests/test_report.py": {
            "flows._checks",
            "flows._cli",
            "flows._report",
            "flows._report_assets",
            "flows._report_svg",
        },
        "tests/test_rkc.py": {"flows._solvers"},
        "tests/test_solvers_eserk.py": {"flows._solvers"},
        "tests/test_solvers_robustness.py": {"flows._solvers"},
        "tests/test_solvers_rock4.py": {"flows._solvers"},
        "tests/test_solvers_tolerance.py": {"flows._solvers"},
        "tests/test_sweep.py": {"flows._batch", "flows._cli", "flows._sweep"},
        "tests/test_sweep_integrity.py": {"flows._io", "flows._sweep", "flows._trajectory"},
        "tests/test_sweep_papers.py": {"flows._cli", "flows._sweep"},
        "tests/test_validation_api.py": {"flows._problem", "flows._validate"},
        "tests/test_significance.py": {"flows._cli", "flows._significance", "flows._stats"},
        "tests/test_read_back.py": {"flows._compile", "flows._io"},
        "tests/test_crashes_messages.py": {
            "flows._cli",
            "flows._cli_check",
            "flows._cli_output",
            "flows._loss_clock",
            "flows._stats",
        },
        "tests/test_dense_output.py": {"flows._solvers"},
    }.items()
}


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


#: The engine: `flows` without its papers and without the command line (`flows._cli*`,
#: generated from the paper registry, so the one part of the engine that imports it).
ENGINE = [
    p
    for p in _sources("flows")
    if not _module_name(p).startswith(("flows.experiments", "flows._cli"))
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


def _private(m: str) -> bool:
    """Whether the imported name `m` is private to the engine: a `flows._x` module, or a
    `_name` reached in any `flows` module outside the papers."""
    parts = m.split(".")
    if parts[0] != "flows" or len(parts) < 2 or parts[1] == "experiments":
        return False
    return any(p.startswith("_") for p in parts[1:])


@pytest.mark.parametrize(
    "path", _sources("flows/experiments"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_papers_import_public_names_only(path):
    bad = sorted(m for m in imports(path) if _private(m))
    assert not bad, (
        f"{_module_name(path)} imports {bad}: a paper uses public names only (`flows`, "
        "`flows.claims`, `flows.plugin`, `flows.models`, `flows.figures`); export what it "
        "needs there"
    )


def test_the_private_test_flags_what_a_paper_must_not_import():
    assert _private("flows._checks") and _private("flows._checks.Check")
    assert _private("flows._flags") and _private("flows.claims._clean")
    assert not _private("flows.claims.Bound") and not _private("flows.plugin.as_float")
    assert not _private("flows.experiments.base._default") and not _private("numpy._core")


def _internals_used() -> dict[str, frozenset[str]]:
    used = {}
    for path in [*_sources("tests"), *_sources("benchmarks")]:
        mods = {".".join(m.split(".")[:2]) for m in imports(path) if _private(m)}
        mods = {m for m in mods if m.split(".")[1].startswith("_")}
        if mods:
            used[str(path.relative_to(ROOT))] = frozenset(mods)
    return used


def test_tests_and_benchmarks_reach_internals_only_where_listed():
    used = _internals_used()
    new = {f: sorted(m - INTERNALS.get(f, frozenset())) for f, m in used.items()}
    new = {f: m for f, m in new.items() if m}
    assert not new, f"private engine modules imported but not listed in INTERNALS: {new}"


def test_the_internals_list_shrinks_when_a_file_stops_needing_a_module():
    used = _internals_used()
    stale = {f: sorted(m - used.get(f, frozenset())) for f, m in INTERNALS.items()}
    stale = {f: m for f, m in stale.items() if m}
    assert not stale, f"no longer imported: remove from INTERNALS: {stale}"


#: The event flow's modules in the order data flows; each imports only earlier ones.
NONSMOOTH_ORDER = ("_net", "_pattern", "_sliding", "_decision", "_loop", "_api")


def test_the_event_flow_package_imports_in_one_direction():
    pkg = ROOT / "flows" / "_nonsmooth"
    found = sorted(p.stem for p in pkg.glob("_*.py") if p.name != "__init__.py")
    assert found == sorted(NONSMOOTH_ORDER), "list the new module in NONSMOOTH_ORDER"
    for k, name in enumerate(NONSMOOTH_ORDER):
        inside = {
            m.split(".")[2]
            for m in imports(pkg / f"{name}.py")
            if m.startswith("flows._nonsmooth.")
        }
        later = sorted(inside & set(NONSMOOTH_ORDER[k + 1 :]))
        assert not later, f"flows._nonsmooth.{name} imports the later {later}"


@pytest.mark.parametrize("module", ["flows/_simulate.py", "flows/_batch.py"])
def test_the_solves_know_no_solver_family(module):
    """What differs between solver families (own evaluation counts, run-time tolerances,
    a stability cap on the first step, Hessian-vector products) is declared by the solvers
    package (`counts_own_evals`, `runtime_solver`, `has_stability_cap`, `solver_report`);
    the solves ask it instead of testing classes."""
    tree = ast.parse((ROOT / module).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    family = {"AbstractStabilizedSolver", "AbstractImplicitSolver", "RKC2", "ESERK4", "ROCK4"}
    assert not names & family, f"{module} tests solver classes: {sorted(names & family)}"
